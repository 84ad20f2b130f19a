"""``PodStore``: the cache's pods, which of them wait, and the bindings in flight.

Owns every pod as last parsed (copy-on-write, :mod:`.cowmaps`: a snapshot shares the map and
later changes copy only what they touch), the pods assumed placed while their binding is in
flight (they count as placed until the API confirms the binding or the binder forgets them),
the pods whose constraints reach other pods (pod affinity, host ports: few, so a session finds
them without walking every pod), Berth's waiting pods — pending by group, and gated — with the
sorted views snapshots share, those of them waiting for a group from their owners, the keys of
those that stopped waiting since the previous view, the lowest priority any pod has had, and
the run times of pods seen placed and then finished (:mod:`.runstats`).

Which queue a pod is charged to, where it counts on its node and which group it joins is the
other stores' business; :class:`berth.scheduler.snapshot.cache.ClusterCache` routes each change
to all of them. Pure and synchronous.
"""

from __future__ import annotations

import collections.abc
import operator
import types
import typing

from berth.scheduler.snapshot import cowmaps, ids, pods, runstats

__all__ = ["PendingIndex", "PodStore", "PodViews"]

_by_key = operator.attrgetter("key")


class PendingIndex(collections.abc.Mapping[str | None, tuple[pods.PodInfo, ...]]):
    """Pending pods by group key, sorted by key; plain pods (no group) under ``None``.

    The groups' tuples sit in a frozen map (:mod:`.cowmaps`), so a snapshot's index costs the
    groups changed since the previous one, not an entry per group: with tens of thousands of
    groups of one standing, a copy per snapshot was most of a cycle (issue #30). Iterating
    it sorts the group keys once (``None`` first); the sessions look groups up instead."""

    __slots__ = ("_groups", "_plain")

    def __init__(
        self,
        groups: cowmaps.FrozenMap[tuple[pods.PodInfo, ...]],
        /,
        *,
        plain: tuple[pods.PodInfo, ...],
    ) -> None:
        self._groups = groups
        self._plain = plain

    def __getitem__(self, key: str | None) -> tuple[pods.PodInfo, ...]:
        if key is not None:
            return self._groups[key]
        if not self._plain:
            raise KeyError(key)
        return self._plain

    def __contains__(self, key: object) -> bool:
        return bool(self._plain) if key is None else key in self._groups

    def __iter__(self) -> collections.abc.Iterator[str | None]:
        if self._plain:
            yield None
        yield from self._groups

    def __len__(self) -> int:
        return len(self._groups) + bool(self._plain)


class PodViews(typing.NamedTuple):
    """What a snapshot shows of the pods (:class:`~berth.scheduler.snapshot.snapshots.Snapshot`'s
    fields of the same names)."""

    pods: cowmaps.FrozenMap[pods.PodInfo]
    constraining: collections.abc.Mapping[str, pods.PodInfo]
    pending: cowmaps.SortedOnRead[pods.PodInfo]
    gated: tuple[pods.PodInfo, ...]
    pending_index: PendingIndex
    pending_changed: frozenset[str | None]  # its groups changed since the previous view
    awaiting_group: tuple[pods.PodInfo, ...]  # pending or gated, ``awaiting_group``, by key
    stopped_waiting: frozenset[str]  # keys of pods that stopped waiting since the previous view
    changed: frozenset[str]  # keys of pods stored or forgotten since the previous view
    priority_floor: int | None
    run_times: runstats.RunTimes


class PodStore:
    """Pods by key; :meth:`view` gives a snapshot its views of them."""

    def __init__(self, *, scheduler_names: frozenset[str]) -> None:
        """``scheduler_names``: the schedulers whose waiting pods are Berth's to place."""
        self._scheduler_names = scheduler_names
        self._pods: cowmaps.CowMap[pods.PodInfo] = cowmaps.CowMap()
        self._assumed: dict[str, ids.NodeName] = {}
        self._constraining: dict[str, pods.PodInfo] = {}
        # Waiting pods by key (what the snapshot's views list, sorted on demand; the pending
        # copy-on-write, as a long backlog of them stands still).
        self._pending: cowmaps.CowMap[pods.PodInfo] = cowmaps.CowMap()
        self._gated: dict[str, pods.PodInfo] = {}
        # Pending pods by group (None: plain pods), and the sorted tuples snapshots share,
        # refreshed for the groups whose pending pods changed.
        self._pending_groups: dict[str | None, dict[str, pods.PodInfo]] = {}
        self._pending_index: cowmaps.CowMap[tuple[pods.PodInfo, ...]] = cowmaps.CowMap()
        self._plain_pending: tuple[pods.PodInfo, ...] = ()
        self._pending_index_dirty: set[str | None] = set()
        self._pending_view: cowmaps.SortedOnRead[pods.PodInfo] | None = None
        self._gated_view: tuple[pods.PodInfo, ...] | None = None
        # The waiting pods (pending or gated) that wait for a group from their owners.
        self._awaiting: dict[str, pods.PodInfo] = {}
        self._awaiting_view: tuple[pods.PodInfo, ...] | None = None
        # Keys of pods that stopped waiting (placed, ended, deleted, replaced) since the last view.
        self._stopped: set[str] = set()
        # Keys of pods stored or forgotten since the last view.
        self._changed: set[str] = set()
        # The lowest priority any pod has had: no pod, now or earlier, is below it.
        self._priority_floor: int | None = None
        self._run_times = runstats.RunTimeStatistics()

    @property
    def infos(self) -> collections.abc.Mapping[str, pods.PodInfo]:
        """Every pod by key, as stored (read only)."""
        return self._pods

    def is_pending(self, key: str, /) -> bool:
        """Whether the pod ``key`` is one of Berth's, waiting for a node and not gated."""
        return key in self._pending

    def is_assumed(self, key: str, /) -> bool:
        """Whether the pod ``key``'s binding is in flight."""
        return key in self._assumed

    def assumed_node(self, key: str, /) -> ids.NodeName | None:
        """The node of the pod ``key``'s binding in flight, if one is."""
        return self._assumed.get(key)

    def assume(self, key: str, /, *, node: str) -> None:
        """The pod ``key``'s binding to ``node`` is in flight (store its placed info next)."""
        self._assumed[key] = ids.NodeName(node)

    def forget_assumed(self, key: str, /) -> bool:
        """Its binding failed; False when it was not assumed."""
        return self._assumed.pop(key, None) is not None

    def landed(self, info: pods.PodInfo, /) -> pods.PodInfo:
        """``info`` as the API shows it, kept on its assumed node while the bind is in
        flight; the assumption ends once the binding landed or the API says otherwise."""
        assumed = self._assumed.get(info.key)
        if assumed is None:
            return info
        if info.node_name is None and not info.terminal:
            return pods.replace(info, node_name=assumed)
        del self._assumed[info.key]
        return info

    def put(
        self, info: pods.PodInfo, /, *, from_api: bool, now: float | None
    ) -> pods.PodInfo | None:
        """Record ``info`` (``from_api``: from a watch event; ``now``: the time of the last
        snapshot, when a finished pod's run ends); the pod it replaces, if any."""
        key = info.key
        old: pods.PodInfo | None = self._pods.get(key)
        if from_api and old is not None:
            self._run_times.finished(old, info, now=now)
        self._pods[key] = info
        self._changed.add(key)
        if self._priority_floor is None or info.priority < self._priority_floor:
            self._priority_floor = info.priority
        if info.constrains_others:
            self._constraining[key] = info
        elif key in self._constraining:
            del self._constraining[key]
        waiting = (
            info.node_name is None
            and not info.terminal
            and not info.deleting
            and info.scheduler_name in self._scheduler_names
        )
        was_pending, was_gated = key in self._pending, key in self._gated
        is_pending, is_gated = waiting and not info.gated, waiting and info.gated
        if is_pending or was_pending:
            self._set_pending(key, info if is_pending else None)
        if is_gated:
            self._gated[key] = info
        else:
            self._gated.pop(key, None)
        if is_pending or was_pending or is_gated != was_gated:
            self._pending_view = None
        if is_gated or was_gated:
            self._gated_view = None
        if (was_pending or was_gated) and (
            not waiting or (old is not None and old.uid != info.uid)
        ):
            self._stopped.add(key)
        self._set_awaiting(key, info if waiting and info.awaiting_group else None)
        return old

    def remove(self, key: str, /) -> pods.PodInfo | None:
        """Forget the pod ``key``; the one removed, if any."""
        old: pods.PodInfo | None = self._pods.pop(key, None)
        if old is None:
            return None
        self._changed.add(key)
        self._assumed.pop(key, None)
        self._constraining.pop(key, None)
        if key in self._pending:
            self._set_pending(key, None)
            self._stopped.add(key)
        if key in self._gated:
            del self._gated[key]
            self._gated_view = None
            self._stopped.add(key)
        self._set_awaiting(key, None)
        return old

    def _set_awaiting(self, key: str, info: pods.PodInfo | None) -> None:
        """``info`` is now ``key``'s pod awaiting a group (``None``: it awaits none)."""
        if info is not None:
            self._awaiting[key] = info
        elif self._awaiting.pop(key, None) is None:
            return
        self._awaiting_view = None

    def _set_pending(self, key: str, info: pods.PodInfo | None) -> None:
        """``info`` is now ``key``'s pending pod (``None``: the pod no longer waits)."""
        previous = self._pending.pop(key, None)
        if previous is not None:
            members = self._pending_groups[previous.pod_group]
            del members[key]
            if not members:
                del self._pending_groups[previous.pod_group]
            self._pending_index_dirty.add(previous.pod_group)
        if info is not None:
            self._pending[key] = info
            self._pending_groups.setdefault(info.pod_group, {})[key] = info
            self._pending_index_dirty.add(info.pod_group)
        self._pending_view = None

    def view(self) -> PodViews:
        """The pods for a snapshot: views later changes do not reach (``pending_changed``:
        the groups whose pending pods changed since the previous view)."""
        if self._pending_view is None:
            # Sorted only if read: sessions take the pending pods by group, from the index.
            self._pending_view = cowmaps.SortedOnRead(
                self._pending.freeze().values_in_any_order(), key=_by_key
            )
        changed = frozenset(self._pending_index_dirty)
        for group in changed:
            members = self._pending_groups.get(group)
            entry = tuple(map(members.__getitem__, sorted(members))) if members else ()
            if group is None:
                self._plain_pending = entry
            elif entry:
                self._pending_index[group] = entry
            else:
                self._pending_index.pop(group, None)
        self._pending_index_dirty.clear()
        if self._gated_view is None:
            self._gated_view = tuple(map(self._gated.__getitem__, sorted(self._gated)))
        if self._awaiting_view is None:
            self._awaiting_view = tuple(map(self._awaiting.__getitem__, sorted(self._awaiting)))
        stopped, self._stopped = frozenset(self._stopped), set()
        stored, self._changed = frozenset(self._changed), set()
        return PodViews(
            pods=self._pods.freeze(),
            constraining=types.MappingProxyType(dict(self._constraining)),
            pending=self._pending_view,
            gated=self._gated_view,
            pending_index=PendingIndex(self._pending_index.freeze(), plain=self._plain_pending),
            pending_changed=changed,
            awaiting_group=self._awaiting_view,
            stopped_waiting=stopped,
            changed=stored,
            priority_floor=self._priority_floor,
            run_times=self._run_times.freeze(),
        )
