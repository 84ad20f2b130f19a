"""VolumeRestrictions: a ReadWriteOncePod claim is used by one pod at a time.

Kubernetes' ``VolumeRestrictions`` plugin, for the access mode that matters to Berth: a pod
using a PersistentVolumeClaim whose access modes include ``ReadWriteOncePod`` waits,
``UNSCHEDULABLE_AND_UNRESOLVABLE``, while any other pod using that claim is placed (bound,
assumed, or tentatively placed in this session — so two members of one gang never share it).
The session's placements count the users of each such claim per row.
"""

from __future__ import annotations

import collections.abc

from berth.scheduler.framework import (
    cyclestate,
    handles,
    interfaces,
    reasons,
    registries,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import nodetable, pods

__all__ = ["NAME", "REASON", "VolumeRestrictions", "in_use_reason", "new"]

NAME = names.VOLUME_RESTRICTIONS
REASON = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)


def in_use_reason(claims: collections.abc.Iterable[str], /) -> reasons.Reason:
    """Why a pod waits: another pod uses its ReadWriteOncePod ``claims``."""
    named = ", ".join(claims)
    return reasons.new(
        reasons.ReasonCode.VOLUME_IN_USE, f"{REASON} ({named})", plugin=NAME, claims=named
    )


class VolumeRestrictions(interfaces.PreFilterPlugin):
    """PreFilter: rejects the pod while one of its ReadWriteOncePod claims is in use."""

    name = NAME

    def __init__(self, handle: handles.ExtendedHandle) -> None:
        self._handle = handle

    def _exclusive(self, pod: pods.PodInfo) -> list[str]:
        claims = self._handle.snapshot().volumes.claims
        return [
            key
            for key in pod.claim_keys
            if (found := claims.get(key)) is not None and found.read_write_once_pod
        ]

    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        if not pod.claims:
            return statuses.SKIP
        mine = self._exclusive(pod)
        if not mine:
            return statuses.SKIP
        users = self._handle.placements().grouped(
            (NAME, "users"), extract=lambda other: [(other.key, k) for k in self._exclusive(other)]
        )
        busy = sorted(
            {
                claim
                for (user, claim), rows in users.items()
                if claim in mine and user != pod.key and rows.any()
            }
        )
        if busy:
            return statuses.rejecting(
                statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, in_use_reason(busy)
            )
        return statuses.SUCCESS


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> VolumeRestrictions:
    """Build the plugin (it takes no arguments)."""
    return VolumeRestrictions(handle)
