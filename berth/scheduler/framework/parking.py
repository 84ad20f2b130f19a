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
  could fit into the free room at best (the count of the class's pods that fit node by node),
  plus one to carry the class's reason; the rest cannot fit whatever happens this cycle;
- a pod was *placed*: the first job of every class wakes, for reclaim and preempt (new
  victims) — one is enough, as they would judge the rest of the class alike;
- time: a job wakes when its parking expires (``revisit_seconds``, as kube-scheduler flushes
  unschedulable pods after five minutes) or earlier when a plugin says its situation changes
  then (the starvation guard's threshold).

A class wakes its jobs in job order's fallback (creation time, UID, key): members of a class
share priority and queue, so that is the order allocate would try them in.

Work that is judged by more than its shape (no class), starving jobs, and work in a
``NamespaceFair`` queue (its turn counts what the other waiting jobs of its namespace need,
parked or not) are never parked.
When nothing at all changed since a session that decided nothing but reasons, and no parked
job's time came, :meth:`Parking.quiet` says the next session would decide the same and may be
skipped.
"""

from __future__ import annotations

import bisect
import collections.abc
import dataclasses
import math
import types
import typing

import numpy as np

from berth.scheduler.framework import equivalence, reasons
from berth.scheduler.snapshot import queues

if typing.TYPE_CHECKING:
    from berth.scheduler.framework import jobs, sessions
    from berth.scheduler.snapshot import changes, nodetable, podgroups, snapshots

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
    pods: int  # pending pods
    until: float
    job: jobs.Job  # as its last session saw it: where it stands in its queue's line


class Parking:
    """Parked jobs across sessions; see the module docstring."""

    def __init__(self, *, revisit_seconds: float = DEFAULT_REVISIT_SECONDS) -> None:
        self.revisit_seconds = revisit_seconds
        self.parked: dict[str, Parked] = {}
        # Keys by class in wake order; may hold keys that woke since (skipped when met).
        self._classes: dict[equivalence.ClassKey, list[tuple[tuple[float, str, str], str]]] = {}
        self._changes: changes.Changes | None = None
        self._quiet = False
        self._wake_at = math.inf

    def clear(self) -> None:
        self.parked.clear()
        self._classes.clear()
        self._changes = None
        self._quiet = False
        self._wake_at = math.inf

    # Before a session -----------------------------------------------------------------------
    def quiet(self, snapshot: snapshots.Snapshot) -> bool:
        """Whether a session over ``snapshot`` would decide nothing new: the last one decided
        only reasons, nothing changed since, and no parked job's time has come."""
        return (
            self._quiet
            and snapshot.changes is not None
            and snapshot.changes.same_state(self._changes)
            and snapshot.now < self._wake_at
        )

    def saw(self, snapshot: snapshots.Snapshot) -> None:
        """A session over ``snapshot`` was skipped as :meth:`quiet`: its counters are ours."""
        self._changes = snapshot.changes

    def admit(self, snapshot: snapshots.Snapshot) -> collections.abc.Mapping[str, Parked]:
        """Wake what the changes since the last session could let fit; the jobs left parked
        (by group key), for the session to leave out."""
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
        if now >= self._wake_at:
            woken.update(k for k, e in self.parked.items() if e.until <= now)
            self._wake_at = min(
                (e.until for k, e in self.parked.items() if k not in woken), default=math.inf
            )
        for key in woken:
            del self.parked[key]
        freed, placed = after.freed != before.freed, after.placed != before.placed
        if freed or placed:
            free = _free_rows(snapshot)
            for klass, line in self._classes.items():
                self._wake_class(klass, line, free=free, freed=freed, placed=placed, at=snapshot)
        return self.parked

    def _wake_class(
        self,
        klass: equivalence.ClassKey,
        line: list[tuple[tuple[float, str, str], str]],
        *,
        free: np.ndarray[typing.Any, np.dtype[np.int64]],
        freed: bool,
        placed: bool,
        at: snapshots.Snapshot,
    ) -> None:
        """Wake the head of ``klass``'s line: as many as could fit, plus one."""
        wake: int | None = None
        while line:
            entry = self.parked.get(line[0][1])
            if entry is None or entry.klass != klass:
                line.pop(0)  # woke another way since
                continue
            if wake is None:
                wake = 1 if placed else 0
                if freed:
                    fits = _fitting(free, dict(entry.requests), columns=at.nodes)
                    if fits:
                        wake = max(wake, -(-fits // max(entry.pods, 1)) + 1)
            if wake <= 0:
                return
            del self.parked[line.pop(0)[1]]
            wake -= 1

    # After a session ------------------------------------------------------------------------
    def record(
        self,
        session: sessions.Session,
        *,
        starving: collections.abc.Set[str],
        revisit: collections.abc.Mapping[str, float],
        quiet: bool,
    ) -> None:
        """Park what ``session`` left pending untouched; ``starving``: jobs the guard holds
        room for (never parked); ``revisit``: when a job's situation changes by itself;
        ``quiet``: the session decided nothing but reasons."""
        snapshot = session.snapshot
        now = snapshot.now
        self._changes = snapshot.changes
        if self._changes is None:
            self.clear()
            return
        added: dict[equivalence.ClassKey, list[tuple[tuple[float, str, str], str]]] = {}
        for key, job in session.jobs.items():
            reason = session.group_why.get(key)
            if reason is None or job.allocated or job.pipelined or job.evicted:
                continue
            if key in starving or _turn_counts_others(snapshot, job.queue):
                continue
            klass = equivalence.class_of(job, session=session)
            if klass is None:
                continue
            entry = _entry(
                job,
                klass=klass,
                reason=reason,
                pod_why=session.pod_why,
                until=min(now + self.revisit_seconds, revisit.get(key, math.inf)),
            )
            self.parked[key] = entry
            added.setdefault(klass, []).append((entry.order, key))
        for klass, fresh in added.items():
            fresh.sort()
            line = self._classes.setdefault(klass, [])
            if not line or line[-1] < fresh[0]:
                line.extend(fresh)  # the usual case: newer work joins the back
            else:
                for item in fresh:
                    bisect.insort(line, item)
            self._wake_at = min(self._wake_at, min(self.parked[k].until for _, k in fresh))
        self._quiet = quiet


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
) -> Parked:
    largest = max(job.pending, key=lambda p: (sum(p.requests.values()), p.key))
    return Parked(
        group=job.group,
        klass=klass,
        order=(job.creation_timestamp, job.uid, str(job.key)),
        queue=str(job.queue),
        reason=reason,
        pod_reasons=tuple((p.key, pod_why[p.key]) for p in job.pending if p.key in pod_why),
        requests=tuple(sorted(largest.requests.items())),
        pods=len(job.pending),
        until=until,
        job=job,
    )


def _free_rows(snapshot: snapshots.Snapshot) -> np.ndarray[typing.Any, np.dtype[np.int64]]:
    nodes = snapshot.nodes
    free = np.clip(nodes.free(), 0, None)
    return typing.cast("np.ndarray[typing.Any, np.dtype[np.int64]]", free[~nodes.unschedulable])


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


def carried_reasons(
    parked: collections.abc.Mapping[str, Parked],
) -> tuple[dict[str, reasons.Reason], dict[str, reasons.Reason]]:
    """The pod and group reasons parked jobs keep (for the session's result)."""
    pods_out: dict[str, reasons.Reason] = {}
    groups_out: dict[str, reasons.Reason] = {}
    for key, entry in parked.items():
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
