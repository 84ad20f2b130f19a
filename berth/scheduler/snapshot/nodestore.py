"""``NodeStore``: the cache's nodes, what their placed pods request, and the node table.

Owns each node as last seen (its static part: labels, taints, allocatable), the pods counted on
each node and what each added to its node's requested sums (so a removal subtracts exactly
that), and the master :class:`~berth.scheduler.snapshot.nodetable.NodeTable`, kept in step with
every pod placed or gone through ``assume``/``forget`` and rebuilt only when a node's static
part changes or a pod asks for a resource the table has no column for. A snapshot gets a fresh
copy of the table and a copy-on-write view of the nodes, refreshed for the nodes that changed.

It moves the cache's :class:`~berth.scheduler.snapshot.changes.Counter` when a pod is placed on
or leaves a node (room taken, room freed). Pure and synchronous;
:class:`berth.scheduler.snapshot.cache.ClusterCache` routes to it.
"""

from __future__ import annotations

import collections.abc
import dataclasses

from berth.api import resources
from berth.scheduler.snapshot import changes, cowmaps, ids, nodes, nodetable, pods

__all__ = ["NodeStore"]


class NodeStore:
    """Nodes by name and the pods counted on them; :meth:`freeze` gives a snapshot its view."""

    def __init__(self, counter: changes.Counter, /) -> None:
        self._changes = counter
        self._nodes: dict[str, nodes.NodeInfo] = {}
        # What each placed pod added to its node, so removal subtracts exactly that.
        self._counted: dict[str, tuple[str, resources.ResourceList]] = {}
        self._requested: dict[str, dict[str, int]] = {}
        self._pods: dict[str, set[str]] = {}
        self._table: nodetable.NodeTable | None = None
        self._views: cowmaps.CowMap[nodes.NodeInfo] = cowmaps.CowMap()
        self._dirty: set[str] = set()

    def add(self, info: nodes.NodeInfo, /) -> bool:
        """Add or update a node; whether its static part changed (the table is rebuilt)."""
        old = self._nodes.get(info.name)
        self._nodes[info.name] = info
        self._dirty.add(info.name)
        if old is not None and old.static_equal(info):
            return False
        self._table = None
        return True

    def remove(self, name: str, /) -> bool:
        """Remove a node; pods still bound to it keep their counts. Whether it was known."""
        if self._nodes.pop(name, None) is None:
            return False
        self._views.pop(name, None)
        self._dirty.discard(name)
        self._table = None
        return True

    def get(self, name: str, /) -> nodes.NodeInfo | None:
        """The node ``name`` as last seen."""
        return self._nodes.get(name)

    def requested(self, name: str, /) -> collections.abc.Mapping[str, int]:
        """What the pods counted on node ``name`` request, summed."""
        return self._requested.get(name, {})

    def count(self, info: pods.PodInfo, /) -> None:
        """Make the node sums reflect ``info`` (placed and not finished counts)."""
        key = info.key
        counted = self._counted.get(key)
        target = (
            (info.node_name, info.requests)
            if info.node_name is not None and not info.terminal
            else None
        )
        if counted == target:
            return
        self.uncount(key)
        if target is None:
            return
        node, requests = target
        self._changes.pod_placed()
        self._counted[key] = target
        sums = self._requested.setdefault(node, {})
        for name, value in requests.items():
            sums[name] = sums.get(name, 0) + value
        self._pods.setdefault(node, set()).add(key)
        self._dirty.add(node)
        self._apply(node, requests, sign=1)

    def uncount(self, key: str, /) -> None:
        """The pod ``key`` no longer takes room on any node."""
        counted = self._counted.pop(key, None)
        if counted is None:
            return
        self._changes.room_freed()
        node, requests = counted
        sums = self._requested[node]
        for name, value in requests.items():
            left = sums[name] - value
            if left:
                sums[name] = left
            else:
                del sums[name]
        members = self._pods[node]
        members.discard(key)
        if not members:
            del self._pods[node]
            del self._requested[node]
        self._dirty.add(node)
        self._apply(node, requests, sign=-1)

    def _apply(self, node: str, requests: resources.ResourceList, *, sign: int) -> None:
        """Keep the master table in step, or drop it when its columns no longer fit."""
        table = self._table
        if table is None:
            return
        row = table.index.get(node)
        if row is None:
            return
        if table.missing(requests):
            self._table = None
            return
        vec = table.vector(requests)
        if sign > 0:
            table.assume(row, vec)
        else:
            table.forget(row, vec)

    def freeze(
        self,
    ) -> tuple[nodetable.NodeTable, cowmaps.FrozenMap[nodes.NodeInfo], frozenset[str]]:
        """A snapshot's private table, its view of the nodes, and the nodes refreshed in it
        (changed, or their pods did, since the last snapshot)."""
        if self._table is None:
            self._table = nodetable.NodeTable.build(self._nodes.values(), requested=self._requested)
        table = self._table.fresh_copy()
        refreshed = frozenset(self._dirty)
        for name in refreshed:
            static = self._nodes.get(name)
            if static is not None:
                self._views[name] = dataclasses.replace(
                    static, pods=tuple(ids.PodKey(k) for k in sorted(self._pods.get(name, ())))
                )
        self._dirty.clear()
        return table, self._views.freeze(), refreshed
