"""NodeVolumeLimits: a node attaches at most its CSI drivers' limits of volumes.

Kubernetes' ``NodeVolumeLimits`` (CSI) filter, vectorised: a node's CSINode declares, per CSI
driver, how many volumes of that driver it may attach (``spec.drivers[].allocatable.count``).
A volume counts once per node however many of the node's pods use it; the session's
placements count, per (driver, volume handle), the placed pods using it per row. A row fails
when the volumes already attached there plus the pod's volumes not yet attached there exceed
the limit of their driver. A node without a limit for a driver (no CSINode, or no count) has
none. A bound claim's driver is its PersistentVolume's ``spec.csi.driver``; an unbound one's is
its StorageClass's provisioner (the volume it will get), as kube-scheduler counts.
"""

from __future__ import annotations

import collections.abc

import numpy as np

from berth.scheduler.framework import (
    cyclestate,
    filtering,
    handles,
    interfaces,
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

    def _attachments(self, pod: pods.PodInfo) -> list[Attachment]:
        storage = self._handle.snapshot().volumes
        found: list[Attachment] = []
        for key in pod.claim_keys:
            claim = storage.claims.get(key)
            attachment = storage.driver_of(claim) if claim is not None else None
            if attachment is not None:
                found.append(attachment)
        return found

    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        if not pod.claims or not self._handle.snapshot().volumes.attach_limits:
            return statuses.SKIP
        return statuses.SUCCESS if self._attachments(pod) else statuses.SKIP

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        mine = set(self._attachments(pod))
        attached = self._handle.placements().grouped(NAME, extract=self._attachments)
        storage = self._handle.snapshot().volumes
        passed = np.ones(len(nodes), dtype=np.bool_)
        for driver in sorted({d for d, _ in mine}):
            in_use = np.zeros(len(nodes), dtype=np.int64)
            new = np.zeros(len(nodes), dtype=np.int64)
            for (d, _), rows in attached.items():
                if d == driver:
                    in_use += rows > 0
            for d, handle in mine:
                if d != driver:
                    continue
                users = attached.get((d, handle))
                new += 1 if users is None else (users == 0)
            passed &= in_use + new <= _limits(storage, driver=driver, nodes=nodes)
        return filtering.NodeFilter(passed=passed, code=statuses.Code.UNSCHEDULABLE, reason=REASON)


def _limits(
    storage: volumes.Volumes, *, driver: str, nodes: nodetable.NodeTable
) -> nodetable.IntArray:
    """Per row, how many volumes of ``driver`` the node may attach (unlimited: none declared)."""
    limits = np.full(len(nodes), _UNLIMITED, dtype=np.int64)
    index: collections.abc.Mapping[str, int] = nodes.index
    for node, drivers in storage.attach_limits.items():
        row = index.get(node)
        count = drivers.get(driver)
        if row is not None and count is not None:
            limits[row] = count
    return limits


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> NodeVolumeLimits:
    """Build the plugin (it takes no arguments)."""
    return NodeVolumeLimits(handle)
