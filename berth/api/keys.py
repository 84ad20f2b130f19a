"""The names Berth's API is addressed by: group, version, pod labels, annotations, gates.

Every module that reads or writes a pod key imports it from here, so a key is spelt once.
The interop keys are the ones other gang schedulers use; Berth reads them too, so workloads
written for the scheduler-plugins coscheduling plugin or Volcano find their group.
"""

from __future__ import annotations

import typing

__all__ = [
    "ADMISSION_GATE",
    "ADMISSION_LABEL",
    "ADMITTED_AT_ANNOTATION",
    "ADMITTED_NODE_ANNOTATION",
    "API_VERSION",
    "DEFAULT_QUEUE",
    "DEFAULT_SCHEDULER_NAME",
    "DERIVED_FROM_ANNOTATION",
    "GROUP",
    "GROUPED_BY_ANNOTATION",
    "GROUP_BY_OWNER_LABEL",
    "GROUP_ERROR_ANNOTATION",
    "INTEROP_POD_GROUP_ANNOTATION",
    "INTEROP_POD_GROUP_LABEL",
    "EXECUTION_TIME_EXCEEDED_ANNOTATION",
    "INVALID_ANNOTATION",
    "MIRROR_OF_ANNOTATION",
    "NAMESPACE_QUEUE_LABEL",
    "POD_GROUP_LABEL",
    "QUEUE_LABEL",
    "RESERVATION_ALLOCATED_ANNOTATION",
    "RESERVATION_LABEL",
    "SIM_DURATION_ANNOTATION",
    "EXPECTED_RUNTIME_ANNOTATION",
    "VERSION",
]

GROUP = "scheduling.berth.io"
VERSION = "v1alpha1"
# Spelt out (not an f-string) so that mypy sees a Literal the models can use as a default.
API_VERSION: typing.Final = "scheduling.berth.io/v1alpha1"
"""The ``apiVersion`` of every Berth object."""

DEFAULT_SCHEDULER_NAME = "berth-scheduler"
"""Pods whose ``spec.schedulerName`` is this are Berth's (configurable in the operator)."""
DEFAULT_QUEUE = "default"
"""The queue that exists implicitly and takes work that names no queue."""

POD_GROUP_LABEL = f"{GROUP}/pod-group"
"""Label: the PodGroup (same namespace) a pod belongs to."""
QUEUE_LABEL = f"{GROUP}/queue"
"""Label: the queue of a pod without a group (it is then a group of one)."""
RESERVATION_LABEL = f"{GROUP}/reservation"
"""Label: the Reservation (same namespace) a pod asks to be placed into, by name."""
RESERVATION_ALLOCATED_ANNOTATION = f"{GROUP}/reservation-allocated"
"""Annotation Berth writes on an owner pod it placed into a reservation."""
ADMISSION_GATE = f"{GROUP}/admission"
"""Scheduling gate holding pods in admission mode until Berth admits them."""
ADMISSION_LABEL = f"{GROUP}/admission"
"""Label: ``enabled`` on a Namespace puts its pods through admission (the webhook gates them);
``disabled`` on a pod keeps the webhook away from it."""
ADMITTED_NODE_ANNOTATION = f"{GROUP}/admitted-node"
"""Annotation Berth writes on a pod it admitted: the node it pinned the pod to."""
ADMITTED_AT_ANNOTATION = f"{GROUP}/admitted-at"
"""Annotation Berth writes on a pod it admitted: when (RFC 3339), for the bind timeout."""
EXPECTED_RUNTIME_ANNOTATION = f"{GROUP}/expected-runtime"
"""Annotation on a pod: how long it expects to run once started (a duration, ``45m``). The
starvation guard lets a pod onto room held for a starving gang only when the pod will have
ended by the time the gang could start (EASY backfill)."""
GROUP_BY_OWNER_LABEL = f"{GROUP}/group-by-owner"
"""Label on a workload (a Job, a JobSet...): ``disabled`` makes each of its pods a group of one
instead of the gang Berth would derive from the workload's spec."""
GROUPED_BY_ANNOTATION = f"{GROUP}/grouped-by"
"""Annotation Berth writes on a pod it grouped by its owners: ``Kind/name`` of the workload the
group was derived from, or ``Pod/<name>`` when the pod is a group of one."""
GROUP_ERROR_ANNOTATION = f"{GROUP}/group-error"
"""Annotation Berth writes on a pod whose group it cannot derive from its owners: what is wrong
(the pod waits until it is fixed)."""
DERIVED_FROM_ANNOTATION = f"{GROUP}/derived-from"
"""Annotation on a PodGroup Berth derived from a workload: how its size was computed."""
MIRROR_OF_ANNOTATION = f"{GROUP}/mirror-of"
"""Annotation on a PodGroup Berth keeps in step with another scheduler's PodGroup of the same
name (scheduler-plugins, Volcano): which one."""
INVALID_ANNOTATION = f"{GROUP}/invalid"
"""Annotation on such a mirror when the PodGroup it follows cannot be honoured: what is wrong
(the group is then never placed, and says so)."""
EXECUTION_TIME_EXCEEDED_ANNOTATION = f"{GROUP}/maximum-execution-time-exceeded"
"""Annotation Berth puts on a PodGroup that failed for running past its
``maximumExecutionTimeSeconds`` (``onMaximumExecutionTime: Fail``): what happened, for its
status. While it is there the group is Failed and never placed; remove it (or recreate the
group) to run the group again."""
NAMESPACE_QUEUE_LABEL = f"{GROUP}/default-queue"
"""Label on a Namespace: the queue its pods join when they name none."""
SIM_DURATION_ANNOTATION = "sim.berth.io/duration"
"""Annotation: how long a simulated pod runs before it succeeds (a Go-style duration)."""

INTEROP_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
"""Label of the scheduler-plugins coscheduling PodGroup, read as :data:`POD_GROUP_LABEL`."""
INTEROP_POD_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
"""Annotation of Volcano's PodGroup, read as :data:`POD_GROUP_LABEL`."""
