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
"""

from __future__ import annotations

import collections.abc
import typing

import numpy as np
import numpy.typing as npt

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import nodetable, pods, snapshots

__all__ = ["MAX_TRACKERS", "Placements"]

IntArray = npt.NDArray[np.int64]
Predicate = collections.abc.Callable[["pods.PodInfo"], bool]
Extractor = collections.abc.Callable[["pods.PodInfo"], collections.abc.Iterable[typing.Hashable]]

ItemT = typing.TypeVar("ItemT", bound=collections.abc.Hashable)

MAX_TRACKERS = 512
"""Counters (and groupings) kept per session; the oldest goes first (each costs one array and
one evaluation per pod change)."""


class Placements:
    """The session's pods on nodes; see the module docstring."""

    def __init__(
        self,
        snapshot: snapshots.Snapshot,
        *,
        nodes: nodetable.NodeTable,
        reserve_pods: collections.abc.Container[str] = frozenset(),
    ) -> None:
        self._snapshot = snapshot
        self._reserve_pods = reserve_pods
        """Pods standing for capacity (``SessionHooks.reserve_pods``, filled by plugins at session
        open, so read live): they hold room, but no other pod sees them."""
        self._index = nodes.index
        self._rows = len(nodes)
        self._added: dict[str, tuple[pods.PodInfo, int]] = {}
        self._removed: set[str] = set()
        self._all: dict[str, tuple[pods.PodInfo, int]] | None = None
        self._counters: dict[typing.Hashable, tuple[Predicate, IntArray]] = {}
        self._groupings: dict[
            typing.Hashable, tuple[Extractor, dict[typing.Hashable, IntArray]]
        ] = {}
        self.generation = 0
        """Bumped by every change: derived results keyed by it stay valid while it holds."""

    # Changes (statements) --------------------------------------------------------------------
    def add(self, pod: pods.PodInfo, node: str) -> None:
        """``pod`` counts on ``node`` from now on (placed, nominated, or an eviction undone)."""
        row = self._index.get(node)
        if row is None or pod.key in self._reserve_pods:
            return  # a reserve pod holds capacity; it is not a pod others see
        self.generation += 1
        key = pod.key
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
        self.generation += 1
        key = pod.key
        old = self._current(key)
        if old is not None:
            self._apply(old[0], old[1], -1)
        if self._all is None:
            self._added.pop(key, None)
            self._removed.add(key)
        else:
            self._all.pop(key, None)

    def _current(self, key: str) -> tuple[pods.PodInfo, int] | None:
        """Where ``key`` counts now, if it does."""
        if self._all is not None:
            return self._all.get(key)
        if key in self._added:
            return self._added[key]
        if key in self._removed:
            return None
        pod = self._snapshot.pods.get(key)
        if pod is None or pod.node_name is None or pod.terminal or key in self._reserve_pods:
            return None
        row = self._index.get(pod.node_name)
        return None if row is None else (pod, row)

    def _apply(self, pod: pods.PodInfo, row: int, sign: int) -> None:
        for predicate, counts in self._counters.values():
            if predicate(pod):
                counts[row] += sign
        size = self._rows
        for extract, by_item in self._groupings.values():
            for item in extract(pod):
                found = by_item.get(item)
                if found is None:
                    found = by_item[item] = np.zeros(size, dtype=np.int64)
                found[row] += sign

    # Reading (plugins) -----------------------------------------------------------------------
    def placed(self) -> collections.abc.Mapping[str, tuple[pods.PodInfo, int]]:
        """Every counted pod: key -> (pod, row)."""
        if self._all is None:
            self._all = self._build()
        return self._all

    def _build(self) -> dict[str, tuple[pods.PodInfo, int]]:
        index, removed, reserve_pods = self._index, self._removed, self._reserve_pods
        found: dict[str, tuple[pods.PodInfo, int]] = {}
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

    def counts(self, key: typing.Hashable, /, *, predicate: Predicate) -> IntArray:
        """Per row, how many counted pods satisfy ``predicate`` (kept current; do not modify)."""
        found = self._counters.get(key)
        if found is not None:
            return found[1]
        counts = np.zeros(self._rows, dtype=np.int64)
        for pod, row in self.placed().values():
            if predicate(pod):
                counts[row] += 1
        self._keep(self._counters, key, (predicate, counts))
        return counts

    def grouped(
        self,
        key: typing.Hashable,
        /,
        *,
        extract: collections.abc.Callable[[pods.PodInfo], collections.abc.Iterable[ItemT]],
    ) -> collections.abc.Mapping[ItemT, IntArray]:
        """Per item ``extract`` yields for a pod, how many counted pods yield it, per row
        (kept current; items no pod yields any more may remain with all-zero counts).

        ``extract`` must yield nothing for a pod that does not ``constrains_others`` (pod
        affinity, host ports): only those are walked, so asking costs what they number, not
        every pod of the cluster.
        """
        found = self._groupings.get(key)
        if found is not None:
            return typing.cast("dict[ItemT, IntArray]", found[1])
        by_item: dict[ItemT, IntArray] = {}
        size = self._rows
        for pod, row in self._constraining():
            for item in extract(pod):
                counts = by_item.get(item)
                if counts is None:
                    counts = by_item[item] = np.zeros(size, dtype=np.int64)
                counts[row] += 1
        self._keep(self._groupings, key, (extract, by_item))
        return by_item

    def _constraining(self) -> collections.abc.Iterator[tuple[pods.PodInfo, int]]:
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
