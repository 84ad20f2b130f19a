"""Dynamic Resource Allocation (``resource.k8s.io/v1``) as it crosses the wire: typed records.

The kinds Berth reads and writes for devices — DeviceClass, ResourceSlice, ResourceClaim and
ResourceClaimTemplate — and the pod fields that name claims, spelt exactly as the API server
serves them (camelCase keys, quantities as strings). They are typed dicts
(``typing_extensions.TypedDict``, which pydantic can check files against on Python 3.11, as the
simulator's scenarios do): the API's JSON is handed around unchanged and parsed once, by the
snapshot's infos (:mod:`berth.scheduler.snapshot.resourceslices`,
:mod:`~berth.scheduler.snapshot.resourceclaims`, :mod:`~berth.scheduler.snapshot.deviceclasses`),
the emulator and the simulator. An :class:`AllocationResult` is also what the scheduler decides
to write into a claim's ``status.allocation``.

The constants are the API's own limits and names (``k8s.io/api/resource/v1``).
"""

from __future__ import annotations

import typing

import typing_extensions

from berth.api import objects

__all__ = [
    "AllocatedDeviceStatus",
    "ADMIN_ACCESS_NAMESPACE_LABEL",
    "ALL",
    "ALLOCATION_RESULTS_MAX_SIZE",
    "API_VERSION",
    "CLAIM_FINALIZER",
    "DEVICE_CLASS_RESOURCE_PREFIX",
    "EXACT_COUNT",
    "GROUP",
    "NODE_NAME_FIELD",
    "RESERVED_FOR_MAX_SIZE",
    "VERSION",
    "AllocatedDeviceResult",
    "AllocationResult",
    "CapacityRequestPolicy",
    "CapacityRequestPolicyRange",
    "CapacityRequirements",
    "CelSelector",
    "Counter",
    "CounterConsumption",
    "CounterSet",
    "Device",
    "DeviceAllocation",
    "DeviceAllocationConfiguration",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceClass",
    "DeviceClassConfiguration",
    "DeviceClassSpec",
    "DeviceClaim",
    "DeviceClaimConfiguration",
    "DeviceConstraint",
    "DeviceRequest",
    "DeviceSelector",
    "DeviceSubRequest",
    "DeviceTaint",
    "DeviceToleration",
    "ExactDeviceRequest",
    "NetworkDeviceData",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "OpaqueDeviceConfiguration",
    "ObjectMeta",
    "OwnerReference",
    "PodResourceClaim",
    "PodResourceClaimStatus",
    "ResourceClaim",
    "ResourceClaimConsumerReference",
    "ResourceClaimSpec",
    "ResourceClaimStatus",
    "ResourceClaimTemplate",
    "ResourceClaimTemplateSpec",
    "ResourcePool",
    "ResourceSlice",
    "ResourceSliceSpec",
    "device_class_resource",
]

GROUP = "resource.k8s.io"
VERSION = "v1"
API_VERSION: typing.Final = "resource.k8s.io/v1"

EXACT_COUNT = "ExactCount"
"""``allocationMode`` of a request for ``count`` devices (the default, count 1)."""
ALL = "All"
"""``allocationMode`` of a request for every matching device of the node's pools."""

ALLOCATION_RESULTS_MAX_SIZE = 32
"""At most this many devices in one claim's allocation (``AllocationResultsMaxSize``)."""
RESERVED_FOR_MAX_SIZE = 256
"""At most this many consumers in a claim's ``status.reservedFor``."""
CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
"""The finalizer an allocating scheduler puts on a claim (``resourceapi.Finalizer``)."""
ADMIN_ACCESS_NAMESPACE_LABEL = "resource.kubernetes.io/admin-access"
"""Namespaces labelled ``"true"`` may create claims with ``adminAccess``."""
NODE_NAME_FIELD = "metadata.name"
"""The node field a node-local allocation's selector matches (``matchFields``)."""

DEVICE_CLASS_RESOURCE_PREFIX = "deviceclass/"
"""Queue quota names devices by class: ``deviceclass/<name>`` in ``guaranteed``/``limit``."""


def device_class_resource(name: str, /) -> str:
    """The queue resource counting devices of the DeviceClass ``name``."""
    return f"{DEVICE_CLASS_RESOURCE_PREFIX}{name}"


# Shared with every kind: :mod:`berth.api.objects` owns them.
OwnerReference = objects.OwnerReference
ObjectMeta = objects.ObjectMeta


# Node selection (core/v1 NodeSelector, as slices and allocations carry it) ----------------------


class NodeSelectorRequirement(typing_extensions.TypedDict, total=False):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: list[str]


class NodeSelectorTerm(typing_extensions.TypedDict, total=False):
    matchExpressions: list[NodeSelectorRequirement]
    matchFields: list[NodeSelectorRequirement]


class NodeSelector(typing_extensions.TypedDict, total=False):
    nodeSelectorTerms: list[NodeSelectorTerm]


# DeviceClass ---------------------------------------------------------------------------------


class CelSelector(typing_extensions.TypedDict):
    expression: str


class DeviceSelector(typing_extensions.TypedDict, total=False):
    cel: CelSelector


class OpaqueDeviceConfiguration(typing_extensions.TypedDict, total=False):
    driver: typing_extensions.Required[str]
    parameters: objects.JSONObject  # the driver's own configuration: Berth passes it through


class DeviceClassConfiguration(typing_extensions.TypedDict, total=False):
    """A DeviceClass's ``spec.config[]``: copied into every allocation made with the class."""

    opaque: OpaqueDeviceConfiguration


class DeviceClaimConfiguration(DeviceClassConfiguration, total=False):
    """A claim's ``spec.devices.config[]``: for the ``requests`` it names (none: all)."""

    requests: list[str]


class DeviceAllocationConfiguration(DeviceClaimConfiguration, total=False):
    """``status.allocation.devices.config[]``: the class's and the claim's, in that order."""

    source: str  # FromClass, FromClaim


class DeviceClassSpec(typing_extensions.TypedDict, total=False):
    selectors: list[DeviceSelector]
    config: list[DeviceClassConfiguration]
    extendedResourceName: str


class DeviceClass(typing_extensions.TypedDict, total=False):
    apiVersion: str
    kind: typing.Literal["DeviceClass"]
    metadata: ObjectMeta
    spec: DeviceClassSpec


# ResourceSlice -------------------------------------------------------------------------------


class DeviceAttribute(typing_extensions.TypedDict, total=False):
    """Exactly one of the values is set."""

    int: int
    bool: bool
    string: str
    version: str  # semantic version 2.0.0


class CapacityRequestPolicyRange(typing_extensions.TypedDict, total=False):
    min: str
    max: str
    step: str


class CapacityRequestPolicy(typing_extensions.TypedDict, total=False):
    default: str
    validValues: list[str]
    validRange: CapacityRequestPolicyRange


class DeviceCapacity(typing_extensions.TypedDict, total=False):
    value: typing_extensions.Required[str]
    requestPolicy: CapacityRequestPolicy


class Counter(typing_extensions.TypedDict):
    value: str


class CounterSet(typing_extensions.TypedDict):
    """Shared counters (partitionable devices): what the devices of a pool draw from."""

    name: str
    counters: dict[str, Counter]


class CounterConsumption(typing_extensions.TypedDict):
    counterSet: str
    counters: dict[str, Counter]


class DeviceTaint(typing_extensions.TypedDict, total=False):
    key: typing_extensions.Required[str]
    value: str
    effect: typing_extensions.Required[str]  # NoSchedule, NoExecute, None
    timeAdded: str


class Device(typing_extensions.TypedDict, total=False):
    name: typing_extensions.Required[str]
    attributes: dict[str, DeviceAttribute]
    capacity: dict[str, DeviceCapacity]
    consumesCounters: list[CounterConsumption]
    nodeName: str
    nodeSelector: NodeSelector
    allNodes: bool
    taints: list[DeviceTaint]
    bindsToNode: bool
    bindingConditions: list[str]
    bindingFailureConditions: list[str]
    allowMultipleAllocations: bool


class ResourcePool(typing_extensions.TypedDict):
    name: str
    generation: int
    resourceSliceCount: int


class ResourceSliceSpec(typing_extensions.TypedDict, total=False):
    driver: typing_extensions.Required[str]
    pool: typing_extensions.Required[ResourcePool]
    nodeName: str
    nodeSelector: NodeSelector
    allNodes: bool
    perDeviceNodeSelection: bool
    devices: list[Device]
    sharedCounters: list[CounterSet]


class ResourceSlice(typing_extensions.TypedDict, total=False):
    apiVersion: str
    kind: typing.Literal["ResourceSlice"]
    metadata: ObjectMeta
    spec: ResourceSliceSpec


# ResourceClaim and its template ---------------------------------------------------------------


class DeviceToleration(typing_extensions.TypedDict, total=False):
    key: str
    operator: str  # Exists, Equal (default)
    value: str
    effect: str
    tolerationSeconds: int


class CapacityRequirements(typing_extensions.TypedDict, total=False):
    requests: dict[str, str]


class ExactDeviceRequest(typing_extensions.TypedDict, total=False):
    deviceClassName: typing_extensions.Required[str]
    selectors: list[DeviceSelector]
    allocationMode: str  # ExactCount (default) or All
    count: int
    adminAccess: bool
    tolerations: list[DeviceToleration]
    capacity: CapacityRequirements


class DeviceSubRequest(typing_extensions.TypedDict, total=False):
    name: typing_extensions.Required[str]
    deviceClassName: typing_extensions.Required[str]
    selectors: list[DeviceSelector]
    allocationMode: str
    count: int
    tolerations: list[DeviceToleration]
    capacity: CapacityRequirements


class DeviceRequest(typing_extensions.TypedDict, total=False):
    """Exactly one of ``exactly`` and ``firstAvailable`` is set."""

    name: typing_extensions.Required[str]
    exactly: ExactDeviceRequest
    firstAvailable: list[DeviceSubRequest]


class DeviceConstraint(typing_extensions.TypedDict, total=False):
    requests: list[str]
    matchAttribute: str
    distinctAttribute: str


class DeviceClaim(typing_extensions.TypedDict, total=False):
    requests: list[DeviceRequest]
    constraints: list[DeviceConstraint]
    config: list[DeviceClaimConfiguration]


class ResourceClaimSpec(typing_extensions.TypedDict, total=False):
    devices: DeviceClaim


class AllocatedDeviceResult(typing_extensions.TypedDict, total=False):
    """One allocated device (``DeviceRequestAllocationResult``)."""

    request: typing_extensions.Required[str]  # "<request>" or "<request>/<subrequest>"
    driver: typing_extensions.Required[str]
    pool: typing_extensions.Required[str]
    device: typing_extensions.Required[str]
    adminAccess: bool
    tolerations: list[DeviceToleration]
    bindingConditions: list[str]
    bindingFailureConditions: list[str]
    shareID: str
    consumedCapacity: dict[str, str]


class DeviceAllocation(typing_extensions.TypedDict, total=False):
    results: list[AllocatedDeviceResult]
    config: list[DeviceAllocationConfiguration]


class AllocationResult(typing_extensions.TypedDict, total=False):
    devices: DeviceAllocation
    nodeSelector: NodeSelector  # absent: usable on every node
    allocationTimestamp: str


class ResourceClaimConsumerReference(typing_extensions.TypedDict, total=False):
    apiGroup: str  # "" for pods
    resource: typing_extensions.Required[str]  # "pods"
    name: typing_extensions.Required[str]
    uid: typing_extensions.Required[str]


class NetworkDeviceData(typing_extensions.TypedDict, total=False):
    interfaceName: str
    ips: list[str]
    hardwareAddress: str


class AllocatedDeviceStatus(typing_extensions.TypedDict, total=False):
    """A driver's status of one allocated device (``status.devices[]``): Berth only clears it."""

    driver: typing_extensions.Required[str]
    pool: typing_extensions.Required[str]
    device: typing_extensions.Required[str]
    shareID: str
    conditions: list[objects.Condition]
    data: objects.JSONObject  # the driver's own status: Berth never reads it
    networkData: NetworkDeviceData


class ResourceClaimStatus(typing_extensions.TypedDict, total=False):
    allocation: AllocationResult
    reservedFor: list[ResourceClaimConsumerReference]
    devices: list[AllocatedDeviceStatus]


class ResourceClaim(typing_extensions.TypedDict, total=False):
    apiVersion: str
    kind: typing.Literal["ResourceClaim"]
    metadata: ObjectMeta
    spec: ResourceClaimSpec
    status: ResourceClaimStatus


class ResourceClaimTemplateSpec(typing_extensions.TypedDict, total=False):
    metadata: ObjectMeta  # labels and annotations copied to each claim
    spec: ResourceClaimSpec


class ResourceClaimTemplate(typing_extensions.TypedDict, total=False):
    apiVersion: str
    kind: typing.Literal["ResourceClaimTemplate"]
    metadata: ObjectMeta
    spec: ResourceClaimTemplateSpec


# The pod's side ------------------------------------------------------------------------------


class PodResourceClaim(typing_extensions.TypedDict, total=False):
    """``spec.resourceClaims[]``: exactly one of the two sources is set."""

    name: typing_extensions.Required[str]
    resourceClaimName: str
    resourceClaimTemplateName: str


class PodResourceClaimStatus(typing_extensions.TypedDict, total=False):
    """``status.resourceClaimStatuses[]``: the claim the controller made from a template
    (no ``resourceClaimName``: it intentionally made none)."""

    name: typing_extensions.Required[str]
    resourceClaimName: str
