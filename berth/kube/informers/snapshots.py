"""The scheduler's ``SnapshotSource`` over the informers' ``ClusterCache``.

:class:`CacheSource` takes a snapshot of the cache at the clock's time for every cycle, leaving
out the pending pods the binder is backing off (their last binding failed: they are retried
when their backoff ends, not at the very next cycle). It remembers the last snapshot it handed
out — the status controllers, the metrics and ``/berth/v1/nodes/{name}`` read it, so nothing but
the scheduling loop ever walks the cache. Runs on the event loop; the session that consumes a
snapshot may run in a worker thread (a snapshot is private to it).
"""

from __future__ import annotations

import collections.abc
import typing

import typing_extensions

from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import snapshots
from berth.util import clocks

__all__ = ["Backoffs", "CacheSource", "NodeView", "TaintView", "node_view"]


class Backoffs(typing.Protocol):
    """Pods not to offer the scheduler now (the binder's retry backoff)."""

    def holding(self, now: float) -> collections.abc.Set[str]:
        """Keys of the pods still backing off at ``now``."""
        ...


class CacheSource:
    """``SnapshotSource``: the cache at the clock's time, minus pods in backoff."""

    def __init__(
        self,
        cache: cluster_cache.ClusterCache,
        *,
        clock: clocks.Clock,
        backoffs: Backoffs | None = None,
    ) -> None:
        self.cache = cache
        self._clock = clock
        self._backoffs = backoffs
        self.last: snapshots.Snapshot | None = None
        """The last snapshot handed out (None before the first cycle)."""
        self._held: frozenset[str] = frozenset()
        self._held_changes = 0  # how often the pods left out changed: the cache never saw it

    def snapshot(self) -> snapshots.Snapshot:
        now = self._clock.now()
        taken = self.cache.snapshot(now)
        held = self._backoffs.holding(now) if self._backoffs is not None else frozenset()
        if held != self._held:
            # A pod whose backoff ended is offered again: work parked without it may fit now.
            self._held = frozenset(held)
            self._held_changes += 1
        if taken.changes is not None:
            taken = taken.but(changes=taken.changes.plus_outside(self._held_changes))
        if held:
            taken = taken.but(pending=tuple(p for p in taken.pending if p.key not in held))
        self.last = taken
        return taken

    def node(self, name: str) -> NodeView | None:
        """The scheduler's view of one node in the last snapshot (``/berth/v1/nodes/{name}``)."""
        if self.last is None:
            return None
        return node_view(self.last, name)


class TaintView(typing_extensions.TypedDict):
    key: str
    value: str
    effect: str


class NodeView(typing_extensions.TypedDict):
    """What ``/berth/v1/nodes/{name}`` answers: the scheduler's view of one node (amounts in
    milli-units, per resource)."""

    name: str
    unschedulable: bool
    labels: dict[str, str]
    taints: list[TaintView]
    allocatableMilli: dict[str, int]
    requestedMilli: dict[str, int]
    freeMilli: dict[str, int]
    pods: list[str]
    snapshotTime: float


def node_view(snapshot: snapshots.Snapshot, name: str) -> NodeView | None:
    """One node as JSON-able data: allocatable, requested and free per resource, its pods."""
    info = snapshot.node_infos.get(name)
    row = snapshot.nodes.index.get(name)
    if info is None or row is None:
        return None
    table = snapshot.nodes
    columns = table.resources
    allocatable = {c: int(table.allocatable[row, i]) for i, c in enumerate(columns)}
    requested = {c: int(table.requested[row, i]) for i, c in enumerate(columns)}
    return {
        "name": info.name,
        "unschedulable": bool(info.unschedulable),
        "labels": dict(info.labels),
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in info.taints],
        "allocatableMilli": allocatable,
        "requestedMilli": requested,
        "freeMilli": {c: allocatable[c] - requested[c] for c in allocatable},
        "pods": list(info.pods),
        "snapshotTime": snapshot.now,
    }
