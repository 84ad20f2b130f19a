"""``ClusterCache``: the incremental cluster state snapshots are taken from.

Owns the bookkeeping between watch events and cycles: infos parsed once per object change,
per-node requested sums kept incrementally (a cycle never re-sums every pod), group membership,
the resolution of pod priorities (PriorityClasses) and queues (a pod's label, else its group's),
and pods assumed by the decision sink while their binding is in flight (they count as placed
until the API confirms the binding or the sink forgets them).

Pure and synchronous: ``berth.kube`` drives it from informers, ``berth.sim`` from its in-memory
cluster. Methods take the objects as the API returns them (dicts; ``berth.api`` models for
Berth's kinds) and are idempotent: adding an object twice is an update.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types
import typing

from berth.api import keys, resources
from berth.scheduler.snapshot import (
    ids,
    nodes,
    nodetable,
    podgroups,
    pods,
    queues,
    reservations,
    snapshots,
    wire,
)

__all__ = ["SYSTEM_PRIORITY_CLASSES", "ClusterCache"]

SYSTEM_PRIORITY_CLASSES: collections.abc.Mapping[str, int] = types.MappingProxyType(
    {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
)
"""The classes every API server creates; known before the informer reports them."""


@dataclasses.dataclass(frozen=True)
class _PriorityClass:
    value: int
    global_default: bool


def _name_of(obj: typing.Any, /) -> str:
    if isinstance(obj, str):
        return obj
    return str(wire.sub(wire.as_raw(obj), "metadata").get("name") or "")


def _key_of(obj: typing.Any, /) -> str:
    if isinstance(obj, str):
        return obj
    meta = wire.sub(wire.as_raw(obj), "metadata")
    return ids.key_of(str(meta.get("namespace") or "default"), name=str(meta.get("name") or ""))


class ClusterCache:
    """Incremental cluster state; :meth:`snapshot` hands a cycle its private view."""

    def __init__(
        self, *, scheduler_names: collections.abc.Iterable[str] = (keys.DEFAULT_SCHEDULER_NAME,)
    ) -> None:
        self._scheduler_names = frozenset(scheduler_names)
        self._nodes: dict[str, nodes.NodeInfo] = {}
        self._pods: dict[str, pods.PodInfo] = {}
        self._assumed: dict[str, ids.NodeName] = {}
        # What each placed pod added to its node, so removal subtracts exactly that.
        self._counted: dict[str, tuple[str, resources.ResourceList]] = {}
        self._node_requested: dict[str, dict[str, int]] = {}
        self._node_pods: dict[str, set[str]] = {}
        self._pending: set[str] = set()
        self._gated: set[str] = set()
        self._groups: dict[str, podgroups.PodGroupInfo] = {}
        self._group_members: dict[str, set[str]] = {}
        self._queues: dict[str, queues.QueueInfo] = {}
        self._reservations: dict[str, reservations.ReservationInfo] = {}
        self._classes: dict[str, _PriorityClass] = {
            name: _PriorityClass(value, False) for name, value in SYSTEM_PRIORITY_CLASSES.items()
        }
        self._class_values: dict[str, int] = dict(SYSTEM_PRIORITY_CLASSES)
        self._default_priority = 0
        # Derived views, refreshed lazily at snapshot time.
        self._table: nodetable.NodeTable | None = None
        self._node_views: dict[str, nodes.NodeInfo] = {}
        self._dirty_nodes: set[str] = set()
        self._group_views: dict[str, podgroups.PodGroupInfo] = {}
        self._dirty_groups: set[str] = set()
        self._pending_view: tuple[pods.PodInfo, ...] | None = None

    # Nodes --------------------------------------------------------------------------------
    def add_node(self, raw: typing.Any, /) -> None:
        """Add or update a node."""
        info = nodes.node_info(raw)
        old = self._nodes.get(info.name)
        self._nodes[info.name] = info
        self._dirty_nodes.add(info.name)
        if old is None or not old.static_equal(info):
            self._table = None

    update_node = add_node

    def remove_node(self, node: typing.Any, /) -> None:
        """Remove a node (by name or object); pods still bound to it keep their counts."""
        name = ids.NodeName(_name_of(node))
        if self._nodes.pop(name, None) is not None:
            self._node_views.pop(name, None)
            self._dirty_nodes.discard(name)
            self._table = None

    # Pods ---------------------------------------------------------------------------------
    def add_pod(self, raw: typing.Any, /) -> None:
        """Add or update a pod."""
        obj = wire.as_raw(raw)
        info = pods.pod_info(obj, priority_classes=self._class_values)
        self._store_pod(self._resolved(info), from_api=True)

    update_pod = add_pod

    def remove_pod(self, pod: typing.Any, /) -> None:
        """Remove a pod (by ``namespace/name`` key or object)."""
        key = ids.PodKey(_key_of(pod))
        old = self._pods.pop(key, None)
        if old is None:
            return
        self._assumed.pop(key, None)
        self._uncount(key)
        self._pending.discard(key)
        self._gated.discard(key)
        self._pending_view = None
        if old.pod_group is not None:
            self._leave_group(old.pod_group, key)

    def assume_pod(self, key: str, /, *, node: str) -> None:
        """Count the pod as placed on ``node`` while its binding is in flight."""
        pod_key = ids.PodKey(key)
        info = self._pods.get(pod_key)
        if info is None:
            raise KeyError(f"cannot assume unknown pod {key!r}")
        self._assumed[pod_key] = ids.NodeName(node)
        self._store_pod(dataclasses.replace(info, node_name=ids.NodeName(node)), from_api=False)

    def forget_pod(self, key: str, /) -> bool:
        """Undo :meth:`assume_pod` (the binding failed); False when it was not assumed."""
        pod_key = ids.PodKey(key)
        if self._assumed.pop(pod_key, None) is None:
            return False
        info = self._pods.get(pod_key)
        if info is not None:
            self._store_pod(dataclasses.replace(info, node_name=None), from_api=False)
        return True

    def _resolved(self, info: pods.PodInfo) -> pods.PodInfo:
        group = self._groups.get(info.pod_group) if info.pod_group is not None else None
        return pods.resolve(
            info,
            priority_classes=self._class_values,
            default_priority=self._default_priority,
            group_queue=group.queue if group is not None else None,
        )

    def _store_pod(self, info: pods.PodInfo, /, *, from_api: bool) -> None:
        """Record ``info``; ``from_api`` says it came from a watch event (not an assumption)."""
        key = info.key
        assumed = self._assumed.get(key) if from_api else None
        if assumed is not None:
            if info.node_name is None and not info.terminal:
                info = dataclasses.replace(info, node_name=assumed)  # the bind is in flight
            else:
                del self._assumed[key]  # the binding landed, or the API says otherwise
        old = self._pods.get(key)
        self._pods[key] = info
        self._count(info)
        waiting = (
            info.node_name is None
            and not info.terminal
            and not info.deleting
            and info.scheduler_name in self._scheduler_names
        )
        was_pending, was_gated = key in self._pending, key in self._gated
        is_pending, is_gated = waiting and not info.gated, waiting and info.gated
        if is_pending:
            self._pending.add(key)
        else:
            self._pending.discard(key)
        if is_gated:
            self._gated.add(key)
        else:
            self._gated.discard(key)
        if is_pending or was_pending or is_gated != was_gated:
            self._pending_view = None
        if old is not None and old.pod_group is not None and old.pod_group != info.pod_group:
            self._leave_group(old.pod_group, key)
        if info.pod_group is not None:
            self._group_members.setdefault(info.pod_group, set()).add(key)
            self._dirty_groups.add(info.pod_group)

    def _leave_group(self, group: str, key: str) -> None:
        members = self._group_members.get(group)
        if members is not None:
            members.discard(key)
            if not members:
                del self._group_members[group]
        self._dirty_groups.add(group)

    def _count(self, info: pods.PodInfo) -> None:
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
        self._uncount(key)
        if target is None:
            return
        node, requests = target
        self._counted[key] = target
        sums = self._node_requested.setdefault(node, {})
        for name, value in requests.items():
            sums[name] = sums.get(name, 0) + value
        self._node_pods.setdefault(node, set()).add(key)
        self._dirty_nodes.add(node)
        self._apply(node, requests, sign=1)

    def _uncount(self, key: str) -> None:
        counted = self._counted.pop(key, None)
        if counted is None:
            return
        node, requests = counted
        sums = self._node_requested[node]
        for name, value in requests.items():
            left = sums[name] - value
            if left:
                sums[name] = left
            else:
                del sums[name]
        members = self._node_pods[node]
        members.discard(key)
        if not members:
            del self._node_pods[node]
            del self._node_requested[node]
        self._dirty_nodes.add(node)
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

    # PodGroups, queues, reservations ------------------------------------------------------
    def add_pod_group(self, raw: typing.Any, /) -> None:
        """Add or update a PodGroup (a ``berth.api`` model or its wire dict)."""
        info = podgroups.pod_group_info(
            raw, priority_classes=self._class_values, default_priority=self._default_priority
        )
        old = self._groups.get(info.key)
        self._groups[info.key] = info
        self._dirty_groups.add(info.key)
        if old is None or old.queue != info.queue:
            self._resolve_members(info.key)

    update_pod_group = add_pod_group

    def remove_pod_group(self, group: typing.Any, /) -> None:
        """Remove a PodGroup (by key or object); its pods stay, without a group object."""
        key = ids.PodGroupKey(_key_of(group))
        if self._groups.pop(key, None) is not None:
            self._dirty_groups.add(key)
            self._resolve_members(key)

    def _resolve_members(self, group: str) -> None:
        for key in sorted(self._group_members.get(group, ())):
            info = self._pods[key]
            resolved = self._resolved(info)
            if resolved is not info:
                self._store_pod(resolved, from_api=False)

    def add_queue(self, raw: typing.Any, /) -> None:
        """Add or update a Queue."""
        info = queues.queue_info(raw)
        self._queues[info.name] = info

    update_queue = add_queue

    def remove_queue(self, queue: typing.Any, /) -> None:
        """Remove a Queue (by name or object)."""
        self._queues.pop(ids.QueueName(_name_of(queue)), None)

    def add_reservation(self, raw: typing.Any, /) -> None:
        """Add or update a Reservation."""
        info = reservations.reservation_info(raw)
        self._reservations[info.key] = info

    update_reservation = add_reservation

    def remove_reservation(self, reservation: typing.Any, /) -> None:
        """Remove a Reservation (by key or object)."""
        self._reservations.pop(ids.ReservationKey(_key_of(reservation)), None)

    # PriorityClasses ----------------------------------------------------------------------
    def add_priority_class(self, raw: typing.Any, /) -> None:
        """Add or update a PriorityClass (``scheduling.k8s.io/v1``)."""
        obj = wire.as_raw(raw)
        value = obj.get("value", 0)
        self._classes[_name_of(obj)] = _PriorityClass(
            value=value if isinstance(value, int) and not isinstance(value, bool) else 0,
            global_default=bool(obj.get("globalDefault")),
        )
        self._classes_changed()

    update_priority_class = add_priority_class

    def remove_priority_class(self, priority_class: typing.Any, /) -> None:
        """Remove a PriorityClass (by name or object)."""
        if self._classes.pop(_name_of(priority_class), None) is not None:
            self._classes_changed()

    def _classes_changed(self) -> None:
        self._class_values = {name: pc.value for name, pc in self._classes.items()}
        defaults = [pc.value for pc in self._classes.values() if pc.global_default]
        # Kubernetes' admission picks the lowest-valued class when several claim the default.
        self._default_priority = min(defaults, default=0)
        for key in sorted(self._pods):
            info = self._pods[key]
            resolved = self._resolved(info)
            if resolved is not info:
                self._store_pod(resolved, from_api=False)
        self._dirty_groups.update(self._groups)
        self._dirty_groups.update(self._group_members)

    # Snapshots ----------------------------------------------------------------------------
    def snapshot(self, now: float, /) -> snapshots.Snapshot:
        """The cluster at ``now``: a private node table copy and copies of every mapping."""
        table = self._master_table().fresh_copy()
        for name in self._dirty_nodes:
            static = self._nodes.get(name)
            if static is not None:
                self._node_views[name] = dataclasses.replace(
                    static,
                    pods=tuple(ids.PodKey(k) for k in sorted(self._node_pods.get(name, ()))),
                )
        self._dirty_nodes.clear()
        for key in self._dirty_groups:
            self._refresh_group(key)
        self._dirty_groups.clear()
        if self._pending_view is None:
            self._pending_view = tuple(self._pods[k] for k in sorted(self._pending))
        queue_views = dict(sorted(self._queues.items()))
        queue_views.setdefault(ids.QueueName(keys.DEFAULT_QUEUE), queues.default_queue())
        return snapshots.Snapshot(
            now=now,
            nodes=table,
            node_infos=types.MappingProxyType({n: self._node_views[n] for n in table.names}),
            pods=types.MappingProxyType(dict(self._pods)),
            pending=self._pending_view,
            gated=tuple(self._pods[k] for k in sorted(self._gated)),
            pod_groups=types.MappingProxyType(dict(sorted(self._group_views.items()))),
            queues=types.MappingProxyType(queue_views),
            reservations=types.MappingProxyType(dict(sorted(self._reservations.items()))),
            priority_classes=types.MappingProxyType(dict(sorted(self._class_values.items()))),
        )

    def _master_table(self) -> nodetable.NodeTable:
        if self._table is None:
            self._table = nodetable.NodeTable.build(
                self._nodes.values(), requested=self._node_requested
            )
        return self._table

    def _refresh_group(self, key: str) -> None:
        members = [self._pods[k] for k in sorted(self._group_members.get(key, ()))]
        static = self._groups.get(key)
        if static is None and members and members[0].labels.get(pods.QUEUE_LABEL):
            implicit = key == pods.implicit_group_key(members[0].namespace, name=members[0].name)
            static = podgroups.implicit_group(members[0]) if implicit else None
        if static is None:
            self._group_views.pop(key, None)
            return
        self._group_views[key] = podgroups.with_members(
            static,
            members=members,
            priority_classes=self._class_values,
            default_priority=self._default_priority,
        )
