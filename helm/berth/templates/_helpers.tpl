{{/*
Names, labels and computed values shared by the templates.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "berth.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* "<release>-<name>", or the release name alone when it already contains the name. */}}
{{- define "berth.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "berth.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "berth.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: stable for the life of a release (a Deployment's selector is immutable). */}}
{{- define "berth.selectorLabels" -}}
app.kubernetes.io/name: {{ include "berth.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end -}}

{{- define "berth.labels" -}}
helm.sh/chart: {{ include "berth.chart" . }}
{{ include "berth.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: berth
{{- end -}}

{{- define "berth.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "berth.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository@digest when a digest is given, else repository:tag (tag defaults to appVersion). */}}
{{- define "berth.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The profile document: values.profile for schedulerName, extraPlugins appended. */}}
{{- define "berth.profile" -}}
{{- $profile := deepCopy .Values.profile -}}
{{- $_ := set $profile "schedulerName" .Values.schedulerName -}}
{{- if .Values.extraPlugins -}}
{{- $_ = set $profile "plugins" (concat (default (list) $profile.plugins) .Values.extraPlugins) -}}
{{- end -}}
{{- toYaml $profile -}}
{{- end -}}

{{/* Combinations the schema cannot express, refused with a message saying what to change. */}}
{{- define "berth.validate" -}}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicaCount) 1) -}}
{{- fail "leaderElection.enabled=false with replicaCount > 1 would let every replica bind pods: set replicaCount=1 or enable leader election" -}}
{{- end -}}
{{- end -}}

{{/* "true" when replicas serve the webhook: admission mode, or the queue-access check of
scheduler mode (queueAccess.webhook); always with admission.webhook.enabled. */}}
{{- define "berth.webhookServed" -}}
{{- if and .Values.admission.webhook.enabled (or (eq .Values.mode "admission") .Values.queueAccess.webhook) -}}
true
{{- end -}}
{{- end -}}
