"""Whether a queue takes a job or a pod: the queue's own problems (missing, invalid, not a
leaf, closed), a quorum that can never fit under a limit, and the limit and fair-share checks
per pod (the ``job_valid`` and ``allocatable`` hooks). Each reason text is built here.
:class:`Admission` reads the books (:class:`~.accounting.Accounting`) it is built with; the
reclaim rules and the starvation guard ask it whether a queue is usable."""

from __future__ import annotations

import numpy as np

from berth.api import keys
from berth.scheduler.framework import jobs, reasons, statuses
from berth.scheduler.plugins.proportion import accounting
from berth.scheduler.plugins.proportion import tree as trees
from berth.scheduler.snapshot import pods, queues
from berth.util import suggestions

__all__ = ["Admission"]

IntArray = accounting.IntArray


def _unschedulable(
    code: reasons.ReasonCode, text: str, **details: reasons.Detail
) -> statuses.Status:
    return statuses.new(statuses.Code.UNSCHEDULABLE, text, reason_code=code, details=details)


def _unresolvable(
    code: reasons.ReasonCode, text: str, **details: reasons.Detail
) -> statuses.Status:
    return statuses.new(
        statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, text, reason_code=code, details=details
    )


class Admission:
    """The admission rules over the books."""

    def __init__(self, books: accounting.Accounting) -> None:
        self.books = books
        self.session = books.session

    def queue_problem(self, name: str, *, running: bool) -> statuses.Status:
        """Why a job of queue ``name`` may not be placed, or SUCCESS (``running``: the group
        already has members placed, which a closed queue lets finish)."""
        books = self.books
        known = self.session.snapshot.queues
        if name not in known:
            best = suggestions.did_you_mean(name, [keys.DEFAULT_QUEUE, *known])
            if best is None:
                return _unresolvable(
                    reasons.ReasonCode.QUEUE_NOT_FOUND, f"queue {name} does not exist", queue=name
                )
            return _unresolvable(
                reasons.ReasonCode.QUEUE_NOT_FOUND,
                f"queue {name} does not exist (did you mean {best}?)",
                queue=name,
                suggestion=best,
            )
        problem = books.tree.problems.get(name)
        if problem is not None:
            return _unresolvable(
                reasons.ReasonCode.QUEUE_INVALID, f"queue {name} is invalid: {problem}", queue=name
            )
        node = books.tree.nodes[name]
        if not node.leaf:
            return _unresolvable(
                reasons.ReasonCode.NOT_LEAF_QUEUE, f"queue {name} is not a leaf queue", queue=name
            )
        if not node.open and not running:
            if node.closed_by != name:
                return _unresolvable(
                    reasons.ReasonCode.QUEUE_CLOSED,
                    f"queue {name} is closed: its parent queue {node.closed_by} is Closed",
                    queue=name,
                    closedBy=node.closed_by or name,
                )
            return _unresolvable(
                reasons.ReasonCode.QUEUE_CLOSED, f"queue {name} is closed", queue=name
            )
        return statuses.SUCCESS

    def job_valid(self, job: jobs.Job) -> statuses.Status:
        books = self.books
        group = job.group
        running = group.placed + group.succeeded > 0
        problem = self.queue_problem(job.queue, running=running)
        if problem.is_success() and not running and books.limited[job.queue]:
            return self._never_fits(job)
        return problem

    def _never_fits(self, job: jobs.Job) -> statuses.Status:
        """UNSCHEDULABLE_AND_UNRESOLVABLE when the group's quorum exceeds a limit on its
        queue's path even with the queue empty: no amount of waiting places it."""
        books = self.books
        group = job.group
        need = np.zeros(len(books.resources), dtype=np.int64)
        if job.pending:
            # Per resource, the smallest amount any minMember of its pods could ask: a bound
            # below the real need, so "never" is never said of a gang that could fit.
            asks = np.sort(np.array([books.vector(p) for p in job.pending]), axis=0)
            need = np.asarray(asks[: group.min_member].sum(axis=0), dtype=np.int64)
        if group.min_resources:
            need = np.maximum(need, books.vector_of(group.min_resources))
        path = books.paths[job.queue]
        over = (need > books.limit[path]) & books.not_pods
        if not over.any():
            return statuses.SUCCESS
        row, col = (int(x) for x in np.argwhere(over)[0])
        queue, res = books.order[int(path[row])], books.resources[col]
        whose = "queue" if queue == job.queue else f"parent queue {queue}"
        return _unresolvable(
            reasons.ReasonCode.NEVER_FITS,
            f"can never fit: needs {trees.format_quantity(res, int(need[col]))} {res}, "
            f"{whose} limit {trees.format_quantity(res, int(books.limit[path[row], col]))}",
            queue=queue,
            resource=res,
        )

    def limit_keeps_out(self, job: jobs.Job) -> reasons.Reason | None:
        """Why ``job``, waiting at session close, would stay out even with more nodes: its
        quorum's requests exceed what a limit on its queue's path leaves now. The allocate
        action stops a gang at its first pod that finds no room, so the pods after it were
        never held against the limit; without this a gang short of both nodes and limit
        would ask an autoscaler for nodes it then leaves idle. None when the limits leave
        room for the quorum (or a reservation's room may count for its pods)."""
        books = self.books
        name = job.queue
        if not books.limited.get(name) or name not in books.index or not job.pending:
            return None
        if any(self.session.hooks.reserved_credit(pod) for pod in job.pending):
            return None  # what a reservation holds for a pod is counted already
        path = books.paths[name]
        need = books.quorum_need(job)
        left = books.limit[path] - books.allocated[path]
        over = (need > left) & books.not_pods
        if not over.any():
            return None
        row, col = (int(x) for x in np.argwhere(over)[0])
        q, res = int(path[row]), books.resources[col]
        whose = "queue" if books.order[q] == name else "parent queue"
        return reasons.new(
            reasons.ReasonCode.QUEUE_AT_LIMIT,
            f"{whose} {books.order[q]} has {trees.format_quantity(res, int(left[row, col]))} "
            f"{res} left under its limit of "
            f"{trees.format_quantity(res, int(books.limit[q, col]))}; "
            f"the gang's quorum needs {trees.format_quantity(res, int(need[col]))}",
            plugin=accounting.NAME,
            queue=books.order[q],
            resource=res,
        )

    def allocatable(self, queue: queues.QueueInfo, pod: pods.PodInfo) -> statuses.Status:
        books = self.books
        name = queue.name
        i = books.index.get(name)
        if i is None or not books.tree.nodes[name].leaf:
            return self.queue_problem(name, running=True)
        vec = books.vector(pod)
        status = self._admit(name, i, vec)
        if not status.is_success():
            # What a reservation of this queue holds for the pod is counted here already: the
            # pod may come in on that room (the Reservation plugin then places it only there).
            credit = self.session.hooks.reserved_credit(pod)
            if credit:
                rest = np.clip(vec - books.vector_of(credit), 0, None)
                status = self._admit(name, i, rest)
        return status

    def _admit(self, name: str, i: int, vec: IntArray) -> statuses.Status:
        """The limit and fair-share checks of :meth:`allocatable` for the request ``vec``."""
        books = self.books
        if books.limited[name]:
            path = books.paths[name]
            over = books.allocated[path] + vec > books.limit[path]
            if over.any():
                row, col = (int(x) for x in np.argwhere(over)[0])
                q, res = int(path[row]), books.resources[col]
                return _unschedulable(
                    reasons.ReasonCode.QUEUE_AT_LIMIT,
                    f"queue {books.order[q]} at limit for {res} "
                    f"({trees.format_quantity(res, int(books.allocated[q, col]))}/"
                    f"{trees.format_quantity(res, int(books.limit[q, col]))})",
                    queue=books.order[q],
                    resource=res,
                )
        at_share = books.at_share(i)
        full = at_share & (vec > 0) if at_share.any() else at_share
        if full.any() and books.others_wait(i):
            col = int(np.flatnonzero(full)[0])
            res = books.resources[col]
            return _unschedulable(
                reasons.ReasonCode.QUEUE_OVER_SHARE,
                f"queue {name} at its fair share for {res} "
                f"({trees.format_quantity(res, int(books.allocated[i, col]))}/"
                f"{trees.format_quantity(res, int(books.share[i, col]))}) while other queues wait",
                queue=name,
                resource=res,
            )
        return statuses.SUCCESS
