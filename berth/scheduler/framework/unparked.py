"""``Unparked``: the pending groups a session tries, kept as parking and the cache change.

A session leaves parked jobs out (:mod:`.parking`). Finding the groups left means taking the
parked ones from every pending group, which costs the whole standing backlog each cycle, even
when the backlog is parked and one small thing changed (issue #30). This keeps that set
across sessions instead: the cache's snapshot names the groups whose pending pods changed since
its previous snapshot (``Snapshot.pending_changed``), and the parking lot names the groups it
parked or woke since it last told; only those are looked at again. When either side cannot say
(a snapshot built by hand, one from another cache or after snapshots that changed something
went unseen, or a lot that cleared), the set is rebuilt from the index, as a full walk would.

Owned by :class:`~berth.scheduler.framework.parking.Parking`. Pure and synchronous.
"""

from __future__ import annotations

import collections.abc
import itertools
import operator
import typing

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import changes, pods, snapshots

__all__ = ["Unparked"]

_by_key = operator.attrgetter("key")

_Index = collections.abc.Mapping[str | None, tuple["pods.PodInfo", ...]]


class Unparked:
    """The pending groups (``None``: plain pods) not parked; see the module docstring."""

    def __init__(self) -> None:
        self._live: set[str | None] = set()
        # What ``_live`` was derived from: the last snapshot's index and counters (None: the
        # set must be rebuilt before it is used).
        self._index: _Index | None = None
        self._changes: changes.Changes | None = None

    def forget(self) -> None:
        """What was parked is no longer known group by group: rebuild on the next read."""
        self._index = None
        self._changes = None

    def settle(
        self, parked: collections.abc.Mapping[str, object], *, touched: collections.abc.Set[str]
    ) -> None:
        """The groups ``touched`` were parked or woken since the last call (``parked``: the
        lot now), against the snapshot last read."""
        if self._index is not None:
            self._update(self._index, parked, touched)

    def waiting(
        self,
        snapshot: snapshots.Snapshot,
        parked: collections.abc.Mapping[str, object],
        *,
        touched: collections.abc.Set[str] | None,
    ) -> collections.abc.Sequence[pods.PodInfo]:
        """``snapshot``'s pending pods but those of ``parked`` groups, sorted by key, as
        ``snapshot.pending_but(parked)`` finds them; ``touched``: the groups parked or woken
        since the last call (None: not known)."""
        index, after, before = snapshot.pending_index, snapshot.changes, self._changes
        changed = snapshot.pending_changed
        if index is None or after is None:
            self.forget()
            return snapshot.pending_but(parked) if parked else snapshot.pending
        if (
            touched is None
            or changed is None
            or self._index is None
            or before is None
            or not after.follows(before)
        ):
            # Only when the cache's snapshots or the lot went unseen: a walk, as pending_but.
            self._live = {g for g in index if g not in parked}
        else:
            self._update(index, parked, itertools.chain(changed, touched))
        self._index, self._changes = index, after
        if not parked:
            return snapshot.pending
        live = self._live
        return sorted((p for g in live for p in index[g]), key=_by_key)

    def _update(
        self,
        index: _Index,
        parked: collections.abc.Mapping[str, object],
        groups: collections.abc.Iterable[str | None],
    ) -> None:
        live = self._live
        for group in groups:
            if group in index and group not in parked:
                live.add(group)
            else:
                live.discard(group)
