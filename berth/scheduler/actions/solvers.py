"""The victim search shared by reclaim and preempt: which running pods to evict for a job.

Both actions hand :func:`evict_for` a job, the pods they may evict, a victim order and a
victim filter (the session's ``reclaimable`` or ``preemptable`` hook); it groups the pods into
*units* and runs :func:`solve` inside one statement, which it commits only on success:

1. Units are tried in the caller's order (least valuable first). A unit is evicted only if the
   filter accepts every pod in it, each asked once the pods before it are gone (the filters
   read per-queue usage, which the evictions already made keep lowering). A pod the filter
   refuses before the search evicts anything is no candidate at all: evictions only lower
   usage, so a filter never accepts what it refused earlier in the search (the contract of
   the ``reclaimable`` and ``preemptable`` hooks).
2. After each eviction, once the free capacity could hold the job's quorum at all, the job is
   placed tentatively (checkpoint; pods in task order through ``allocatable`` and the scheduling
   attempt); if ``job_ready`` agrees the search stops, otherwise the placement is rolled back
   and the next unit goes.
3. The victims found are pruned: each is spared in turn, most valuable first, if the job still
   fits without it. Each trial replays the evictions from the start, so the result does not
   depend on node scores moving pods around.

Nothing is left evicted unless the job's quorum then fits (the issue's rule): on failure the
statement is rolled back to where it was. A job inside its preemption window (its
``preemptionDelay``, the PodGroup's else its queue's or an ancestor's, counted from when it
began waiting: KAI's ``preemption-delay``) evicts nothing even when victims were found: it
waits for an autoscaler's new nodes first, and its reason says so (``PreemptionDelayed``,
:func:`delayed`); once the window passes, the search evicts as before.

:func:`victim_units` keeps gangs whole: the members a group holds above ``minMember`` may go
one by one; beyond them, only the whole gang goes. The searches are bounded
(:data:`MAX_UNITS`, :data:`MAX_PLACEMENT_TRIES`), so one hopeless job costs a bounded number
of attempts.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import typing

import numpy as np
import numpy.typing as npt

from berth.api import durations
from berth.scheduler.framework import decisions, jobs, reasons, sessions, statements
from berth.scheduler.snapshot import podgroups

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import pods, queues

__all__ = [
    "MAX_PLACEMENT_TRIES",
    "MAX_PRUNED",
    "MAX_UNITS",
    "Search",
    "Unit",
    "could_fit",
    "delayed",
    "evict_for",
    "evicted_keys",
    "needs_room",
    "pending_tasks",
    "place_job",
    "preemption_delay",
    "quorum_vector",
    "solve",
    "victim_units",
    "window_end",
]

MAX_UNITS = 512
"""Victim units a search evicts for one job before giving up (bounds a hopeless search)."""
MAX_PLACEMENT_TRIES = 32
"""Tentative placements of the job per search (each is a full scheduling attempt per pod)."""
MAX_PRUNED = 16
"""Searches that found more units than this keep them all (pruning costs one try per unit)."""

Rank = tuple[typing.Any, ...]
IntArray = npt.NDArray[np.int64]


class Search(enum.Enum):
    """How a victim search for one job ended (:func:`evict_for`)."""

    EVICTED = "evicted"  # committed: the victims go and the job is placed
    NOT_FOUND = "not found"  # no victims would make the job fit
    DELAYED = "delayed"  # victims were found, but the job's preemption window is open


@dataclasses.dataclass(frozen=True)
class Unit:
    """Pods evicted together (one pod, or the core of a gang), and its place in the order."""

    pods: tuple[pods.PodInfo, ...]
    rank: Rank


def evicted_keys(session: sessions.Session) -> set[str]:
    """Pods evicted by statements committed so far in this session."""
    return {d.key for d in session.recorder.decisions() if isinstance(d, decisions.EvictPod)}


def needs_room(job: jobs.Job) -> bool:
    """The job is below quorum and has pods this session has not placed."""
    if job.occupied() >= job.group.min_member:
        return False
    return any(pod.key not in job.allocated for pod in job.pending)


def pending_tasks(session: sessions.Session, job: jobs.Job) -> list[pods.PodInfo]:
    """The job's pods not placed yet, in task order, that PreEnqueue admits."""
    framework = session.framework
    return [
        pod
        for pod in session.ordered_tasks(job)
        if pod.key not in job.allocated and framework.run_pre_enqueue(pod).is_success()
    ]


def victim_units(
    candidates: collections.abc.Iterable[pods.PodInfo],
    *,
    session: sessions.Session,
    evicted: collections.abc.Container[str],
    rank: collections.abc.Callable[[pods.PodInfo], Rank],
) -> list[Unit]:
    """``candidates`` grouped into units (module docstring), in ``rank`` order.

    A gang gives one unit per member it can spare (``minMember`` still met without it), then
    one unit of all its placed members, ranked as its least evictable member, offered only
    when every one of them is a candidate. Evicting a spare member and then the whole gang
    evicts each pod once.
    """
    snapshot = session.snapshot
    units: list[Unit] = []
    grouped: dict[str, list[pods.PodInfo]] = {}
    for pod in candidates:
        if pod.key in evicted:
            continue
        group = snapshot.group_of(pod)
        if group is None or group.min_member <= 1:
            units.append(Unit(pods=(pod,), rank=rank(pod)))
        else:
            grouped.setdefault(group.key, []).append(pod)
    for key in sorted(grouped):
        group = snapshot.pod_groups[key]
        offered = sorted(grouped[key], key=rank)
        placed = [
            p
            for p in snapshot.members(key)
            if p.node_name is not None and not p.terminal and p.key not in evicted
        ]
        spare = max(len(placed) + group.succeeded - group.min_member, 0)
        units.extend(Unit(pods=(p,), rank=rank(p)) for p in offered[:spare])
        offered_keys = {p.key for p in offered}
        if placed and all(p.key in offered_keys for p in placed):
            whole = sorted(placed, key=rank)
            units.append(Unit(pods=tuple(whole), rank=rank(whole[-1])))
    units.sort(key=lambda u: u.rank)
    return units


def place_job(
    session: sessions.Session,
    stmt: statements.Statement,
    *,
    job: jobs.Job,
    queue: queues.QueueInfo,
    tasks: collections.abc.Sequence[pods.PodInfo],
) -> bool:
    """Place ``tasks`` in ``stmt`` as allocate would; True when the job is then ready.

    The caller rolls back on False. Pods of a shape that failed once are not tried again.
    """
    failed: set[tuple[typing.Hashable, typing.Hashable]] = set()
    need = job.group.min_member
    for index, pod in enumerate(tasks):
        if job.occupied() >= need:
            break
        shape = (pod.signature, pod.requests)
        if shape not in failed and session.hooks.allocatable(queue, pod).is_success():
            attempt = session.place(pod, explain=False)
            if attempt.row is not None:
                status = stmt.allocate(pod, attempt.row, state=attempt.state)
                if status.is_success() or status.is_wait():
                    continue
            else:
                failed.add(shape)
        if job.occupied() + len(tasks) - index - 1 < need:
            return False
    return session.hooks.job_ready(job).is_success()


def quorum_vector(
    session: sessions.Session, job: jobs.Job, tasks: collections.abc.Sequence[pods.PodInfo]
) -> IntArray:
    """What the first ``tasks`` up to the job's quorum ask for, summed."""
    missing = max(job.group.min_member - job.occupied(), 0)
    total = np.zeros(len(session.nodes.resources), dtype=np.int64)
    for pod in tasks[:missing]:
        total += session.vector(pod)
    return total


def could_fit(session: sessions.Session, need: IntArray) -> bool:
    """Whether the free capacity of schedulable nodes, summed, covers ``need`` (a cheap
    necessary condition before a real placement attempt)."""
    nodes = session.nodes
    free = np.clip(nodes.free(), 0, None)[~nodes.unschedulable].sum(axis=0)
    return bool((free >= need).all())


def solve(
    session: sessions.Session,
    stmt: statements.Statement,
    *,
    job: jobs.Job,
    queue: queues.QueueInfo,
    tasks: collections.abc.Sequence[pods.PodInfo],
    units: collections.abc.Sequence[Unit],
    allowed: collections.abc.Callable[[pods.PodInfo], bool],
    reason: str,
) -> bool:
    """Evict few units so that ``job`` fits, and place it (module docstring).

    True: ``stmt`` now holds the evictions and the job's placements, ready to commit.
    False: ``stmt`` is back where it was.
    """
    base = stmt.checkpoint()
    todo = list(tasks)
    need = quorum_vector(session, job, todo)
    chosen: list[Unit] = []
    tries = 0
    fitted = False
    gone: set[str] = set()
    for unit in units:
        if len(chosen) >= MAX_UNITS or tries >= MAX_PLACEMENT_TRIES:
            break
        fresh = [pod for pod in unit.pods if pod.key not in gone]
        if not fresh:
            continue
        # Each member is asked as the ones before it are gone: the filters read usage, and
        # a gang's members together may take a queue further than any one of them alone.
        before = stmt.checkpoint()
        accepted = True
        for pod in fresh:
            if not allowed(pod):
                accepted = False
                break
            stmt.evict(pod, reason=reason)
        if not accepted:
            stmt.rollback(before)
            continue
        gone.update(pod.key for pod in fresh)
        chosen.append(unit)
        if not could_fit(session, need):
            continue
        tries += 1
        checkpoint = stmt.checkpoint()
        if place_job(session, stmt, job=job, queue=queue, tasks=todo):
            fitted = True
            break
        stmt.rollback(checkpoint)
    if not fitted:
        stmt.rollback(base)
        return False
    if len(chosen) == 1 or len(chosen) > MAX_PRUNED:
        return True

    def attempt(victims: list[Unit]) -> bool:
        stmt.rollback(base)
        evicted: set[str] = set()
        for unit in victims:
            for pod in unit.pods:
                if pod.key not in evicted:
                    stmt.evict(pod, reason=reason)
                    evicted.add(pod.key)
        return place_job(session, stmt, job=job, queue=queue, tasks=todo)

    kept = list(chosen)
    for unit in reversed(chosen):
        trial = [u for u in kept if u is not unit]
        if trial and attempt(trial):
            kept = trial
    if attempt(kept):
        return True
    stmt.rollback(base)  # cannot happen with deterministic placement; never evict in vain
    return False


def preemption_delay(
    session: sessions.Session, job: jobs.Job, queue: queues.QueueInfo
) -> tuple[float, str] | None:
    """``job``'s ``preemptionDelay`` in seconds and whose it is (``its``, ``queue q's``):
    the PodGroup's, else its queue's, else the nearest ancestor queue's that sets one (an
    ancestor's setting is meant for its subtree, as only leaves take work); None if none."""
    if job.group.preemption_delay is not None:
        return job.group.preemption_delay, "its"
    known = session.snapshot.queues
    current: queues.QueueInfo | None = queue
    seen: set[str] = set()
    while current is not None and current.name not in seen:
        if current.preemption_delay is not None:
            return current.preemption_delay, f"queue {current.name}'s"
        seen.add(current.name)
        current = known.get(current.parent) if current.parent is not None else None
    return None


def window_end(session: sessions.Session, job: jobs.Job, queue: queues.QueueInfo) -> float | None:
    """When ``job``'s preemption window closes: its :func:`preemption_delay` after it began
    waiting (its ``minMember``-th pod's creation, or the group's, if later:
    :func:`~berth.scheduler.snapshot.podgroups.quorum_since`); None without one."""
    found = preemption_delay(session, job, queue)
    if found is None or not found[0]:
        return None
    since = podgroups.quorum_since(job.group, members=session.snapshot.members(job.key))
    return None if since is None else since + found[0]


def delayed(
    session: sessions.Session, job: jobs.Job, queue: queues.QueueInfo, *, doing: str
) -> reasons.Reason | None:
    """Why ``job`` does not ``doing`` (preempt, reclaim) now although it could: its
    preemption window is still open; None once it has closed (or it has none)."""
    ends = window_end(session, job, queue)
    now = session.snapshot.now
    found = preemption_delay(session, job, queue)
    if ends is None or ends <= now or found is None:
        return None
    delay, whose = found
    left = ends - now
    return reasons.new(
        reasons.ReasonCode.PREEMPTION_DELAYED,
        f"could {doing} to fit, but waits for new nodes first: "
        f"{whose} preemptionDelay {_text(delay)} ends in {_text(left)}",
        delaySeconds=delay,
        remainingSeconds=round(left, 3),
    )


def _text(seconds: float) -> str:
    return durations.format_duration(max(round(seconds * 1000), 0))


def evict_for(
    session: sessions.Session,
    candidates: collections.abc.Iterable[pods.PodInfo],
    *,
    job: jobs.Job,
    queue: queues.QueueInfo,
    evicted: collections.abc.Container[str],
    rank: collections.abc.Callable[[pods.PodInfo], Rank],
    allowed: collections.abc.Callable[[pods.PodInfo], bool],
    reason: str,
    doing: str,
) -> Search:
    """Evict some of ``candidates`` so that ``job`` fits, in one statement.

    The part reclaim and preempt (``doing``) share once each has chosen its candidates, victim
    order and filter: :func:`victim_units`, then :func:`solve`, then commit or discard. A
    search that found victims for a job inside its preemption window discards them, and the
    job's reason says it waits for new nodes (:func:`delayed`, explaining what it waited for
    so far).
    """
    # A filter's no stands for the whole search (the hooks' contract: evictions only lower
    # what queues hold), so the pods refused before any eviction are left out up front: a
    # hopeless search over hundreds of running pods then groups and walks only the few that
    # could go.
    candidates = [pod for pod in candidates if pod.key not in evicted and allowed(pod)]
    units = victim_units(candidates, session=session, evicted=evicted, rank=rank)
    if not units:
        return Search.NOT_FOUND
    tasks = pending_tasks(session, job)
    with session.statement() as stmt:
        if not solve(
            session,
            stmt,
            job=job,
            queue=queue,
            tasks=tasks,
            units=units,
            allowed=allowed,
            reason=reason,
        ):
            stmt.discard()
            return Search.NOT_FOUND
        waiting = delayed(session, job, queue, doing=doing)
        if waiting is not None:
            stmt.discard()
            before = session.group_why.get(job.key)
            if before is None or before.code is not reasons.ReasonCode.PREEMPTION_DELAYED:
                session.reject_job(
                    job, reason=waiting if before is None else waiting.explained_by(before)
                )
            return Search.DELAYED
        stmt.commit()
    return Search.EVICTED
