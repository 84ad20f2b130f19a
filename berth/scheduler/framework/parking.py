"""The parking lot: work that cannot fit waits for an event that could change that.

kube-scheduler's queueing hints, for jobs. After a session, a job that stayed pending with
nothing done for it (no pod placed, nominated or evicted) is *parked* with its reasons and its
equivalence class (:mod:`.equivalence`). The next session leaves parked jobs out — they keep
the reasons they had, and the sink is not told again — unless something happened since that
could let them fit:

- their group changed (a member added, removed or updated; the PodGroup edited): that job
  wakes;
- the *world* changed (a node added, removed or edited, a queue, reservation, namespace,
  priority class or storage object changed, or a source around the cache offers other pods:
  a binding's backoff ended, admission's gates moved): every job wakes;
- room was *freed* (a pod ended, was deleted or evicted): in each class, as many jobs wake as
  could reach their quorum in the free room at best (the free room counted in pods of the
  least any of a job's pending pods asks for, node by node, on the nodes its pods' node
  selector, affinity and tolerations allow; a job's quorum takes that many); where no job
  can, the head alone wakes if its queue's pods ended since (the queue fell back: it may
  reclaim now, or the starvation guard hold room for it), or if the class may evict (below)
  and some node it may use has room left of something it asks for (with a victim's room
  beside it, preempt or reclaim may now make it); the rest cannot fit whatever happens this
  cycle, and keep their reasons;
- a pod was *placed*: the first job of every class that may evict wakes, for reclaim and
  preempt (new victims) — one is enough, as they would judge the rest of the class alike.
  A class may evict when some pod ever known has a lower priority than its jobs (the
  snapshot's ``priority_floor``: a preemption victim), when its jobs could reclaim as they
  were parked, or when pods of its queue ended since (the queue fell back, and may now
  reclaim). A queue's standing that moves otherwise (another queue's demand falling raises
  its fair share) is looked at again when the class's parking expires;
- time, for one job: a job wakes when a plugin says its own situation changes then (the
  starvation guard's threshold, counted from its creation; a group's schedule timeout);
- time, for a class: the head of a class's line wakes when the class's parking expires
  (``revisit_seconds``, as kube-scheduler flushes unschedulable pods after five minutes) or
  earlier when a plugin says what it says of every job of that shape changes then (a running
  pod becoming reclaimable, decayed fair shares drifting). One job is enough, as for a
  placement: the class is judged alike, and if the head now fits or reclaims, the room that
  frees or fills wakes the rest. Waking every member instead would make a backlog cost its
  length every ``revisit_seconds`` (or every cycle, while pods keep starting).

A class wakes its jobs in job order's fallback (creation time, UID, key): members of a class
share priority and queue, so that is the order allocate would try them in.

Starving jobs (past the starvation guard's threshold) that contend for held room — the
first ``MAX_HOLDERS`` of their queue's line in the guard's order, among whom are all it holds
room for now or would next (the ``job_contending`` hook) — are never parked: the guard must
see them every cycle. It holds for a few at a time, so a backlog older than the threshold is
mostly starving jobs that do not contend: those park, each also in its queue's line (by
priority, then age: the guard's order within a queue), and when contenders of a queue leave
(placed, gone, given back, outranked) as many of that queue's line wake at the next admit.
Trying every one of them every cycle instead made an old backlog cost its length every
cycle.

Work that is judged by more than its shape (no class) and work in a ``NamespaceFair`` queue
(its turn counts what the other waiting jobs of its namespace need, parked or not) are never
parked.
When nothing at all changed since a session that decided nothing but reasons, and no parked
job's time came, :meth:`Parking.quiet` says the next session would decide the same and may be
skipped.
"""

from __future__ import annotations

import bisect
import collections.abc
import dataclasses
import heapq
import itertools
import math
import types
import typing

import numpy as np

from berth.scheduler.framework import equivalence, reasons, unparked
from berth.scheduler.snapshot import cowmaps, queues

if typing.TYPE_CHECKING:
    from berth.api import resources
    from berth.scheduler.framework import filtering, jobs, sessions
    from berth.scheduler.snapshot import changes, nodetable, podgroups, pods, snapshots

    RowsFn = collections.abc.Callable[[pods.PodInfo], filtering.BoolArray]

__all__ = ["DEFAULT_REVISIT_SECONDS", "Lazy", "Parked", "Parking", "carried_reasons"]

DEFAULT_REVISIT_SECONDS = 300.0


@dataclasses.dataclass(slots=True, frozen=True)
class Parked:
    """One parked job: what it was parked under and the reasons it keeps meanwhile."""

    group: podgroups.PodGroupInfo  # the snapshot's view: another object means it changed
    klass: equivalence.ClassKey
    order: tuple[float, str, str]
    queue: str
    reason: reasons.Reason
    pod_reasons: tuple[tuple[str, reasons.Reason], ...]
    requests: tuple[tuple[str, int], ...]  # its largest pending pod's
    probe: pods.PodInfo  # that pod (its signature says which nodes it may use)
    least: tuple[tuple[str, int], ...]  # what each of its pending pods asks at least
    quorum: int  # pods it must place to make progress (its quorum's missing members, or one)
    priority: int
    reclaims: bool  # it could reclaim from other queues when parked
    held: resources.ResourceList  # what its queue's placed pods held then
    until: float  # when it wakes by its own time (``inf``: only with its class or an event)
    starving: bool  # starving but not contending for held room: also in its queue's line
    job: jobs.Job  # as its last session saw it: where it stands in its queue's line


class Parking:
    """Parked jobs across sessions; see the module docstring."""

    def __init__(self, *, revisit_seconds: float = DEFAULT_REVISIT_SECONDS) -> None:
        self.revisit_seconds = revisit_seconds
        # Copy-on-write: each session is handed the lot as it stood (a frozen view), which
        # costs the entries changed since, not a copy of a backlog of tens of thousands.
        self.parked: cowmaps.CowMap[Parked] = cowmaps.CowMap()
        # Keys by class in wake order; may hold keys that woke since (skipped when met).
        self._classes: dict[equivalence.ClassKey, list[tuple[tuple[float, str, str], str]]] = {}
        # When each class's head wakes by time, and the same as a heap (stale items skipped).
        self._class_until: dict[equivalence.ClassKey, float] = {}
        self._class_times: list[tuple[float, int, equivalence.ClassKey]] = []
        self._job_times: list[tuple[float, str]] = []  # (until, key); stale items skipped
        # Starving jobs not contending for held room, by queue in the guard's order within a
        # queue (priority, then age); may hold keys that woke since. The contenders of the
        # last session (key: queue), and per queue how many left then: as many of its line
        # wake at the next admit.
        self._hold_lines: dict[str, list[tuple[tuple[int, float, str, str], str]]] = {}
        self._contending: dict[str, str] = {}
        self._contenders_left: dict[str, int] = {}
        self._ticket = itertools.count()  # heap tie-break: class keys need not be ordered
        self._changes: changes.Changes | None = None
        self._quiet = False
        self._due = math.inf  # when something placed changes by time alone (CycleResult)
        # Rows each pod signature may use (static filters): kept while the world is the same
        # (nodes' rows, labels and taints move only with it, and it clears the lot).
        self._rows: dict[collections.abc.Hashable, filtering.BoolArray] = {}
        # The groups a session tries, kept as jobs park and wake (issue #30), and the keys
        # parked or woken since it was last told (None: cleared, it must rebuild).
        self._unparked = unparked.Unparked()
        self._touched: set[str] | None = None

    def clear(self) -> None:
        self.parked.clear()
        self._touched = None
        self._unparked.forget()
        self._classes.clear()
        self._class_until.clear()
        self._class_times.clear()
        self._job_times.clear()
        self._hold_lines.clear()
        self._contenders_left.clear()
        self._changes = None
        self._quiet = False
        self._rows.clear()

    @property
    def _wake_at(self) -> float:
        """The earliest time a parked job or class wakes by time alone."""
        self._drop_stale()
        first_job = self._job_times[0][0] if self._job_times else math.inf
        first_class = self._class_times[0][0] if self._class_times else math.inf
        return min(first_job, first_class)

    def _drop_stale(self) -> None:
        jobs_heap, classes_heap = self._job_times, self._class_times
        while jobs_heap:
            until, key = jobs_heap[0]
            entry = self.parked.get(key)
            if entry is not None and entry.until == until:
                break
            heapq.heappop(jobs_heap)
        while classes_heap:
            until, _, klass = classes_heap[0]
            if self._class_until.get(klass) == until:
                break
            heapq.heappop(classes_heap)

    # Before a session -----------------------------------------------------------------------
    def quiet(self, snapshot: snapshots.Snapshot) -> bool:
        """Whether a session over ``snapshot`` would decide nothing new: the last one decided
        only reasons, nothing changed since, and no parked job's time has come."""
        return (
            self._quiet
            and not self._contenders_left
            and snapshot.changes is not None
            and snapshot.changes.same_state(self._changes)
            and snapshot.now < self._wake_at
            and snapshot.now < self._due
        )

    def saw(self, snapshot: snapshots.Snapshot) -> None:
        """A session over ``snapshot`` was skipped as :meth:`quiet`: its counters are ours."""
        self._changes = snapshot.changes

    def admit(
        self, snapshot: snapshots.Snapshot, *, rows: RowsFn | None = None
    ) -> collections.abc.Mapping[str, Parked]:
        """Wake what the changes since the last session could let fit; the jobs left parked
        (by group key), for the session to leave out: a view later changes to the lot do not
        reach. ``rows``: the nodes a pod may use by its static filters (none: every node)."""
        now, before, after = snapshot.now, self._changes, snapshot.changes
        if after is None or before is None or not after.same_world(before):
            self.clear()
            return types.MappingProxyType({})
        groups = snapshot.pod_groups
        if after.taken == before.taken + 1:
            # The snapshot right after ours: only the groups it names changed.
            changed = [k for k in after.groups if k in self.parked]
            suspects = [k for k in changed if groups.get(k) is not self.parked[k].group]
        else:
            suspects = [k for k, e in self.parked.items() if groups.get(k) is not e.group]
        woken = set(suspects)
        due: list[equivalence.ClassKey] = []
        if now >= self._wake_at:
            while self._job_times and self._job_times[0][0] <= now:
                woken.add(heapq.heappop(self._job_times)[1])  # stale keys: gone or re-timed
            woken = {k for k in woken if k in self.parked}
            while self._class_times and self._class_times[0][0] <= now:
                until, _, klass = heapq.heappop(self._class_times)
                if self._class_until.get(klass) == until:
                    due.append(klass)
                    # Re-armed: a head that wakes and is not parked again (placed, starving)
                    # must not leave the rest of its line without a time.
                    self._arm(klass, now + self.revisit_seconds)
        for key in woken:
            self._wake(key)
        for klass in due:
            line = self._classes.get(klass)
            if line is not None:
                self._wake_head(klass, line, count=1)
        for queue, count in self._contenders_left.items():
            self._wake_for_holds(queue, count)
        self._contenders_left.clear()
        freed, placed = after.freed != before.freed, after.placed != before.placed
        if freed or placed:
            room = _Room(_free_rows(snapshot), nodes=snapshot.nodes, rows=self._usable_rows(rows))
            for klass, line in self._classes.items():
                self._wake_class(klass, line, room=room, freed=freed, placed=placed, at=snapshot)
        return self.parked.freeze()

    def _wake(self, key: str) -> None:
        """The job ``key`` leaves the lot."""
        del self.parked[key]
        if self._touched is not None:
            self._touched.add(key)

    def waiting(self, snapshot: snapshots.Snapshot) -> collections.abc.Sequence[pods.PodInfo]:
        """``snapshot``'s pending pods but the parked jobs' (after :meth:`admit`), sorted by
        key: what ``snapshot.pending_but(self.parked)`` finds, at the cost of the jobs not
        parked and of what changed since the last session (:mod:`.unparked`)."""
        found = self._unparked.waiting(snapshot, self.parked, touched=self._touched)
        self._touched = set()
        return found

    def _usable_rows(
        self, rows: RowsFn | None
    ) -> collections.abc.Callable[[pods.PodInfo], filtering.BoolArray | None]:
        """The rows a pod may use by ``rows`` (none: every row), kept by signature while the
        world stays the same."""

        def usable(pod: pods.PodInfo) -> filtering.BoolArray | None:
            if rows is None:
                return None
            mask = self._rows.get(pod.signature)
            if mask is None:
                mask = self._rows[pod.signature] = rows(pod)
            return mask

        return usable

    def _wake_class(
        self,
        klass: equivalence.ClassKey,
        line: list[tuple[tuple[float, str, str], str]],
        *,
        room: _Room,
        freed: bool,
        placed: bool,
        at: snapshots.Snapshot,
    ) -> None:
        """Wake the head of ``klass``'s line: as many as could fit (module docstring)."""
        wake: int | None = None
        while line:
            entry = self.parked.get(line[0][1])
            if entry is None or entry.klass != klass:
                line.pop(0)  # woke another way since
                continue
            if wake is None:
                fell_back = _fell_back(entry, at)
                evicts = fell_back or _may_evict(entry, at)
                # Preempt and reclaim have new victims: for the classes that may evict.
                wake = 1 if placed and evicts else 0
                if freed:
                    fits = room.fitting(entry)
                    if fits >= entry.quorum:
                        wake = max(wake, fits // entry.quorum)
                    elif fell_back or (evicts and (fits or room.partly_free(entry))):
                        # Its queue's standing moved (it may reclaim, or the starvation
                        # guard hold room for it, now); or, too little alone but with a
                        # victim's room beside it, preempt or reclaim may now make it: the
                        # head tries.
                        wake = max(wake, 1)
            if wake <= 0:
                return
            self._wake(line.pop(0)[1])
            wake -= 1

    def _wake_for_holds(self, queue: str, count: int) -> None:
        """Wake the first ``count`` starving jobs of ``queue``'s line: as many of its
        contenders for held room left, and the next in line take their places."""
        line = self._hold_lines.get(queue)
        woken = 0
        while line and woken < count:
            key = line.pop(0)[1]
            entry = self.parked.get(key)
            if entry is not None and entry.starving and entry.queue == queue:
                self._wake(key)
                woken += 1
        if line is not None and not line:
            del self._hold_lines[queue]

    def _wake_head(
        self,
        klass: equivalence.ClassKey,
        line: list[tuple[tuple[float, str, str], str]],
        *,
        count: int,
    ) -> None:
        """Wake the first ``count`` jobs still parked in ``klass``'s line."""
        while line and count > 0:
            key = line.pop(0)[1]
            entry = self.parked.get(key)
            if entry is not None and entry.klass == klass:
                self._wake(key)
                count -= 1

    # After a session ------------------------------------------------------------------------
    def record(
        self,
        session: sessions.Session,
        *,
        contending: collections.abc.Mapping[str, str],
        starving: collections.abc.Set[str] = frozenset(),
        revisit: collections.abc.Mapping[str, float],
        class_revisit: collections.abc.Mapping[str, float] | None = None,
        quiet: bool,
        due: float | None = None,
    ) -> None:
        """Park what ``session`` left pending untouched; ``contending``: starving jobs room is
        held for or would be next, with their queues (never parked); ``starving``: the other
        starving jobs (parked in their queue's line, woken as contenders leave);
        ``revisit``: when a job's own situation changes by itself;
        ``class_revisit``: when that of every job of its shape does (by job key; the class's
        head wakes then); ``quiet``: the session decided nothing but reasons; ``due``: when
        something placed changes by time alone (no session is skipped as quiet from then)."""
        class_revisit = class_revisit or {}
        self._due = math.inf if due is None else due
        snapshot = session.snapshot
        now = snapshot.now
        self._changes = snapshot.changes
        if self._changes is None:
            self.clear()
            return
        hooks = session.hooks
        reclaiming = len(hooks.reclaimable) > 0 and len(hooks.can_reclaim) > 0
        added: dict[equivalence.ClassKey, list[tuple[tuple[float, str, str], str]]] = {}
        # Each class just judged is timed afresh: its safety net restarts from now.
        class_until: dict[equivalence.ClassKey, float] = {}
        hold_line: dict[str, list[tuple[tuple[int, float, str, str], str]]] = {}
        for key, job in session.jobs.items():
            reason = session.group_why.get(key)
            if reason is None or job.allocated or job.pipelined or job.evicted:
                continue
            if key in contending or _turn_counts_others(snapshot, job.queue):
                continue
            klass = equivalence.class_of(job, session=session)
            if klass is None:
                continue
            entry = _entry(
                job,
                klass=klass,
                reason=reason,
                pod_why=session.pod_why,
                until=revisit.get(key, math.inf),
                reclaims=reclaiming and hooks.can_reclaim(job),
                held=snapshot.usage_of(job.queue).allocated,
                starving=key in starving,
            )
            self.parked[key] = entry
            if self._touched is not None:
                self._touched.add(key)
            added.setdefault(klass, []).append((entry.order, key))
            if entry.starving:
                hold_line.setdefault(entry.queue, []).append(((-entry.priority, *entry.order), key))
            if entry.until < math.inf:
                heapq.heappush(self._job_times, (entry.until, key))
            class_until[klass] = min(
                class_until.get(klass, now + self.revisit_seconds),
                class_revisit.get(key, math.inf),
            )
        for klass, fresh in added.items():
            fresh.sort()
            line = self._classes.setdefault(klass, [])
            if not line or line[-1] < fresh[0]:
                line.extend(fresh)  # the usual case: newer work joins the back
            else:
                for item in fresh:
                    bisect.insort(line, item)
        for klass, until in class_until.items():
            self._arm(klass, until)
        for queue, joining in hold_line.items():
            waiting = self._hold_lines.setdefault(queue, [])
            for waiter in joining:
                at = bisect.bisect_left(waiting, waiter)
                if at == len(waiting) or waiting[at] != waiter:  # not there already
                    waiting.insert(at, waiter)
        # A contender left (placed, gone, no longer starving, or outranked in its queue): as
        # many of its queue's line are looked at again next session, quiet or not.
        left: dict[str, int] = {}
        for contender, queue in self._contending.items():
            if contender not in contending and queue in self._hold_lines:
                left[queue] = left.get(queue, 0) + 1
        self._contending = dict(contending)
        self._contenders_left = left
        self._quiet = quiet
        if self._touched is not None:
            # Told now, against the snapshot these jobs were parked under: the next session
            # then looks at what changed after, not at everything this one parked.
            self._unparked.settle(self.parked, touched=self._touched)
            self._touched = set()

    def _arm(self, klass: equivalence.ClassKey, until: float) -> None:
        """The head of ``klass``'s line wakes at ``until`` (replacing its earlier time)."""
        self._class_until[klass] = until
        heapq.heappush(self._class_times, (until, next(self._ticket), klass))


def _turn_counts_others(snapshot: snapshots.Snapshot, queue: str) -> bool:
    """Whether a job's turn in ``queue`` depends on the other jobs waiting in it (left out
    while parked, they would change it): NamespaceFair's virtual finish times."""
    info = snapshot.queues.get(queue)
    return info is not None and info.job_order == queues.NAMESPACE_FAIR


def _entry(
    job: jobs.Job,
    *,
    klass: equivalence.ClassKey,
    reason: reasons.Reason,
    pod_why: collections.abc.Mapping[str, reasons.Reason],
    until: float,
    reclaims: bool,
    held: resources.ResourceList,
    starving: bool,
) -> Parked:
    largest = max(job.pending, key=lambda p: (sum(p.requests.values()), p.key))
    least = dict(largest.requests)
    for pod in job.pending:
        least = {name: min(milli, pod.requests[name]) for name, milli in least.items()}
    return Parked(
        group=job.group,
        klass=klass,
        order=(job.creation_timestamp, job.uid, str(job.key)),
        queue=str(job.queue),
        reason=reason,
        pod_reasons=tuple((p.key, pod_why[p.key]) for p in job.pending if p.key in pod_why),
        requests=tuple(sorted(largest.requests.items())),
        probe=largest,
        least=tuple(sorted((name, milli) for name, milli in least.items() if milli > 0)),
        quorum=max(job.group.min_member - job.occupied(), 1),
        priority=job.priority,
        reclaims=reclaims,
        held=held,
        until=until,
        starving=starving,
        job=job,
    )


def _may_evict(entry: Parked, snapshot: snapshots.Snapshot) -> bool:
    """Whether ``entry``'s job may evict to fit: some pod could be preempt's victim, or it
    could reclaim when parked."""
    floor = snapshot.priority_floor
    return entry.reclaims or floor is None or entry.priority > floor


def _fell_back(entry: Parked, snapshot: snapshots.Snapshot) -> bool:
    """Whether pods of ``entry``'s queue ended since it was parked: the queue holds less."""
    held = snapshot.usage_of(entry.queue).allocated
    return held is not entry.held and any(held[name] < milli for name, milli in entry.held.items())


_Count = collections.abc.Callable[..., int | bool]
"""A question about the free room: :func:`_fitting` or :func:`_partly_free`."""


class _Room:
    """The free room one :meth:`Parking.admit` offers the parked classes: each question
    answered once per admit (classes of several queues share their pods' shapes)."""

    def __init__(
        self,
        free: np.ndarray[typing.Any, np.dtype[np.int64]],
        *,
        nodes: nodetable.NodeTable,
        rows: collections.abc.Callable[[pods.PodInfo], filtering.BoolArray | None],
    ) -> None:
        self._free = free
        self._nodes = nodes
        self._rows = rows
        self._answers: dict[tuple[object, ...], int] = {}

    def _answer(self, entry: Parked, shape: tuple[tuple[str, int], ...], count: _Count) -> int:
        """``count`` over the free room of the nodes ``entry``'s pods may use, for pods of
        ``shape``: worked out once per admit for each signature and shape."""
        key = (count, entry.probe.signature, shape)
        found = self._answers.get(key)
        if found is None:
            mask = self._rows(entry.probe)
            usable = self._free if mask is None else self._free[mask]
            found = self._answers[key] = int(count(usable, dict(shape), columns=self._nodes))
        return found

    def fitting(self, entry: Parked) -> int:
        """How many pods of the least ``entry``'s pods ask for fit, at best."""
        return self._answer(entry, entry.least, _fitting)

    def partly_free(self, entry: Parked) -> bool:
        """Whether a node ``entry``'s pods may use has room of something its largest asks."""
        return bool(self._answer(entry, entry.requests, _partly_free))


def _free_rows(snapshot: snapshots.Snapshot) -> np.ndarray[typing.Any, np.dtype[np.int64]]:
    """Free room per node row (cordoned rows: none)."""
    nodes = snapshot.nodes
    free = np.clip(nodes.free(), 0, None)
    free[nodes.unschedulable] = 0
    return typing.cast("np.ndarray[typing.Any, np.dtype[np.int64]]", free)


def _fitting(
    free: np.ndarray[typing.Any, np.dtype[np.int64]],
    requests: dict[str, int],
    *,
    columns: nodetable.NodeTable,
) -> int:
    """How many pods asking ``requests`` the free room holds at best, node by node."""
    if columns.missing(requests):
        return 0  # a resource no node has
    vec = columns.vector(requests, memo=False)
    asked = vec > 0
    if not asked.any() or free.shape[0] == 0:
        return int(free.shape[0]) * 1_000_000
    per_node = (free[:, asked] // vec[asked]).min(axis=1)
    return int(per_node.sum())


def _partly_free(
    free: np.ndarray[typing.Any, np.dtype[np.int64]],
    requests: dict[str, int],
    *,
    columns: nodetable.NodeTable,
) -> bool:
    """Whether some node has room left of a resource ``requests`` asks for."""
    if columns.missing(requests) or free.shape[0] == 0:
        return False
    vec = columns.vector(requests, memo=False)
    return bool((free[:, vec > 0] > 0).any())


def carried_reasons(
    parked: collections.abc.Mapping[str, Parked],
) -> tuple[dict[str, reasons.Reason], dict[str, reasons.Reason]]:
    """The pod and group reasons parked jobs keep (for the session's result)."""
    pods_out: dict[str, reasons.Reason] = {}
    groups_out: dict[str, reasons.Reason] = {}
    for key, entry in cowmaps.items_in_any_order(parked):  # sorted by the reader
        groups_out[key] = entry.reason
        pods_out.update(entry.pod_reasons)
    return pods_out, groups_out


_V = typing.TypeVar("_V")


class Lazy(collections.abc.Mapping[str, _V]):
    """A read-only mapping built by ``build`` when first read (a result's reasons merged
    with the parked jobs', which few readers need every cycle)."""

    __slots__ = ("_build", "_data")

    def __init__(self, build: collections.abc.Callable[[], dict[str, _V]]) -> None:
        self._build: collections.abc.Callable[[], dict[str, _V]] | None = build
        self._data: dict[str, _V] | None = None

    def _get(self) -> dict[str, _V]:
        if self._data is None:
            assert self._build is not None
            self._data, self._build = self._build(), None
        return self._data

    def __getitem__(self, key: str) -> _V:
        return self._get()[key]

    def __iter__(self) -> collections.abc.Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __repr__(self) -> str:
        return f"Lazy({self._get()!r})"
