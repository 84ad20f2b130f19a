"""Berth's own kinds (Queue, PodGroup, Reservation) as they cross the wire: typed records.

The pydantic models (:mod:`berth.api.queues`, :mod:`~berth.api.podgroups`,
:mod:`~berth.api.reservations`) validate what users write and render the CRDs; these records
are the same objects as the API server serves them to Berth's watches (camelCase keys, every
field optional: the API server leaves unset fields out, and a status may not be written yet),
and the status shapes Berth's owners compute and patch (:mod:`berth.status`). The snapshot's
infos parse the specs once (:mod:`berth.scheduler.snapshot.queues`, ...), refusing bad values
with the field's name.
"""

from __future__ import annotations

import typing_extensions

from berth.api import core, objects

__all__ = [
    "CurrentOwner",
    "ObjectStatus",
    "PodGroup",
    "PodGroupSpec",
    "PodGroupStatus",
    "ProvisioningRequestPolicy",
    "Queue",
    "QueueAutoscaling",
    "QueueSpec",
    "QueueStatus",
    "QueueSummary",
    "Reservation",
    "ReservationOwner",
    "ReservationSpec",
    "ReservationStatus",
    "ReservedDevice",
    "SubGroup",
    "SubGroupStatus",
    "TopologyConstraint",
]


class ObjectStatus(typing_extensions.TypedDict, total=False):
    """What every status of Berth's kinds has: the conditions (one per type)."""

    conditions: list[objects.Condition]


# Queue ---------------------------------------------------------------------------------------


class ProvisioningRequestPolicy(typing_extensions.TypedDict, total=False):
    provisioningClassName: str
    parameters: dict[str, str]


class QueueAutoscaling(typing_extensions.TypedDict, total=False):
    provisioningRequest: ProvisioningRequestPolicy
    reservationBuffers: bool


class QueueSpec(typing_extensions.TypedDict, total=False):
    parent: str
    guaranteed: dict[str, str]
    limit: dict[str, str]
    weight: int
    priority: int
    reclaimable: bool
    state: str  # Open, Closed
    reclaimMinRuntimeSeconds: int
    defaultExpectedRuntimeSeconds: int
    maximumExecutionTimeSeconds: int
    jobOrder: str  # PriorityFIFO, FIFO, NamespaceFair
    preemptAcrossQueues: bool
    preemptionDelay: str
    autoscaling: QueueAutoscaling
    namespaceSelector: objects.LabelSelector


class QueueSummary(typing_extensions.TypedDict, total=False):
    guaranteed: str
    allocated: str
    fairShare: str
    limit: str


class QueueStatus(ObjectStatus, total=False):
    allocated: dict[str, str]
    requested: dict[str, str]
    fairShare: dict[str, str]
    children: list[str]
    pending: int
    running: int
    state: str
    stateReason: str
    pendingPods: int
    runningPods: int
    summary: QueueSummary


class Queue(objects.KubeObject, total=False):
    spec: QueueSpec
    status: QueueStatus


# PodGroup ------------------------------------------------------------------------------------


class TopologyConstraint(typing_extensions.TypedDict, total=False):
    required: str
    preferred: str


class SubGroup(typing_extensions.TypedDict, total=False):
    name: str
    minMember: int
    selector: objects.LabelSelector
    topology: TopologyConstraint


class PodGroupSpec(typing_extensions.TypedDict, total=False):
    minMember: int
    minResources: dict[str, str]
    queue: str
    priorityClassName: str
    scheduleTimeoutSeconds: int
    onScheduleTimeout: str  # Requeue, Fail
    maximumExecutionTimeSeconds: int
    onMaximumExecutionTime: str
    preemptionDelay: str
    topology: TopologyConstraint
    subGroups: list[SubGroup]


class SubGroupStatus(typing_extensions.TypedDict, total=False):
    name: str
    minMember: int
    scheduled: int
    running: int


class PodGroupStatus(ObjectStatus, total=False):
    phase: str
    scheduled: int
    running: int
    succeeded: int
    failed: int
    queuePosition: int
    queuePending: int
    subGroups: list[SubGroupStatus]


class PodGroup(objects.KubeObject, total=False):
    spec: PodGroupSpec
    status: PodGroupStatus


# Reservation ---------------------------------------------------------------------------------


class ReservationOwner(typing_extensions.TypedDict, total=False):
    object: dict[str, str]  # {name}
    controller: dict[str, str]  # {kind, name}
    labelSelector: objects.LabelSelector


class ReservationSpec(typing_extensions.TypedDict, total=False):
    template: core.PodTemplateSpec
    owners: list[ReservationOwner]
    ttl: str
    expires: str
    startAt: str
    allocateOnce: bool
    queue: str
    unschedulable: bool
    capacityBuffer: bool


class CurrentOwner(typing_extensions.TypedDict, total=False):
    namespace: str
    name: str
    uid: str


class ReservedDevice(typing_extensions.TypedDict, total=False):
    """A device a Reservation holds (``status.devices``)."""

    claim: str
    request: str
    driver: str
    pool: str
    device: str
    shareID: str
    consumedCapacity: dict[str, str]


class ReservationStatus(ObjectStatus, total=False):
    phase: str  # Pending, Available, Bound, Expired, ...
    nodeName: str
    allocatable: dict[str, str]
    allocated: dict[str, str]
    currentOwners: list[CurrentOwner]
    devices: list[ReservedDevice]
    ownerSelector: str
    expiresAt: str


class Reservation(objects.KubeObject, total=False):
    spec: ReservationSpec
    status: ReservationStatus
