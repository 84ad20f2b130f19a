"""allocate: place pending pods — reserve pods, then plain pods, then jobs queue by queue.

The first action of every session (KAI's ``allocate``):

1. Reserve pods (the in-memory pods standing for Pending Reservations) go first, through
   the job path below restricted to them: a Reservation applied together with its owners is
   placed before they are tried, so they see it and go into it (as in Koordinator, which
   schedules reservations first).
2. Plain pods (neither PodGroup nor queue) bypass batch logic: each is placed on its own, in
   QueueSort order (priority, then creation time, with the in-tree profile), and committed at
   once. They go before the other jobs because their usage reduces what queues can use.
3. Jobs: the queue that goes first (``session.hooks.queue_order``, asked again after every job,
   since shares move) gives its next job (``job_order``); the job's pods are tried in
   ``task_order`` inside one statement. The statement commits only when ``job_ready`` says the
   job is ready (a gang's quorum); otherwise everything it tentatively took is rolled back and
   the group gets ``"<job_ready reason>; <first failing pod's reason>"``.

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
import logging
import typing

from berth.scheduler.framework import equivalence, jobs, sessions, statements, statuses

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import pods, queues

__all__ = ["NAME", "Allocate", "new"]

NAME = "allocate"

logger = logging.getLogger(__name__)


class Allocate:
    """The allocate action; see the module docstring."""

    name = NAME

    def __init__(self) -> None:
        # Classes that did not fit this execute -> the first one's group and pod reasons.
        self._failed: dict[equivalence.ClassKey, tuple[str, tuple[str, ...]]] = {}

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
        reserving = [job for job in session.jobs.values() if _reserves(job)]
        if reserving:
            self._place_jobs(session, reserving)
        self._place_plain(session)
        self._place_jobs(session, [job for job in session.jobs.values() if not _reserves(job)])
        logger.debug(
            "Leave allocate (session %s): %d pods placed",
            session.id,
            len(session.placed) - placed_before,
        )

    # Plain pods ---------------------------------------------------------------------------------
    def _place_plain(self, session: sessions.Session) -> None:
        framework = session.framework
        for pod in session.ordered_plain():
            admitted = framework.run_pre_enqueue(pod)
            if not admitted.is_success():
                session.reject_pod(pod, reason=admitted.message())
                continue
            attempt = session.place(pod)
            if attempt.row is None:
                session.reject_pod(pod, reason=attempt.status.message())
                continue
            with session.statement() as stmt:
                status = stmt.allocate(pod, attempt.row, state=attempt.state)
                if status.is_success():
                    stmt.commit()
                else:
                    # WAIT has nothing to wait for without a job: the pod stays pending.
                    session.reject_pod(pod, reason=status.message())

    # Jobs -------------------------------------------------------------------------------------
    def _place_jobs(self, session: sessions.Session, candidates: list[jobs.Job]) -> None:
        known = session.snapshot.queues
        grouped: dict[str, list[jobs.Job]] = {}
        for job in candidates:
            if job.queue not in known:
                session.reject_job(job, reason=f"queue {job.queue} does not exist")
            else:
                grouped.setdefault(job.queue, []).append(job)
        by_queue: dict[str, collections.deque[jobs.Job]] = {}
        for info in session.hooks.queue_order.sorted(known[name] for name in grouped):
            ordered = session.hooks.job_order.sorted(grouped[info.name])
            by_queue[info.name] = collections.deque(ordered)
        order = session.hooks.queue_order
        while by_queue:
            queue = order.first(known[name] for name in by_queue)
            assert queue is not None
            waiting = by_queue[queue.name]
            if session.hooks.queue_overused(queue):
                for job in waiting:
                    session.reject_job(job, reason=f"queue {queue.name} is over its share")
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
            session.reject_job(job, reason=job.group.invalid)
            return
        valid = session.hooks.job_valid(job)
        if not valid.is_success():
            session.reject_job(job, reason=valid.message())
            return
        klass: equivalence.ClassKey | None = None
        if self._failed:  # the key costs something: only once a class failed
            klass = equivalence.class_of(job, snapshot=session.snapshot)
            seen = self._failed.get(klass) if klass is not None else None
            if seen is not None:
                _same_as_class(session, job, seen)
                return
        self._place_members(session, job, queue=queue)
        if job.key not in session.group_reasons or job.allocated:
            return
        if klass is None:
            klass = equivalence.class_of(job, snapshot=session.snapshot)
        if klass is not None:
            ordered = session.ordered_tasks(job)
            self._failed[klass] = (
                session.group_reasons[job.key],
                tuple(session.pod_reasons.get(p.key, "") for p in ordered),
            )

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
                session.reject_pod(pod, reason=admitted.message())
        first_failure: str | None = None
        with session.statement() as stmt:
            for index, pod in enumerate(tasks):
                reason = self._try(session, stmt, pod, queue=queue)
                if reason is None:
                    continue
                session.reject_pod(pod, reason=reason)
                first_failure = first_failure or reason
                untried = len(tasks) - index - 1
                if job.occupied() + untried < job.group.min_member:
                    break  # quorum is out of reach: stop spending attempts on this job
            ready = session.hooks.job_ready(job)
            if not ready.is_success():
                stmt.discard()
                text = ready.message()
                if first_failure is not None:
                    text = f"{text}; {first_failure}"
                session.reject_job(job, reason=text)
                return
            if len(stmt) == 0:
                stmt.discard()
                if first_failure is not None:
                    session.reject_job(job, reason=first_failure)
                return
            stmt.commit()
            if stmt.failure is not None:
                session.reject_job(job, reason=stmt.failure.message())

    @staticmethod
    def _try(
        session: sessions.Session,
        stmt: statements.Statement,
        pod: pods.PodInfo,
        *,
        queue: queues.QueueInfo,
    ) -> str | None:
        """Place ``pod`` in ``stmt``; ``None`` on success, else why not."""
        admit = session.hooks.allocatable(queue, pod)
        if not admit.is_success():
            return admit.message()
        attempt = session.place(pod)
        if attempt.row is None:
            return attempt.status.message()
        status: statuses.Status = stmt.allocate(pod, attempt.row, state=attempt.state)
        if status.is_success() or status.is_wait():
            return None
        return status.message()


def _same_as_class(
    session: sessions.Session, job: jobs.Job, seen: tuple[str, tuple[str, ...]]
) -> None:
    """``job`` stays pending as the first of its class did: its reasons, pod by pod."""
    reason, pod_reasons = seen
    session.reject_job(job, reason=reason)
    for pod, why in zip(session.ordered_tasks(job), pod_reasons, strict=False):
        if why:
            session.reject_pod(pod, reason=why)


def _reserves(job: jobs.Job) -> bool:
    """Whether ``job`` is a Reservation's reserve pod (a group of one of its own)."""
    return any(pod.reserve for pod in job.pending)


def new() -> Allocate:
    """Build the action."""
    return Allocate()
