"""The ``core/v1`` kinds Berth reads and writes, as they cross the wire: typed records.

Pod (spec, status, conditions), Node, Event, Binding, Eviction, Namespace and Secret, spelt
exactly as the API server serves them (the storage kinds are in :mod:`berth.api.storage`). Only
the fields Berth reads or writes are declared; every other field is carried along untouched (a
typed dict is the decoded JSON itself). See :mod:`berth.api.objects` for what ``total=False``
promises.

The informers hand these on (:mod:`berth.kube.informers`), the snapshot's infos parse them once
(:mod:`berth.scheduler.snapshot.pods`, :mod:`~berth.scheduler.snapshot.nodes`), and the
binder and admission write them (:mod:`berth.kube.transport.pod_edits`).
"""

from __future__ import annotations

import typing_extensions

from berth.api import dra, objects

__all__ = [
    "Affinity",
    "Binding",
    "Container",
    "ContainerImage",
    "ContainerPort",
    "ContainerState",
    "ContainerStateTerminated",
    "ContainerStatus",
    "DeleteOptions",
    "Event",
    "EventSeries",
    "EventSource",
    "LocalObjectReference",
    "Eviction",
    "Namespace",
    "Node",
    "NodeAddress",
    "NodeAffinity",
    "NodeCondition",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NodeSpec",
    "NodeStatus",
    "NodeSystemInfo",
    "ObjectReference",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PodCondition",
    "PodSchedulingGate",
    "PodSchedulingGroup",
    "PodSpec",
    "PodStatus",
    "PodTemplate",
    "PodTemplateSpec",
    "PreferredSchedulingTerm",
    "ResourceRequirements",
    "Secret",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "Volume",
    "WeightedPodAffinityTerm",
]

# Scheduling constraints ----------------------------------------------------------------------

NodeSelectorRequirement = dra.NodeSelectorRequirement
NodeSelectorTerm = dra.NodeSelectorTerm


class PreferredSchedulingTerm(typing_extensions.TypedDict, total=False):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(typing_extensions.TypedDict, total=False):
    requiredDuringSchedulingIgnoredDuringExecution: dra.NodeSelector
    preferredDuringSchedulingIgnoredDuringExecution: list[PreferredSchedulingTerm]


class Affinity(typing_extensions.TypedDict, total=False):
    """A pod's ``spec.affinity``. Berth edits ``nodeAffinity`` (it pins a pod to a node in
    admission mode); the pod (anti-)affinity terms are read by the snapshot's parser only."""

    nodeAffinity: NodeAffinity
    podAffinity: PodAffinity
    podAntiAffinity: PodAffinity


class PodAffinityTerm(typing_extensions.TypedDict, total=False):
    labelSelector: objects.LabelSelector
    namespaces: list[str]
    namespaceSelector: objects.LabelSelector
    topologyKey: str
    matchLabelKeys: list[str]
    mismatchLabelKeys: list[str]


class WeightedPodAffinityTerm(typing_extensions.TypedDict, total=False):
    weight: int
    podAffinityTerm: PodAffinityTerm


class PodAffinity(typing_extensions.TypedDict, total=False):
    """``podAffinity`` and ``podAntiAffinity`` alike."""

    requiredDuringSchedulingIgnoredDuringExecution: list[PodAffinityTerm]
    preferredDuringSchedulingIgnoredDuringExecution: list[WeightedPodAffinityTerm]


class TopologySpreadConstraint(typing_extensions.TypedDict, total=False):
    maxSkew: int
    topologyKey: str
    whenUnsatisfiable: str  # DoNotSchedule, ScheduleAnyway
    labelSelector: objects.LabelSelector
    minDomains: int
    matchLabelKeys: list[str]
    nodeAffinityPolicy: str
    nodeTaintsPolicy: str


class Toleration(typing_extensions.TypedDict, total=False):
    key: str
    operator: str  # Exists, Equal (default)
    value: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute
    tolerationSeconds: int


class Taint(typing_extensions.TypedDict, total=False):
    key: str
    value: str
    effect: str
    timeAdded: str


class PodSchedulingGate(typing_extensions.TypedDict):
    name: str


class PodSchedulingGroup(typing_extensions.TypedDict, total=False):
    """Kubernetes 1.36's ``spec.schedulingGroup`` (``scheduling.k8s.io/v1alpha2`` PodGroups)."""

    podGroupName: str


# Pod -----------------------------------------------------------------------------------------


class ResourceRequirements(typing_extensions.TypedDict, total=False):
    requests: dict[str, str]  # quantities as the API serves them ("500m", "1Gi")
    limits: dict[str, str]
    claims: list[dict[str, str]]  # {name, request}


class ContainerPort(typing_extensions.TypedDict, total=False):
    name: str
    containerPort: int
    hostPort: int
    hostIP: str
    protocol: str  # TCP (default), UDP, SCTP


class Container(typing_extensions.TypedDict, total=False):
    name: str
    image: str
    resources: ResourceRequirements
    restartPolicy: str  # "Always" on an init container makes it a sidecar
    ports: list[ContainerPort]
    imagePullPolicy: str  # IfNotPresent (the API server's default), Always, Never
    terminationMessagePath: str


class Volume(typing_extensions.TypedDict, total=False):
    """A pod volume; Berth reads the ones that name a claim (the rest are carried along)."""

    name: str
    persistentVolumeClaim: dict[str, str | bool]  # {claimName, readOnly}
    ephemeral: dict[str, objects.KubeObject]  # {volumeClaimTemplate}


class PodSpec(typing_extensions.TypedDict, total=False):
    """The ``spec`` fields Berth reads or writes; the rest is carried along."""

    containers: list[Container]
    initContainers: list[Container]
    ephemeralContainers: list[Container]  # EphemeralContainer: Berth only drops them
    nodeName: str
    nodeSelector: dict[str, str]
    affinity: Affinity
    tolerations: list[Toleration]
    schedulerName: str
    schedulingGates: list[PodSchedulingGate]
    priority: int
    priorityClassName: str
    preemptionPolicy: str
    overhead: dict[str, str]
    resources: ResourceRequirements
    resourceClaims: list[dra.PodResourceClaim]
    restartPolicy: str
    terminationGracePeriodSeconds: int
    dnsPolicy: str
    hostNetwork: bool
    volumes: list[Volume]
    topologySpreadConstraints: list[TopologySpreadConstraint]
    workloadRef: dict[str, str]  # {name, podGroup, podGroupReplicaKey}
    schedulingGroup: PodSchedulingGroup  # 1.36's scheduling.k8s.io/v1alpha2 gangs
    serviceAccountName: str
    automountServiceAccountToken: bool


class PodCondition(typing_extensions.TypedDict, total=False):
    type: str  # PodScheduled, Ready, DisruptionTarget, ...
    status: str
    reason: str
    message: str
    lastProbeTime: str | None
    lastTransitionTime: str


class ContainerStateTerminated(typing_extensions.TypedDict, total=False):
    exitCode: int
    reason: str
    message: str
    startedAt: str
    finishedAt: str


class ContainerState(typing_extensions.TypedDict, total=False):
    running: dict[str, str]  # {startedAt}
    waiting: dict[str, str]  # {reason, message}
    terminated: ContainerStateTerminated


class ContainerStatus(typing_extensions.TypedDict, total=False):
    name: str
    image: str
    imageID: str
    containerID: str
    ready: bool
    started: bool
    restartCount: int
    state: ContainerState
    lastState: ContainerState


class PodStatus(typing_extensions.TypedDict, total=False):
    phase: str  # Pending, Running, Succeeded, Failed, Unknown
    conditions: list[PodCondition]
    nominatedNodeName: str
    startTime: str
    hostIP: str
    podIP: str
    containerStatuses: list[ContainerStatus]
    initContainerStatuses: list[ContainerStatus]
    resourceClaimStatuses: list[dra.PodResourceClaimStatus]
    reason: str
    message: str
    qosClass: str  # Guaranteed, Burstable, BestEffort


class Pod(objects.KubeObject, total=False):
    spec: PodSpec
    status: PodStatus


class PodTemplateSpec(typing_extensions.TypedDict, total=False):
    metadata: objects.ObjectMeta
    spec: PodSpec


class PodTemplate(objects.KubeObject, total=False):
    """A ``core/v1`` PodTemplate: what a capacity request's pods look like."""

    template: PodTemplateSpec


class LocalObjectReference(typing_extensions.TypedDict, total=False):
    name: str


# Node ----------------------------------------------------------------------------------------


class ContainerImage(typing_extensions.TypedDict, total=False):
    names: list[str]
    sizeBytes: int


class NodeSpec(typing_extensions.TypedDict, total=False):
    podCIDR: str
    unschedulable: bool
    taints: list[Taint]
    providerID: str


class NodeCondition(PodCondition, total=False):
    """A node's condition (Ready, MemoryPressure, ...): a pod's keys and the kubelet's
    heartbeat."""

    lastHeartbeatTime: str


class NodeAddress(typing_extensions.TypedDict, total=False):
    type: str  # InternalIP, ExternalIP, Hostname
    address: str


class NodeSystemInfo(typing_extensions.TypedDict, total=False):
    """``status.nodeInfo``: what the kubelet reports of itself (``kubectl get nodes -o wide``)."""

    kubeletVersion: str
    kubeProxyVersion: str
    osImage: str
    kernelVersion: str
    containerRuntimeVersion: str
    operatingSystem: str
    architecture: str
    machineID: str
    systemUUID: str
    bootID: str


class NodeStatus(typing_extensions.TypedDict, total=False):
    capacity: dict[str, str]
    allocatable: dict[str, str]
    conditions: list[NodeCondition]
    addresses: list[NodeAddress]
    nodeInfo: NodeSystemInfo
    images: list[ContainerImage]


class Node(objects.KubeObject, total=False):
    spec: NodeSpec
    status: NodeStatus


class Namespace(objects.KubeObject, total=False):
    spec: dict[str, list[str]]  # {finalizers}
    status: dict[str, str]  # {phase}


class Secret(objects.KubeObject, total=False):
    type: str  # Opaque, kubernetes.io/tls, ...
    data: dict[str, str]  # base64 of each value
    stringData: dict[str, str]


# Writes: Binding, Eviction, Event --------------------------------------------------------------


class ObjectReference(typing_extensions.TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    fieldPath: str


class Binding(objects.KubeObject, total=False):
    """``POST pods/<name>/binding``: what the binder writes to place a pod."""

    target: ObjectReference


class DeleteOptions(typing_extensions.TypedDict, total=False):
    preconditions: dict[str, str | None]  # {uid, resourceVersion}; null: no precondition
    gracePeriodSeconds: int
    propagationPolicy: str  # Orphan, Background, Foreground
    orphanDependents: bool  # deprecated: propagationPolicy Orphan
    dryRun: list[str]  # ["All"]


class Eviction(objects.KubeObject, total=False):
    """``POST pods/<name>/eviction`` (``policy/v1``): honours PodDisruptionBudgets."""

    deleteOptions: DeleteOptions


class EventSource(typing_extensions.TypedDict, total=False):
    component: str
    host: str


class EventSeries(typing_extensions.TypedDict, total=False):
    count: int
    lastObservedTime: str


class Event(objects.KubeObject, total=False):
    """A ``core/v1`` Event (and the ``events.k8s.io/v1`` fields Berth reads from autoscalers)."""

    involvedObject: ObjectReference
    regarding: ObjectReference  # events.k8s.io/v1
    reason: str
    message: str
    note: str  # events.k8s.io/v1
    type: str  # Normal, Warning
    source: EventSource
    reportingComponent: str
    reportingController: str  # events.k8s.io/v1
    reportingInstance: str
    action: str
    count: int
    firstTimestamp: str
    lastTimestamp: str
    eventTime: str
    series: EventSeries
