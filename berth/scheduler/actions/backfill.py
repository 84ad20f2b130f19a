"""backfill: nominate nodes for starving jobs, so the capacity they wait for is seen held.

Runs right after allocate. A job that allocate could not place and that the session calls
starving (``job_starving``; with the in-tree profile, the Proportion plugin's starvation guard:
waiting longer than ``starvationThresholdSeconds``) gets its pods, up to quorum, *pipelined*
onto the room it can use now — with the in-tree profile, the capacity the guard holds for it
as running work frees it —, in one statement that commits
:class:`~berth.scheduler.framework.decisions.NominatePod` decisions (the pods'
``status.nominatedNodeName``) and no binding. The nominated room then counts as taken for the
rest of the session (reclaim and preempt do not hand it to anyone else), and the group's
reason says how far the guard got::

    starving for 312s: holding room for 20/64 pods on 3 nodes as they free

Once the held room covers the quorum, allocate places the job whole in a later cycle.
Smaller work is never delayed by a job that is not starving, nor by room the starving job
cannot use or does not need.
"""

from __future__ import annotations

import logging
import typing

from berth.scheduler.actions import solvers
from berth.scheduler.framework import jobs, sessions

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import pods

__all__ = ["NAME", "Backfill", "new", "starving_reason"]

NAME = "backfill"

logger = logging.getLogger(__name__)


def starving_reason(*, waited: float, held: int, needed: int, nodes: int) -> str:
    """The group's reason while the guard holds room for it."""
    where = "node" if nodes == 1 else "nodes"
    return (
        f"starving for {int(waited)}s: holding room for {held}/{needed} pods "
        f"on {nodes} {where} as they free"
    )


class Backfill:
    """The backfill action; see the module docstring."""

    name = NAME

    def execute(self, session: sessions.Session) -> None:
        hooks = session.hooks
        nominated = 0
        starving: list[jobs.Job] = []
        if len(hooks.job_starving):
            starving = [
                job
                for job in session.jobs.values()
                if solvers.needs_room(job) and not job.pipelined and hooks.job_starving(job)
            ]
        logger.info("Enter backfill (session %s): %d starving jobs", session.id, len(starving))
        if starving:
            wanted = {job.key for job in starving}
            for queue in session.ordered_queues():
                for job in session.ordered_jobs(queue.name):
                    if job.key in wanted and hooks.job_valid(job).is_success():
                        nominated += self._nominate(session, job)
        logger.info("Leave backfill (session %s): %d pods nominated", session.id, nominated)

    @staticmethod
    def _nominate(session: sessions.Session, job: jobs.Job) -> int:
        needed = job.group.min_member - job.occupied()
        tasks: list[pods.PodInfo] = solvers.pending_tasks(session, job)
        failed: set[tuple[typing.Hashable, typing.Hashable]] = set()
        with session.statement() as stmt:
            for pod in tasks:
                if len(job.pipelined) >= needed:
                    break
                shape = (pod.signature, pod.requests)
                if shape in failed:
                    continue
                attempt = session.place(pod)
                if attempt.row is None:
                    failed.add(shape)
                    continue
                stmt.pipeline(pod, attempt.row)
            count = len(job.pipelined)
            nodes = len(set(job.pipelined.values()))
            if count:
                stmt.commit()
            else:
                stmt.discard()
        session.reject_job(
            job,
            reason=starving_reason(
                waited=session.snapshot.now - job.creation_timestamp,
                held=count,
                needed=job.group.min_member,
                nodes=nodes,
            ),
        )
        return count


def new() -> Backfill:
    """Build the action."""
    return Backfill()
