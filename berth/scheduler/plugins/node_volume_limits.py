"""NodeVolumeLimits: a node attaches at most its CSI drivers' limits of volumes.

Kubernetes' ``NodeVolumeLimits`` (CSI) filter, vectorised: a node's CSINode declares, per CSI
driver, how many volumes of that driver it may attach (``spec.drivers[].allocatable.count``).
A volume counts once per node however many of the node's pods use it: the session's
placements count, per row, the placed pods' volumes of each driver, less the repeats of the
volumes of claims several pods use (counted per volume: few), so that an attempt costs what
the drivers and shared volumes number, not every volume of the cluster. A row fails
when the pod attaches volumes of a driver not yet attached there and, with the volumes already
attached there, they exceed the driver's limit; a driver the pod attaches nothing new of is not
judged (kube-scheduler's semantics: a node already over a limit still takes a pod sharing its
volumes). A node without a limit for a driver (no CSINode, or no count) has none. A bound
claim's driver is its PersistentVolume's ``spec.csi.driver``; an unbound one's is its
StorageClass's provisioner (the volume it will get), as kube-scheduler counts.
"""

from __future__ import annotations

import collections
import collections.abc

import numpy as np

from berth.scheduler.framework import (
    cyclestate,
    filtering,
    handles,
    interfaces,
    reasons,
    registries,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import nodetable, pods, volumes

__all__ = ["NAME", "REASON", "NodeVolumeLimits", "new"]

NAME = names.NODE_VOLUME_LIMITS
REASON = "node(s) exceed max volume count"
_UNLIMITED = np.iinfo(np.int64).max

Attachment = tuple[str, str]  # (CSI driver, volume handle)


class NodeVolumeLimits(interfaces.PreFilterPlugin, interfaces.FilterPlugin):
    """PreFilter (skips pods without CSI volumes), Filter."""

    name = NAME

    def __init__(self, handle: handles.ExtendedHandle) -> None:
        self._handle = handle
        self._shared: tuple[object, frozenset[str]] | None = None  # (snapshot, claim keys)
        # driver -> (the storage and row index it was computed for, limits per row)
        self._limits: dict[str, tuple[object, object, nodetable.IntArray]] = {}

    def _attachments(self, pod: pods.PodInfo) -> list[Attachment]:
        storage = self._handle.snapshot().volumes
        found: list[Attachment] = []
        for key in pod.claim_keys:
            claim = storage.claims.get(key)
            attachment = storage.driver_of(claim) if claim is not None else None
            if attachment is not None:
                found.append(attachment)
        return found

    def _shared_claims(self) -> frozenset[str]:
        """Claims more than one known pod uses (the only volumes two pods can share on a node;
        walked once per snapshot)."""
        snapshot = self._handle.snapshot()
        if self._shared is None or self._shared[0] is not snapshot:
            known: dict[str, pods.PodInfo] = dict(snapshot.constraining)
            known.update((p.key, p) for p in snapshot.pending)
            users = collections.Counter(
                key for pod in known.values() if not pod.terminal for key in pod.claim_keys
            )
            self._shared = (snapshot, frozenset(k for k, n in users.items() if n > 1))
        return self._shared[1]

    def _per_driver(self, pod: pods.PodInfo) -> list[tuple[str, int]]:
        """(driver, i) for the i-th volume of each driver the pod attaches: counted per row,
        their sum is how many volumes of that driver the node's pods attach."""
        seen: dict[str, int] = {}
        for driver, _ in set(self._attachments(pod)):
            seen[driver] = seen.get(driver, 0) + 1
        return [(d, i) for d, n in seen.items() for i in range(n)]

    def _shared_attachments(self, pod: pods.PodInfo) -> list[Attachment]:
        shared = self._shared_claims()
        if not shared or not any(k in shared for k in pod.claim_keys):
            return []
        storage = self._handle.snapshot().volumes
        return [
            found
            for key in pod.claim_keys
            if key in shared
            and (claim := storage.claims.get(key)) is not None
            and (found := storage.driver_of(claim)) is not None
        ]

    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        if not pod.claims or not self._handle.snapshot().volumes.attach_limits:
            return statuses.SKIP
        return statuses.SUCCESS if self._attachments(pod) else statuses.SKIP

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        placed = self._handle.placements()
        # Volumes per row = the pods' volumes, less the repeats of a volume several pods share.
        volumes_per_pod = placed.grouped((NAME, "count"), extract=self._per_driver)
        shared_users = placed.grouped((NAME, "shared"), extract=self._shared_attachments)
        storage = self._handle.snapshot().volumes
        size = len(nodes)
        mine = set(self._attachments(pod))
        passed = np.ones(size, dtype=np.bool_)
        for driver in sorted({d for d, _ in mine}):
            in_use = np.zeros(size, dtype=np.int64)
            for (d, _), rows in volumes_per_pod.items():
                if d == driver:
                    in_use += rows
            for (d, _), users in shared_users.items():
                if d == driver:
                    in_use -= np.maximum(users - 1, 0)
            new = np.zeros(size, dtype=np.int64)
            for d, handle in mine:
                if d != driver:
                    continue
                sharing = shared_users.get((d, handle))
                new += 1 if sharing is None else (sharing == 0)
            # A row where the pod attaches nothing new of the driver passes even over its limit
            # (lowered, or filled by another scheduler): sharing needs no attachment.
            limits = self._limits_of(storage, driver=driver, nodes=nodes)
            passed &= (new == 0) | (in_use + new <= limits)
        return filtering.NodeFilter(
            passed=passed,
            code=statuses.Code.UNSCHEDULABLE,
            reason=REASON,
            reason_code=reasons.ReasonCode.VOLUME_LIMIT_EXCEEDED,
        )

    def _limits_of(
        self, storage: volumes.Volumes, *, driver: str, nodes: nodetable.NodeTable
    ) -> nodetable.IntArray:
        """:func:`_limits`, computed once per snapshot (the storage and rows it holds)."""
        found = self._limits.get(driver)
        if found is not None and found[0] is storage and found[1] is nodes.index:
            return found[2]
        limits = _limits(storage, driver=driver, nodes=nodes)
        limits.setflags(write=False)
        if len(self._limits) > 64:
            self._limits.clear()
        self._limits[driver] = (storage, nodes.index, limits)
        return limits


def _limits(
    storage: volumes.Volumes, *, driver: str, nodes: nodetable.NodeTable
) -> nodetable.IntArray:
    """Per row, how many volumes of ``driver`` the node may attach (unlimited: none declared);
    kept for the table's generation of rows (one walk of the CSINodes per session)."""
    limits = np.full(len(nodes), _UNLIMITED, dtype=np.int64)
    index: collections.abc.Mapping[str, int] = nodes.index
    for node, count in storage.limits(driver).items():
        row = index.get(node)
        if row is not None:
            limits[row] = count
    return limits


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> NodeVolumeLimits:
    """Build the plugin (it takes no arguments)."""
    return NodeVolumeLimits(handle)
