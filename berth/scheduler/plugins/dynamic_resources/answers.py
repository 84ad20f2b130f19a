"""``Answers``: whether claims of some specs can be allocated on a node, kept from cycle to cycle.

The allocator's answer on a node depends on the claims' specs, the catalog (classes and
slices), the pools the node reaches and what the claims' allocations hold of them — nothing
else. The session's ledger shares answers between pods of one template; they die with the
session, so with pods arriving one or two a cycle (a stream, not a backlog) every cycle
searched every node again for its first pod: hundreds of allocator searches per pod bound.
These answers outlive the session: keyed by the specs, the node and the usage of the pools it
reaches as the snapshot shows it (:meth:`~berth.scheduler.snapshot.devices.AllocatedState.
pool_usage`), so a cycle searches only the nodes whose pools changed since. An answer is
taken only where the session has changed none of the node's pools (its own allocations and
evictions are the ledger's), all are dropped when the catalog is rebuilt (a class or a slice
changed), and the map is bounded (cleared when full; it fills again in one cycle).
"""

from __future__ import annotations

import collections.abc

from berth.scheduler.plugins.dynamic_resources import allocator
from berth.scheduler.snapshot import devices

__all__ = ["LIMIT", "Answer", "Answers"]

Answer = bool | allocator.Unallocatable
"""Claims of these specs can be allocated there (True), or why not; a failure naming a claim
(:class:`~.allocator.Failure`) is that claim's and never kept."""

LIMIT = 1 << 16
"""Answers kept at most (a node's pools take a handful of usages between their changes)."""


class Answers:
    """Allocator answers by (specs, node, pools' usage), for one catalog at a time."""

    def __init__(self, *, limit: int = LIMIT) -> None:
        self._limit = limit
        self._catalog: devices.Catalog | None = None
        self._shared = False
        self._known: dict[collections.abc.Hashable, Answer] = {}
        self._ids: dict[collections.abc.Hashable, int] = {}
        self._next = 0
        self.hits = 0
        """Answers given (tests, the bench)."""

    def specs_id(self, specs: collections.abc.Hashable, /) -> int:
        """A small number standing for ``specs`` (claims' specs hash deep: keys carry this)."""
        found = self._ids.get(specs)
        if found is None:
            if len(self._ids) >= self._limit:
                self._ids.clear()
                self._known.clear()  # its keys name the numbers given so far
            found = self._ids[specs] = self._next
            self._next += 1
        return found

    def key(
        self,
        catalog: devices.Catalog,
        specs: int,
        node: str,
        *,
        usage: tuple[devices.PoolUsage, ...],
        pools: tuple[devices.Pool, ...],
        labels: collections.abc.Mapping[str, str],
    ) -> collections.abc.Hashable:
        """The key of claims of ``specs`` (:meth:`specs_id`) on ``node``, whose ``pools``
        are in ``usage``."""
        if catalog is not self._catalog:
            self._catalog, self._known = catalog, {}
            self._shared = catalog.has_shared_slices
        ids = tuple(pool.id for pool in pools)
        if self._shared:
            # Which devices of a shared slice a node reaches follows its labels.
            return (specs, node, ids, usage, frozenset(labels.items()))
        return (specs, node, ids, usage)

    def get(self, key: collections.abc.Hashable) -> Answer | None:
        found = self._known.get(key)
        if found is not None:
            self.hits += 1
        return found

    def put(self, key: collections.abc.Hashable, answer: Answer) -> None:
        if len(self._known) >= self._limit:
            self._known.clear()
        self._known[key] = answer
