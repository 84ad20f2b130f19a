"""``Session``: one scheduling cycle over a snapshot — jobs, callbacks, reasons, results.

:func:`open_session` takes a :class:`~berth.scheduler.snapshot.snapshots.Snapshot` and a
:class:`~berth.scheduler.framework.runtime.Framework`, sorts the snapshot's pending pods into
jobs (one per PodGroup, or per pod with a queue) and plain pods (neither group nor queue), and
calls every session plugin's ``on_session_open``. Actions then place pods through
:meth:`Session.place` and :meth:`Session.statement`; :func:`close_session` calls
``on_session_close``, gives every pod and group left pending its "why pending" reason, and
returns the :class:`~berth.scheduler.framework.decisions.CycleResult`.

Session callbacks live in :attr:`Session.hooks` (:class:`SessionHooks`), each kind of hook with
its combining rule (see :mod:`berth.scheduler.framework.hooks`); the ``add_*_fn`` methods are
the registrars KAI and Volcano plugin authors expect.
"""

from __future__ import annotations

import collections.abc
import itertools
import logging
import time
import types
import typing

from berth.scheduler.framework import (
    decisions,
    hooks,
    jobs,
    parking,
    placements,
    runtime,
    statements,
    statuses,
)

if typing.TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from berth.api import resources
    from berth.scheduler.snapshot import ids, pods, queues, snapshots

__all__ = ["FRAMEWORK", "Session", "SessionHooks", "close_session", "open_session"]

FRAMEWORK = "framework"
"""The plugin name the session's own checks (:attr:`SessionHooks.blocked`) report under."""

logger = logging.getLogger(__name__)

_session_ids = itertools.count(1)


class SessionHooks:
    """Every session callback, by kind; each attribute's docstring states its rule."""

    def __init__(self, *, report: hooks.ErrorReport) -> None:
        self.blocked: dict[str | None, str] = {}
        """Fail closed: queues that take nothing more this session, with the reason (key
        ``None``: every queue) — a session plugin failed to open, or an allocate/deallocate
        handler raised on one of the queue's pods, so the books the queue's limits are checked
        against can no longer be trusted. Checked first by :attr:`job_valid` and
        :attr:`allocatable`."""
        self.job_order: hooks.Ordering[jobs.Job] = hooks.Ordering(
            fallback=lambda job: (job.creation_timestamp, job.uid, job.key), report=report
        )
        """Jobs within a queue. First non-zero wins; ties by creation time, then UID."""
        self.task_order: hooks.Ordering[pods.PodInfo] = hooks.Ordering(
            fallback=lambda pod: (pod.creation_timestamp, pod.uid, pod.key), report=report
        )
        """Pods within a job (and plain pods without a QueueSort plugin). First non-zero wins;
        ties by creation time, then UID."""
        self.queue_order: hooks.Ordering[queues.QueueInfo] = hooks.Ordering(
            fallback=lambda queue: queue.name, report=report
        )
        """Queues, asked again after every job (shares move). First non-zero wins; ties by
        name."""
        self.predicates = hooks.NodePredicates(report=report)
        """Extra vectorised filters after the Filter plugins. All must agree, row by row."""
        self.node_order = hooks.NodeScores(report=report)
        """Extra vectorised scores added to the Score plugins' total. Summed."""
        self.allocated: hooks.Events[[jobs.Event]] = hooks.Events(
            report=report, failed=self._handler_failed
        )
        """Allocate event handlers. All called, in registration order; one raising blocks the
        pod's queue (:attr:`blocked`)."""
        self.deallocated: hooks.Events[[jobs.Event]] = hooks.Events(
            report=report, failed=self._handler_failed
        )
        """Deallocate event handlers. All called, in registration order; one raising blocks
        the pod's queue."""
        self.job_valid: hooks.AllAgree[[jobs.Job]] = hooks.AllAgree(report=report)
        """May the job be tried at all (e.g. enough pods exist)? All must agree; the first
        non-``SUCCESS`` status is the group's reason."""
        self.job_ready: hooks.AllAgree[[jobs.Job]] = hooks.AllAgree(report=report)
        """Is what the session placed for the job enough to commit (quorum)? All must agree;
        none registered means ready."""
        self.job_pipelined: hooks.AllAgree[[jobs.Job]] = hooks.AllAgree(report=report)
        """Is the job ready counting pipelined pods? All must agree."""
        self.job_starving: hooks.AnyTrue[[jobs.Job]] = hooks.AnyTrue(report=report)
        """Has the job waited too long (backfill must not delay it)? Any says yes."""
        self.nominations: hooks.FirstWins[[jobs.Job], collections.abc.Mapping[str, str]] = (
            hooks.FirstWins(report=report)
        )
        """Where a starving job's pods wait for room to free (pod key -> node), for backfill
        to nominate them there. The first registered callback's answer; ``None`` when none."""
        self.queue_overused: hooks.AnyTrue[[queues.QueueInfo]] = hooks.AnyTrue(
            report=report, failed=self._check_failed
        )
        """Is the queue over its share (skip it this round)? Any says yes; one raising says
        yes and blocks the queue (:attr:`blocked`)."""
        self.allocatable: hooks.AllAgree[[queues.QueueInfo, pods.PodInfo]] = hooks.AllAgree(
            report=report
        )
        """May the queue take this pod now (limits, shares)? All must agree; the first
        non-``SUCCESS`` status is the pod's reason."""
        self.can_reclaim: hooks.AllTrue[[jobs.Job]] = hooks.AllTrue(report=report)
        """May the job take capacity back from other queues at all (e.g. its queue is below
        its guarantee)? All must agree; asked before any victim is looked at."""
        self.reclaimable: hooks.AllTrue[[jobs.Job, pods.PodInfo]] = hooks.AllTrue(report=report)
        """May the reclaiming job evict this victim pod (of another queue)? All must agree."""
        self.preemptable: hooks.AllTrue[[jobs.Job, pods.PodInfo]] = hooks.AllTrue(report=report)
        """May the preempting job evict this victim pod (same queue)? All must agree."""
        self.revisit_at: list[collections.abc.Callable[[jobs.Job], float | None]] = []
        """When a waiting job's situation changes by time alone (e.g. the starvation guard's
        threshold passes): a job parked (:mod:`.parking`) wakes by the earliest answer."""
        self.reserved_credit: hooks.FirstWins[[pods.PodInfo], resources.ResourceList | None] = (
            hooks.FirstWins(report=report)
        )
        """Asked by a queue plugin about a pod its queue would refuse: how much of the pod's
        requests a reservation of the pod's own queue already holds for it (and so is counted
        in that queue already). A non-empty answer admits the pod on that reservation's room,
        and the pod is then placed only into it. The first registered callback answers;
        ``None`` (or nothing registered): no credit."""
        self.job_valid.add(self._job_not_blocked, plugin=FRAMEWORK)
        self.allocatable.add(self._pod_not_blocked, plugin=FRAMEWORK)

    def block(self, queue: str | None, reason: str) -> None:
        """Stop placement for ``queue`` (None: every queue) for the rest of the session."""
        self.blocked.setdefault(queue, reason)

    def _why_blocked(self, queue: str | None) -> str | None:
        return self.blocked.get(None) or (self.blocked.get(queue) if queue else None)

    def _job_not_blocked(self, job: jobs.Job) -> statuses.Status:
        why = self._why_blocked(job.queue)
        if why is None:
            return statuses.SUCCESS
        return statuses.new(statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, why)

    def _pod_not_blocked(self, queue: queues.QueueInfo, pod: pods.PodInfo) -> statuses.Status:
        why = self._why_blocked(queue.name)
        if why is None:
            return statuses.SUCCESS
        return statuses.new(statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, why)

    def _check_failed(self, plugin: str, exc: BaseException, args: tuple[object, ...]) -> None:
        queue = args[0] if args else None
        name = getattr(queue, "name", None)  # a QueueInfo
        name = name if isinstance(name, str) else None
        self.block(
            name,
            f"placement held: plugin {plugin} failed to check queue {name} "
            f"({type(exc).__name__}: {exc})",
        )

    def _handler_failed(self, plugin: str, exc: BaseException, args: tuple[object, ...]) -> None:
        event = args[0] if args else None
        pod = event.pod if isinstance(event, jobs.Event) else None
        queue = pod.queue if pod is not None else None
        self.block(
            queue,
            f"placement held: plugin {plugin} failed to account for "
            f"{pod.key if pod is not None else 'a pod'} ({type(exc).__name__}: {exc})",
        )


class Session:
    """One cycle's state. Built by :func:`open_session`; ended by :func:`close_session`."""

    def __init__(
        self, snapshot: snapshots.Snapshot, *, framework: runtime.Framework, session_id: str
    ) -> None:
        self.id = session_id
        self.snapshot = snapshot
        self.nodes = snapshot.nodes
        """The session's node table (statements change it; the snapshot's own copy)."""
        self.placements = placements.Placements(snapshot, nodes=snapshot.nodes)
        """Which pods are on which node, statements included (for pod-to-pod constraints)."""
        self.framework = framework
        self.recorder = decisions.DecisionRecorder()
        self.hooks = SessionHooks(report=framework.report)
        self.jobs: dict[ids.PodGroupKey, jobs.Job] = {}
        """Jobs with pods to try, by group key."""
        self.plain: list[pods.PodInfo] = []
        """Pending pods with neither group nor queue, by key (default placement)."""
        self.placed: dict[ids.PodKey, str] = {}
        """Pods bound by a committed statement this session -> node."""
        self.pod_reasons: dict[str, str] = {}
        self.group_reasons: dict[str, str] = {}
        self.action_seconds: dict[str, float] = {}
        self.queue_statuses: dict[str, decisions.QueueStatusSummary] = {}
        """What a queue plugin publishes at session close, by queue name (into the result)."""
        self.attempt_seconds: list[float] = []
        self.parked: collections.abc.Mapping[str, parking.Parked] = types.MappingProxyType({})
        """Jobs left out of this session, parked with their reasons (:mod:`.parking`)."""
        self.lines: dict[str, tuple[str, ...]] = {}
        """Per queue, its jobs left pending in job order (set at close)."""
        self.pending: collections.abc.Sequence[pods.PodInfo] = snapshot.pending
        """The snapshot's pending pods but the parked jobs' (those this session is about)."""
        self._job_of: dict[ids.PodKey, jobs.Job] = {}
        self._vectors: dict[ids.PodKey, npt.NDArray[np.int64]] = {}
        self.closed = False

    # Registrars (KAI / Volcano names) ---------------------------------------------------------
    def add_job_order_fn(
        self, fn: collections.abc.Callable[[jobs.Job, jobs.Job], int], *, plugin: str
    ) -> None:
        self.hooks.job_order.add(fn, plugin=plugin)

    def add_task_order_fn(
        self, fn: collections.abc.Callable[[pods.PodInfo, pods.PodInfo], int], *, plugin: str
    ) -> None:
        self.hooks.task_order.add(fn, plugin=plugin)

    def add_queue_order_fn(
        self,
        fn: collections.abc.Callable[[queues.QueueInfo, queues.QueueInfo], int],
        *,
        plugin: str,
    ) -> None:
        self.hooks.queue_order.add(fn, plugin=plugin)

    def add_node_order_fn(self, fn: hooks.NodeScorer, *, plugin: str) -> None:
        self.hooks.node_order.add(fn, plugin=plugin)

    def add_predicate_fn(self, fn: hooks.NodePredicate, *, plugin: str) -> None:
        self.hooks.predicates.add(fn, plugin=plugin)

    def add_event_handler(
        self,
        *,
        plugin: str,
        allocate: collections.abc.Callable[[jobs.Event], None] | None = None,
        deallocate: collections.abc.Callable[[jobs.Event], None] | None = None,
    ) -> None:
        if allocate is not None:
            self.hooks.allocated.add(allocate, plugin=plugin)
        if deallocate is not None:
            self.hooks.deallocated.add(deallocate, plugin=plugin)

    def add_job_valid_fn(
        self, fn: collections.abc.Callable[[jobs.Job], statuses.Status], *, plugin: str
    ) -> None:
        self.hooks.job_valid.add(fn, plugin=plugin)

    def add_job_ready_fn(
        self, fn: collections.abc.Callable[[jobs.Job], statuses.Status], *, plugin: str
    ) -> None:
        self.hooks.job_ready.add(fn, plugin=plugin)

    def add_job_pipelined_fn(
        self, fn: collections.abc.Callable[[jobs.Job], statuses.Status], *, plugin: str
    ) -> None:
        self.hooks.job_pipelined.add(fn, plugin=plugin)

    # For actions -------------------------------------------------------------------------------
    def statement(self) -> statements.Statement:
        """A new transaction over this session (use as a context manager)."""
        return statements.Statement(self)

    def place(self, pod: pods.PodInfo) -> runtime.Attempt:
        """One scheduling attempt for ``pod`` over the session's nodes (nothing is changed)."""
        started = time.perf_counter()
        attempt = self.framework.find_node(
            pod,
            nodes=self.nodes,
            predicates=self.hooks.predicates,
            node_scores=self.hooks.node_order,
        )
        self.attempt_seconds.append(time.perf_counter() - started)
        return attempt

    def job_of(self, pod: pods.PodInfo) -> jobs.Job | None:
        """The job ``pod`` is a pending member of, if any."""
        return self._job_of.get(pod.key)

    def ordered_queues(self) -> list[queues.QueueInfo]:
        """The queues that have jobs this session, in queue order."""
        known = self.snapshot.queues
        names = {job.queue for job in self.jobs.values()}
        return self.hooks.queue_order.sorted(known[n] for n in names if n in known)

    def ordered_jobs(self, queue: str) -> list[jobs.Job]:
        """The queue's jobs, in job order."""
        return self.hooks.job_order.sorted(j for j in self.jobs.values() if j.queue == queue)

    def ordered_tasks(self, job: jobs.Job) -> list[pods.PodInfo]:
        """The job's pending pods, in task order."""
        return self.hooks.task_order.sorted(job.pending)

    def ordered_plain(self) -> list[pods.PodInfo]:
        """Plain pods in QueueSort order (task order without a QueueSort plugin)."""
        return self.framework.sort_plain(self.plain, fallback=self.hooks.task_order)

    def vector(self, pod: pods.PodInfo) -> npt.NDArray[np.int64]:
        """``pod``'s requests over the node table's columns (cached for the session)."""
        vec = self._vectors.get(pod.key)
        if vec is None:
            vec = self._vectors[pod.key] = self.nodes.vector(pod.requests)
        return vec

    def reject_pod(self, pod: pods.PodInfo, *, reason: str) -> None:
        """``pod`` stays pending this cycle because of ``reason`` (the last one given wins)."""
        self.pod_reasons[pod.key] = reason

    def reject_job(self, job: jobs.Job, *, reason: str) -> None:
        """``job`` stays pending because of ``reason``; its pods without a reason of their own
        get (or keep following) ``pod group <key>: <reason>``."""
        self.group_reasons[job.key] = reason
        derived = f"pod group {job.key}: "
        for pod in job.pending:
            if pod.key in self.placed:
                continue
            current = self.pod_reasons.get(pod.key)
            if current is None or current.startswith(derived):
                self.pod_reasons[pod.key] = derived + reason


def _awaiting_reason(pod: pods.PodInfo) -> str:
    if pod.group_error:
        return f"cannot derive its group from its owners: {pod.group_error}"
    return "waiting for Berth to derive its group from its owners"


def open_session(
    snapshot: snapshots.Snapshot,
    *,
    framework: runtime.Framework,
    session_id: str | None = None,
    parked: collections.abc.Mapping[str, parking.Parked] | None = None,
) -> Session:
    """Open a session over ``snapshot``: jobs and plain pods built, session plugins opened.
    The groups in ``parked`` are left out (they keep their reasons)."""
    session = Session(
        snapshot, framework=framework, session_id=session_id or f"s{next(_session_ids)}"
    )
    if parked:
        session.parked = parked
    framework.begin_session()
    framework.handle.attach(snapshot, recorder=session.recorder, placements=session.placements)
    members: dict[ids.PodGroupKey, list[pods.PodInfo]] = {}
    left_out = session.parked
    pending = (
        [p for p in snapshot.pending if p.pod_group not in left_out]
        if left_out
        else snapshot.pending
    )
    session.pending = pending
    for pod in pending:
        if pod.awaiting_group:
            session.reject_pod(pod, reason=_awaiting_reason(pod))
        elif pod.pod_group is None:
            # Neither group nor queue (a queue alone makes an implicit group of one).
            session.plain.append(pod)
        elif pod.pod_group in snapshot.pod_groups:
            members.setdefault(pod.pod_group, []).append(pod)
        else:
            session.reject_pod(pod, reason=f"waiting for PodGroup {pod.pod_group} to exist")
    for key in sorted(members):
        job = jobs.Job(snapshot.pod_groups[key], pending=members[key])
        session.jobs[key] = job
        for pod in job.pending:
            session._job_of[pod.key] = job
    for pod in snapshot.gated:
        gates = ", ".join(pod.scheduling_gates)
        session.reject_pod(pod, reason=f"waiting for scheduling gates to be removed: {gates}")
    logger.debug(
        "session %s opened: %d nodes, %d jobs, %d plain pods",
        session.id,
        len(session.nodes),
        len(session.jobs),
        len(session.plain),
    )
    framework.run_session_open(session)
    return session


def close_session(session: Session) -> decisions.CycleResult:
    """Close ``session``: plugins closed, reasons recorded, the handle detached; the result."""
    if session.closed:
        raise RuntimeError(f"session {session.id} is already closed")
    framework = session.framework
    try:
        framework.run_session_close(session)
    finally:
        session.closed = True
        framework.handle.detach()
    left_out = session.parked
    for pod in session.pending:
        if pod.key not in session.placed and pod.key not in session.pod_reasons:
            session.pod_reasons[pod.key] = decisions.NOT_TRIED
    recorder = session.recorder
    for key in sorted(session.group_reasons):
        job = session.jobs.get(typing.cast("ids.PodGroupKey", key))
        if job is not None and job.group.implicit and any(p.reserve for p in job.pending):
            continue  # a reserve pod's group of one: its Reservation gets the pod's reason
        recorder.record(
            decisions.Unschedulable(
                subject=decisions.Subject.GROUP, key=key, reason=session.group_reasons[key]
            )
        )
    for key in sorted(session.pod_reasons):
        reason = session.pod_reasons[key]
        waiting = session.snapshot.pods.get(key)
        if waiting is not None and waiting.reserve and waiting.reservation is not None:
            # An in-memory reserve pod is no pod in the API: the reason is its Reservation's
            # (without the name of the group of one it forms).
            subject, key_out = decisions.Subject.RESERVATION, str(waiting.reservation)
            reason = reason.removeprefix(f"pod group {waiting.pod_group}: ")
        else:
            subject, key_out = decisions.Subject.POD, key
        recorder.record(decisions.Unschedulable(subject=subject, key=key_out, reason=reason))
    in_line = session.lines = _waiting_in_line(session)
    pod_reasons: collections.abc.Mapping[str, str]
    group_reasons: collections.abc.Mapping[str, str]
    lines: collections.abc.Mapping[str, tuple[str, ...]]
    if left_out:
        # Parked jobs keep their reasons (the sink was told them when they were parked); with
        # a long backlog, merging them costs more than a cycle, so readers pay on first use.
        kept = dict(left_out)
        own_pods, own_groups = dict(session.pod_reasons), dict(session.group_reasons)
        pod_reasons = parking.Lazy(lambda: _merged(own_pods, parking.carried_reasons(kept)[0]))
        group_reasons = parking.Lazy(lambda: _merged(own_groups, parking.carried_reasons(kept)[1]))
        lines = parking.Lazy(lambda: _with_parked(in_line, kept))
    else:
        pod_reasons = types.MappingProxyType(dict(sorted(session.pod_reasons.items())))
        group_reasons = types.MappingProxyType(dict(sorted(session.group_reasons.items())))
        lines = types.MappingProxyType(in_line)
    errors, plugin_seconds = framework.end_session()
    return decisions.CycleResult(
        session_id=session.id,
        decisions=recorder.decisions(),
        pod_reasons=pod_reasons,
        group_reasons=group_reasons,
        action_seconds=types.MappingProxyType(dict(session.action_seconds)),
        plugin_seconds=types.MappingProxyType(plugin_seconds),
        attempt_seconds=tuple(session.attempt_seconds),
        errors=errors,
        queues=types.MappingProxyType(dict(sorted(session.queue_statuses.items()))),
        waiting=lines,
    )


def _merged(own: dict[str, str], kept: dict[str, str]) -> dict[str, str]:
    return dict(sorted({**kept, **own}.items()))


def _with_parked(
    in_line: dict[str, tuple[str, ...]], parked: collections.abc.Mapping[str, parking.Parked]
) -> dict[str, tuple[str, ...]]:
    """The lines with parked jobs after the session's own (their turn comes once they wake),
    in the order they stood in when parked."""
    extra: dict[str, list[tuple[tuple[int, int], str]]] = {}
    for key, entry in parked.items():
        extra.setdefault(entry.queue, []).append((entry.rank, key))
    out = dict(in_line)
    for queue in sorted(extra):
        out[queue] = out.get(queue, ()) + tuple(key for _, key in sorted(extra[queue]))
    return out


def _waiting_in_line(session: Session) -> dict[str, tuple[str, ...]]:
    """Per queue, the jobs that stayed pending (they have a reason), in job order."""
    names = sorted({job.queue for job in session.jobs.values()})
    out: dict[str, tuple[str, ...]] = {}
    for name in names:
        line = tuple(
            str(job.key) for job in session.ordered_jobs(name) if job.key in session.group_reasons
        )
        if line:
            out[name] = line
    return out
