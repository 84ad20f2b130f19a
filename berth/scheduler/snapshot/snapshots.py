"""``Snapshot``: the cluster as one scheduling cycle sees it, taken at ``now``.

Owns the read side every session shares: the :class:`~berth.scheduler.snapshot.nodetable.NodeTable`
(a private copy the session may mutate through ``assume``/``forget``), the infos by key, the
PriorityClasses, the per-queue usage, the placed groups by queue, and lookups between them.
Nothing here changes when the cache moves on: the large mappings are copy-on-write views
(:mod:`.cowmaps`), the others copies, all keyed by plain ``str`` (the typed ids of :mod:`.ids`
are ``str`` subtypes, so they look up directly). Mapping iteration order is not a contract
(R9): iterate ``pending`` (sorted by key) or sort.

Taken by :meth:`berth.scheduler.snapshot.cache.ClusterCache.snapshot`; opened by the
framework's ``Session``.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import operator
import typing

from berth.scheduler.snapshot import (
    changes,
    devices,
    gpudevices,
    gpumix,
    nodes,
    nodetable,
    placedgroups,
    podgroups,
    pods,
    queues,
    reservations,
    runstats,
    usage,
    volumes,
)

__all__ = ["Snapshot"]


_by_key = operator.attrgetter("key")


# The fields are named like the modules; these aliases keep the annotations readable to mypy.
_NodeInfo = nodes.NodeInfo
_PodInfo = pods.PodInfo
_PodGroupInfo = podgroups.PodGroupInfo
_QueueInfo = queues.QueueInfo
_ReservationInfo = reservations.ReservationInfo
_QueueUsage = usage.QueueUsage
_Volumes = volumes.Volumes
_NO_VOLUMES = volumes.EMPTY
_Devices = devices.Devices
_NO_DEVICES = devices.EMPTY
_Changes = changes.Changes
_RunTimes = runstats.RunTimes
_NO_RUN_TIMES = runstats.EMPTY


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Snapshot:
    """Everything a cycle reads; see the module docstring."""

    now: float  # the clock's time when the snapshot was taken (seconds since the epoch)
    nodes: nodetable.NodeTable
    node_infos: collections.abc.Mapping[str, _NodeInfo]  # in row order
    pods: collections.abc.Mapping[str, _PodInfo]  # every known pod, any phase
    # The pods with pod (anti-)affinity or host ports, any phase (``PodInfo.constrains_others``)
    constraining: collections.abc.Mapping[str, _PodInfo] = dataclasses.field(default_factory=dict)
    # Namespace name -> its labels (for pod affinity's namespaceSelector)
    namespace_labels: collections.abc.Mapping[str, collections.abc.Mapping[str, str]] = (
        dataclasses.field(default_factory=dict)
    )
    pending: collections.abc.Sequence[_PodInfo]  # Berth's pods waiting for a node, ungated, by key
    gated: tuple[_PodInfo, ...] = ()  # Berth's waiting pods held by scheduling gates
    pod_groups: collections.abc.Mapping[str, _PodGroupInfo]
    queues: collections.abc.Mapping[str, _QueueInfo]
    reservations: collections.abc.Mapping[str, _ReservationInfo]
    priority_classes: collections.abc.Mapping[str, int]
    # Per queue (by name; absent: nothing runs or waits there), summed by the cache as pods
    # change, so that queue plugins need not walk every pod each cycle.
    queue_usage: collections.abc.Mapping[str, _QueueUsage]
    # Namespace -> its labels (what queues' namespaceSelectors match), for namespaces known.
    namespaces: collections.abc.Mapping[str, collections.abc.Mapping[str, str]] = dataclasses.field(
        default_factory=dict
    )
    # PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSI attach limits.
    volumes: _Volumes = _NO_VOLUMES
    # DeviceClasses, ResourceSlices, ResourceClaims and their templates (DRA).
    devices: _Devices = _NO_DEVICES
    # The cache's change counters (None: a snapshot built by hand, which parks nothing).
    changes: _Changes | None = None
    # No pod the cache has known, now or earlier, has a lower priority (None: not known).
    priority_floor: int | None = None
    # Run times of pods that finished, per queue (estimates for the others: runtimes).
    run_times: _RunTimes = _NO_RUN_TIMES
    # Node name -> its placed pods holding a share of a GPU, on its devices (gpudevices).
    shared_gpus: collections.abc.Mapping[str, gpudevices.NodeShares] = dataclasses.field(
        default_factory=dict
    )
    # The GPU workload mix arriving, as the cache learned it (gpumix; the prior by default).
    gpu_mix: gpumix.View = dataclasses.field(default_factory=gpumix.Mix().view)
    # The waiting pods (pending or gated) that wait for a group from their owners, sorted by
    # key, as the cache keeps them (Berth's own; in admission mode also the gated pods of
    # kube-scheduler that admission offers); None: not known (``awaiting_owner_group`` looks).
    awaiting_group: tuple[_PodInfo, ...] | None = None
    # Keys of Berth's pods that stopped waiting (placed or assumed, ended, deleted, replaced)
    # since the cache's previous snapshot (the one ``changes.since`` names); None: not known.
    stopped_waiting: frozenset[str] | None = None
    # ``pending`` by group key (None: plain pods), sorted by key, as the cache keeps it; a
    # snapshot built otherwise (or replaced) has none, and ``pending_but`` walks ``pending``.
    pending_index: collections.abc.Mapping[str | None, tuple[_PodInfo, ...]] | None = (
        dataclasses.field(default=None, init=False, repr=False)
    )
    # The groups whose entry in ``pending_index`` changed since the cache's previous snapshot
    # (whose ``changes.seq`` is ``changes.since``), for readers that keep what they derive
    # from the index across snapshots; None: not known.
    pending_changed: frozenset[str | None] | None = dataclasses.field(
        default=None, init=False, repr=False
    )
    # The placed groups of ``pod_groups`` by queue, as the cache keeps them; a snapshot built
    # otherwise (or replaced) has none until ``placed_groups`` scans ``pod_groups`` once.
    placed_index: placedgroups.PlacedGroups | None = dataclasses.field(
        default=None, init=False, repr=False
    )

    @property
    def placed_groups(self) -> placedgroups.PlacedGroups:
        """The groups of ``pod_groups`` with a member placed, by queue (:mod:`.placedgroups`).
        With the cache's index this costs nothing; otherwise the first read walks every group."""
        index = self.placed_index
        if index is None:
            index = placedgroups.scan(self.pod_groups)
            object.__setattr__(self, "placed_index", index)
        return index

    def but(self, **fields: typing.Any) -> Snapshot:
        """This snapshot with ``fields`` replaced, keeping the cache's indexes that still hold
        (``dataclasses.replace`` alone leaves them all out, and every cycle would then walk the
        whole backlog): the pending index unless ``pending`` is replaced, the placed groups
        unless ``pod_groups`` is."""
        made = dataclasses.replace(self, **fields)
        if "pending" not in fields and self.pending_index is not None:
            made.with_pending_index(self.pending_index, changed=self.pending_changed)
        if "pod_groups" not in fields and self.placed_index is not None:
            made.with_placed_groups(self.placed_index)
        return made

    def awaiting_owner_group(self) -> tuple[_PodInfo, ...]:
        """The waiting pods that wait for a group from their owners (``awaiting_group``; in
        admission mode with the gated pods admission offers), sorted by key. With the cache's
        index this costs those pods, not the whole backlog."""
        if self.awaiting_group is not None:
            return self.awaiting_group
        waiting = (p for p in (*self.pending, *self.gated) if p.awaiting_group)
        return tuple(sorted(waiting, key=_by_key))

    def pending_but(self, groups: collections.abc.Mapping[str, object], /) -> list[_PodInfo]:
        """``pending`` but the pods of ``groups`` (by group key), sorted by key. With the
        cache's index this costs the groups left, not the whole backlog."""
        index = self.pending_index
        if index is None:
            return [p for p in self.pending if p.pod_group not in groups]
        kept = index.keys() - groups.keys()
        return sorted((p for g in kept for p in index[g]), key=_by_key)

    def with_pending_index(
        self,
        index: collections.abc.Mapping[str | None, tuple[_PodInfo, ...]],
        /,
        *,
        changed: frozenset[str | None] | None = None,
    ) -> Snapshot:
        """This snapshot, knowing ``pending`` by group (``index`` must hold exactly
        ``pending``: the cache's own, kept as pods change; ``changed``: its groups changed
        since the cache's previous snapshot, if known)."""
        object.__setattr__(self, "pending_index", index)
        object.__setattr__(self, "pending_changed", changed)
        return self

    def with_placed_groups(self, index: placedgroups.PlacedGroups, /) -> Snapshot:
        """This snapshot, knowing its placed groups (``index`` must be exactly what
        :func:`placedgroups.scan` finds in ``pod_groups``: the cache's own, kept as groups
        change)."""
        object.__setattr__(self, "placed_index", index)
        return self

    def usage_of(self, queue: str, /) -> _QueueUsage:
        """What ``queue``'s own pods hold and wait for (not its subtree's)."""
        return self.queue_usage.get(queue, usage.EMPTY)

    def group_of(self, pod: _PodInfo, /) -> _PodGroupInfo | None:
        """The pod's group (``None`` for a plain pod, or when its PodGroup does not exist)."""
        return self.pod_groups.get(pod.pod_group) if pod.pod_group is not None else None

    def members(self, group: str, /) -> tuple[_PodInfo, ...]:
        """The group's known pods, any phase, sorted by key."""
        info = self.pod_groups.get(group)
        if info is None:
            return ()
        return tuple(self.pods[key] for key in info.members if key in self.pods)

    def pods_on(self, node: str, /) -> tuple[_PodInfo, ...]:
        """The pods counted on ``node`` (bound or assumed, not finished), sorted by key."""
        info = self.node_infos.get(node)
        if info is None:
            return ()
        return tuple(self.pods[key] for key in info.pods if key in self.pods)
