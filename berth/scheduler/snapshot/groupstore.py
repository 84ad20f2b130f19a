"""``GroupStore``: the cache's PodGroups, their members, and the groups' snapshot views.

Owns each PodGroup as last parsed (its queue as written kept apart, since a group naming
``default`` joins its namespace's default queue and that can change), which pods belong to
each group (a pod naming a group the store has not seen yet too: the group's view appears with
it), and the copy-on-write views snapshots share, rebuilt at snapshot time for the groups whose
object or members changed, with the index of the placed ones by queue
(:mod:`.placedgroups`) kept from the same rebuilds. A plain pod of Berth's in a queue is a
group of one (:func:`~berth.scheduler.snapshot.podgroups.implicit_group`).

Pure and synchronous; :class:`berth.scheduler.snapshot.cache.ClusterCache` routes to it.
"""

from __future__ import annotations

import collections.abc
import dataclasses

from berth.api import keys
from berth.scheduler.snapshot import cowmaps, ids, placedgroups, podgroups, pods

__all__ = ["GroupStore"]


class GroupStore:
    """PodGroups and their members by group key; :meth:`refresh`, :meth:`view` and
    :meth:`placed_view` give a snapshot its views."""

    def __init__(self) -> None:
        self._groups: dict[str, podgroups.PodGroupInfo] = {}
        self._spec_queue: dict[str, ids.QueueName] = {}  # as written, before defaulting
        self._members: dict[str, set[str]] = {}
        self._views: cowmaps.CowMap[podgroups.PodGroupInfo] = cowmaps.CowMap()
        self._placed = placedgroups.PlacedGroupIndex()  # of ``_views``, updated with them
        self._dirty: set[str] = set()

    def get(self, key: str, /) -> podgroups.PodGroupInfo | None:
        """The PodGroup ``key`` as stored (in its namespace's queue), if seen."""
        return self._groups.get(key)

    def written(self, info: podgroups.PodGroupInfo, /) -> None:
        """``info`` was parsed from the API: remember the queue it names as written."""
        self._spec_queue[info.key] = info.queue

    def in_namespace_queue(
        self, info: podgroups.PodGroupInfo, /, *, namespace_queue: str | None
    ) -> podgroups.PodGroupInfo:
        """``info`` in its namespace's default queue ``namespace_queue`` when it names
        ``default`` (or none)."""
        queue = self._spec_queue.get(info.key, info.queue)
        if namespace_queue and queue == keys.DEFAULT_QUEUE:
            queue = ids.QueueName(namespace_queue)
        return info if queue == info.queue else dataclasses.replace(info, queue=queue)

    def put(self, info: podgroups.PodGroupInfo, /) -> bool:
        """Store ``info``; whether its queue changed (its members resolve again)."""
        old = self._groups.get(info.key)
        self._groups[info.key] = info
        self._dirty.add(info.key)
        return old is None or old.queue != info.queue

    def remove(self, key: str, /) -> bool:
        """Forget the PodGroup ``key`` (its pods stay, without a group object); whether it was
        known."""
        self._spec_queue.pop(key, None)
        if self._groups.pop(key, None) is None:
            return False
        self._dirty.add(key)
        return True

    def in_namespace(self, namespace: str, /) -> list[str]:
        """The keys of the stored groups of ``namespace``, sorted."""
        return sorted(k for k, g in self._groups.items() if g.namespace == namespace)

    def members(self, key: str, /) -> list[str]:
        """The keys of the group ``key``'s pods, sorted."""
        return sorted(self._members.get(key, ()))

    def join(self, group: str, key: str, /) -> None:
        """The pod ``key`` is (still) a member of ``group``: its view is rebuilt."""
        self._members.setdefault(group, set()).add(key)
        self._dirty.add(group)

    def leave(self, group: str, key: str, /) -> None:
        """The pod ``key`` left ``group`` (moved to another, or gone)."""
        members = self._members.get(group)
        if members is not None:
            members.discard(key)
            if not members:
                del self._members[group]
        self._dirty.add(group)

    def touch_all(self) -> None:
        """Every group's view is rebuilt at the next snapshot (priorities changed)."""
        self._dirty.update(self._groups)
        self._dirty.update(self._members)

    def refresh(
        self,
        infos: collections.abc.Mapping[str, pods.PodInfo],
        /,
        *,
        priority_classes: collections.abc.Mapping[str, int],
        default_priority: int,
    ) -> dict[str, podgroups.PodGroupInfo | None]:
        """Rebuild the views of the groups that changed since the last call, from their
        members in ``infos``: the new views by key (``None``: the group has none now)."""
        refreshed: dict[str, podgroups.PodGroupInfo | None] = {}
        for key in self._dirty:
            members = [infos[k] for k in sorted(self._members.get(key, ()))]
            static = self._groups.get(key)
            if static is None and members and members[0].queue:
                first = members[0]
                implicit = key == pods.implicit_group_key(first.namespace, name=first.name)
                static = podgroups.implicit_group(first) if implicit else None
            if static is None:
                self._views.pop(key, None)
                refreshed[key] = None
                continue
            view = self._views[key] = podgroups.with_members(
                static,
                members=members,
                priority_classes=priority_classes,
                default_priority=default_priority,
            )
            refreshed[key] = view
        self._dirty.clear()
        self._placed.groups_changed(refreshed)
        return refreshed

    def view(self) -> cowmaps.FrozenMap[podgroups.PodGroupInfo]:
        """The groups' views for a snapshot (after :meth:`refresh`)."""
        return self._views.freeze()

    def placed_view(self) -> placedgroups.PlacedGroups:
        """The placed groups among :meth:`view`'s, by queue (after :meth:`refresh`)."""
        return self._placed.view()
