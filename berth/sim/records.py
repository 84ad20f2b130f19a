"""What happened during a simulation, as the runner observed it: the raw material of reports.

The runner tells a :class:`Recorder` about jobs arriving, pods binding, finishing and being
evicted, queues changing and cycles running; the recorder keeps per-job facts and per-queue time
series (allocated and pending resources, sampled at every change) and counts partly bound gangs.
It never looks at the cluster itself, so a report depends only on the sequence of events.
:mod:`berth.sim.reports` turns a recorder into the JSON report. All times are milliseconds of
virtual time.
"""

from __future__ import annotations

import collections.abc
import dataclasses

from berth.api import resources
from berth.sim import fairness

__all__ = ["PREEMPTED", "JobRecord", "PodRecord", "Recorder", "Series"]


class Series:
    """A step function of time: ``(t, value)`` samples, one per instant (the last one wins)."""

    __slots__ = ("samples",)

    def __init__(self, initial: resources.ResourceList | None = None) -> None:
        self.samples: list[tuple[int, resources.ResourceList]] = []
        if initial is not None:
            self.samples.append((0, initial))

    def set(self, at: int, value: resources.ResourceList) -> None:
        """Record ``value`` from ``at`` on; a sample at the same instant is replaced."""
        if self.samples and self.samples[-1][0] == at:
            self.samples[-1] = (at, value)
            # Two changes that cancel out within an instant leave no trace.
            if len(self.samples) > 1 and self.samples[-2][1] == value:
                self.samples.pop()
        elif not self.samples or self.samples[-1][1] != value:
            self.samples.append((at, value))

    @property
    def last(self) -> resources.ResourceList:
        return self.samples[-1][1] if self.samples else resources.ResourceList()


PREEMPTED = "Preempted"
"""Why an eviction was, when the scheduler gave no cause: preemption or reclaim."""


@dataclasses.dataclass
class JobRecord:
    """One job: a PodGroup and its pods, or a plain pod on its own."""

    namespace: str
    name: str
    workload: str | None  # the generator it came from; None for manifests
    queue: str | None  # None for plain pods
    min_member: int
    submitted: int
    pods: dict[str, str | None] = dataclasses.field(default_factory=dict)  # name -> last node
    bound: int = 0  # pods bound in the current attempt (running or finished)
    succeeded: int = 0
    started: int | None = None  # when min_member pods were first bound
    finished: int | None = None  # when every pod of the last attempt had succeeded
    evictions: int = 0
    evicted_at: list[int] = dataclasses.field(default_factory=list)  # when each eviction was
    # Why each eviction was, as the Event's reason: ``Preempted`` (preemption, reclaim) or
    # ``MaximumExecutionTimeExceeded`` (the timelimit action)
    evicted_for: list[str] = dataclasses.field(default_factory=list)
    restarts: int = 0
    reason: str | None = None  # the scheduler's last "why pending", while it waits
    # What its pods ask for together, each pod counted once (a gang started over recreates
    # its pods under the same names): the job's size, for the waits by size.
    asked: resources.ResourceList = dataclasses.field(default_factory=resources.ResourceList)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gang(self) -> bool:
        return self.min_member > 1


@dataclasses.dataclass
class PodRecord:
    """What the recorder needs to know about one pod."""

    job: str  # key of its JobRecord
    queue: str | None
    requests: resources.ResourceList
    node: str | None = None
    bound_at: int | None = None  # when it was bound (ms of virtual time)
    done: bool = False


class Recorder:
    """Collects the facts a report is made of; the runner calls it as things happen."""

    def __init__(self, *, capacity: resources.ResourceList, nodes: int) -> None:
        self.capacity = capacity
        self.nodes = nodes
        self.jobs: dict[str, JobRecord] = {}
        self.pods: dict[str, PodRecord] = {}
        self.allocated: dict[str, Series] = {}  # queue -> bound requests
        self.pending: dict[str, Series] = {}  # queue -> requests of pods waiting to be bound
        self.shapes: list[tuple[int, tuple[fairness.QueueShape, ...]]] = []
        self.published: dict[str, Series] = {}  # queue -> fair share the scheduler computed
        self.evicted: collections.Counter[str] = collections.Counter()  # queue -> pods evicted
        # queue -> resource -> milli-units x milliseconds of running the evictions threw away
        self.work_lost: dict[str, dict[str, int]] = {}
        self.cluster = Series(resources.ResourceList())  # every bound pod, queued or not
        # Free capacity the starvation guard held idle after each cycle (drains), by queue.
        self.held_idle: dict[str, resources.ResourceList] = {}
        self.held = Series(resources.ResourceList())  # the same, summed over queues
        self.partial_gangs = 0
        self.cycles = 0
        self.decisions = 0
        self.end = 0
        self._touched: set[str] = set()
        # Pods holding each node; how many nodes hold none, over time (what an autoscaler's
        # consolidation could remove at once: placement that packs leaves more of them).
        self._on_node: collections.Counter[str] = collections.Counter()
        self.empty_nodes: list[tuple[int, int]] = [(0, nodes)]

    # Queues -------------------------------------------------------------------------------
    def queues_changed(
        self, shapes: collections.abc.Iterable[fairness.QueueShape], *, at: int
    ) -> None:
        """The set of queues (or a weight, guarantee, limit) changed at ``at``."""
        ordered = tuple(sorted(shapes, key=lambda s: s.name))
        for shape in ordered:
            self._queue(shape.name)
        if self.shapes and self.shapes[-1][0] == at:
            self.shapes[-1] = (at, ordered)
        elif not self.shapes or self.shapes[-1][1] != ordered:
            self.shapes.append((at, ordered))

    def fair_share_published(self, queue: str, value: resources.ResourceList, *, at: int) -> None:
        """The scheduler's queue plugin computed ``value`` as the queue's fair share."""
        self.published.setdefault(queue, Series()).set(at, value)

    def held_published(self, queue: str, value: resources.ResourceList, *, at: int) -> None:
        """After a cycle, the starvation guard holds ``value`` idle for ``queue`` (its
        starving gangs and Reservations booked for later draining nodes)."""
        if not value and queue not in self.held_idle:
            return
        if value:
            self.held_idle[queue] = value
        else:
            del self.held_idle[queue]
        total: dict[str, int] = {}
        for amounts in self.held_idle.values():
            for name, amount in amounts.items():
                total[name] = total.get(name, 0) + amount
        self.held.set(at, resources.ResourceList(total))

    def _queue(self, name: str) -> None:
        if name not in self.allocated:
            self.allocated[name] = Series(resources.ResourceList())
            self.pending[name] = Series(resources.ResourceList())

    # Jobs and pods ------------------------------------------------------------------------
    def job_submitted(self, job: JobRecord) -> None:
        """A job arrived (its pods follow with :meth:`pod_created`)."""
        self.jobs[job.key] = job
        if job.queue is not None:
            self._queue(job.queue)

    def pod_created(
        self,
        key: str,
        *,
        job: str,
        queue: str | None,
        requests: resources.ResourceList,
        at: int,
    ) -> None:
        """A pod of ``job`` was created and waits to be bound."""
        self.pods[key] = PodRecord(job=job, queue=queue, requests=requests)
        record = self.jobs[job]
        name = key.partition("/")[2]
        if name not in record.pods:
            record.pods[name] = None
            record.asked = record.asked + requests
        self._add_pending(queue, requests, at=at)

    def pod_bound(
        self,
        key: str,
        *,
        node: str,
        at: int,
        requests: resources.ResourceList | None = None,
    ) -> None:
        """The scheduler bound the pod to ``node``; ``requests``: what it holds there when
        that differs from what it asked waiting (a share of a GPU sized by the node's)."""
        pod = self.pods[key]
        if requests is not None and requests != pod.requests:
            self._add_pending(pod.queue, pod.requests * -1, at=at)
            pod.requests = requests
            self._add_pending(pod.queue, requests, at=at)
        pod.node = node
        pod.bound_at = at
        job = self.jobs[pod.job]
        job.pods[key.partition("/")[2]] = node
        job.bound += 1
        if job.started is None and job.bound >= job.min_member:
            job.started = at
            job.reason = None
        self._add_pending(pod.queue, pod.requests * -1, at=at)
        self._add_allocated(pod.queue, pod.requests, at=at)
        self._touched.add(pod.job)
        self._occupy(node, 1, at=at)

    def pod_succeeded(self, key: str, *, at: int) -> None:
        """The pod ran its duration and finished; its resources are free."""
        pod = self.pods[key]
        pod.done = True
        job = self.jobs[pod.job]
        job.succeeded += 1
        self._add_allocated(pod.queue, pod.requests * -1, at=at)
        if pod.node is not None:
            self._occupy(pod.node, -1, at=at)
        if job.succeeded >= len(job.pods) and job.bound >= len(job.pods):
            job.finished = at

    def pod_removed(
        self, key: str, *, at: int, evicted: bool, lost: bool = False, cause: str = PREEMPTED
    ) -> None:
        """The pod is gone before finishing: evicted by the scheduler (``cause``: why, as the
        eviction's Event says it), or deleted (``lost``: because another member of its gang
        was evicted, so its work is lost too)."""
        pod = self.pods.pop(key)
        job = self.jobs[pod.job]
        if evicted:
            job.evictions += 1
            job.evicted_at.append(at)
            job.evicted_for.append(cause)
            if pod.queue is not None:
                self.evicted[pod.queue] += 1
        if pod.done:
            return
        if (evicted or lost) and pod.queue is not None and pod.bound_at is not None:
            ran = at - pod.bound_at
            lost_here = self.work_lost.setdefault(pod.queue, {})
            for name, amount in pod.requests.items():
                lost_here[name] = lost_here.get(name, 0) + amount * ran
        if pod.node is None:
            self._add_pending(pod.queue, pod.requests * -1, at=at)
        else:
            job.bound -= 1
            self._add_allocated(pod.queue, pod.requests * -1, at=at)
            self._touched.add(pod.job)
            self._occupy(pod.node, -1, at=at)

    def job_restarted(self, job_key: str) -> None:
        """The job's pods were recreated from scratch (after an eviction of a gang member)."""
        job = self.jobs[job_key]
        job.restarts += 1
        job.bound = 0
        job.succeeded = 0
        job.finished = None

    def job_reason(self, job_key: str, reason: str) -> None:
        """The scheduler's latest explanation of why the job waits."""
        job = self.jobs.get(job_key)
        if job is not None and job.started is None:
            job.reason = reason

    # Cycles -------------------------------------------------------------------------------
    def cycle_done(self, *, decisions: int) -> None:
        """A scheduling cycle ran and its decisions were applied; checks for partial gangs."""
        self.cycles += 1
        self.decisions += decisions
        for key in sorted(self._touched):
            job = self.jobs[key]
            if job.gang and 0 < job.bound < job.min_member:
                self.partial_gangs += 1
        self._touched.clear()

    def finish(self, *, at: int) -> None:
        """The simulation stopped at ``at``."""
        self.end = at

    # Internals ----------------------------------------------------------------------------
    def _occupy(self, node: str, delta: int, *, at: int) -> None:
        held = self._on_node[node] + delta
        if held > 0:
            self._on_node[node] = held
        else:
            del self._on_node[node]
        empty = max(self.nodes - len(self._on_node), 0)
        if self.empty_nodes[-1][0] == at:
            self.empty_nodes[-1] = (at, empty)
        elif self.empty_nodes[-1][1] != empty:
            self.empty_nodes.append((at, empty))

    def _add_pending(self, queue: str | None, delta: resources.ResourceList, *, at: int) -> None:
        if queue is not None:
            self._queue(queue)
            series = self.pending[queue]
            series.set(at, series.last + delta)

    def _add_allocated(self, queue: str | None, delta: resources.ResourceList, *, at: int) -> None:
        self.cluster.set(at, self.cluster.last + delta)
        if queue is not None:
            self._queue(queue)
            series = self.allocated[queue]
            series.set(at, series.last + delta)
