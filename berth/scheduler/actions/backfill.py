"""backfill: room for starving jobs first, then leftover capacity for what fairness held back.

Runs right after allocate, in two passes over the jobs still below quorum (queue order, then
job order):

1. **Starving jobs** (``job_starving``; with the in-tree profile, the Proportion plugin's
   starvation guard: waiting longer than ``starvationThresholdSeconds``) get their pods, up to
   quorum, *pipelined* onto the nodes ``nominations`` names for them (the guard's: nodes it
   keeps the freeing capacity of for the job), else onto room free now, in one statement
   that commits
   :class:`~berth.scheduler.framework.decisions.NominatePod` decisions (the pods'
   ``status.nominatedNodeName``) and no binding. The nominated room then counts as taken for
   the rest of the session (reclaim first takes the nominations back while it searches for
   the starving jobs, and lets them stand for the jobs it did not place), and the
   group's reason says how far the guard got, before why the job does not fit yet::

       starving for 312s: holding 8 nodes for 64/64 pods as they free, 24 nvidia.com/gpu
       idle meanwhile, expected in 2400s (run times: ...); gang needs ...

   Once the held room covers the quorum, allocate places the job whole in a later cycle.
2. **Leftovers**: a job whose quorum would fit in the free capacity is tried once more, now
   that every queue had its turn. Allocate tries queues in fair-share order, and a queue at
   its share is refused more while another queue below its own still waits; if that other
   queue's work then did not fit, its share would sit idle. Trying again here keeps the
   cluster work-conserving without letting anyone jump the fair order.

Smaller work is never delayed by a job that is not starving, nor by room the starving job
cannot use or does not need.
"""

from __future__ import annotations

import logging
import typing

import numpy as np
import numpy.typing as npt

from berth.scheduler.actions import solvers
from berth.scheduler.framework import jobs, reasons, sessions

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import pods, queues

__all__ = ["NAME", "Backfill", "new", "starving_reason"]

NAME = "backfill"

IntArray = npt.NDArray[np.int64]

logger = logging.getLogger(__name__)


def starving_reason(
    *,
    waited: float,
    held: int,
    needed: int,
    nodes: int,
    start: sessions.ExpectedStart | None = None,
    now: float = 0.0,
) -> str:
    """The group's reason while the guard holds room for it: how long it has waited, how many
    nodes are kept for it and for how many of the pods its quorum needs, and when it is
    expected to start there by which estimates (``start``, when the guard says)."""
    where, frees = ("node", "it frees") if nodes == 1 else ("nodes", "they free")
    text = (
        f"starving for {int(waited)}s: holding {nodes} {where} for {held}/{needed} pods as {frees}"
    )
    if start is None:
        return text
    if start.idle:
        text = f"{text}, {start.idle} idle meanwhile"
    if start.at is None:
        return f"{text} (no estimate of when: {start.basis})"
    left = max(0, round(start.at - now))
    return f"{text}, expected in {left}s ({start.basis})"


class Backfill:
    """The backfill action; see the module docstring."""

    name = NAME

    def __init__(self) -> None:
        self._free: IntArray | None = None  # free capacity summed, during one execute

    def execute(self, session: sessions.Session) -> None:
        hooks = session.hooks
        waiting = [job for job in session.jobs.values() if solvers.needs_room(job)]
        logger.debug("Enter backfill (session %s): %d jobs below quorum", session.id, len(waiting))
        nominated = placed = 0
        self._free = None
        if waiting:
            starving = {
                job.key for job in waiting if len(hooks.job_starving) and hooks.job_starving(job)
            }
            for queue in session.ordered_queues():
                for job in session.ordered_jobs(queue.name):
                    if not solvers.needs_room(job) or job.pipelined:
                        continue
                    if not hooks.job_valid(job).is_success():
                        continue
                    if job.key in starving:
                        nominated += self._nominate(session, job)
                    else:
                        placed += self._fill(session, job, queue=queue)
        logger.debug(
            "Leave backfill (session %s): %d pods nominated, %d placed",
            session.id,
            nominated,
            placed,
        )

    def _nominate(self, session: sessions.Session, job: jobs.Job) -> int:
        needed = job.group.min_member - job.occupied()
        failed: set[tuple[typing.Hashable, typing.Hashable]] = set()
        targets = session.hooks.nominations(job) or {}
        index = session.nodes.index
        with session.statement() as stmt:
            for pod in solvers.pending_tasks(session, job):
                if len(job.pipelined) >= needed:
                    break
                target = targets.get(pod.key)
                if target is not None and target in index:
                    # The node frees for it: nominated now, counted as taken from now on.
                    stmt.pipeline(pod, index[target])
                    continue
                shape = (pod.signature, pod.requests)
                if targets or shape in failed:
                    continue
                # No plugin names targets: room free now (a miss only skips the pod).
                attempt = session.place(pod, explain=False)
                if attempt.row is None:
                    failed.add(shape)
                    continue
                stmt.pipeline(pod, attempt.row)
            count = len(job.pipelined)
            nodes = len(set(job.pipelined.values()))
            if count:
                stmt.commit()
                self._free = None
            else:
                stmt.discard()
        now = session.snapshot.now
        start = session.hooks.expected_start(job) if count else None
        reason = starving_reason(
            waited=now - job.creation_timestamp,
            held=count,
            needed=job.group.min_member,
            nodes=nodes,
            start=start,
            now=now,
        )
        if start is not None and start.at is not None:
            starving = reasons.new(
                reasons.ReasonCode.UNSCHEDULABLE,
                reason,
                expectedStartSeconds=max(0, round(start.at - now)),
            )
        else:
            starving = reasons.new(reasons.ReasonCode.UNSCHEDULABLE, reason)
        why = session.group_why.get(job.key)
        session.reject_job(job, reason=starving.followed_by(why) if why else starving)
        return count

    def _fill(self, session: sessions.Session, job: jobs.Job, *, queue: queues.QueueInfo) -> int:
        # A cheap necessary condition first: the free capacity covers the missing members at
        # the size of the job's smallest pod. Most jobs in a full cluster stop here.
        if self._free is None:
            nodes = session.nodes
            self._free = np.clip(nodes.free(), 0, None)[~nodes.unschedulable].sum(axis=0)
        missing = job.group.min_member - job.occupied()
        smallest = np.min([session.vector(p) for p in job.pending], axis=0)
        if (self._free < smallest * missing).any():
            return 0
        tasks: list[pods.PodInfo] = solvers.pending_tasks(session, job)
        if not tasks or not solvers.could_fit(session, solvers.quorum_vector(session, job, tasks)):
            return 0
        before = len(job.allocated)
        with session.statement() as stmt:
            if not solvers.place_job(session, stmt, job=job, queue=queue, tasks=tasks):
                stmt.discard()
                return 0
            stmt.commit()
        self._free = None  # the placements took some of it
        return len(job.allocated) - before if stmt.failure is None else 0


def new() -> Backfill:
    """Build the action."""
    return Backfill()
