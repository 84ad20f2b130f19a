"""``PlacedGroups``: the groups with a member placed, by queue, kept current as groups change.

Owns the index a session reads instead of walking every group to find the running ones. A
large backlog means tens of thousands of groups (every plain pod of a queue is a group of
one), of which the few placed in one queue, or carrying a limit of their own, are what a
check of running work (the timelimit action's maximum execution time) can act on: with this
index such a check costs the groups it may act on, not the backlog.

A group is *placed* when one of its members is on a node and not finished
(``PodGroupInfo.placed > 0``); it is indexed under the queue it is charged to
(``PodGroupInfo.queue``), and also under :attr:`PlacedGroups.self_limited` when it has a
maximum execution time of its own or the mark of having failed past one (it concerns that
check whatever its queue says).

:class:`PlacedGroupIndex` is the writer's side, owned by the cache's
:class:`~berth.scheduler.snapshot.groupstore.GroupStore`: it is told each group view rebuilt
(:meth:`PlacedGroupIndex.groups_changed`) and hands a snapshot a frozen :class:`PlacedGroups`
whose maps are copy-on-write (:mod:`.cowmaps`), so a snapshot costs the groups that changed,
not those placed. :func:`scan` builds the same index from every group at once: for a snapshot
built by hand, and as the reference the tests compare the increments with.

Pure and synchronous.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types

from berth.scheduler.snapshot import cowmaps, podgroups

__all__ = ["PlacedGroupIndex", "PlacedGroups", "is_placed", "is_self_limited", "scan"]

_Groups = collections.abc.Mapping[str, podgroups.PodGroupInfo]
_NONE: _Groups = types.MappingProxyType({})


def is_placed(group: podgroups.PodGroupInfo, /) -> bool:
    """Whether ``group`` is indexed: a member is placed (bound or assumed) and not finished."""
    return group.placed > 0


def is_self_limited(group: podgroups.PodGroupInfo, /) -> bool:
    """Whether ``group`` has a maximum execution time of its own, or failed past one."""
    return group.max_execution_seconds is not None or group.execution_failure is not None


@dataclasses.dataclass(frozen=True)
class PlacedGroups:
    """The placed groups when a snapshot was taken; see the module docstring. Iteration order
    is not a contract: sort what is kept."""

    # Queue name -> its placed groups by key (no queue without one).
    by_queue: collections.abc.Mapping[str, _Groups]
    # The placed groups with a limit of their own or a failure mark, by key (any queue).
    self_limited: _Groups

    def in_queue(self, queue: str, /) -> _Groups:
        """The placed groups charged to ``queue``, by key (empty when none)."""
        return self.by_queue.get(queue, _NONE)


def scan(groups: _Groups, /) -> PlacedGroups:
    """The index of ``groups`` (by key), built by walking them all."""
    by_queue: dict[str, dict[str, podgroups.PodGroupInfo]] = {}
    self_limited: dict[str, podgroups.PodGroupInfo] = {}
    for key, group in cowmaps.items_in_any_order(groups):
        if not is_placed(group):
            continue
        by_queue.setdefault(group.queue, {})[key] = group
        if is_self_limited(group):
            self_limited[key] = group
    return PlacedGroups(
        by_queue=types.MappingProxyType(
            {queue: types.MappingProxyType(found) for queue, found in by_queue.items()}
        ),
        self_limited=types.MappingProxyType(self_limited),
    )


class PlacedGroupIndex:
    """The writer's side: :meth:`groups_changed` with the group views rebuilt, :meth:`view`
    for a snapshot."""

    def __init__(self) -> None:
        self._by_queue: dict[str, cowmaps.CowMap[podgroups.PodGroupInfo]] = {}
        self._queue_of: dict[str, str] = {}  # placed group key -> the queue it is indexed under
        self._self_limited: cowmaps.CowMap[podgroups.PodGroupInfo] = cowmaps.CowMap()
        self._view: PlacedGroups | None = None  # the last view, while nothing changed

    def groups_changed(
        self, changed: collections.abc.Mapping[str, podgroups.PodGroupInfo | None], /
    ) -> None:
        """The groups ``changed`` names have these views now (``None``: none any more)."""
        indexed = self._queue_of
        for key, view in changed.items():
            # Most groups of a backlog wait, before and after: one lookup each, no call.
            if key in indexed or (view is not None and view.placed > 0):
                self._group_changed(key, view)

    def _group_changed(self, key: str, view: podgroups.PodGroupInfo | None, /) -> None:
        self._view = None
        was = self._queue_of.pop(key, None)
        now = view.queue if view is not None and is_placed(view) else None
        if was is not None and was != now:
            left = self._by_queue[was]
            del left[key]
            if not left:
                del self._by_queue[was]
        if view is None or now is None:
            self._self_limited.pop(key, None)
            return
        self._queue_of[key] = now
        joined = self._by_queue.get(now)
        if joined is None:
            joined = self._by_queue[now] = cowmaps.CowMap()
        joined[key] = view
        if is_self_limited(view):
            self._self_limited[key] = view
        else:
            self._self_limited.pop(key, None)

    def view(self) -> PlacedGroups:
        """The index now, unchanged by later calls (a queue's map is frozen again only when
        it changed: :meth:`cowmaps.CowMap.freeze` keeps the last view)."""
        if self._view is None:
            self._view = PlacedGroups(
                by_queue=types.MappingProxyType(
                    {queue: bucket.freeze() for queue, bucket in self._by_queue.items()}
                ),
                self_limited=self._self_limited.freeze(),
            )
        return self._view
