"""Admission webhook configurations (``admissionregistration.k8s.io/v1``): typed records.

The Mutating- and ValidatingWebhookConfiguration as the API server takes and serves them,
spelt as it does (camelCase keys). Berth writes them where no Helm renders its chart
(:mod:`berth.cli.up_webhooks`), points the chart's and Kueue's at a local process on the real
control plane (:mod:`berth.realcluster.install`, :mod:`berth.realcluster.kueue`), and the
emulator calls the webhooks they name. See :mod:`berth.api.objects` for what ``total=False``
promises.
"""

from __future__ import annotations

import typing_extensions

from berth.api import objects

__all__ = [
    "API_VERSION",
    "MatchCondition",
    "RuleWithOperations",
    "ServiceReference",
    "Webhook",
    "WebhookClientConfig",
    "WebhookConfiguration",
]

API_VERSION = "admissionregistration.k8s.io/v1"


class RuleWithOperations(typing_extensions.TypedDict, total=False):
    """Which requests a webhook is sent: operations on resources of API groups and versions."""

    operations: list[str]  # CREATE, UPDATE, DELETE, CONNECT, *
    apiGroups: list[str]
    apiVersions: list[str]
    resources: list[str]
    scope: str  # Cluster, Namespaced, *


class ServiceReference(typing_extensions.TypedDict, total=False):
    namespace: str
    name: str
    path: str
    port: int


class WebhookClientConfig(typing_extensions.TypedDict, total=False):
    """Where the API server sends a review: a ``url``, or a ``service``, trusting ``caBundle``."""

    url: str
    service: ServiceReference
    caBundle: str  # base64 of PEM


class MatchCondition(typing_extensions.TypedDict):
    """A CEL expression a request must satisfy to be sent (``object``, ``oldObject``...)."""

    name: str
    expression: str


class Webhook(typing_extensions.TypedDict, total=False):
    """A MutatingWebhook or a ValidatingWebhook (``reinvocationPolicy``: mutating only)."""

    name: str
    clientConfig: WebhookClientConfig
    rules: list[RuleWithOperations]
    admissionReviewVersions: list[str]
    sideEffects: str  # None, NoneOnDryRun
    failurePolicy: str  # Fail, Ignore
    matchPolicy: str  # Exact, Equivalent
    timeoutSeconds: int
    reinvocationPolicy: str  # Never, IfNeeded
    namespaceSelector: objects.LabelSelector
    objectSelector: objects.LabelSelector
    matchConditions: list[MatchCondition]


class WebhookConfiguration(objects.KubeObject, total=False):
    """A ``MutatingWebhookConfiguration`` or a ``ValidatingWebhookConfiguration``."""

    webhooks: list[Webhook]
