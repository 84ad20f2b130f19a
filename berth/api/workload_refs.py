"""Kubernetes 1.35's Workload API: a pod's ``spec.workloadRef`` and the Berth PodGroup for it.

A ``scheduling.k8s.io/v1alpha1`` Workload lists pod groups (``spec.podGroups[].name`` with a
``basic`` or ``gang`` policy); a pod joins one with ``spec.workloadRef`` (``name`` of the
Workload, ``podGroup``, and optionally ``podGroupReplicaKey``: the pods sharing a key are one
gang of that pod group). Berth stands for each (Workload, pod group, replica key) with a Berth
PodGroup named by :func:`group_name`; the scheduler's snapshot (the pod's group) and the
interop mirrors (the PodGroup written) both derive the name from here, so they always agree.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import hashlib

from berth.api import core

__all__ = ["MAX_NAME", "WorkloadRef", "from_pod_spec", "group_name"]

MAX_NAME = 253
"""A PodGroup's name is an object name: at most 253 characters."""


@dataclasses.dataclass(frozen=True)
class WorkloadRef:
    """What a pod's ``spec.workloadRef`` says."""

    workload: str
    pod_group: str
    replica_key: str | None = None

    @property
    def group_name(self) -> str:
        """The Berth PodGroup standing for this pod group (and replica)."""
        return group_name(self.workload, self.pod_group, replica_key=self.replica_key)


def group_name(workload: str, pod_group: str, /, *, replica_key: str | None = None) -> str:
    """``<workload>-<pod group>[-<replica key>]``, lowercased; a replica key that is not a
    valid name part (or a name too long) is replaced by a short hash of it, keeping it unique."""
    name = f"{workload}-{pod_group}".lower()
    if replica_key is None:
        return name[:MAX_NAME]
    key = replica_key.lower()
    if not key.replace("-", "").replace(".", "").isalnum() or not key.isascii():
        key = "r" + hashlib.sha256(replica_key.encode()).hexdigest()[:10]
    tail = f"-{key}"
    return name[: MAX_NAME - len(tail)] + tail


def from_pod_spec(spec: core.PodSpec, /) -> WorkloadRef | None:
    """The pod's ``spec.workloadRef``, or None without one (or without its two names)."""
    ref = spec.get("workloadRef")
    if not isinstance(ref, collections.abc.Mapping):
        return None
    workload, pod_group = ref.get("name"), ref.get("podGroup")
    if not (isinstance(workload, str) and workload and isinstance(pod_group, str) and pod_group):
        return None
    key = ref.get("podGroupReplicaKey")
    return WorkloadRef(workload, pod_group, key if isinstance(key, str) and key else None)
