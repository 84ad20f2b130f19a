"""``Changes``: what moved in the cluster cache, as counters a snapshot carries.

The scheduler parks work that cannot fit until an event that could change that (queueing
hints, :mod:`berth.scheduler.framework.parking`). It learns which events happened by comparing
the counters of the snapshot it parked a job under with those of the next one:

- ``seq``: anything at all changed (every mutation of the cache counts);
- ``world``: what every placement depends on — nodes (added, removed, their labels, taints,
  capacity), queues, reservations, namespaces, priority classes, storage (claims, volumes,
  storage classes, CSI nodes' attach limits);
- ``freed``: a pod stopped counting on a node (it ended, was deleted, evicted, or its binding
  was forgotten): room appeared;
- ``placed``: a pod started counting on a node (new victims for preemption, new neighbours for
  pod affinity).

- ``outside``: the sources around the cache changed what they offer (the binder's backoffs
  ended, admission lifted or held a gate): counted as a change of the world, since the cache
  did not see it. Each such source adds its own running count (:meth:`Changes.plus_outside`),
  so the sum moves whenever one of them does.

``source`` names the cache, so counters of two caches are never compared. ``taken`` counts the
snapshots taken, ``groups`` names the groups whose view changed since the previous one, whose
``seq`` was ``since``, and ``pods`` the pods stored or forgotten since then (a reader that saw
a snapshot at that ``seq`` need not compare every group or pod, even when snapshots that
changed nothing came between).
"""

from __future__ import annotations

import dataclasses
import itertools

__all__ = ["Changes", "Counter", "new_source"]

_sources = itertools.count(1)


def new_source() -> int:
    """A number no other cache in this process has."""
    return next(_sources)


@dataclasses.dataclass(frozen=True, slots=True)
class Changes:
    """The cache's counters when a snapshot was taken; see the module docstring."""

    source: int
    seq: int
    world: int
    freed: int
    placed: int
    taken: int = 0
    groups: frozenset[str] = frozenset()
    pods: frozenset[str] = frozenset()
    outside: int = 0
    since: int = -1  # the previous snapshot's ``seq`` (-1: none)

    def follows(self, other: Changes) -> bool:
        """``groups`` and ``pods`` name every group and pod changed since ``other`` (taken
        from the same cache)."""
        return self.source == other.source and self.since == other.seq

    def same_state(self, other: Changes | None) -> bool:
        """Nothing at all changed between ``other`` and these counters."""
        return other is not None and (self.source, self.seq, self.outside) == (
            other.source,
            other.seq,
            other.outside,
        )

    def same_world(self, other: Changes) -> bool:
        """Neither the world nor what the sources around the cache offer changed."""
        return (self.source, self.world, self.outside) == (other.source, other.world, other.outside)

    def plus_outside(self, count: int) -> Changes:
        """These counters with a source's running count of its own changes added."""
        return dataclasses.replace(self, outside=self.outside + count) if count else self


class Counter:
    """The cache's running counters (mutable; :meth:`freeze` gives the snapshot's copy)."""

    __slots__ = ("freed", "frozen_at", "placed", "seq", "source", "taken", "world")

    def __init__(self) -> None:
        self.source = new_source()
        self.seq = self.world = self.freed = self.placed = self.taken = 0
        self.frozen_at = -1  # ``seq`` at the last snapshot

    def touch(self) -> None:
        """Something changed."""
        self.seq += 1

    def world_changed(self) -> None:
        self.seq += 1
        self.world += 1

    def room_freed(self) -> None:
        self.seq += 1
        self.freed += 1

    def pod_placed(self) -> None:
        self.seq += 1
        self.placed += 1

    def freeze(self, *, groups: frozenset[str], pods: frozenset[str] = frozenset()) -> Changes:
        """The counters for a new snapshot, in which ``groups`` and ``pods`` changed."""
        self.taken += 1
        since, self.frozen_at = self.frozen_at, self.seq
        return Changes(
            source=self.source,
            seq=self.seq,
            world=self.world,
            freed=self.freed,
            placed=self.placed,
            taken=self.taken,
            groups=groups,
            pods=pods,
            since=since,
        )
