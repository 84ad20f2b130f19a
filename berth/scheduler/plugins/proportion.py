"""Proportion: hierarchical queues — guarantees, limits, weighted fair share by dominant
resource, the rules of reclaim, and the starvation guard (KAI's and Volcano's ``proportion``).

At session open it builds the queue tree and every queue's entitlement
(:mod:`berth.scheduler.plugins.proportion_shares`) from what each queue runs (placed pods, by
their queue) and waits for (pending pods), then registers:

- **queue order**: the queue furthest below its entitlement first — the dominant share of what
  it holds over the dominant share of its entitlement —, then higher ``priority``, then name;
- **job_valid**: a job whose queue is unusable (``queue team-a is invalid: parent queue org
  does not exist``), not a leaf (``queue team is not a leaf queue``) or closed (``queue team-a
  is closed``; a group that already runs may complete) waits with that reason;
- **allocatable**, per pod: never above a ``limit``, the queue's or an ancestor's (``queue
  team-a at limit for cpu (64/64)``); and not while the queue is at or above its entitlement if
  another queue below its own still has jobs to try (``queue team-a at its fair share for cpu
  (10/10) while other queues wait``). A job may thus take its queue over its entitlement by
  one pod, so discrete pods never leave capacity idle;
- **queue_overused**: the same entitlement rule for a whole queue;
- **can_reclaim** / **reclaimable**: a job may take capacity back when it fits within the
  guarantee of its queue or of an ancestor; a victim must sit in another, ``reclaimable``
  queue that holds more than its entitlement of a resource the job needs;
- **job_starving**: a job not ready whose group was created ``starvationThresholdSeconds`` ago;
- **allocate/deallocate handlers** keeping every queue's usage current while statements
  place, pipeline and evict (ancestors count their subtree);
- the **starvation guard**: for the starving jobs (at most :data:`MAX_HOLDERS`, highest
  priority, then oldest), the free capacity each could use now, up to what it still needs, is
  held — a node predicate keeps every other pod off it — so the capacity accumulates as it
  frees until the job fits; the backfill action nominates the job's pods onto it. Capacity the
  job cannot use, or does not need, stays open to other work.

At session close it publishes every queue's ``allocated``, ``requested``, ``fairShare``,
pending/running PodGroup counts and problem into ``session.queue_statuses`` (the cycle
result's ``queues``), and drops what it built (R8).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import math

import numpy as np
import numpy.typing as npt
import pydantic
import pydantic.alias_generators

from berth.api import resources
from berth.scheduler.framework import (
    decisions,
    filtering,
    handles,
    interfaces,
    jobs,
    sessions,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.plugins import proportion_shares as shares
from berth.scheduler.snapshot import nodetable, pods, queues

__all__ = [
    "MAX_HOLDERS",
    "NAME",
    "Proportion",
    "ProportionArgs",
    "new",
]

NAME = names.PROPORTION
MAX_HOLDERS = 8
"""Starving jobs that hold capacity at once (each costs one simulated placement per pod)."""

IntArray = shares.IntArray
_INF = math.inf


class ProportionArgs(pydantic.BaseModel):
    """Arguments of Proportion."""

    model_config = pydantic.ConfigDict(
        alias_generator=pydantic.alias_generators.to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )

    starvation_threshold_seconds: int | None = pydantic.Field(default=300, ge=0)
    """Seconds a job may wait for room (counted from its group's creation) before the
    starvation guard holds freeing capacity for it. Five minutes by default: long enough for
    ordinary churn to place most work, short against jobs that run for hours. ``0`` or null
    turns the guard off."""


def _unschedulable(text: str) -> statuses.Status:
    return statuses.new(statuses.Code.UNSCHEDULABLE, text)


def _unresolvable(text: str) -> statuses.Status:
    return statuses.new(statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, text)


class _Runs:
    """Requests summed per queue, cheaply: consecutive pods of a queue mostly ask the same."""

    def __init__(self) -> None:
        self.runs: dict[str, list[tuple[resources.ResourceList, list[int]]]] = {}

    def add(self, queue: str, requests: resources.ResourceList) -> None:
        entry = self.runs.get(queue)
        if entry is None:
            self.runs[queue] = [(requests, [1])]
            return
        last, count = entry[-1]
        if last is requests or last == requests:
            count[0] += 1
        else:
            entry.append((requests, [1]))

    def totals(self, table: nodetable.NodeTable) -> dict[str, IntArray]:
        zero = np.zeros(len(table.resources), dtype=np.int64)
        out: dict[str, IntArray] = {}
        for queue, entry in self.runs.items():
            total = zero.copy()
            for requests, count in entry:
                total += table.vector(requests) * count[0]
            out[queue] = total
        return out


@dataclasses.dataclass(eq=False)
class _Hold:
    """Capacity held for one starving job: amounts per row, and for how many of its pods."""

    job: jobs.Job
    amounts: IntArray  # [rows, resources]
    rows: npt.NDArray[np.bool_]
    pods: int


class _Books:
    """One session's queue accounting; built at open, dropped at close."""

    def __init__(self, session: sessions.Session, *, threshold: int | None) -> None:
        snapshot = session.snapshot
        table = session.nodes
        self.session = session
        self.threshold = threshold or None
        self.resources = table.resources
        self.tree = shares.build_tree(snapshot.queues.values(), resource_names=table.resources)
        order = self.order = list(self.tree.nodes)
        self.index = {name: i for i, name in enumerate(order)}
        self.paths = {
            name: np.array([self.index[a] for a in self.tree.path(name)], dtype=np.intp)
            for name in order
        }
        width = len(table.resources)
        self.limit = np.array([self.tree.nodes[n].limit for n in order], dtype=np.int64)
        self.guaranteed = np.array([self.tree.nodes[n].guaranteed for n in order], dtype=np.int64)
        self.limit = self.limit.reshape(len(order), width)
        self.guaranteed = self.guaranteed.reshape(len(order), width)
        self.limited = {
            name: bool((self.limit[self.paths[name]] < shares.UNLIMITED).any()) for name in order
        }
        # Usage: placed pods count until they finish; pending pods are demand.
        running, waiting = _Runs(), _Runs()
        for pod in snapshot.pods.values():
            if pod.queue is not None and pod.node_name is not None and not pod.terminal:
                running.add(pod.queue, pod.requests)
        for pod in snapshot.pending:
            if pod.queue is not None:
                waiting.add(pod.queue, pod.requests)
        self.used_at_open = running.totals(table)
        self.waiting_at_open = waiting.totals(table)
        self.allocated = np.zeros((len(order), width), dtype=np.int64)
        self.pending = np.zeros_like(self.allocated)
        self.pipelined = np.zeros_like(self.allocated)
        for name, path in self.paths.items():
            if name in self.used_at_open:
                self.allocated[path] += self.used_at_open[name]
            if name in self.waiting_at_open:
                self.pending[path] += self.waiting_at_open[name]
        usable = ~table.unschedulable
        # Cordoned nodes offer nothing new, but what runs there still counts.
        self.capacity = table.allocatable[usable].sum(axis=0) + table.requested[~usable].sum(axis=0)
        self.capacity = np.asarray(self.capacity, dtype=np.int64).reshape(width)
        demand = {
            name: self.allocated[self.index[name]] + self.pending[self.index[name]]
            for name in order
            if self.tree.nodes[name].leaf
        }
        fair = shares.fair_shares(self.tree, capacity=self.capacity, demand=demand)
        self.share = np.array([fair[n] for n in order], dtype=np.int64).reshape(len(order), width)
        self.inv_scale = np.divide(
            1.0,
            self.capacity,
            out=np.zeros(width, dtype=np.float64),
            where=self.capacity > 0,
        )
        self.share_ds = (self.share * self.inv_scale).max(axis=1, initial=0.0)
        self.not_pods = np.array([r != resources.PODS for r in table.resources], dtype=np.bool_)
        self._ratios: list[float | None] = [None] * len(order)
        # Leaf queues that take work this session, with their jobs, for "others wait".
        by_queue: dict[str, list[jobs.Job]] = {}
        for key in sorted(session.jobs):
            job = session.jobs[key]
            node = self.tree.nodes.get(job.queue)
            if node is not None and node.leaf and node.open:
                by_queue.setdefault(job.queue, []).append(job)
        self.workers = [(self.index[q], by_queue[q]) for q in sorted(by_queue)]
        self._cursor = [0] * len(self.workers)
        self._needs: dict[str, IntArray] = {}
        self.evicted_from: dict[str, int] = {}  # group key -> members evicted this session
        self.holds: list[_Hold] = []

    # Shares ---------------------------------------------------------------------------------
    def ratio(self, i: int) -> float:
        """Dominant share held over dominant share entitled (1.0: exactly at entitlement)."""
        cached = self._ratios[i]
        if cached is not None:
            return cached
        held = float((self.allocated[i] * self.inv_scale).max(initial=0.0))
        entitled = float(self.share_ds[i])
        # Entitled to nothing: at the entitlement while holding nothing, past it otherwise.
        value = held / entitled if entitled > 0 else (_INF if held > 0 else 1.0)
        self._ratios[i] = value
        return value

    def others_wait(self, i: int) -> bool:
        """Whether a queue other than ``i``, below its entitlement, has a job still to try."""
        reasons = self.session.group_reasons
        for slot, (j, waiting) in enumerate(self.workers):
            if j == i or self.ratio(j) >= 1.0:
                continue
            k = self._cursor[slot]
            while k < len(waiting) and (waiting[k].committed or waiting[k].key in reasons):
                k += 1  # placed, or tried and failed this session: it no longer waits
            self._cursor[slot] = k
            if k < len(waiting):
                return True
        return False

    def queue_key(self, queue: queues.QueueInfo) -> tuple[float, int]:
        i = self.index.get(queue.name)
        return (_INF if i is None else self.ratio(i), -queue.priority)

    def overused(self, queue: queues.QueueInfo) -> bool:
        i = self.index.get(queue.name)
        return i is not None and self.ratio(i) >= 1.0 and self.others_wait(i)

    # Validity -------------------------------------------------------------------------------
    def queue_problem(self, name: str, *, running: bool) -> statuses.Status:
        """Why a job of queue ``name`` may not be placed, or SUCCESS (``running``: the group
        already has members placed, which a closed queue lets finish)."""
        if name not in self.session.snapshot.queues:
            return _unresolvable(f"queue {name} does not exist")
        problem = self.tree.problems.get(name)
        if problem is not None:
            return _unresolvable(f"queue {name} is invalid: {problem}")
        node = self.tree.nodes[name]
        if not node.leaf:
            return _unresolvable(f"queue {name} is not a leaf queue")
        if not node.open and not running:
            return _unresolvable(f"queue {name} is closed")
        return statuses.SUCCESS

    def job_valid(self, job: jobs.Job) -> statuses.Status:
        group = job.group
        return self.queue_problem(job.queue, running=group.placed + group.succeeded > 0)

    def allocatable(self, queue: queues.QueueInfo, pod: pods.PodInfo) -> statuses.Status:
        name = queue.name
        i = self.index.get(name)
        if i is None or not self.tree.nodes[name].leaf:
            return self.queue_problem(name, running=True)
        vec = self.session.vector(pod)
        if self.limited[name]:
            path = self.paths[name]
            over = self.allocated[path] + vec > self.limit[path]
            if over.any():
                row, col = (int(x) for x in np.argwhere(over)[0])
                q, res = int(path[row]), self.resources[col]
                return _unschedulable(
                    f"queue {self.order[q]} at limit for {res} "
                    f"({shares.format_quantity(res, int(self.allocated[q, col]))}/"
                    f"{shares.format_quantity(res, int(self.limit[q, col]))})"
                )
        if self.ratio(i) >= 1.0 and self.others_wait(i):
            col = int(np.argmax(self.allocated[i] * self.inv_scale))
            res = self.resources[col]
            return _unschedulable(
                f"queue {name} at its fair share for {res} "
                f"({shares.format_quantity(res, int(self.allocated[i, col]))}/"
                f"{shares.format_quantity(res, int(self.share[i, col]))}) while other queues wait"
            )
        return statuses.SUCCESS

    # Reclaim ---------------------------------------------------------------------------------
    def quorum_need(self, job: jobs.Job) -> IntArray:
        """What the job's pods up to quorum ask for (its highest-priority, oldest pods)."""
        need = self._needs.get(job.key)
        if need is None:
            group = job.group
            count = max(group.min_member - group.placed - group.succeeded, 1)
            ordered = sorted(job.pending, key=lambda p: (-p.priority, p.creation_timestamp, p.key))
            need = np.zeros(len(self.resources), dtype=np.int64)
            for pod in ordered[:count]:
                need += self.session.vector(pod)
            self._needs[job.key] = need
        return need

    def can_reclaim(self, job: jobs.Job) -> bool:
        path = self.paths.get(job.queue)
        if path is None or not self.queue_problem(job.queue, running=True).is_success():
            return False
        need = self.quorum_need(job)
        for a in path:
            promised = self.guaranteed[a] > 0
            if not (need[promised] > 0).any():
                continue
            if (self.allocated[a][promised] + need[promised] <= self.guaranteed[a][promised]).all():
                return True
        return False

    def reclaimable(self, job: jobs.Job, victim: pods.PodInfo) -> bool:
        name = victim.queue
        if name is None or name == job.queue:
            return False
        j = self.index.get(name)
        if j is None or not self.tree.nodes[name].reclaimable:
            return False
        vec = self.session.vector(victim)
        useful = (self.allocated[j] > self.share[j]) & (vec > 0) & (self.quorum_need(job) > 0)
        return bool((useful & self.not_pods).any())

    # Starvation ------------------------------------------------------------------------------
    def starving(self, job: jobs.Job) -> bool:
        if self.threshold is None or job.occupied() >= job.group.min_member:
            return False
        if not self.queue_problem(job.queue, running=True).is_success():
            return False
        return self.session.snapshot.now - job.creation_timestamp >= self.threshold

    def take_holds(self) -> None:
        """Hold the free capacity each starving job could use now (module docstring)."""
        session = self.session
        candidates = [
            job
            for job in session.jobs.values()
            if job.group.created >= job.group.min_member and self.starving(job)
        ]
        candidates.sort(key=lambda j: (-j.priority, j.creation_timestamp, j.uid, j.key))
        if not candidates:
            return
        scratch = session.nodes.copy()
        for job in candidates[:MAX_HOLDERS]:
            path = self.paths[job.queue]
            if (self.allocated[path] + self.quorum_need(job) > self.limit[path]).any():
                continue  # its queue's limit keeps it waiting: holding room would only waste it
            need = job.group.min_member - job.occupied()
            held = np.zeros_like(scratch.requested)
            count = 0
            failed: set[tuple[object, object]] = set()
            for pod in sorted(
                job.pending, key=lambda p: (-p.priority, p.creation_timestamp, p.key)
            ):
                shape = (pod.signature, pod.requests)
                if count >= need or shape in failed:
                    continue
                attempt = session.framework.find_node(pod, nodes=scratch)
                if attempt.row is None:
                    failed.add(shape)
                    continue
                vec = scratch.vector(pod.requests)
                scratch.assume(attempt.row, vec)
                held[attempt.row] += vec
                count += 1
            if count:
                self.holds.append(
                    _Hold(job=job, amounts=held, rows=np.asarray(held.any(axis=1)), pods=count)
                )

    def hold_filter(self, pod: pods.PodInfo, nodes: nodetable.NodeTable) -> filtering.NodeFilter:
        """Keep ``pod`` off capacity held for a starving job other than its own."""
        own = self.session.job_of(pod)
        # A holder that placed or nominated its pods holds them through the table instead.
        active = [
            h
            for h in self.holds
            if h.job is not own and not h.job.committed and not h.job.pipelined
        ]
        if not active:
            return filtering.passing(len(nodes))
        held = active[0].amounts if len(active) == 1 else np.sum([h.amounts for h in active], 0)
        rows = np.logical_or.reduce([h.rows for h in active])
        fits = ((nodes.free() - held) >= nodes.vector(pod.requests)).all(axis=1)
        return filtering.NodeFilter(
            passed=fits | ~rows,
            code=statuses.Code.UNSCHEDULABLE,
            reason=f"room held for starving pod group {active[0].job.key}",
        )

    # Events ----------------------------------------------------------------------------------
    def _changed(self, path: npt.NDArray[np.intp]) -> None:
        for i in path:
            self._ratios[i] = None

    def on_allocate(self, event: jobs.Event) -> None:
        self._move(event, sign=1)

    def on_deallocate(self, event: jobs.Event) -> None:
        self._move(event, sign=-1)

    def _move(self, event: jobs.Event, *, sign: int) -> None:
        pod = event.pod
        path = self.paths.get(pod.queue) if pod.queue is not None else None
        # A placed pod evicted (-1), or its eviction undone (+1).
        if pod.node_name is not None and pod.pod_group is not None:
            self.evicted_from[pod.pod_group] = self.evicted_from.get(pod.pod_group, 0) - sign
        if path is None:
            return
        vec = self.session.vector(pod) * sign
        if len(path) == 1:
            self.allocated[path[0]] += vec
        else:
            self.allocated[path] += vec
        if pod.node_name is None:  # a pending pod placed or nominated (+1), or undone (-1)
            self.pending[path] -= vec
            if event.job is not None and pod.key in event.job.pipelined:
                self.pipelined[path] += vec
        self._changed(path)

    # Publishing ------------------------------------------------------------------------------
    def publish(self) -> dict[str, decisions.QueueStatusSummary]:
        """Every queue's status after the session (module docstring)."""
        session = self.session
        snapshot = session.snapshot
        pending_groups: collections.Counter[str] = collections.Counter()
        running_groups: collections.Counter[str] = collections.Counter()
        for key, group in snapshot.pod_groups.items():
            job = session.jobs.get(group.key)
            placed = group.placed - self.evicted_from.get(key, 0)
            placed += len(job.committed) if job is not None else 0
            if placed > 0:
                counter = running_groups
            elif group.pending + group.gated > 0:
                counter = pending_groups
            else:
                continue
            chain = self.tree.path(group.queue) or (group.queue,)
            for name in chain:
                counter[name] += 1
        children: dict[str, list[str]] = {}
        for info in snapshot.queues.values():
            if info.parent is not None:
                children.setdefault(info.parent, []).append(info.name)
        out: dict[str, decisions.QueueStatusSummary] = {}
        empty = np.zeros(len(self.resources), dtype=np.int64)
        for name in sorted(snapshot.queues):
            i = self.index.get(name)
            if i is not None:
                allocated = self.allocated[i] - self.pipelined[i]
                requested = self.pending[i] + self.pipelined[i]
                fair = self.share[i]
            else:
                allocated = self.used_at_open.get(name, empty)
                requested = self.waiting_at_open.get(name, empty)
                fair = empty
            out[name] = decisions.QueueStatusSummary(
                allocated=self._resource_list(allocated),
                requested=self._resource_list(requested),
                fair_share=self._resource_list(fair),
                pending=pending_groups[name],
                running=running_groups[name],
                children=tuple(sorted(children.get(name, ()))),
                problem=self.tree.problems.get(name),
            )
        return out

    def _resource_list(self, vec: IntArray) -> resources.ResourceList:
        return resources.ResourceList(
            {name: int(v) for name, v in zip(self.resources, vec.tolist(), strict=True) if v > 0}
        )


class Proportion(interfaces.SessionPlugin):
    """Session plugin (queue order, validity, allocatable, reclaim filters, starvation guard,
    queue statuses)."""

    name = NAME

    def __init__(self, args: ProportionArgs) -> None:
        self._threshold = args.starvation_threshold_seconds
        self._books: _Books | None = None

    def on_session_open(self, session: sessions.Session) -> None:
        books = self._books = _Books(session, threshold=self._threshold)
        hooks = session.hooks
        hooks.queue_order.add_key(books.queue_key, plugin=NAME)
        hooks.queue_overused.add(books.overused, plugin=NAME)
        session.add_job_valid_fn(books.job_valid, plugin=NAME)
        hooks.allocatable.add(books.allocatable, plugin=NAME)
        hooks.can_reclaim.add(books.can_reclaim, plugin=NAME)
        hooks.reclaimable.add(books.reclaimable, plugin=NAME)
        hooks.job_starving.add(books.starving, plugin=NAME)
        session.add_event_handler(
            plugin=NAME, allocate=books.on_allocate, deallocate=books.on_deallocate
        )
        if books.threshold is not None:
            books.take_holds()
            if books.holds:
                session.add_predicate_fn(books.hold_filter, plugin=NAME)

    def on_session_close(self, session: sessions.Session) -> None:
        books, self._books = self._books, None
        if books is not None and books.session is session:
            session.queue_statuses.update(books.publish())


def new(args: ProportionArgs, handle: handles.ExtendedHandle) -> Proportion:
    """Build the plugin."""
    return Proportion(args)
