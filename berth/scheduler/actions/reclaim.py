"""reclaim: a queue below its guarantee or its fair share takes capacity back from others.

Runs after allocate and backfill (KAI's and Volcano's ``reclaim``). For every job still below
quorum, queue by queue in queue order and job by job in job order:

1. the job must be valid (``job_valid``) and allowed to reclaim at all (``can_reclaim``: with
   the in-tree profile, its quorum fits within its queue's — or an ancestor's — guarantee, or
   its queue stays within its weighted fair share with it);
2. the candidates are the running pods the ``reclaimable`` hook accepts (with the in-tree
   profile, other queues' pods; for a starving job whose held nodes drained past
   ``drainPreemptSeconds``, whatever runs on those nodes); victims go cheapest first: lowest
   queue priority, then lowest pod priority, then least work lost (the pod that started
   last, then the newest), and gangs stay whole
   (:func:`~berth.scheduler.actions.solvers.victim_units`);
3. a victim is taken only while the ``reclaimable`` hook accepts it (with the in-tree profile:
   its queue is ``reclaimable`` and stays at or above its share — or guarantee — without it;
   docs/fair-share.md has the rules), and nothing is evicted unless the job's quorum then
   fits (:func:`~berth.scheduler.actions.solvers.solve`); the statement then commits the
   evictions and the job's bindings together.

Jobs backfill nominated nodes for (starving jobs: the starvation guard's nominations) are
not left out: reclaim goes first. Their nominations are taken back while it runs
(:meth:`Statement.withdraw <berth.scheduler.framework.statements.Statement.withdraw>`: they
would otherwise count as their queues' usage and fill the nodes), each such job is searched
for like any other, and the nominations stand again, as backfill made them, for the jobs it
did not place. So a starving job whose queue is below its fair share (or guarantee) takes it
back like any other, and the guard holds room only for what reclaim could not free (a big
gang behind a stream of small jobs of queues within their shares).

A job fewer of whose pods than its quorum needs fit the largest node even emptied
(:meth:`Session.too_big_for_any_node
<berth.scheduler.framework.sessions.Session.too_big_for_any_node>`)
is not searched for: no eviction frees more room than a node has.

A search that fails for a job is not repeated for the next jobs of the same queue asking for
the same pods (the same shapes, quorum and nodes held for them): they would fail the same
way, and a queue with a long backlog would otherwise cost one search per job per cycle.

Without any ``reclaimable`` or ``can_reclaim`` callback (no queue plugin enabled) there is no
policy saying who owes whom, and the action does nothing.
"""

from __future__ import annotations

import functools
import logging
import typing

from berth.scheduler.actions import solvers
from berth.scheduler.framework import sessions

if typing.TYPE_CHECKING:
    from berth.scheduler.framework import jobs
    from berth.scheduler.snapshot import pods, queues

__all__ = ["NAME", "Reclaim", "new"]

NAME = "reclaim"

logger = logging.getLogger(__name__)


class Reclaim:
    """The reclaim action; see the module docstring."""

    name = NAME

    def execute(self, session: sessions.Session) -> None:
        hooks = session.hooks
        waiting = [job for job in session.jobs.values() if solvers.needs_room(job)]
        logger.debug("Enter reclaim (session %s): %d jobs below quorum", session.id, len(waiting))
        evictions = 0
        if waiting and len(hooks.reclaimable) and len(hooks.can_reclaim):
            evictions = self._reclaim(session)
        logger.debug("Leave reclaim (session %s): %d pods evicted", session.id, evictions)

    def _reclaim(self, session: sessions.Session) -> int:
        hooks = session.hooks
        infos = session.snapshot.queues
        evicted = solvers.evicted_keys(session)
        before = len(evicted)

        def rank(pod: pods.PodInfo) -> solvers.Rank:
            info = infos.get(pod.queue) if pod.queue is not None else None
            priority = info.priority if info is not None else 0
            started = pod.start_time if pod.start_time is not None else pod.creation_timestamp
            return (priority, pod.priority, -started, -pod.creation_timestamp, pod.key)

        failed: set[tuple[typing.Hashable, ...]] = set()

        def attempt(job: jobs.Job, queue: queues.QueueInfo) -> None:
            """Reclaim for ``job``: its evictions and placements committed, or nothing."""
            nonlocal evicted
            # The cheap questions first: most jobs may not reclaim at all.
            if not hooks.can_reclaim(job):
                return
            if session.too_big_for_any_node(job):
                return  # eviction frees room on nodes, never more than a node has
            # A starving job's search also depends on the nodes held for it.
            shape = (*_shape(job), frozenset((hooks.nominations(job) or {}).values()))
            if shape in failed or not hooks.job_valid(job).is_success():
                return
            candidates = [pod for pod in session.running_pods() if pod.queue is not None]
            found = solvers.evict_for(
                session,
                candidates,
                job=job,
                queue=queue,
                evicted=evicted,
                rank=rank,
                allowed=functools.partial(hooks.reclaimable, job),
                reason=hooks.reclaim_reason(job) or _reason(job),
                doing="reclaim",
            )
            if found is solvers.Search.EVICTED:
                evicted = solvers.evicted_keys(session)
            elif found is solvers.Search.NOT_FOUND:
                failed.add(shape)  # a job of another window may still reclaim alike

        # Backfill nominated nodes for the starving jobs: reclaim goes first. Their
        # nominations are taken back while it searches (else they would count as their
        # queues' usage and fill the nodes), and stand again for the jobs it did not place.
        nominated = [job for job in session.jobs.values() if job.pipelined]
        with session.statement() as withdrawal:
            rows = session.nodes.index
            renominate = [
                (pod, rows[job.pipelined[pod.key]])
                for job in nominated
                for pod in job.pending
                if pod.key in job.pipelined
            ]
            for pod, _ in renominate:
                withdrawal.withdraw(pod)
            for queue in session.ordered_queues():
                for job in session.ordered_jobs(queue.name):
                    if solvers.needs_room(job):
                        attempt(job, queue)
            for pod, row in renominate:
                if pod.key not in session.placed:
                    withdrawal.pipeline(pod, row)
            withdrawal.commit()
        return len(evicted) - before


def _reason(job: jobs.Job) -> str:
    """What a victim is told when no plugin says on which promise its queue was reclaimed."""
    return f"reclaimed by queue {job.queue} for {job.group.title}"


def _shape(job: jobs.Job) -> tuple[typing.Hashable, ...]:
    """What a victim search for ``job`` depends on besides the cluster: its queue, quorum and
    the shapes of its pending pods."""
    return (
        job.queue,
        job.group.min_member - job.occupied(),
        tuple(sorted((repr(p.signature), tuple(sorted(p.requests.items()))) for p in job.pending)),
    )


def new() -> Reclaim:
    """Build the action."""
    return Reclaim()
