"""Order between queues and within one: the queue order (below guarantee first, then by how
far each queue is through its entitlement; the ``queue_order`` and ``queue_overused`` hooks),
and a leaf queue's ``jobOrder`` (PriorityFIFO, FIFO, NamespaceFair) as a job-order key ahead
of the profile's own."""

from __future__ import annotations

import math

import numpy as np

from berth.scheduler.framework import jobs
from berth.scheduler.plugins.proportion import accounting
from berth.scheduler.snapshot import queues

__all__ = ["JobOrder", "QueueOrder"]

IntArray = accounting.IntArray


class QueueOrder:
    """The queue order over the books."""

    def __init__(self, books: accounting.Accounting) -> None:
        self.books = books

    def queue_key(self, queue: queues.QueueInfo) -> tuple[bool, float, int]:
        """Queues below their guarantee first (their priority orders only what lies beyond
        it, as KAI's over-quota priority does), then by ratio, then priority."""
        books = self.books
        i = books.index.get(queue.name)
        if i is None:
            return (True, math.inf, -queue.priority)
        return (not books.below_guarantee(i), books.ratio(i), -queue.priority)

    def overused(self, queue: queues.QueueInfo) -> bool:
        books = self.books
        i = books.index.get(queue.name)
        return i is not None and books.ratio(i) >= 1.0 and books.others_wait(i)


class JobOrder:
    """The job order rules over the books."""

    def __init__(self, books: accounting.Accounting) -> None:
        self.books = books
        self.session = books.session
        self._fair: dict[str, float] | None = None  # NamespaceFair keys, once asked

    def ordered_queues(self) -> bool:
        """Whether some usable queue orders its jobs other than priority then FIFO."""
        infos = self.session.snapshot.queues
        return any(
            infos[name].job_order != queues.PRIORITY_FIFO
            for name in self.books.order
            if name in infos
        )

    def job_order_key(self, job: jobs.Job) -> tuple[float]:
        """The queue's own job order, ahead of the profile's (priority, then age): the same
        constant for PriorityFIFO queues (no opinion), when the group joined the queue for FIFO
        (its creation, or when it was requeued after a timeout),
        and a virtual finish time for NamespaceFair (:meth:`_fair_keys`)."""
        info = self.session.snapshot.queues.get(job.queue)
        policy = info.job_order if info is not None else queues.PRIORITY_FIFO
        if policy == queues.FIFO:
            return (job.queued_at,)
        if policy == queues.NAMESPACE_FAIR:
            if self._fair is None:
                self._fair = self._fair_keys()
            return (self._fair.get(job.key, 0.0),)
        return (0.0,)

    def _fair_keys(self) -> dict[str, float]:
        """For the jobs of NamespaceFair queues: the namespace's dominant share of the cluster
        held by its running pods in the queue, plus the quorum needs of its jobs up to and
        including this one (in priority, then age order) — the namespace that would hold
        least after placing the job goes first, so namespaces take turns by what they use,
        not by how many groups they submit."""
        session, books = self.session, self.books
        infos = session.snapshot.queues
        fair = {
            n for n in books.order if n in infos and infos[n].job_order == queues.NAMESPACE_FAIR
        }
        held: dict[tuple[str, str], float] = {}
        scale = np.where(books.capacity > 0, books.capacity, 1).astype(np.float64)
        counted = books.not_pods & (books.capacity > 0)

        def dominant(vec: IntArray) -> float:
            return float((vec[counted] / scale[counted]).max(initial=0.0))

        for pod in session.snapshot.pods.values():
            if pod.queue in fair and pod.node_name is not None and not pod.terminal:
                where = (str(pod.queue), pod.namespace)
                held[where] = held.get(where, 0.0) + dominant(books.vector(pod))
        out: dict[str, float] = {}
        by_namespace: dict[tuple[str, str], list[jobs.Job]] = {}
        for job in session.jobs.values():
            if job.queue in fair:
                by_namespace.setdefault((str(job.queue), job.group.namespace), []).append(job)
        for where, waiting in by_namespace.items():
            waiting.sort(key=lambda j: (-j.priority, j.queued_at, j.uid, j.key))
            total = held.get(where, 0.0)
            for job in waiting:
                total += dominant(books.quorum_need(job))
                out[job.key] = total
        return out
