"""``Placements``: which pods are on which node during one session, with per-row counts.

Plugins whose answer depends on the pods already on a node (InterPodAffinity,
PodTopologySpread, NodePorts) read the session's :class:`Placements`
(``session.placements``). It holds the snapshot's placed pods (bound or assumed, not finished,
on a node of the table; the session's reserve pods excluded) and follows every statement at
once: a pod the session places tentatively counts for the next attempt (so a gang's members
constrain each other), an evicted pod stops counting, and undoing either undoes that.

Nothing is built until a plugin asks: while no pod has such a constraint, a statement's
operation costs one dictionary update. A plugin asks for

- :meth:`Placements.counts`: the number of placed pods matching a predicate, per row, kept up
  to date as pods come and go (the predicate is evaluated once per pod, not once per attempt);
- :meth:`Placements.grouped`: per item the pods yield (a term they own, a host port they bind),
  the number of placed pods yielding it, per row.

Keys must capture everything the predicate or extractor depends on. The arrays are shared and
change in place as pods come and go: read them within one attempt, copy to keep.

**From one session to the next.** Counting every placed pod costs what the cluster holds (5000
nodes' worth of pods is 20 ms); a stream of new pods, a few per cycle, would pay it each cycle.
So at session close the framework keeps the placed pods and the counts asked with
``carried=True`` (:meth:`Placements.hand_on`) and the next session's :class:`Placements` takes
them over (:class:`Carried`), brought up to its snapshot by re-counting only the pods the cache
changed in between (``Changes.pods``), those the last session placed or evicted tentatively, and
those whose standing as reserve pods changed. That holds while the snapshots follow each other
from one cache, the world did not change (``Changes.world``: nodes, namespaces, storage...) and
the node table's rows are the same; otherwise the session counts afresh. A snapshot the loop
takes but runs no session over (one that could only repeat the last) passes the state on
(:meth:`Carried.passed_over`), its changed pods to count again. A predicate asked with
``carried=True`` must therefore depend on nothing but the pod and the world (a term, a
selector, namespace labels); one that reads other pods (which claims several pods share) is
counted per session. Counts no session read for :data:`CARRY_SESSIONS` sessions are dropped.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import numpy as np
import numpy.typing as npt

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import changes as changes_
    from berth.scheduler.snapshot import nodetable, pods, snapshots

__all__ = ["CARRY_SESSIONS", "MAX_TRACKERS", "Carried", "Placements"]

IntArray = npt.NDArray[np.int64]
Predicate = collections.abc.Callable[["pods.PodInfo"], bool]
Extractor = collections.abc.Callable[["pods.PodInfo"], collections.abc.Iterable[typing.Hashable]]
Entry = tuple["pods.PodInfo", int]
"""A counted pod and its row."""

ItemT = typing.TypeVar("ItemT", bound=collections.abc.Hashable)

MAX_TRACKERS = 512
"""Counters (and groupings) kept per session; the oldest goes first (each costs one array and
one evaluation per pod change)."""

CARRY_SESSIONS = 8
"""Sessions a carried counter or grouping outlives its last reader (each costs an evaluation
per pod that changes, read or not)."""


class _Counter:
    __slots__ = ("carried", "counts", "predicate", "read_in")

    def __init__(self, predicate: Predicate, counts: IntArray, *, carried: bool, read_in: int):
        self.predicate = predicate
        self.counts = counts
        self.carried = carried
        self.read_in = read_in  # the last session that asked for it


class _Grouping:
    __slots__ = ("by_item", "carried", "extract", "read_in")

    def __init__(
        self,
        extract: Extractor,
        by_item: dict[typing.Hashable, IntArray],
        *,
        carried: bool,
        read_in: int,
    ):
        self.extract = extract
        self.by_item = by_item
        self.carried = carried
        self.read_in = read_in


@dataclasses.dataclass(frozen=True, slots=True)
class Carried:
    """What a closed session hands the next (:meth:`Placements.hand_on`)."""

    placed: dict[str, Entry]  # as the session left them, its own changes included
    counters: dict[typing.Hashable, _Counter]
    groupings: dict[typing.Hashable, _Grouping]
    # Pods to count again besides those the next snapshot changed: the ones the session's
    # statements added or removed, and those changed in snapshots no session ran over.
    stale: frozenset[str]
    reserve_pods: frozenset[str]
    index: collections.abc.Mapping[str, int]  # the node table's rows (by identity)
    changes: changes_.Changes
    session: int  # how many sessions the state has seen

    def serves(self, snapshot: snapshots.Snapshot, /) -> bool:
        """Whether ``snapshot`` is the cache's next after the one this state reflects, with
        the world and the node rows unchanged since (see the module docstring)."""
        now = snapshot.changes
        return (
            now is not None
            and now.follows(self.changes)
            and now.world == self.changes.world
            and snapshot.nodes.index is self.index
        )

    def passed_over(self, snapshot: snapshots.Snapshot, /) -> Carried | None:
        """The state to hand the session after ``snapshot``, over which no session ran (the
        loop skips one that could only repeat the last): the pods it changed are counted
        again then; ``None`` when it breaks the chain."""
        if not self.serves(snapshot) or snapshot.changes is None:
            return None
        return dataclasses.replace(
            self, stale=self.stale | snapshot.changes.pods, changes=snapshot.changes
        )


class Placements:
    """The session's pods on nodes; see the module docstring."""

    def __init__(
        self,
        snapshot: snapshots.Snapshot,
        *,
        nodes: nodetable.NodeTable,
        reserve_pods: collections.abc.Set[str] = frozenset(),
        carried: Carried | None = None,
    ) -> None:
        """``carried``: the previous session's state, taken over when the snapshots follow each
        other (see the module docstring)."""
        self._snapshot = snapshot
        self._reserve_pods = reserve_pods
        """Pods standing for capacity (``SessionHooks.reserve_pods``, filled by plugins at session
        open, so read live): they hold room, but no other pod sees them."""
        self._index = nodes.index
        self._rows = len(nodes)
        self._added: dict[str, Entry] = {}
        self._removed: set[str] = set()
        self._all: dict[str, Entry] | None = None
        self._counters: dict[typing.Hashable, _Counter] = {}
        self._groupings: dict[typing.Hashable, _Grouping] = {}
        self._touched: set[str] = set()
        self._carried = carried
        self._session = carried.session + 1 if carried is not None else 0
        self._handed_on = False
        self.generation = 0
        """Bumped by every change: derived results keyed by it stay valid while it holds."""

    # Changes (statements) --------------------------------------------------------------------
    def add(self, pod: pods.PodInfo, node: str) -> None:
        """``pod`` counts on ``node`` from now on (placed, nominated, or an eviction undone)."""
        row = self._index.get(node)
        if row is None or pod.key in self._reserve_pods:
            return  # a reserve pod holds capacity; it is not a pod others see
        self._take_over()
        self.generation += 1
        key = pod.key
        self._touched.add(key)
        old = self._current(key)
        if old is not None:
            self._apply(old[0], old[1], -1)
        if self._all is None:
            self._added[key] = (pod, row)
            self._removed.discard(key)
        else:
            self._all[key] = (pod, row)
        self._apply(pod, row, 1)

    def remove(self, pod: pods.PodInfo) -> None:
        """``pod`` no longer counts (evicted, or its placement undone)."""
        self._take_over()
        self.generation += 1
        key = pod.key
        self._touched.add(key)
        old = self._current(key)
        if old is not None:
            self._apply(old[0], old[1], -1)
        if self._all is None:
            self._added.pop(key, None)
            self._removed.add(key)
        else:
            self._all.pop(key, None)

    def _current(self, key: str) -> Entry | None:
        """Where ``key`` counts now, if it does."""
        if self._all is not None:
            return self._all.get(key)
        if key in self._added:
            return self._added[key]
        if key in self._removed:
            return None
        return self._in_snapshot(key)

    def _in_snapshot(self, key: str) -> Entry | None:
        """Where the snapshot has ``key`` count (no statement considered)."""
        pod = self._snapshot.pods.get(key)
        if pod is None or pod.node_name is None or pod.terminal or key in self._reserve_pods:
            return None
        row = self._index.get(pod.node_name)
        return None if row is None else (pod, row)

    def _apply(self, pod: pods.PodInfo, row: int, sign: int) -> None:
        for counter in self._counters.values():
            if counter.predicate(pod):
                counter.counts[row] += sign
        size = self._rows
        for grouping in self._groupings.values():
            by_item = grouping.by_item
            for item in grouping.extract(pod):
                found = by_item.get(item)
                if found is None:
                    found = by_item[item] = np.zeros(size, dtype=np.int64)
                found[row] += sign

    # From one session to the next -----------------------------------------------------------
    def hand_on(self) -> Carried | None:
        """What the next session may take over (``None``: nothing worth it). This object is
        spent: reading or changing it afterwards raises."""
        self._take_over()
        changes = self._snapshot.changes
        counters = {k: c for k, c in self._counters.items() if c.carried}
        groupings = {k: g for k, g in self._groupings.items() if g.carried}
        carried = None
        if changes is not None and (self._all is not None or groupings):
            carried = Carried(
                placed=self._placed(),  # built here only for groupings, which walk fewer pods
                counters=counters,
                groupings=groupings,
                stale=frozenset(self._touched),
                reserve_pods=frozenset(self._reserve_pods),
                index=self._index,
                changes=changes,
                session=self._session,
            )
        self._handed_on = True
        return carried

    def _take_over(self) -> None:
        """Adopt the previous session's state, if it applies (once, before the first use)."""
        if self._handed_on:
            raise RuntimeError("these placements were handed on to the next session")
        carried, self._carried = self._carried, None
        changes = self._snapshot.changes
        if carried is None or changes is None or not carried.serves(self._snapshot):
            return  # (``changes`` is never None when it serves: said for the type checker)
        oldest = self._session - CARRY_SESSIONS
        self._all = carried.placed
        self._counters = {k: c for k, c in carried.counters.items() if c.read_in >= oldest}
        self._groupings = {k: g for k, g in carried.groupings.items() if g.read_in >= oldest}
        placed = self._all
        for key in changes.pods | carried.stale | (self._reserve_pods ^ carried.reserve_pods):
            old, new = placed.get(key), self._in_snapshot(key)
            if old == new:
                continue
            if old is not None:
                self._apply(old[0], old[1], -1)
            if new is None:
                del placed[key]
            else:
                placed[key] = new
                self._apply(new[0], new[1], 1)

    # Reading (plugins) -----------------------------------------------------------------------
    def placed(self) -> collections.abc.Mapping[str, Entry]:
        """Every counted pod: key -> (pod, row)."""
        return self._placed()

    def _placed(self) -> dict[str, Entry]:
        self._take_over()
        if self._all is None:
            self._all = self._build()
        return self._all

    def _build(self) -> dict[str, Entry]:
        index, removed, reserve_pods = self._index, self._removed, self._reserve_pods
        found: dict[str, Entry] = {}
        for key, pod in self._snapshot.pods.items():
            node = pod.node_name
            if node is None or pod.terminal or key in removed or key in reserve_pods:
                continue
            row = index.get(node)
            if row is not None:
                found[key] = (pod, row)
        found.update(self._added)
        self._added = {}
        self._removed = set()
        return found

    def counts(
        self, key: typing.Hashable, /, *, predicate: Predicate, carried: bool = False
    ) -> IntArray:
        """Per row, how many counted pods satisfy ``predicate`` (kept current; do not modify).
        ``carried``: the predicate depends on the pod and the world alone, so the counts may
        be kept for the next session (see the module docstring)."""
        self._take_over()
        found = self._counters.get(key)
        if found is not None:
            found.read_in = self._session
            return found.counts
        counts = np.zeros(self._rows, dtype=np.int64)
        for pod, row in self._placed().values():
            if predicate(pod):
                counts[row] += 1
        self._keep(
            self._counters,
            key,
            _Counter(predicate, counts, carried=carried, read_in=self._session),
        )
        return counts

    def grouped(
        self,
        key: typing.Hashable,
        /,
        *,
        extract: collections.abc.Callable[[pods.PodInfo], collections.abc.Iterable[ItemT]],
        carried: bool = False,
    ) -> collections.abc.Mapping[ItemT, IntArray]:
        """Per item ``extract`` yields for a pod, how many counted pods yield it, per row
        (kept current; items no pod yields any more may remain with all-zero counts).
        ``carried``: as for :meth:`counts`.

        ``extract`` must yield nothing for a pod that does not ``constrains_others`` (pod
        affinity, host ports): only those are walked, so asking costs what they number, not
        every pod of the cluster.
        """
        self._take_over()
        found = self._groupings.get(key)
        if found is not None:
            found.read_in = self._session
            return typing.cast("dict[ItemT, IntArray]", found.by_item)
        by_item: dict[typing.Hashable, IntArray] = {}
        size = self._rows
        for pod, row in self._constraining():
            for item in extract(pod):
                counts = by_item.get(item)
                if counts is None:
                    counts = by_item[item] = np.zeros(size, dtype=np.int64)
                counts[row] += 1
        self._keep(
            self._groupings,
            key,
            _Grouping(extract, by_item, carried=carried, read_in=self._session),
        )
        return typing.cast("dict[ItemT, IntArray]", by_item)

    def _constraining(self) -> collections.abc.Iterator[Entry]:
        if self._all is not None:
            yield from ((p, r) for p, r in self._all.values() if p.constrains_others)
            return
        index, removed, added = self._index, self._removed, self._added
        for key, pod in self._snapshot.constraining.items():
            node = pod.node_name
            if node is None or pod.terminal or key in removed or key in added:
                continue
            if key in self._reserve_pods:
                continue
            row = index.get(node)
            if row is not None:
                yield pod, row
        yield from ((p, r) for p, r in added.values() if p.constrains_others)

    @staticmethod
    def _keep(into: dict[typing.Hashable, typing.Any], key: typing.Hashable, value: object) -> None:
        if len(into) >= MAX_TRACKERS:
            del into[next(iter(into))]
        into[key] = value
