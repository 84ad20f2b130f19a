"""preempt: inside one queue, a higher-priority job evicts lower-priority work to fit.

Runs last (KAI's and Volcano's ``preempt``). For every job still below quorum, queue by queue
in queue order and job by job in job order:

1. the job must be valid (``job_valid``), none of its pending pods may have
   ``preemptionPolicy: Never`` (Kubernetes' admission copies it from the PriorityClass), and
   enough of them to reach its quorum must fit the largest node emptied
   (:meth:`Session.too_big_for_any_node
   <berth.scheduler.framework.sessions.Session.too_big_for_any_node>`: no eviction frees more
   room than a node has);
2. the candidates are the running pods of *the same queue*, of other groups, whose priority is
   below the job's — and, when the ``preempts_across_queues`` hook says so (the in-tree
   profile: the job's queue sets ``preemptAcrossQueues``), those of other queues too (the
   ``preemptable`` hook then decides: with the in-tree profile, only from a
   queue above its fair share, never below its guarantee); victims go lowest priority
   first, then newest, and gangs stay whole
   (:func:`~berth.scheduler.actions.solvers.victim_units`);
3. a victim is taken only while the ``preemptable`` hook accepts it (the Priority plugin:
   lower priority than the job), and nothing is evicted unless the job's quorum then fits
   (:func:`~berth.scheduler.actions.solvers.solve`); the statement then commits the
   evictions and the job's bindings together.

Staying inside the queue (unless the queue opts in) keeps preemption from moving capacity
between queues: that is reclaim's business, under the queues' guarantees and shares.
"""

from __future__ import annotations

import collections
import functools
import logging
import typing

from berth.scheduler.actions import solvers
from berth.scheduler.framework import sessions

if typing.TYPE_CHECKING:
    from berth.scheduler.framework import jobs
    from berth.scheduler.snapshot import pods

__all__ = ["NAME", "NEVER", "Preempt", "new"]

NAME = "preempt"
NEVER = "Never"
"""The ``preemptionPolicy`` of pods that never evict others."""

logger = logging.getLogger(__name__)


def _rank(pod: pods.PodInfo) -> solvers.Rank:
    return (pod.priority, -pod.creation_timestamp, pod.key)


class Preempt:
    """The preempt action; see the module docstring."""

    name = NAME

    def execute(self, session: sessions.Session) -> None:
        waiting = [job for job in session.jobs.values() if solvers.needs_room(job)]
        logger.debug("Enter preempt (session %s): %d jobs below quorum", session.id, len(waiting))
        evictions = self._preempt(session) if waiting else 0
        logger.debug("Leave preempt (session %s): %d pods evicted", session.id, evictions)

    def _preempt(self, session: sessions.Session) -> int:
        hooks = session.hooks
        evicted = solvers.evicted_keys(session)
        before = len(evicted)
        by_queue: dict[str, list[pods.PodInfo]] | None = None
        floor = session.snapshot.priority_floor
        for queue in session.ordered_queues():
            for job in session.ordered_jobs(queue.name):
                if not solvers.needs_room(job):
                    continue
                if floor is not None and job.priority <= floor:
                    continue  # no pod has a lower priority: no candidate, whatever runs
                if any(pod.preemption_policy == NEVER for pod in job.pending):
                    continue
                if session.too_big_for_any_node(job):
                    continue  # eviction frees room on nodes, never more than a node has
                if by_queue is None:
                    by_queue = collections.defaultdict(list)
                    for pod in session.running_pods():
                        if pod.queue is not None:
                            by_queue[pod.queue].append(pod)
                across = hooks.preempts_across_queues(job) is True
                pool = (
                    [p for name in sorted(by_queue) for p in by_queue[name]]
                    if across
                    else by_queue.get(job.queue, ())
                )
                candidates = [
                    pod for pod in pool if pod.priority < job.priority and pod.pod_group != job.key
                ]
                if not candidates or not hooks.job_valid(job).is_success():
                    continue
                if (
                    solvers.evict_for(
                        session,
                        candidates,
                        job=job,
                        queue=queue,
                        evicted=evicted,
                        rank=_rank,
                        allowed=functools.partial(hooks.preemptable, job),
                        reason=_reason(job, across=across),
                        doing="preempt",
                    )
                    is solvers.Search.EVICTED
                ):
                    evicted = solvers.evicted_keys(session)
        return len(evicted) - before


def new() -> Preempt:
    """Build the action."""
    return Preempt()


def _reason(job: jobs.Job, *, across: bool) -> str:
    """What a victim is told: the job that took the room, its priority, and its queue when
    the job's queue preempts across queues."""
    taker = f"preempted by {job.group.title} (priority {job.priority})"
    return f"{taker} of queue {job.queue}" if across else taker
