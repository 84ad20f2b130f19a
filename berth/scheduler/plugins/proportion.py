"""Proportion: hierarchical queues — guarantees, limits, weighted fair share by dominant
resource, the rules of reclaim, and the starvation guard (KAI's and Volcano's ``proportion``).

At session open it builds the queue tree and every queue's entitlement
(:mod:`berth.scheduler.plugins.proportion_shares`) from what each queue runs (placed pods, by
their queue) and waits for (pending pods) — totals the cache keeps per queue
(``Snapshot.queue_usage``), so opening costs the queues and the pending jobs, not every running
pod —, then registers:

- **queue order**: the queue furthest through its entitlement last — its *ratio* is the
  largest ``allocated / entitlement`` over the resources it asks for (a resource it asks for
  but is entitled to none of counts as 1, reached) —, then higher ``priority``, then name;
- **job_valid**: a job whose queue is unusable (``queue team-a is invalid: parent queue org
  does not exist``), not a leaf (``queue team is not a leaf queue``) or closed (``queue team-a
  is closed``; a group that already runs may complete) waits with that reason, and so does
  one whose quorum exceeds a limit on its queue's path even with the queue empty (``can never
  fit: needs 16 cpu, queue limit 8``);
- **allocatable**, per pod: never above a ``limit``, the queue's or an ancestor's (``queue
  team-a at limit for cpu (64/64)``); and not once the queue holds its whole entitlement of a
  resource the pod asks for while another queue below its own still has jobs to try (``queue
  team-a at its fair share for cpu (10/10) while other queues wait``). A job may thus take its
  queue past its entitlement by one pod, so discrete pods never leave capacity idle, and the
  backfill action hands leftovers to queues held back once every queue had its turn;
- **queue_overused**: ratio at 1 or more while another queue below its own waits;
- **can_reclaim** / **reclaimable**: a job may take capacity back when its quorum fits
  within the guarantee of its queue or of an ancestor — the part the tree can honour, i.e.
  ``min(guaranteed, entitlement)``, which is all of it unless higher-priority siblings'
  guarantees already took the level's budget —; a victim must sit in another, ``reclaimable``
  queue holding more than its entitlement of a resource the job needs;
- **job_starving** and **nominations** (the starvation guard): a job below quorum whose
  group was created ``starvationThresholdSeconds`` ago, while its queue has room left in its
  share (and limits). For such jobs (at most :data:`MAX_HOLDERS`, the queue furthest below
  its share first, then priority, then age), each pod gets a node nominated: one where it
  fits once what runs there frees, preferring nodes where more of it fits already. Whatever
  is free on those nodes, up to the pod's size and the room left in its queue's share, is
  *held*: a node predicate keeps every other pod off it, so the room accumulates as running
  work finishes until the job fits whole; the backfill action pipelines the pods onto their
  nodes. The guard holds only room the queue is entitled to — it never overrides the
  weighted split — and capacity the job cannot use, or does not need, stays open;
- **allocate/deallocate handlers** keeping every queue's usage current while statements
  place, pipeline and evict (ancestors count their subtree).

At session close it publishes every queue's ``allocated``, ``requested``, ``fairShare``,
pending/running PodGroup counts, children and problem into ``session.queue_statuses`` (the
cycle result's ``queues``), and drops what it built (R8).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import math
import typing

import numpy as np
import numpy.typing as npt
import pydantic
import pydantic.alias_generators

from berth.api import resources
from berth.scheduler.framework import (
    decisions,
    filtering,
    handles,
    hooks,
    interfaces,
    jobs,
    sessions,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.plugins import proportion_shares as shares
from berth.scheduler.snapshot import nodetable, pods, queues, runtimes, usage

__all__ = [
    "MAX_HOLDERS",
    "NAME",
    "Proportion",
    "ProportionArgs",
    "ReclaimMode",
    "new",
]

NAME = names.PROPORTION
MAX_HOLDERS = 8
"""Starving jobs that hold capacity at once (each costs one simulated placement per pod)."""

IntArray = shares.IntArray
_INF = math.inf
_FITS_NOW_SCALE = 1_000_000


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
    reclaim_to_fair_share: bool = True
    """Whether a queue below its weighted fair share may evict work of ``reclaimable`` queues
    above theirs (reclaim toward a guarantee is always on)."""
    reclaim_min_runtime_seconds: int = pydantic.Field(default=60, ge=0, le=7 * 24 * 3600)
    """Seconds a pod must have run (since ``status.startTime``) before fair-share reclaim may
    evict it, unless its queue sets ``reclaimMinRuntimeSeconds``. A minute: a pod placed by
    one cycle is never taken back by the next ones while shares settle, and little work is
    lost against jobs that run for hours."""
    reclaim_evictions_per_cycle: int = pydantic.Field(default=32, ge=1, le=100_000)
    """Pods a cycle may evict for fair-share reclaim, counting every eviction the cycle made
    before (reclaim toward a guarantee is not limited). Rebalancing then takes a few cycles
    instead of one burst, and each cycle looks at the shares the last one left."""


class ReclaimMode(enum.Enum):
    """Why a job may take capacity back from other queues."""

    GUARANTEE = "guarantee"  # its quorum fits within its queue's (or an ancestor's) guarantee
    FAIR_SHARE = "fair-share"  # its queue stays within its weighted fair share with it


def _unschedulable(text: str) -> statuses.Status:
    return statuses.new(statuses.Code.UNSCHEDULABLE, text)


def _unresolvable(text: str) -> statuses.Status:
    return statuses.new(statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, text)


@dataclasses.dataclass(eq=False)
class _Hold:
    """Room held for one starving job: amounts per row, and the node each pod waits on."""

    job: jobs.Job
    amounts: IntArray  # [rows, resources]: free now, kept for the job
    rows: npt.NDArray[np.bool_]
    targets: dict[str, str]  # pod key -> node it waits on
    shadow: float | object | None = dataclasses.field(default=None)  # see Books.shadow


_UNKNOWN = object()
"""A hold's shadow time before it was worked out (``None`` is a known "no time")."""


def _ends_before_start(ends: float, shadow: float | None) -> bool:
    """A pod ending at ``ends`` cannot delay a job starting at ``shadow`` (EASY backfill)."""
    return shadow is not None and ends <= shadow


def _fits_now_scorer(free: IntArray) -> hooks.NodeScorer:
    """A node order preferring the nodes where more of the pod fits in ``free`` today
    (scaled to dominate the Score plugins' 0..100 per plugin), so room is held where it
    frees soonest."""

    def score(
        pod: pods.PodInfo, nodes: nodetable.NodeTable, feasible: filtering.BoolArray
    ) -> IntArray:
        vec = nodes.vector(pod.requests)
        asked = vec > 0
        if not asked.any():
            return np.zeros(len(nodes), dtype=np.int64)
        part = np.minimum(free[:, asked] / vec[asked], 1.0).min(axis=1)
        return np.asarray(part * _FITS_NOW_SCALE, dtype=np.int64)

    return score


@dataclasses.dataclass(frozen=True, eq=False)
class _Layout:
    """What depends only on the queues and the resource columns: the tree, and each usable
    queue's row, path and quota as arrays (read-only). The same from cycle to cycle until a
    queue or a node changes, so it is memoised on the node table's static part (keyed by the
    queues themselves), not rebuilt every session — and not kept by the plugin (R8)."""

    tree: shares.QueueTree
    order: list[str]  # usable queues by name: the rows below
    index: dict[str, int]
    paths: dict[str, npt.NDArray[np.intp]]  # queue and its ancestors, as rows
    rows: dict[str, tuple[int, ...]]  # the same as plain ints, for per-event loops
    limit: IntArray  # [queues, resources]
    guaranteed: IntArray
    limited: dict[str, bool]  # a limit somewhere on its path
    not_pods: npt.NDArray[np.bool_]  # [resources]


def _layout(
    infos: collections.abc.Iterable[queues.QueueInfo], *, resource_names: tuple[str, ...]
) -> _Layout:
    tree = shares.build_tree(infos, resource_names=resource_names)
    order = list(tree.nodes)
    index = {name: i for i, name in enumerate(order)}
    paths = {name: np.array([index[a] for a in tree.path(name)], dtype=np.intp) for name in order}
    shape = (len(order), len(resource_names))  # one row per usable queue, one per resource
    limit = np.array([tree.nodes[n].limit for n in order], dtype=np.int64).reshape(shape)
    guaranteed = np.array([tree.nodes[n].guaranteed for n in order], dtype=np.int64).reshape(shape)
    not_pods = np.array([r != resources.PODS for r in resource_names], dtype=np.bool_)
    for array in (limit, guaranteed, not_pods, *paths.values()):
        array.setflags(write=False)
    return _Layout(
        tree=tree,
        order=order,
        index=index,
        paths=paths,
        rows={name: tuple(int(i) for i in path) for name, path in paths.items()},
        limit=limit,
        guaranteed=guaranteed,
        limited={name: bool((limit[paths[name]] < shares.UNLIMITED).any()) for name in order},
        not_pods=not_pods,
    )


class _Books:
    """One session's queue accounting; built at open, dropped at close."""

    def __init__(self, session: sessions.Session, *, args: ProportionArgs) -> None:
        snapshot = session.snapshot
        table = session.nodes
        self.session = session
        self.args = args
        self.threshold = args.starvation_threshold_seconds or None
        self.resources = table.resources
        infos = tuple(snapshot.queues.values())
        layout = table.cached(
            (NAME, "layout", infos),
            compute=lambda: _layout(infos, resource_names=table.resources),
        )
        self.tree = layout.tree
        order = self.order = layout.order
        self.index = layout.index
        self.paths = layout.paths
        self.rows = layout.rows
        self.limit = layout.limit
        self.guaranteed = layout.guaranteed
        self.limited = layout.limited
        self.not_pods = layout.not_pods
        width = len(table.resources)
        shape = (len(order), width)  # one row per usable queue, one column per resource
        # Usage: placed pods count until they finish; pending pods are demand. The cache
        # keeps both summed per queue, so opening costs the queues, not the pods.
        self.used_at_open = {
            name: table.vector(used.allocated, memo=False)
            for name, used in snapshot.queue_usage.items()
            if used.allocated
        }
        self.waiting_at_open = {
            name: table.vector(used.requested, memo=False)
            for name, used in snapshot.queue_usage.items()
            if used.requested
        }
        self.allocated = np.zeros(shape, dtype=np.int64)
        self.pending = np.zeros_like(self.allocated)
        self.pipelined = np.zeros_like(self.allocated)
        for name, path in self.paths.items():
            if name in self.used_at_open:
                self.allocated[path] += self.used_at_open[name]
            if name in self.waiting_at_open:
                self.pending[path] += self.waiting_at_open[name]
        # Cordoned nodes offer nothing new, but what runs there still counts.
        cordoned = table.unschedulable
        if cordoned.any():
            capacity = table.allocatable[~cordoned].sum(axis=0) + table.requested[cordoned].sum(0)
        else:
            capacity = table.allocatable.sum(axis=0)
        self.capacity = np.asarray(capacity, dtype=np.int64).reshape(width)
        demand = {
            name: self.allocated[self.index[name]] + self.pending[self.index[name]]
            for name in order
            if self.tree.nodes[name].leaf
        }
        fair = shares.fair_shares(self.tree, capacity=self.capacity, demand=demand)
        self.share = np.array([fair[n] for n in order], dtype=np.int64).reshape(shape)
        # The guarantee the tree honours: all of it, unless the guarantees of higher-priority
        # siblings took the level's budget first (then the share is all that is left of it).
        self.honored = np.minimum(self.guaranteed, self.share)
        # What each queue asks for (runs or waits for): the resources its ratio looks at.
        asked = (self.allocated + self.pending) > 0
        self.inv_share = np.divide(
            1.0,
            self.share,
            out=np.zeros(self.share.shape, dtype=np.float64),
            where=asked & (self.share > 0),
        )
        self.unshared = asked & (self.share <= 0)  # asked for, entitled to none of it
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
        self._hopeless_jobs: dict[str, bool] = {}
        self._smallest_pods: dict[str, IntArray] = {}
        self._rooms: list[IntArray | None] = [None] * len(order)
        self._rooms_cached = False
        self._full: list[npt.NDArray[np.bool_] | None] = [None] * len(order)
        self.evicted_from: dict[str, int] = {}  # group key -> members evicted this session
        self.evicted_vec: dict[str, IntArray] = {}  # group key -> requests evicted this session
        self.evictions = 0  # pods evicted by this session's statements (undone ones uncounted)
        self._modes: dict[str, ReclaimMode | None] = {}
        self._ripe: float | None = None
        self._fair: dict[str, float] | None = None
        self.holds: list[_Hold] = []
        self.shadows: dict[str, float] = {}  # the plugin's, across sessions (see shadow)

    # Shares ---------------------------------------------------------------------------------
    def ratio(self, i: int) -> float:
        """How far the queue is through its entitlement: the largest ``allocated / share``
        over the resources it asks for (1.0: at it; a resource it asks for but is entitled
        to none of counts as 1.0 while it holds none of it, as infinity once it does)."""
        cached = self._ratios[i]
        if cached is not None:
            return cached
        held = self.allocated[i]
        value = float((held * self.inv_share[i]).max(initial=0.0))
        unshared = self.unshared[i]
        if unshared.any():
            value = max(value, _INF if (held[unshared] > 0).any() else 1.0)
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
            if node.closed_by != name:
                return _unresolvable(
                    f"queue {name} is closed: its parent queue {node.closed_by} is Closed"
                )
            return _unresolvable(f"queue {name} is closed")
        return statuses.SUCCESS

    def job_valid(self, job: jobs.Job) -> statuses.Status:
        group = job.group
        running = group.placed + group.succeeded > 0
        problem = self.queue_problem(job.queue, running=running)
        if problem.is_success() and not running and self.limited[job.queue]:
            return self._never_fits(job)
        return problem

    def _never_fits(self, job: jobs.Job) -> statuses.Status:
        """UNSCHEDULABLE_AND_UNRESOLVABLE when the group's quorum exceeds a limit on its
        queue's path even with the queue empty: no amount of waiting places it."""
        group = job.group
        need = np.zeros(len(self.resources), dtype=np.int64)
        if job.pending:
            # Per resource, the smallest amount any minMember of its pods could ask: a bound
            # below the real need, so "never" is never said of a gang that could fit.
            asks = np.sort(np.array([self.session.vector(p) for p in job.pending]), axis=0)
            need = np.asarray(asks[: group.min_member].sum(axis=0), dtype=np.int64)
        if group.min_resources:
            need = np.maximum(need, self.session.nodes.vector(group.min_resources, memo=False))
        path = self.paths[job.queue]
        over = (need > self.limit[path]) & self.not_pods
        if not over.any():
            return statuses.SUCCESS
        row, col = (int(x) for x in np.argwhere(over)[0])
        queue, res = self.order[int(path[row])], self.resources[col]
        whose = "queue" if queue == job.queue else f"parent queue {queue}"
        return _unresolvable(
            f"can never fit: needs {shares.format_quantity(res, int(need[col]))} {res}, "
            f"{whose} limit {shares.format_quantity(res, int(self.limit[path[row], col]))}"
        )

    def allocatable(self, queue: queues.QueueInfo, pod: pods.PodInfo) -> statuses.Status:
        name = queue.name
        i = self.index.get(name)
        if i is None or not self.tree.nodes[name].leaf:
            return self.queue_problem(name, running=True)
        vec = self.session.vector(pod)
        status = self._admit(name, i, vec)
        if not status.is_success():
            # What a reservation of this queue holds for the pod is counted here already: the
            # pod may come in on that room (the Reservation plugin then places it only there).
            credit = self.session.hooks.reserved_credit(pod)
            if credit:
                rest = np.clip(vec - self.session.nodes.vector(credit), 0, None)
                status = self._admit(name, i, rest)
        return status

    def _admit(self, name: str, i: int, vec: IntArray) -> statuses.Status:
        """The limit and fair-share checks of :meth:`allocatable` for the request ``vec``."""
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
        at_share = self._full[i]
        if at_share is None:  # the resources the queue holds its whole share of, cached
            at_share = self._full[i] = self.allocated[i] >= self.share[i]
        full = at_share & (vec > 0) if at_share.any() else at_share
        if full.any() and self.others_wait(i):
            col = int(np.flatnonzero(full)[0])
            res = self.resources[col]
            return _unschedulable(
                f"queue {name} at its fair share for {res} "
                f"({shares.format_quantity(res, int(self.allocated[i, col]))}/"
                f"{shares.format_quantity(res, int(self.share[i, col]))}) while other queues wait"
            )
        return statuses.SUCCESS

    # Job order -------------------------------------------------------------------------------
    def ordered_queues(self) -> bool:
        """Whether some usable queue orders its jobs other than priority then FIFO."""
        infos = self.session.snapshot.queues
        return any(
            infos[name].job_order != queues.PRIORITY_FIFO for name in self.order if name in infos
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
        session = self.session
        infos = session.snapshot.queues
        fair = {n for n in self.order if n in infos and infos[n].job_order == queues.NAMESPACE_FAIR}
        held: dict[tuple[str, str], float] = {}
        scale = np.where(self.capacity > 0, self.capacity, 1).astype(np.float64)
        counted = self.not_pods & (self.capacity > 0)

        def dominant(vec: IntArray) -> float:
            return float((vec[counted] / scale[counted]).max(initial=0.0))

        for pod in session.snapshot.pods.values():
            if pod.queue in fair and pod.node_name is not None and not pod.terminal:
                where = (str(pod.queue), pod.namespace)
                held[where] = held.get(where, 0.0) + dominant(session.vector(pod))
        out: dict[str, float] = {}
        by_namespace: dict[tuple[str, str], list[jobs.Job]] = {}
        for job in session.jobs.values():
            if job.queue in fair:
                by_namespace.setdefault((str(job.queue), job.group.namespace), []).append(job)
        for where, waiting in by_namespace.items():
            waiting.sort(key=lambda j: (-j.priority, j.queued_at, j.uid, j.key))
            total = held.get(where, 0.0)
            for job in waiting:
                total += dominant(self.quorum_need(job))
                out[job.key] = total
        return out

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

    def reclaim_mode(self, job: jobs.Job) -> ReclaimMode | None:
        """Whether (and on which promise) ``job`` may take capacity back from other queues:
        its quorum fits within the guarantee of its queue or an ancestor, else its queue stays
        within its fair share with it (the ancestors are checked per victim, below the
        level the two queues share: :meth:`reclaimable`)."""
        key = job.key
        if key in self._modes:
            return self._modes[key]
        mode: ReclaimMode | None = None
        path = self.paths.get(job.queue)
        if path is not None and self.queue_problem(job.queue, running=True).is_success():
            need = self.quorum_need(job)
            for a in path:
                promised = self.honored[a] > 0
                if not (need[promised] > 0).any():
                    continue
                if (
                    self.allocated[a][promised] + need[promised] <= self.honored[a][promised]
                ).all():
                    mode = ReclaimMode.GUARANTEE
                    break
            if (
                mode is None
                and self.args.reclaim_to_fair_share
                and self._within_share(self.index[job.queue], need)
            ):
                mode = ReclaimMode.FAIR_SHARE
        self._modes[key] = mode
        return mode

    def can_reclaim(self, job: jobs.Job) -> bool:
        return self.reclaim_mode(job) is not None

    def _within_share(self, i: int, need: IntArray) -> bool:
        """Queue ``i`` plus ``need`` holds no more than its fair share of any resource the
        need asks for (``pods`` aside)."""
        cols = (need > 0) & self.not_pods
        if not cols.any():
            return False
        return bool((self.allocated[i][cols] + need[cols] <= self.share[i][cols]).all())

    def _keeps_share(self, i: int, vec: IntArray) -> bool:
        """Queue ``i`` less ``vec`` still holds at least its whole fair share of one of the
        resources ``vec`` frees — its dominant share over them stays at 1 or more, so the
        eviction takes nothing it is entitled to (a resource it is entitled to none of but
        holds counts as above its share)."""
        cols = (vec > 0) & self.not_pods
        after = self.allocated[i][cols] - vec[cols]
        share = self.share[i][cols]
        return bool((((after >= share) & (share > 0)) | ((share <= 0) & (after > 0))).any())

    def min_runtime(self, victim: pods.PodInfo) -> int:
        """Seconds ``victim`` must have run before fair-share reclaim may take it."""
        info = self.session.snapshot.queues.get(victim.queue) if victim.queue else None
        if info is not None and info.min_runtime_seconds is not None:
            return info.min_runtime_seconds
        return self.args.reclaim_min_runtime_seconds

    def reclaimable(self, job: jobs.Job, victim: pods.PodInfo) -> bool:
        name = victim.queue
        if name is None or name == job.queue:
            return False
        j = self.index.get(name)
        if j is None or not self.tree.nodes[name].reclaimable:
            return False
        mode = self.reclaim_mode(job)
        if mode is None:
            return False
        vec = self.session.vector(victim)
        need = self.quorum_need(job)
        if not ((vec > 0) & (need > 0) & self.not_pods).any():
            return False  # frees nothing the job asks for
        # Only the levels below the one both queues share move: the victim's side gives,
        # the job's side takes; a common ancestor keeps its total.
        mine = self.rows[job.queue]
        # A queue that is not reclaimable protects its whole subtree from the outside (a
        # child saying otherwise does not open it); inside it, siblings still rebalance.
        if not all(
            self.tree.nodes[self.order[a]].reclaimable for a in self.rows[name] if a not in mine
        ):
            return False
        if mode is ReclaimMode.GUARANTEE:
            # Held more than its entitlement before its gang started going: the solver asks
            # member by member, and a gang goes whole or not at all.
            held = self.allocated[j]
            if victim.pod_group is not None and victim.pod_group in self.evicted_vec:
                held = held + self.evicted_vec[victim.pod_group]
            useful = (held > self.share[j]) & (vec > 0) & (need > 0)
            return bool((useful & self.not_pods).any())
        if self.evictions >= self.args.reclaim_evictions_per_cycle:
            return False
        started = victim.start_time if victim.start_time is not None else victim.creation_timestamp
        if self.session.snapshot.now - started < self.min_runtime(victim):
            return False
        ours = [a for a in mine if a not in self.rows[name]]
        theirs = [a for a in self.rows[name] if a not in mine]
        return all(self._within_share(a, need) for a in ours) and all(
            self._keeps_share(a, vec) for a in theirs
        )

    def preemptable(self, job: jobs.Job, victim: pods.PodInfo) -> bool:
        """Preemption inside a queue is the Priority plugin's business; across queues (the
        job's queue sets ``preemptAcrossQueues``) the victim's queue must hold more than its
        fair share of a resource the pod frees and keep its guarantee without it (it and
        its ancestors below the level the two queues share)."""
        name = victim.queue
        if name is None or name == job.queue:
            return True
        info = self.session.snapshot.queues.get(job.queue)
        j = self.index.get(name)
        if info is None or not info.preempt_across_queues or j is None:
            return False
        vec = self.session.vector(victim)
        cols = (vec > 0) & self.not_pods
        mine = self.rows.get(job.queue, ())
        held = self.allocated[j]
        if victim.pod_group is not None and victim.pod_group in self.evicted_vec:
            held = held + self.evicted_vec[victim.pod_group]  # as before its gang started going
        if not (held[cols] > self.share[j][cols]).any():
            return False
        for a in self.rows[name]:
            if a in mine:
                continue
            honored = self.honored[a]
            kept = self.allocated[a] - vec >= honored
            if not kept[(vec > 0) & (honored > 0)].all():
                return False
        return True

    # Starvation ------------------------------------------------------------------------------
    def _room(self, i: int, path: npt.NDArray[np.intp], *, used: IntArray) -> IntArray:
        """What queue ``i`` may still take: its share and every limit on its path, less
        ``used`` (usage by queue, as rows like ``allocated``)."""
        room: IntArray = np.minimum(
            self.share[i] - used[i], (self.limit[path] - used[path]).min(axis=0)
        )
        return room

    def _hopeless(self, job: jobs.Job) -> bool:
        """The job's quorum exceeds its queue's share or a limit even with the queue empty:
        holding room for it would only waste the room."""
        found = self._hopeless_jobs.get(job.key)
        if found is None:
            need = self.quorum_need(job)
            path, i = self.paths[job.queue], self.index[job.queue]
            found = bool((need > self.share[i]).any() or (need > self.limit[path]).any())
            self._hopeless_jobs[job.key] = found
        return found

    def _smallest(self, job: jobs.Job) -> IntArray:
        """The job's smallest pending pod (by summed milli-units), cached for the session."""
        found = self._smallest_pods.get(job.key)
        if found is None:
            vectors = [self.session.vector(p) for p in job.pending]
            found = self._smallest_pods[job.key] = min(vectors, key=lambda v: int(v.sum()))
        return found

    def revisit_at(self, job: jobs.Job) -> float | None:
        """When time alone changes what this plugin says of ``job``: it passes the starvation
        threshold, or a running pod passes its minimum runtime and may be reclaimed. Parked
        jobs wake then, so that the guard and reclaim see them."""
        now = self.session.snapshot.now
        times = [self._next_ripe()]
        if self.threshold is not None and job.creation_timestamp + self.threshold > now:
            times.append(job.creation_timestamp + self.threshold)
        found = min(times)
        return found if found < math.inf else None

    def _next_ripe(self) -> float:
        """The first time after now a running pod passes its minimum runtime (once a
        session)."""
        if self._ripe is None:
            snapshot = self.session.snapshot
            now, soonest = snapshot.now, math.inf
            for info in snapshot.node_infos.values():
                for key in info.pods:
                    pod = snapshot.pods.get(key)
                    if pod is None or pod.queue is None:
                        continue
                    started = (
                        pod.start_time if pod.start_time is not None else (pod.creation_timestamp)
                    )
                    ripe = started + self.min_runtime(pod)
                    if now < ripe < soonest:
                        soonest = ripe
            self._ripe = soonest
        return self._ripe

    def starving(self, job: jobs.Job) -> bool:
        """Waited past the threshold, below quorum, and its queue has room left in its share
        (and limits) for what the job asks: the guard holds only room the queue is entitled
        to, so it never overrides the weighted split, while the room the queue's own smaller
        work gives back as it finishes accumulates for the starving job."""
        if self.threshold is None or job.occupied() >= job.group.min_member:
            return False
        if self.session.snapshot.now - job.creation_timestamp < self.threshold:
            return False
        if not job.pending or not self.queue_problem(job.queue, running=True).is_success():
            return False
        if self._hopeless(job):
            return False
        if not self.session.hooks.job_valid(job).is_success():
            return False  # e.g. a group backing off after its schedule timeout holds nothing
        i = self.index[job.queue]
        room = self._rooms[i]
        if room is None:
            room = self._rooms[i] = self._room(i, self.paths[job.queue], used=self.allocated)
            self._rooms_cached = True
        asked = self._smallest(job) > 0
        return bool((room[asked] > 0).all())

    def take_holds(self) -> None:
        """Nominate nodes for each starving job's pods and hold what is free there, within
        the room left in its queue's share (module docstring)."""
        session = self.session
        candidates = [
            job
            for job in session.jobs.values()
            if job.group.created >= job.group.min_member and self.starving(job)
        ]
        # The queue furthest below its share first, as allocate would serve them.
        candidates.sort(
            key=lambda j: (
                self.ratio(self.index[j.queue]),
                -j.priority,
                j.creation_timestamp,
                j.uid,
                j.key,
            )
        )
        if not candidates:
            return
        table = session.nodes
        free = np.clip(table.free(), 0, None)  # free now and not held yet
        # The nodes as if emptied of what runs there: a pod's target is where it fits once
        # that frees, besides the pods already targeted (each counted whole).
        emptied = table.copy()
        emptied.requested[:] = 0  # a private copy nothing has read yet
        scorer = hooks.NodeScores()
        scorer.add(_fits_now_scorer(free), plugin=NAME)
        planned = self.allocated.copy()  # usage if every hold so far became placements
        for job in candidates[:MAX_HOLDERS]:
            path, i = self.paths[job.queue], self.index[job.queue]
            room = np.maximum(self._room(i, path, used=planned), 0)
            wanted = job.group.min_member - job.occupied()
            held = np.zeros_like(table.requested)
            targets: dict[str, str] = {}
            failed: set[tuple[object, object]] = set()
            for pod in sorted(
                job.pending, key=lambda p: (-p.priority, p.creation_timestamp, p.key)
            ):
                shape = (pod.signature, pod.requests)
                if len(targets) >= wanted or shape in failed:
                    continue
                attempt = session.framework.find_node(pod, nodes=emptied, node_scores=scorer)
                if attempt.row is None:
                    failed.add(shape)
                    continue
                row = attempt.row
                vec = emptied.vector(pod.requests)
                emptied.assume(row, vec)
                take = np.minimum(np.minimum(vec, free[row]), room)
                held[row] += take
                free[row] -= take
                room = room - take
                targets[pod.key] = table.names[row]
            if targets:
                planned[path] += held.sum(axis=0)
                self.holds.append(
                    _Hold(
                        job=job,
                        amounts=held,
                        rows=np.asarray(held.any(axis=1)),
                        targets=targets,
                        shadow=_UNKNOWN,
                    )
                )

    def nominations(self, job: jobs.Job) -> dict[str, str]:
        """The nodes the guard nominated for a starving job's pods (pod key -> node)."""
        for hold in self.holds:
            if hold.job is job:
                return dict(hold.targets)
        return {}

    def shadow(self, hold: _Hold) -> float | None:
        """When the held job could start at the latest: once every pod on the nodes held for
        it has ended as declared (EASY backfill's shadow time); ``None`` when one of them
        declares no runtime (then nobody backfills into the hold)."""
        if hold.shadow is _UNKNOWN:
            snapshot = self.session.snapshot
            latest: float | None = snapshot.now
            for node in sorted(set(hold.targets.values())):
                for pod in snapshot.pods_on(node):
                    ends = runtimes.expected_end(pod, now=snapshot.now, queues=snapshot.queues)
                    if ends is None:
                        latest = None
                        break
                    latest = max(latest, ends) if latest is not None else None
                if latest is None:
                    break
            if latest is not None:
                # The gang's start never moves later for backfill's sake: what was promised
                # it in an earlier cycle stands (room backfilled meanwhile ends by then).
                latest = min(latest, self.shadows.get(hold.job.key, latest))
                self.shadows[hold.job.key] = latest
            hold.shadow = latest
        return typing.cast("float | None", hold.shadow)

    def hold_filter(self, pod: pods.PodInfo, nodes: nodetable.NodeTable) -> filtering.NodeFilter:
        """Keep ``pod`` off capacity held for a starving job other than its own."""
        own = self.session.job_of(pod)
        # A holder that placed or nominated its pods holds them through the table instead.
        active = [
            h
            for h in self.holds
            if h.job is not own and not h.job.committed and not h.job.pipelined
        ]
        if active:
            # EASY backfill: room held for a gang may go to a pod that ends before it starts.
            snapshot = self.session.snapshot
            ends = runtimes.expected_end(pod, now=snapshot.now, queues=snapshot.queues)
            if ends is not None:
                active = [h for h in active if not _ends_before_start(ends, self.shadow(h))]
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
    def on_allocate(self, event: jobs.Event) -> None:
        self._move(event, sign=1)

    def on_deallocate(self, event: jobs.Event) -> None:
        self._move(event, sign=-1)

    def _move(self, event: jobs.Event, *, sign: int) -> None:
        # Called once per placement, pipelining, eviction and undo: plain loops over the
        # (short) path beat NumPy's fancy indexing here.
        pod = event.pod
        # A placed pod evicted (-1), or its eviction undone (+1).
        vec = self.session.vector(pod)
        if pod.node_name is not None:
            self.evictions -= sign
            group = pod.pod_group
            if group is not None:
                self.evicted_from[group] = self.evicted_from.get(group, 0) - sign
                gone = self.evicted_vec.get(group)
                self.evicted_vec[group] = (-sign * vec) if gone is None else gone - sign * vec
        rows = self.rows.get(pod.queue) if pod.queue is not None else None
        if rows is None:
            return
        if sign < 0:
            vec = -vec
        placing = pod.node_name is None  # a pending pod placed or nominated, or undone
        nominated = placing and event.job is not None and pod.key in event.job.pipelined
        allocated, pending, ratios, full = self.allocated, self.pending, self._ratios, self._full
        for i in rows:
            allocated[i] += vec
            if placing:
                pending[i] -= vec
                if nominated:
                    self.pipelined[i] += vec
            ratios[i] = None
            full[i] = None
        if self._rooms_cached:
            # A change anywhere on a path changes the room of every queue below it.
            self._rooms = [None] * len(self._rooms)
            self._rooms_cached = False

    # Publishing ------------------------------------------------------------------------------
    def publish(self) -> dict[str, decisions.QueueStatusSummary]:
        """Every queue's status after the session (module docstring)."""
        session = self.session
        snapshot = session.snapshot
        # Groups per queue as the snapshot had them (the cache counts them); only the groups
        # this session committed pods of or evicted from can have moved since.
        by_state = {state: collections.Counter[str]() for state in usage.GroupState}
        for name, used in snapshot.queue_usage.items():
            by_state[usage.GroupState.RUNNING][name] += used.running_groups
            by_state[usage.GroupState.PENDING][name] += used.pending_groups
        touched = set(self.evicted_from)
        touched.update(key for key, job in session.jobs.items() if job.committed)
        for key in touched:
            group = snapshot.pod_groups.get(key)
            if group is None:
                continue
            job = session.jobs.get(group.key)
            placed = group.placed - self.evicted_from.get(key, 0)
            placed += len(job.committed) if job is not None else 0
            before, after = usage.group_state(group), usage.group_state(group, placed=placed)
            if before is not after:
                if before is not None:
                    by_state[before][group.queue] -= 1
                if after is not None:
                    by_state[after][group.queue] += 1
        # A parent counts its subtree's groups.
        subtree = {state: collections.Counter[str]() for state in usage.GroupState}
        for state, by_leaf in by_state.items():
            for queue, count in by_leaf.items():
                for name in self.tree.path(queue) or (queue,):
                    subtree[state][name] += count
        running_groups = subtree[usage.GroupState.RUNNING]
        pending_groups = subtree[usage.GroupState.PENDING]
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
        self._args = args
        self._books: _Books | None = None
        self._shadows: dict[str, float] = {}  # starving job -> its earliest shadow time

    def on_session_open(self, session: sessions.Session) -> None:
        books = self._books = _Books(session, args=self._args)
        books.shadows = self._shadows
        registry = session.hooks
        registry.queue_order.add_key(books.queue_key, plugin=NAME)
        if books.ordered_queues():
            registry.job_order.add_key(books.job_order_key, plugin=NAME, leading=True)
        registry.queue_overused.add(books.overused, plugin=NAME)
        session.add_job_valid_fn(books.job_valid, plugin=NAME)
        registry.allocatable.add(books.allocatable, plugin=NAME)
        registry.can_reclaim.add(books.can_reclaim, plugin=NAME)
        registry.reclaimable.add(books.reclaimable, plugin=NAME)
        registry.preemptable.add(books.preemptable, plugin=NAME)
        registry.job_starving.add(books.starving, plugin=NAME)
        registry.revisit_at.append(books.revisit_at)
        registry.nominations.add(books.nominations, plugin=NAME)
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
            # A shadow lasts while its job is held for; a job held again later starts afresh.
            held = {hold.job.key for hold in books.holds}
            for key in [k for k in self._shadows if k not in held]:
                del self._shadows[key]


def new(args: ProportionArgs, handle: handles.ExtendedHandle) -> Proportion:
    """Build the plugin."""
    return Proportion(args)
