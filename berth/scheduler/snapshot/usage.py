"""``QueueUsage``: what each queue runs and waits for, kept current by the cache as pods change.

Owns the per-queue totals a queue plugin needs every cycle, so that a cycle costs what changed
and not what runs: the requests of a queue's placed, unfinished pods (``allocated``; reserve
pods included, pods of any scheduler), the requests of its pods waiting for a node
(``requested``: Berth's, ungated, not being deleted — what the cache puts in a snapshot's
``pending``; a pod a source holds back from one cycle, such as one in bind backoff, is still
demand and still counts), and how many of its groups run (a member placed) or only wait (no
member placed, one pending or gated).

:class:`QueueTotals` is the mutable side, owned by the cache's
:class:`~berth.scheduler.snapshot.queuestore.QueueStore`: the store tells it each pod's and each
group's current contribution (:meth:`QueueTotals.set_pod`, :meth:`QueueTotals.set_group`),
and it moves the sums by the difference. :meth:`QueueTotals.views` hands a snapshot frozen
:class:`QueueUsage` values, rebuilt only for the queues that changed. Sums are exact integers
(milli-units), so adding and subtracting the same requests never drifts.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import types

from berth.api import resources
from berth.scheduler.snapshot import podgroups

__all__ = ["EMPTY", "GroupState", "QueueTotals", "QueueUsage", "group_state"]


class GroupState(enum.Enum):
    """Where a group stands, for the running/pending counts of its queue."""

    RUNNING = "running"  # a member is placed (bound or assumed) and not finished
    PENDING = "pending"  # nothing placed, a member waits (pending or gated)


def group_state(
    group: podgroups.PodGroupInfo, /, *, placed: int | None = None
) -> GroupState | None:
    """Where ``group`` stands (``None``: in neither count, e.g. every member finished).
    ``placed`` replaces its placed count: a session's view after it placed or evicted some."""
    if (group.placed if placed is None else placed) > 0:
        return GroupState.RUNNING
    if group.pending + group.gated > 0:
        return GroupState.PENDING
    return None


@dataclasses.dataclass(frozen=True)
class QueueUsage:
    """One queue's totals when the snapshot was taken (its own pods only, not its subtree)."""

    allocated: resources.ResourceList = dataclasses.field(default_factory=resources.ResourceList)
    requested: resources.ResourceList = dataclasses.field(default_factory=resources.ResourceList)
    running_groups: int = 0
    pending_groups: int = 0


EMPTY = QueueUsage()
"""The usage of a queue nothing runs or waits in."""

Contribution = tuple[str, resources.ResourceList]
"""A pod's part in a queue's sum: the queue's name and the pod's requests."""


def _move(
    sums: dict[str, dict[str, int]], queue: str, requests: resources.ResourceList, *, sign: int
) -> None:
    total = sums.setdefault(queue, {})
    for name, value in requests.items():
        left = total.get(name, 0) + sign * value
        if left:
            total[name] = left
        else:
            del total[name]
    if not total:
        del sums[queue]


SUM_BOUND = 2**62
"""A queue's sums are exact here (Python ints) but handed on saturated at half of int64: the
accounting plugins add them up in int64 arrays, and enough of the largest pods in one queue
(each within :data:`berth.api.quantities.MAX_MILLI`) would otherwise overflow them — for every
queue's session, not just that one."""


def _saturated(sums: dict[str, int] | None) -> resources.ResourceList:
    if not sums:
        return resources.ResourceList()
    return resources.ResourceList({k: min(v, SUM_BOUND) for k, v in sums.items()})


class QueueTotals:
    """Per-queue sums and group counts, moved by each pod's and group's change."""

    def __init__(self) -> None:
        self._running: dict[str, Contribution] = {}  # pod key -> what it adds to allocated
        self._waiting: dict[str, Contribution] = {}  # pod key -> what it adds to requested
        self._groups: dict[str, tuple[str, GroupState]] = {}  # group key -> queue, state
        self._allocated: dict[str, dict[str, int]] = {}
        self._requested: dict[str, dict[str, int]] = {}
        self._counts: dict[str, dict[GroupState, int]] = {}
        self._views: dict[str, QueueUsage] = {}
        self._dirty: set[str] = set()  # queues whose view is stale
        self._last: collections.abc.Mapping[str, QueueUsage] | None = None

    def set_pod(
        self, key: str, /, *, running: Contribution | None, waiting: Contribution | None
    ) -> None:
        """The pod ``key`` now adds ``running`` to a queue's allocated sum and ``waiting`` to
        a queue's requested sum (``None``: nothing; a removed pod adds nothing)."""
        self._replace(self._running, self._allocated, key, running)
        self._replace(self._waiting, self._requested, key, waiting)

    def _replace(
        self,
        by_pod: dict[str, Contribution],
        sums: dict[str, dict[str, int]],
        key: str,
        new: Contribution | None,
    ) -> None:
        old = by_pod.get(key)
        if old == new:
            return
        if old is not None:
            _move(sums, old[0], old[1], sign=-1)
            self._dirty.add(old[0])
        if new is None:
            del by_pod[key]
            return
        by_pod[key] = new
        _move(sums, new[0], new[1], sign=1)
        self._dirty.add(new[0])

    def set_group(self, key: str, /, *, queue: str | None, state: GroupState | None) -> None:
        """The group ``key`` now counts as ``state`` in ``queue`` (``None``: in no count)."""
        new = (queue, state) if queue is not None and state is not None else None
        old = self._groups.get(key)
        if old == new:
            return
        if old is not None:
            counts = self._counts[old[0]]
            counts[old[1]] -= 1
            if not counts[old[1]]:
                del counts[old[1]]
                if not counts:
                    del self._counts[old[0]]
            self._dirty.add(old[0])
        if new is None:
            del self._groups[key]
            return
        self._groups[key] = new
        counts = self._counts.setdefault(new[0], {})
        counts[new[1]] = counts.get(new[1], 0) + 1
        self._dirty.add(new[0])

    def views(self) -> collections.abc.Mapping[str, QueueUsage]:
        """Every queue with something running or waiting -> its usage now, by name (a copy:
        later changes do not reach it; the same object while nothing changed)."""
        if self._dirty or self._last is None:
            for queue in self._dirty:
                allocated = self._allocated.get(queue)
                requested = self._requested.get(queue)
                counts = self._counts.get(queue)
                if not (allocated or requested or counts):
                    self._views.pop(queue, None)
                    continue
                counts = counts or {}
                self._views[queue] = QueueUsage(
                    allocated=_saturated(allocated),
                    requested=_saturated(requested),
                    running_groups=counts.get(GroupState.RUNNING, 0),
                    pending_groups=counts.get(GroupState.PENDING, 0),
                )
            self._dirty.clear()
            self._last = types.MappingProxyType(dict(sorted(self._views.items())))
        return self._last
