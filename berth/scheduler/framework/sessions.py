"""``Session``: one scheduling cycle over a snapshot — jobs, callbacks, reasons, results.

:func:`open_session` takes a :class:`~berth.scheduler.snapshot.snapshots.Snapshot` and a
:class:`~berth.scheduler.framework.runtime.Framework`, sorts the snapshot's pending pods into
jobs (one per PodGroup, or per pod with a queue) and plain pods (neither group nor queue), and
calls every session plugin's ``on_session_open``. Actions then place pods through
:meth:`Session.place` and :meth:`Session.statement`; :func:`close_session` calls
``on_session_close``, gives every pod and group left pending its "why pending" reason, and
returns the :class:`~berth.scheduler.framework.decisions.CycleResult`.

Session callbacks live in :attr:`Session.hooks` (:class:`SessionHooks`), each kind of hook with
its combining rule (see :mod:`berth.scheduler.framework.hooks`); the ``add_*_fn`` methods are
the registrars KAI and Volcano plugin authors expect.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import itertools
import logging
import operator
import time
import types
import typing

from berth.scheduler.framework import (
    decisions,
    hooks,
    jobs,
    parking,
    pending,
    placements,
    reasons,
    runtime,
    scopes,
    statements,
    statuses,
)
from berth.scheduler.snapshot import cowmaps

if typing.TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from berth.api import resources
    from berth.scheduler.snapshot import ids, pods, queues, resourceclaims, snapshots

__all__ = [
    "FRAMEWORK",
    "ExpectedStart",
    "Session",
    "SessionHooks",
    "close_session",
    "open_session",
]


@dataclasses.dataclass(frozen=True)
class ExpectedStart:
    """When a starving job is expected to start on the room held for it (seconds since the
    epoch; ``None``: nothing estimates it) and, in words, what the estimate rests on."""

    at: float | None
    basis: str
    idle: str = ""  # the room kept free for it meanwhile, in words ("16 nvidia.com/gpu")


FRAMEWORK = "framework"
"""The plugin name the session's own checks (:attr:`SessionHooks.blocked`) report under."""

logger = logging.getLogger(__name__)

_session_ids = itertools.count(1)
_BY_KEY = operator.attrgetter("key")


class SessionHooks:
    """Every session callback, by kind; each attribute's docstring states its rule."""

    def __init__(self, *, report: hooks.ErrorReport) -> None:
        self.blocked: dict[str | None, str] = {}
        """Fail closed: queues that take nothing more this session, with the reason (key
        ``None``: every queue) — a session plugin failed to open, or an allocate/deallocate
        handler raised on one of the queue's pods, so the books the queue's limits are checked
        against can no longer be trusted. Checked first by :attr:`job_valid` and
        :attr:`allocatable`."""
        self.job_order: hooks.Ordering[jobs.Job] = hooks.Ordering(
            fallback=lambda job: (job.creation_timestamp, job.uid, job.key), report=report
        )
        """Jobs within a queue. First non-zero wins; ties by creation time, then UID."""
        self.task_order: hooks.Ordering[pods.PodInfo] = hooks.Ordering(
            fallback=lambda pod: (pod.creation_timestamp, pod.uid, pod.key), report=report
        )
        """Pods within a job (and plain pods without a QueueSort plugin). First non-zero wins;
        ties by creation time, then UID."""
        self.queue_order: hooks.Ordering[queues.QueueInfo] = hooks.Ordering(
            fallback=lambda queue: queue.name, report=report
        )
        """Queues, asked again after every job (shares move). First non-zero wins; ties by
        name."""
        self.predicates = hooks.NodePredicates(report=report)
        """Extra vectorised filters after the Filter plugins. All must agree, row by row."""
        self.node_order = hooks.NodeScores(report=report)
        """Extra vectorised scores added to the Score plugins' total. Summed."""
        self.allocated: hooks.Events[[jobs.Event]] = hooks.Events(
            report=report, failed=self._handler_failed
        )
        """Allocate event handlers. All called, in registration order; one raising blocks the
        pod's queue (:attr:`blocked`)."""
        self.deallocated: hooks.Events[[jobs.Event]] = hooks.Events(
            report=report, failed=self._handler_failed
        )
        """Deallocate event handlers. All called, in registration order; one raising blocks
        the pod's queue."""
        self.job_valid: hooks.AllAgree[[jobs.Job]] = hooks.AllAgree(report=report)
        """May the job be tried at all (e.g. enough pods exist)? All must agree; the first
        non-``SUCCESS`` status is the group's reason."""
        self.job_ready: hooks.AllAgree[[jobs.Job]] = hooks.AllAgree(report=report)
        """Is what the session placed for the job enough to commit (quorum)? All must agree;
        none registered means ready."""
        self.job_pipelined: hooks.AllAgree[[jobs.Job]] = hooks.AllAgree(report=report)
        """Is the job ready counting pipelined pods? All must agree."""
        self.job_starving: hooks.AnyTrue[[jobs.Job]] = hooks.AnyTrue(report=report)
        """Has the job waited too long (backfill must not delay it)? Any says yes."""
        self.job_contending: hooks.AnyTrue[[jobs.Job]] = hooks.AnyTrue(report=report)
        """Is the starving job among those room is held for or would be next (the first few
        of its queue's line)? Any says yes. Such a job is tried every cycle; a starving job
        none says this of parks in its queue's line (:mod:`.parking`)."""
        self.nominations: hooks.FirstWins[[jobs.Job], collections.abc.Mapping[str, str]] = (
            hooks.FirstWins(report=report)
        )
        """Where a starving job's pods wait for room to free (pod key -> node), for backfill
        to nominate them there. The first registered callback's answer; ``None`` when none."""
        self.expected_start: hooks.FirstWins[[jobs.Job], ExpectedStart | None] = hooks.FirstWins(
            report=report
        )
        """When a starving job is expected to start where room is held for it, and from which
        run-time estimates, for its reason. The first registered callback's answer."""
        self.job_scopes: hooks.FirstWins[[jobs.Job], scopes.ScopePlan | None] = hooks.FirstWins(
            report=report
        )
        """The node subsets (topology domains) the allocate action tries the job in, best
        first (:mod:`berth.scheduler.framework.scopes`). The first registered callback's
        answer; ``None``: anywhere, as usual."""
        self.queue_overused: hooks.AnyTrue[[queues.QueueInfo]] = hooks.AnyTrue(
            report=report, failed=self._check_failed
        )
        """Is the queue over its share (skip it this round)? Any says yes; one raising says
        yes and blocks the queue (:attr:`blocked`)."""
        self.allocatable: hooks.AllAgree[[queues.QueueInfo, pods.PodInfo]] = hooks.AllAgree(
            report=report
        )
        """May the queue take this pod now (limits, shares)? All must agree; the first
        non-``SUCCESS`` status is the pod's reason."""
        self.can_reclaim: hooks.AllTrue[[jobs.Job]] = hooks.AllTrue(report=report)
        """May the job take capacity back from other queues at all (e.g. its queue is below
        its guarantee)? All must agree; asked before any victim is looked at."""
        self.reclaimable: hooks.AllTrue[[jobs.Job, pods.PodInfo]] = hooks.AllTrue(report=report)
        """May the reclaiming job evict this victim pod (of another queue)? All must agree.
        Asked as a search evicts; a callback must not accept a pod it refused earlier in the
        same search (evictions only lower what queues hold), since the search leaves out
        what is refused before it evicts anything."""
        self.reclaim_reason: hooks.FirstWins[[jobs.Job], str | None] = hooks.FirstWins(
            report=report
        )
        """Why the job's reclaim evicts (the text its victims carry: who took the room and on
        which promise). The first registered callback answers; ``None``: the action's own."""
        self.preemptable: hooks.AllTrue[[jobs.Job, pods.PodInfo]] = hooks.AllTrue(report=report)
        """May the preempting job evict this victim pod (same queue)? All must agree. The
        same contract as :attr:`reclaimable`: a refusal stands for the whole search."""
        self.preempts_across_queues: hooks.FirstWins[[jobs.Job], bool] = hooks.FirstWins(
            report=report
        )
        """May the job's preemption look at other queues' pods too (its queue's policy)? The
        first registered callback answers; ``None`` (nothing registered): its own queue only."""
        self.job_first: hooks.AnyTrue[[jobs.Job]] = hooks.AnyTrue(report=report)
        """Must the job be placed before plain pods and other jobs (e.g. a pod standing for
        capacity that other pods of the same cycle are to use)? Any says yes."""
        self.evictable: hooks.AllTrue[[pods.PodInfo]] = hooks.AllTrue(report=report)
        """May this running pod be a victim of reclaim or preemption at all? All must agree;
        asked before the actions' own checks (a reserve pod never is: :attr:`reserve_pods`)."""
        self.revisit_at: hooks.Earliest[[jobs.Job]] = hooks.Earliest(report=report)
        """When a waiting job's situation changes by time alone (e.g. the starvation guard's
        threshold passes): a job parked (:mod:`.parking`) wakes by the earliest answer."""
        self.class_revisit_at: hooks.Earliest[[jobs.Job]] = hooks.Earliest(report=report)
        """When the situation of every waiting job of the same shape as this one (its
        equivalence class: same queue, quorum and pods) changes by time alone, whatever the
        job's own age (e.g. a running pod becomes reclaimable, decayed fair shares drift):
        the head of a parked class (:mod:`.parking`) wakes by the earliest answer."""
        self.cycle_revisit_at: hooks.Earliest[[]] = hooks.Earliest(report=report)
        """When something placed changes by time alone (e.g. the timelimit action's next
        deadline, a reservation booked for later starting): asked at close, after every action
        placed what it could; the earliest answer is the session's :attr:`Session.revisit_at`."""
        self.reserved_credit: hooks.FirstWins[[pods.PodInfo], resources.ResourceList | None] = (
            hooks.FirstWins(report=report)
        )
        """Asked by a queue plugin about a pod its queue would refuse: how much of the pod's
        requests a reservation of the pod's own queue already holds for it (and so is counted
        in that queue already). A non-empty answer admits the pod on that reservation's room,
        and the pod is then placed only into it. The first registered callback answers;
        ``None`` (or nothing registered): no credit."""
        self.device_requests: hooks.FirstWins[[pods.PodInfo], resources.ResourceList | None] = (
            hooks.FirstWins(report=report)
        )
        """Asked by a queue plugin: the devices ``pod``'s ResourceClaims take, per DeviceClass
        (``deviceclass/<name>``, milli-devices) — for a pod placed in this session, what its
        allocations hold; for a pending pod, what its claims not yet allocated would take;
        for a running pod, what evicting it would free. Answers for one pod stay the same
        between its placement and the undoing of it. The first registered callback answers;
        ``None`` (nothing registered): no devices."""
        self.claim_allocations: hooks.FirstWins[
            [pods.PodInfo], tuple[tuple[str, resourceclaims.AllocationInfo], ...] | None
        ] = hooks.FirstWins(report=report)
        """Asked by a plugin binding ``pod`` (a reserve pod records what its Reservation holds):
        the allocations this session made for the pod's claims, as (claim key, allocation).
        The first registered callback answers; ``None``: none made."""
        self.reservation_rows: hooks.FirstWins[
            [pods.PodInfo], collections.abc.Mapping[str, str] | None
        ] = hooks.FirstWins(report=report)
        """Asked by a plugin filtering an owner pod: per node name, the Reservation (key) the
        pod's current attempt would be placed into there (what it holds is the pod's to use
        on that node). The first registered callback answers; ``None``: none."""
        self.reserve_pods: set[str] = set()
        """Keys of in-memory pods that stand for capacity, not for pods in the API (a plugin
        adds its own at session open): placed like any pod and holding room on their node,
        but no other pod's constraints count them, reclaim and preemption never evict them,
        no node is nominated for them, and their "why pending" is about the object
        :attr:`reported_as` names. Every plugin's keys count (a union)."""
        self.reported_as: hooks.FirstWins[[pods.PodInfo], tuple[decisions.Subject, str] | None] = (
            hooks.FirstWins(report=report)
        )
        """Asked at close about a pending pod of :attr:`reserve_pods`: the object its "why
        pending" is about (subject and key), since it is no pod anyone can look at. The first
        registered callback answers; ``None``: the pod itself."""
        self.unsignable: hooks.AnyTrue[[pods.PodInfo]] = hooks.AnyTrue(report=report)
        """Does a plugin refuse to sign this pending pod, because more than its shape decides
        where it may go (e.g. it asks for an object by name)? Then it shares no equivalence
        class (:mod:`~berth.scheduler.framework.equivalence`) and is scheduled on its own:
        kube-scheduler's ``SignPod`` answering Unschedulable (opportunistic batching,
        KEP-5598). Any says yes."""
        self.labels_in_signature: hooks.AnyTrue[[]] = hooks.AnyTrue(report=report)
        """Does a plugin read pending pods' labels this session (e.g. selectors other objects
        hold), so that a pod's labels are part of its signature (its equivalence class)? Any
        says yes."""
        self.job_valid.add(self._job_not_blocked, plugin=FRAMEWORK)
        self.allocatable.add(self._pod_not_blocked, plugin=FRAMEWORK)

    def block(self, queue: str | None, reason: str) -> None:
        """Stop placement for ``queue`` (None: every queue) for the rest of the session."""
        self.blocked.setdefault(queue, reason)

    def _why_blocked(self, queue: str | None) -> str | None:
        return self.blocked.get(None) or (self.blocked.get(queue) if queue else None)

    def _job_not_blocked(self, job: jobs.Job) -> statuses.Status:
        why = self._why_blocked(job.queue)
        if why is None:
            return statuses.SUCCESS
        return statuses.new(
            statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, why, reason_code=reasons.ReasonCode.ERROR
        )

    def _pod_not_blocked(self, queue: queues.QueueInfo, pod: pods.PodInfo) -> statuses.Status:
        why = self._why_blocked(queue.name)
        if why is None:
            return statuses.SUCCESS
        return statuses.new(
            statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, why, reason_code=reasons.ReasonCode.ERROR
        )

    def _check_failed(self, plugin: str, exc: BaseException, args: tuple[object, ...]) -> None:
        queue = args[0] if args else None
        name = getattr(queue, "name", None)  # a QueueInfo
        name = name if isinstance(name, str) else None
        self.block(
            name,
            f"placement held: plugin {plugin} failed to check queue {name} "
            f"({type(exc).__name__}: {exc})",
        )

    def _handler_failed(self, plugin: str, exc: BaseException, args: tuple[object, ...]) -> None:
        event = args[0] if args else None
        pod = event.pod if isinstance(event, jobs.Event) else None
        queue = pod.queue if pod is not None else None
        self.block(
            queue,
            f"placement held: plugin {plugin} failed to account for "
            f"{pod.key if pod is not None else 'a pod'} ({type(exc).__name__}: {exc})",
        )


class Session:
    """One cycle's state. Built by :func:`open_session`; ended by :func:`close_session`."""

    def __init__(
        self, snapshot: snapshots.Snapshot, *, framework: runtime.Framework, session_id: str
    ) -> None:
        self.id = session_id
        self.snapshot = snapshot
        self.nodes = snapshot.nodes
        """The session's node table (statements change it; the snapshot's own copy)."""
        self.framework = framework
        self.recorder = decisions.DecisionRecorder()
        self.hooks = SessionHooks(report=framework.report)
        self.placements = placements.Placements(
            snapshot,
            nodes=snapshot.nodes,
            reserve_pods=self.hooks.reserve_pods,
            carried=framework.take_placements(),
        )
        """Which pods are on which node, statements included (for pod-to-pod constraints)."""
        self.jobs: dict[ids.PodGroupKey, jobs.Job] = {}
        """Jobs with pods to try, by group key."""
        self.plain: list[pods.PodInfo] = []
        """Pending pods with neither group nor queue, by key (default placement)."""
        self.placed: dict[ids.PodKey, str] = {}
        """Pods bound by a committed statement this session -> node."""
        self.pod_why: dict[str, reasons.Reason] = {}
        """Why each pod left pending waits, by pod key (the last reason given wins)."""
        self.group_why: dict[str, reasons.Reason] = {}
        """Why each job left pending waits, by group key."""
        self._following: set[str] = set()  # pods whose reason is their group's (reject_job)
        self.action_seconds: dict[str, float] = {}
        self.queue_statuses: dict[str, decisions.QueueStatusSummary] = {}
        """What a queue plugin publishes at session close, by queue name (into the result)."""
        self.attempt_seconds: list[float] = []
        self.revisit_at: float | None = None
        """When something placed changes by time alone (into the result): what
        ``hooks.cycle_revisit_at`` says when the session closes (never before ``now``)."""
        self.parked: collections.abc.Mapping[str, parking.Parked] = types.MappingProxyType({})
        """Jobs left out of this session, parked with their reasons (:mod:`.parking`)."""
        self.lines: dict[str, tuple[str, ...]] = {}
        """Per queue, its jobs left pending in job order (set at close)."""
        self.pending: collections.abc.Sequence[pods.PodInfo] = snapshot.pending
        """The snapshot's pending pods but the parked jobs' (those this session is about)."""
        self._job_of: dict[ids.PodKey, jobs.Job] = {}
        self._vectors: dict[ids.PodKey, npt.NDArray[np.int64]] = {}
        self._running: list[pods.PodInfo] | None = None
        self._largest: npt.NDArray[np.int64] | None = None  # each resource's most on a node
        self.scope: scopes.Scope | None = None
        """While set (by an action trying a job in one scope), :meth:`place` rejects the rows
        outside it."""
        self.placement_limit: int | None = None
        """The most pods the session places (``None``: no limit); allocate stops at it."""
        self.cut_short = False
        """Whether allocate stopped at :attr:`placement_limit` with pods left untried: the
        session runs no further action, and the loop runs the next one at once."""
        self.closed = False

    @property
    def full(self) -> bool:
        """Whether the session placed as many pods as its :attr:`placement_limit`."""
        return self.placement_limit is not None and len(self.placed) >= self.placement_limit

    # For actions -------------------------------------------------------------------------------
    def statement(self) -> statements.Statement:
        """A new transaction over this session (use as a context manager)."""
        return statements.Statement(self)

    def place(self, pod: pods.PodInfo, *, explain: bool = True) -> runtime.Attempt:
        """One scheduling attempt for ``pod`` over the session's nodes (nothing is changed);
        ``explain=False`` for a trial whose reason is dropped when no node fits."""
        started = time.perf_counter()
        predicates = self.hooks.predicates
        scope = self.scope
        if scope is not None:
            predicates = predicates.extended(
                lambda pod, nodes: scope.node_filter(pod, len(nodes)), plugin=FRAMEWORK
            )
        attempt = self.framework.find_node(
            pod,
            nodes=self.nodes,
            predicates=predicates,
            node_scores=self.hooks.node_order,
            explain=explain,
        )
        self.attempt_seconds.append(time.perf_counter() - started)
        return attempt

    def running_pods(self) -> list[pods.PodInfo]:
        """Pods that could be victims, by key: placed on a node of the session, running, not
        being deleted, no reserve pod, evictable by every plugin's say (``evictable``). Worked
        out once a session (the snapshot does not change); what the session evicted is
        still in."""
        if self._running is None:
            # The nodes' pods, not every pod: a long backlog of pending pods is no victim.
            snapshot = self.snapshot
            index = self.nodes.index
            reserve_pods = self.hooks.reserve_pods  # capacity held in memory: no pod to evict
            found = [
                pod
                for info in snapshot.node_infos.values()
                for key in info.pods
                if key not in reserve_pods
                and (pod := snapshot.pods.get(key)) is not None
                and pod.node_name is not None
                and not pod.terminal
                and not pod.deleting
                and pod.node_name in index
            ]
            evictable = self.hooks.evictable
            if len(evictable):
                found = [pod for pod in found if evictable(pod)]
            self._running = sorted(found, key=_BY_KEY)
        return self._running

    def job_of(self, pod: pods.PodInfo) -> jobs.Job | None:
        """The job ``pod`` is a pending member of, if any."""
        return self._job_of.get(pod.key)

    def ordered_queues(self) -> list[queues.QueueInfo]:
        """The queues that have jobs this session, in queue order."""
        known = self.snapshot.queues
        names = {job.queue for job in self.jobs.values()}
        return self.hooks.queue_order.sorted(known[n] for n in names if n in known)

    def ordered_jobs(self, queue: str) -> list[jobs.Job]:
        """The queue's jobs, in job order."""
        return self.hooks.job_order.sorted(j for j in self.jobs.values() if j.queue == queue)

    def ordered_tasks(self, job: jobs.Job) -> list[pods.PodInfo]:
        """The job's pending pods, in task order."""
        return self.hooks.task_order.sorted(job.pending)

    def ordered_plain(self) -> list[pods.PodInfo]:
        """Plain pods in QueueSort order (a profile has exactly one QueueSort plugin)."""
        return self.framework.sort_plain(self.plain)

    def vector(self, pod: pods.PodInfo) -> npt.NDArray[np.int64]:
        """``pod``'s requests over the node table's columns (cached for the session)."""
        vec = self._vectors.get(pod.key)
        if vec is None:
            vec = self._vectors[pod.key] = self.nodes.vector(pod.requests)
        return vec

    def too_big_for_any_node(self, job: jobs.Job) -> bool:
        """Whether fewer of ``job``'s pending pods than its quorum still needs could fit on a
        node even emptied: then no eviction and no room held can help it (a bigger node can,
        e.g. one an autoscaler adds). A pod counts as fitting when, resource by resource, it
        asks at most the largest allocatable of any node: one that passes may still fit
        nowhere (a trial placement finds that), one that fails fits nowhere for sure."""
        if self._largest is None:
            table = self.nodes
            self._largest = (
                table.allocatable.max(axis=0)
                if len(table)
                else np.zeros(len(table.resources), dtype=np.int64)
            )
        largest = self._largest
        group = job.group
        wanted = max(group.min_member - group.placed - group.succeeded, 1)
        fitting = sum(1 for pod in job.pending if (self.vector(pod) <= largest).all())
        return fitting < wanted

    @property
    def pod_reasons(self) -> dict[str, str]:
        """Pod key -> the message of its reason (for rendering; decide on :attr:`pod_why`)."""
        return {key: why.message for key, why in self.pod_why.items()}

    @property
    def group_reasons(self) -> dict[str, str]:
        """Group key -> the message of its reason (for rendering; decide on
        :attr:`group_why`)."""
        return {key: why.message for key, why in self.group_why.items()}

    def reject_pod(self, pod: pods.PodInfo, *, reason: reasons.Reason) -> None:
        """``pod`` stays pending this cycle because of ``reason`` (the last one given wins)."""
        self.pod_why[pod.key] = reason
        self._following.discard(pod.key)

    def reject_job(self, job: jobs.Job, *, reason: reasons.Reason) -> None:
        """``job`` stays pending because of ``reason``; its pods without a reason of their own
        get (or keep following) the group's, worded ``pod group <key>: <message>`` — or, for a
        pod's group of one, the reason as it is (the pod is the group)."""
        self.group_why[job.key] = reason
        derived = reasons.Reason(
            code=reason.code,
            message=reason.message
            if job.group.implicit
            else f"{job.group.title}: {reason.message}",
            plugin=reason.plugin,
            details={**reason.details, "group": str(job.key)},
        )
        for pod in job.pending:
            if pod.key in self.placed:
                continue
            if pod.key not in self.pod_why or pod.key in self._following:
                self.pod_why[pod.key] = derived
                self._following.add(pod.key)

    def accept(self, pod: pods.PodInfo, *, job: jobs.Job | None) -> None:
        """``pod`` was placed (and ``job`` has a committed member): forget why they waited."""
        self.pod_why.pop(pod.key, None)
        self._following.discard(pod.key)
        if job is not None:
            self.group_why.pop(job.key, None)

    def follows_group(self, pod_key: str) -> bool:
        """Whether the pod's reason is its group's (given by :meth:`reject_job`)."""
        return pod_key in self._following


def _awaiting_reason(pod: pods.PodInfo) -> reasons.Reason:
    if pod.group_error:
        return reasons.new(
            reasons.ReasonCode.INVALID,
            f"cannot derive its group from its owners: {pod.group_error}",
        )
    return reasons.new(
        reasons.ReasonCode.GROUP_PENDING, "waiting for Berth to derive its group from its owners"
    )


def _group_missing(group: ids.PodGroupKey) -> reasons.Reason:
    return reasons.new(
        reasons.ReasonCode.GROUP_PENDING,
        f"waiting for PodGroup {group} to exist",
        group=str(group),
    )


def _gated(pod: pods.PodInfo) -> reasons.Reason:
    gates = ", ".join(pod.scheduling_gates)
    return reasons.new(
        reasons.ReasonCode.SCHEDULING_GATED, f"waiting for scheduling gates to be removed: {gates}"
    )


def open_session(
    snapshot: snapshots.Snapshot,
    *,
    framework: runtime.Framework,
    session_id: str | None = None,
    parked: collections.abc.Mapping[str, parking.Parked] | None = None,
    waiting: collections.abc.Sequence[pods.PodInfo] | None = None,
    placement_limit: int | None = None,
) -> Session:
    """Open a session over ``snapshot``: jobs and plain pods built, session plugins opened.
    The groups in ``parked`` are left out (they keep their reasons; the mapping must not
    change while the session's result is read: :meth:`parking.Parking.admit` hands a frozen
    view); ``waiting``: the pending pods but theirs, sorted by key, when the caller keeps them
    (:meth:`parking.Parking.waiting`; otherwise found here, at the cost of every pending
    group); ``placement_limit``: the most pods the session places (:attr:`Session.full`)."""
    session = Session(
        snapshot, framework=framework, session_id=session_id or f"s{next(_session_ids)}"
    )
    session.placement_limit = placement_limit
    if parked:
        session.parked = parked
    framework.begin_session()
    framework.handle.attach(
        snapshot, recorder=session.recorder, placements=session.placements, finder=framework
    )
    members: dict[ids.PodGroupKey, list[pods.PodInfo]] = {}
    left_out = session.parked
    if waiting is None:
        waiting = snapshot.pending_but(left_out) if left_out else snapshot.pending
    session.pending = waiting
    for pod in waiting:
        if pod.awaiting_group:
            session.reject_pod(pod, reason=_awaiting_reason(pod))
        elif pod.pod_group is None:
            # Neither group nor queue (a queue alone makes an implicit group of one).
            session.plain.append(pod)
        elif pod.pod_group in snapshot.pod_groups:
            members.setdefault(pod.pod_group, []).append(pod)
        else:
            session.reject_pod(pod, reason=_group_missing(pod.pod_group))
    for key in sorted(members):
        job = jobs.Job(snapshot.pod_groups[key], pending=members[key])
        session.jobs[key] = job
        for pod in job.pending:
            session._job_of[pod.key] = job
    for pod in snapshot.gated:
        session.reject_pod(pod, reason=_gated(pod))
    logger.debug(
        "session %s opened: %d nodes, %d jobs, %d plain pods",
        session.id,
        len(session.nodes),
        len(session.jobs),
        len(session.plain),
    )
    framework.run_session_open(session)
    return session


def close_session(session: Session) -> decisions.CycleResult:
    """Close ``session``: plugins closed, reasons recorded, the handle detached; the result."""
    if session.closed:
        raise RuntimeError(f"session {session.id} is already closed")
    framework = session.framework
    try:
        framework.run_session_close(session)
    finally:
        session.closed = True
        framework.handle.detach()
    framework.keep_placements(session.placements.hand_on())
    revisit_at = session.hooks.cycle_revisit_at()
    if revisit_at is not None:
        session.revisit_at = max(revisit_at, session.snapshot.now)
    left_out = session.parked
    for pod in session.pending:
        if pod.key not in session.placed and pod.key not in session.pod_why:
            session.pod_why[pod.key] = decisions.NOT_TRIED
    recorder = session.recorder
    for key in sorted(session.group_why):
        job = session.jobs.get(typing.cast("ids.PodGroupKey", key))
        if job is not None and job.group.implicit and _has_reserve_pods(job, session=session):
            continue  # a reserve pod's group of one: the object it stands for gets the reason
        recorder.record(
            decisions.Unschedulable(
                subject=decisions.Subject.GROUP, key=key, reason=session.group_why[key]
            )
        )
    for key in sorted(session.pod_why):
        reason = session.pod_why[key]
        subject, key_out = decisions.Subject.POD, key
        waiting = session.snapshot.pods.get(key) if key in session.hooks.reserve_pods else None
        about = session.hooks.reported_as(waiting) if waiting is not None else None
        if waiting is not None and about is not None:
            # A reserve pod is no pod in the API: the reason is the object's it stands for
            # (without the name of the group of one it forms).
            subject, key_out = about
            if session.follows_group(key) and waiting.pod_group in session.group_why:
                reason = session.group_why[waiting.pod_group]
        recorder.record(decisions.Unschedulable(subject=subject, key=key_out, reason=reason))
    for gang in _waiting_gangs(session):
        marked = pending.decide(gang)
        if marked is not None:
            recorder.record(marked)
    in_line = _waiting_in_line(session)
    session.lines = {name: tuple(str(job.key) for job in line) for name, line in in_line.items()}
    pod_why: collections.abc.Mapping[str, reasons.Reason]
    group_why: collections.abc.Mapping[str, reasons.Reason]
    lines: collections.abc.Mapping[str, tuple[str, ...]]
    if left_out:
        # Parked jobs keep their reasons (the sink was told them when they were parked); with
        # a long backlog, merging them costs more than a cycle, so readers pay on first use.
        # ``left_out`` does not change (open_session), so it is kept as it is: a copy of a
        # backlog of tens of thousands was most of a cycle's cost (issue #30).
        kept = left_out
        own_pods, own_groups = dict(session.pod_why), dict(session.group_why)
        pod_why = parking.Lazy(lambda: _merged(own_pods, parking.carried_reasons(kept)[0]))
        group_why = parking.Lazy(lambda: _merged(own_groups, parking.carried_reasons(kept)[1]))
        order = session.hooks.job_order
        lines = parking.Lazy(lambda: _with_parked(in_line, kept, order=order))
    else:
        pod_why = types.MappingProxyType(dict(sorted(session.pod_why.items())))
        group_why = types.MappingProxyType(dict(sorted(session.group_why.items())))
        lines = types.MappingProxyType(dict(session.lines))
    errors, plugin_seconds = framework.end_session()
    return decisions.CycleResult(
        session_id=session.id,
        decisions=recorder.decisions(),
        pod_why=pod_why,
        group_why=group_why,
        action_seconds=types.MappingProxyType(dict(session.action_seconds)),
        plugin_seconds=types.MappingProxyType(plugin_seconds),
        attempt_seconds=tuple(session.attempt_seconds),
        errors=errors,
        queues=types.MappingProxyType(dict(sorted(session.queue_statuses.items()))),
        waiting=lines,
        revisit_at=session.revisit_at,
        cut_short=session.cut_short,
    )


def _waiting_gangs(session: Session) -> list[pending.Gang]:
    """The session's waiting pods (not the parked jobs', not reserve pods) by gang, with what
    :func:`pending.decide` reads: a PodGroup's members together (a gang below quorum as a
    whole), a pod of no group on its own."""
    reserve_pods = session.hooks.reserve_pods
    members: dict[str, dict[str, reasons.Reason]] = {}
    for key, why in session.pod_why.items():
        if key in reserve_pods:
            continue
        pod = session.snapshot.pods.get(key)
        group = pod.pod_group if pod is not None and pod.pod_group is not None else key
        members.setdefault(group, {})[key] = why
    out: list[pending.Gang] = []
    for group in sorted(members):
        job = session.jobs.get(typing.cast("ids.PodGroupKey", group))
        out.append(
            pending.Gang(
                key=group,
                whole=job is None or job.occupied() < job.group.min_member,
                reason=session.group_why.get(group),
                pods=members[group],
            )
        )
    return out


def _has_reserve_pods(job: jobs.Job, *, session: Session) -> bool:
    reserve_pods = session.hooks.reserve_pods
    return bool(reserve_pods) and any(p.key in reserve_pods for p in job.pending)


def _merged(
    own: dict[str, reasons.Reason], kept: dict[str, reasons.Reason]
) -> dict[str, reasons.Reason]:
    return dict(sorted({**kept, **own}.items()))


def _with_parked(
    in_line: dict[str, list[jobs.Job]],
    parked: collections.abc.Mapping[str, parking.Parked],
    *,
    order: hooks.Ordering[jobs.Job],
) -> dict[str, tuple[str, ...]]:
    """The lines with parked jobs in their places: each queue's waiting jobs, the session's
    own and the parked ones (as their last session saw them), in the session's job order —
    a parked job keeps its turn, and work that arrived after it still stands behind it."""
    merged = {name: list(line) for name, line in in_line.items()}
    for _, entry in cowmaps.items_in_any_order(parked):  # each line is sorted below
        merged.setdefault(entry.queue, []).append(entry.job)
    return {
        name: tuple(str(job.key) for job in order.sorted(merged[name])) for name in sorted(merged)
    }


def _waiting_in_line(session: Session) -> dict[str, list[jobs.Job]]:
    """Per queue, the jobs that stayed pending (they have a reason), in job order."""
    names = sorted({job.queue for job in session.jobs.values()})
    out: dict[str, list[jobs.Job]] = {}
    for name in names:
        line = [job for job in session.ordered_jobs(name) if job.key in session.group_why]
        if line:
            out[name] = line
    return out
