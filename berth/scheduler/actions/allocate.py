"""allocate: place pending pods — jobs that go first, then plain pods, then jobs queue by queue.

The first action of every session (KAI's ``allocate``):

1. Jobs a plugin says go first (``session.hooks.job_first``) are placed first, through the job
   path below restricted to them. The Reservation plugin says so of its reserve pods, so a
   Reservation applied together with its owners is placed before they are tried and they go
   into it (as in Koordinator, which schedules reservations first).
2. Plain pods (neither PodGroup nor queue) bypass batch logic: each is placed on its own, in
   QueueSort order (priority, then creation time, with the in-tree profile), and committed at
   once. They go before the other jobs because their usage reduces what queues can use.
3. Jobs: the queue that goes first (``session.hooks.queue_order``, asked again after every job,
   since shares move) gives its next job (``job_order``); the job's pods are tried in
   ``task_order`` inside one statement. The statement commits only when ``job_ready`` says the
   job is ready (a gang's quorum); otherwise everything it tentatively took is rolled back and
   the group gets ``"<job_ready reason>; <first failing pod's reason>"``.

A job some plugin wants in one part of the cluster (``job_scopes``: a topology domain) is tried
in each scope of its plan in turn, best first, inside one statement rolled back between tries;
the first try that makes it ready commits (:mod:`berth.scheduler.framework.scopes`).

A session with a placement limit (:attr:`Session.placement_limit`, the live operator's
``placements_per_cycle``) stops once it placed that many pods, between two jobs or plain pods
(a gang is never split): the rest waits untried (no news) and the session is *cut short*, so
the loop runs the next one at once. Bindings of the first pods of a burst of thousands then go
out while the rest is placed, instead of after all of them (issue #30).

A job stops trying its pods as soon as its quorum is out of reach (placed pods plus untried
ones fall below ``minMember``): that is what keeps a 1000-pod gang that does not fit cheap.

Jobs of one equivalence class (:mod:`~berth.scheduler.framework.equivalence`: same queue,
priority, quorum and pod shapes) are tried once: when one does not fit, the rest of its class
stays pending with its reasons, since nothing allocate does frees room or shares. Work a
plugin judges by more than its shape (pod affinity, spread, host ports, reservations) has no
class, and each of its pods gets its own attempt and its own reason.
"""

from __future__ import annotations

import collections
import collections.abc
import logging
import typing

from berth.api import keys
from berth.scheduler.framework import (
    equivalence,
    jobs,
    reasons,
    scopes,
    sessions,
    statements,
    statuses,
)
from berth.util import suggestions

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import pods, queues

__all__ = ["NAME", "Allocate", "new"]

NAME = "allocate"

logger = logging.getLogger(__name__)

_ClassFailure = tuple[reasons.Reason, tuple[reasons.Reason | None, ...]]
"""How the first job of a class that did not fit stayed pending: its group's and its pods'
reasons (in task order)."""


class Allocate:
    """The allocate action; see the module docstring."""

    name = NAME

    def __init__(self) -> None:
        # Classes that did not fit this execute -> the first one's group and pod reasons.
        self._failed: dict[equivalence.ClassKey, _ClassFailure] = {}

    def execute(self, session: sessions.Session) -> None:
        self._failed = {}
        try:
            self._execute(session)
        finally:
            self._failed = {}

    def _execute(self, session: sessions.Session) -> None:
        logger.debug(
            "Enter allocate (session %s): %d jobs, %d plain pods",
            session.id,
            len(session.jobs),
            len(session.plain),
        )
        placed_before = len(session.placed)
        first = session.hooks.job_first
        early = [job for job in session.jobs.values() if first(job)]
        if early:
            self._place_jobs(session, early)
        self._place_plain(session)
        placed_first = {job.key for job in early}
        self._place_jobs(
            session, [job for job in session.jobs.values() if job.key not in placed_first]
        )
        logger.debug(
            "Leave allocate (session %s): %d pods placed",
            session.id,
            len(session.placed) - placed_before,
        )

    # Plain pods ---------------------------------------------------------------------------------
    def _place_plain(self, session: sessions.Session) -> None:
        framework = session.framework
        for pod in session.ordered_plain():
            if _stop_at_limit(session):
                return
            admitted = framework.run_pre_enqueue(pod)
            if not admitted.is_success():
                session.reject_pod(pod, reason=admitted.reason())
                continue
            attempt = session.place(pod)
            if attempt.row is None:
                session.reject_pod(pod, reason=attempt.status.reason())
                continue
            with session.statement() as stmt:
                status = stmt.allocate(pod, attempt.row, state=attempt.state)
                if status.is_success():
                    stmt.commit()
                else:
                    # WAIT has nothing to wait for without a job: the pod stays pending.
                    session.reject_pod(pod, reason=status.reason())

    # Jobs -------------------------------------------------------------------------------------
    def _place_jobs(self, session: sessions.Session, candidates: list[jobs.Job]) -> None:
        known = session.snapshot.queues
        grouped: dict[str, list[jobs.Job]] = {}
        for job in candidates:
            if job.queue not in known:
                session.reject_job(
                    job,
                    reason=queue_missing(
                        job.queue, known=[keys.DEFAULT_QUEUE, *session.snapshot.queues]
                    ),
                )
            else:
                grouped.setdefault(job.queue, []).append(job)
        by_queue: dict[str, collections.deque[jobs.Job]] = {}
        for info in session.hooks.queue_order.sorted(known[name] for name in grouped):
            ordered = session.hooks.job_order.sorted(grouped[info.name])
            by_queue[info.name] = collections.deque(ordered)
        order = session.hooks.queue_order
        while by_queue:
            if _stop_at_limit(session):
                return
            queue = order.first(known[name] for name in by_queue)
            assert queue is not None
            waiting = by_queue[queue.name]
            if session.hooks.queue_overused(queue):
                for job in waiting:
                    session.reject_job(job, reason=over_share(queue.name))
                del by_queue[queue.name]
                continue
            job = waiting.popleft()
            if not waiting:
                del by_queue[queue.name]
            self._place_job(session, job, queue=queue)

    def _place_job(
        self, session: sessions.Session, job: jobs.Job, *, queue: queues.QueueInfo
    ) -> None:
        if job.group.invalid is not None:
            session.reject_job(job, reason=invalid_group(job.group.invalid))
            return
        valid = session.hooks.job_valid(job)
        if not valid.is_success():
            session.reject_job(job, reason=valid.reason())
            return
        klass: equivalence.ClassKey | None = None
        if self._failed:  # the key costs something: only once a class failed
            klass = equivalence.class_of(job, session=session)
            seen = self._failed.get(klass) if klass is not None else None
            if seen is not None:
                _same_as_class(session, job, seen)
                return
        self._place_members(session, job, queue=queue)
        why = session.group_why.get(job.key)
        if why is None or job.allocated:
            return
        if klass is None:
            klass = equivalence.class_of(job, session=session)
        if klass is not None:
            ordered = session.ordered_tasks(job)
            self._failed[klass] = (why, tuple(session.pod_why.get(p.key) for p in ordered))

    def _place_members(
        self, session: sessions.Session, job: jobs.Job, *, queue: queues.QueueInfo
    ) -> None:
        framework = session.framework
        tasks: list[pods.PodInfo] = []
        for pod in session.ordered_tasks(job):
            admitted = framework.run_pre_enqueue(pod)
            if admitted.is_success():
                tasks.append(pod)
            else:
                session.reject_pod(pod, reason=admitted.reason())
        plan = session.hooks.job_scopes(job)
        with session.statement() as stmt:
            if plan is None:
                first_failure = self._try_tasks(session, stmt, job, tasks, queue=queue)
                ready = session.hooks.job_ready(job)
            else:
                first_failure, ready = self._try_scopes(
                    session, stmt, job, tasks, queue=queue, plan=plan
                )
            if not ready.is_success():
                stmt.discard()
                why = ready.reason()
                if first_failure is not None:
                    # A pod's group of one is no gang: what kept the pod out is the reason.
                    alone = job.group.implicit
                    why = first_failure if alone else why.followed_by(first_failure)
                session.reject_job(job, reason=why)
                return
            if len(stmt) == 0:
                stmt.discard()
                if first_failure is not None:
                    session.reject_job(job, reason=first_failure)
                return
            stmt.commit()
            if stmt.failure is not None:
                session.reject_job(job, reason=stmt.failure.reason())

    def _try_tasks(
        self,
        session: sessions.Session,
        stmt: statements.Statement,
        job: jobs.Job,
        tasks: list[pods.PodInfo],
        *,
        queue: queues.QueueInfo,
    ) -> reasons.Reason | None:
        """Try ``tasks`` in order inside ``stmt``; the first pod's failure, if any.

        A pod shaped like one that failed since the last placement gets that pod's reason
        without an attempt of its own: nothing changed that could judge it otherwise (a
        job of four identical replicas that do not fit costs one attempt, not four)."""
        first_failure: reasons.Reason | None = None
        failed: dict[collections.abc.Hashable, reasons.Reason] = {}
        for index, pod in enumerate(tasks):
            # A pod's shape is asked only once one failed: most pods of a job that fits place.
            asked = bool(failed)
            shape = equivalence.shape_of(pod, session=session) if asked else None
            reason = failed.get(shape) if shape is not None else None
            if reason is None:
                reason = self._try(session, stmt, pod, queue=queue)
                if reason is None:
                    failed.clear()  # the nodes changed
                    continue
                if not asked:
                    shape = equivalence.shape_of(pod, session=session)
                if shape is not None:
                    failed[shape] = reason
            session.reject_pod(pod, reason=reason)
            first_failure = first_failure or reason
            untried = len(tasks) - index - 1
            if job.occupied() + untried < job.group.min_member:
                break  # quorum is out of reach: stop spending attempts on this job
        return first_failure

    def _try_scopes(
        self,
        session: sessions.Session,
        stmt: statements.Statement,
        job: jobs.Job,
        tasks: list[pods.PodInfo],
        *,
        queue: queues.QueueInfo,
        plan: scopes.ScopePlan,
    ) -> tuple[reasons.Reason | None, statuses.Status]:
        """Try the job in each scope of ``plan`` (then anywhere, if it falls back) until it is
        ready; what the last try failed on, and the readiness (the plan's reason when no
        scope worked)."""
        checkpoint = stmt.checkpoint()
        first_failure: reasons.Reason | None = None
        tries: list[scopes.Scope | None] = list(plan.scopes[: scopes.MAX_TRIES])
        if not plan.required:
            tries.append(None)
        for scope in tries:
            session.scope = scope
            try:
                failure = self._try_tasks(session, stmt, job, tasks, queue=queue)
            finally:
                session.scope = None
            ready = session.hooks.job_ready(job)
            if ready.is_success():
                for key in job.allocated:  # placed in this try: earlier tries' reasons are stale
                    session.pod_why.pop(key, None)
                return failure, ready
            first_failure = first_failure or failure
            stmt.rollback(checkpoint)
        if not plan.required:
            return first_failure, ready
        # The plan's obstacle is the kind (no domain holds the gang); what the last try met
        # only explains it, so the plan's code stays.
        why = plan.reason if first_failure is None else plan.reason.explained_by(first_failure)
        return None, statuses.rejecting(statuses.Code.UNSCHEDULABLE, why)

    @staticmethod
    def _try(
        session: sessions.Session,
        stmt: statements.Statement,
        pod: pods.PodInfo,
        *,
        queue: queues.QueueInfo,
    ) -> reasons.Reason | None:
        """Place ``pod`` in ``stmt``; ``None`` on success, else why not."""
        admit = session.hooks.allocatable(queue, pod)
        if not admit.is_success():
            return admit.reason()
        attempt = session.place(pod)
        if attempt.row is None:
            return attempt.status.reason()
        status: statuses.Status = stmt.allocate(pod, attempt.row, state=attempt.state)
        if status.is_success() or status.is_wait():
            return None
        return status.reason()


def _stop_at_limit(session: sessions.Session) -> bool:
    """Whether the session placed its limit: then whatever is left is untried, and the session
    is cut short (module docstring)."""
    if session.full:
        session.cut_short = True
    return session.full


def queue_missing(queue: str, *, known: collections.abc.Iterable[str] = ()) -> reasons.Reason:
    """Why a job of a queue that does not exist waits (naming the closest of the ``known``
    queues, if one is close: a typo)."""
    best = suggestions.did_you_mean(queue, known)
    if best is None:
        return reasons.new(
            reasons.ReasonCode.QUEUE_NOT_FOUND, f"queue {queue} does not exist", queue=queue
        )
    return reasons.new(
        reasons.ReasonCode.QUEUE_NOT_FOUND,
        f"queue {queue} does not exist (did you mean {best}?)",
        queue=queue,
        suggestion=best,
    )


def over_share(queue: str) -> reasons.Reason:
    """Why the jobs of a queue a plugin calls overused wait this round."""
    return reasons.new(
        reasons.ReasonCode.QUEUE_OVER_SHARE, f"queue {queue} is over its share", queue=queue
    )


def invalid_group(problem: str) -> reasons.Reason:
    """Why a PodGroup whose spec cannot be used waits (``problem`` says what is wrong)."""
    return reasons.new(reasons.ReasonCode.INVALID, problem)


def _same_as_class(session: sessions.Session, job: jobs.Job, seen: _ClassFailure) -> None:
    """``job`` stays pending as the first of its class did: its reasons, pod by pod."""
    reason, pod_reasons = seen
    session.reject_job(job, reason=reason)
    for pod, why in zip(session.ordered_tasks(job), pod_reasons, strict=False):
        if why is not None:
            session.reject_pod(pod, reason=why)


def new() -> Allocate:
    """Build the action."""
    return Allocate()
