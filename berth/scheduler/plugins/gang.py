"""Gang: a PodGroup is placed all or nothing — ``minMember`` pods and ``minResources`` at once.

What the session asks of it (the allocate action commits a job's statement only when
``job_ready`` agrees, and rolls back everything the job took otherwise, so a group that
cannot reach quorum holds nothing):

- ``job_valid``: is the group worth trying? Never when it is invalid as written (a malformed
  ``minResources``, another scheduler's PodGroup Berth cannot honour); not until ``minMember`` of
  its pods exist
  (``waiting for pods: 3/8 created, minMember 8``), and not when the cluster's free capacity
  (on schedulable nodes, plus what the group already holds) cannot cover ``minResources``
  (scheduler-plugins' coscheduling PreFilter check); never when, with nothing placed, its
  ``minMember`` pods ask more of some resource than the schedulable nodes have in all
  (``ClusterTooSmall``: ``can never fit: needs 40 nvidia.com/gpu, the cluster has 32``).
- A group whose status says it failed for running past its maximum execution time
  (:mod:`berth.scheduler.actions.timelimit`, ``onMaximumExecutionTime: Fail``) is never
  worth trying again (:func:`failed_status`).
- ``job_ready``: ``minMember`` pods are placed (already running or done, plus those this
  session placed, minus those it evicts). A group of one is no gang: its reason is its pod's.
- ``job_pipelined``: the same, counting pods nominated to nodes that are freeing up.
- Timeout (``scheduleTimeoutSeconds``, else the ``defaultScheduleTimeoutSeconds`` argument).
  The clock starts when the ``minMember``-th pod was created (or the group, if later):
  before that the group is waiting for pods, not for room. What happens when it passes is
  the group's ``onScheduleTimeout``:

  - ``Requeue`` (the default): the group's attempts alternate with back-offs — it is tried
    for the timeout, then left alone for a back-off (the timeout, doubling after each
    attempt, at most ``maxTimeoutBackoffSeconds``), then tried again, and so on
    (:func:`timeout_state`; derived from the clock alone, so no state is kept between
    cycles). While backing off ``job_valid`` refuses it (``schedule timeout of 60s
    exceeded (attempt 1): backing off 60s, retrying in 42s at the back of its queue``), so
    it holds nothing — no placement, no starvation-guard hold, no nomination — and when it
    is tried again, its place in the queue is as if it had arrived then (a job-order key:
    after the groups of its priority that were waiting already).
  - ``Fail``: a group still not placed when the session closes gets the ``Timeout`` reason
    code (its message starts ``schedule timeout of 60s exceeded``) — the mark the PodGroup
    status turns into the ``Failed`` phase, as scheduler-plugins marks a gang whose Permit
    wait expired.

Every reason it gives is built by one function here (:func:`quorum_status`,
:func:`min_resources_status`, :func:`cluster_status`, :func:`ready_status`, :func:`timed_out`,
:func:`backing_off`).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import numpy as np
import numpy.typing as npt
import pydantic

from berth.api import quantities, resources
from berth.scheduler.framework import (
    handles,
    interfaces,
    jobs,
    reasons,
    registries,
    sessions,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import nodetable, podgroups, pods

__all__ = [
    "NAME",
    "TIMEOUT_PREFIX",
    "Gang",
    "GangArgs",
    "TimeoutState",
    "backing_off",
    "cluster_status",
    "failed_status",
    "min_resources_status",
    "new",
    "quorum_since",
    "quorum_status",
    "ready_status",
    "timed_out",
    "timeout_state",
]

NAME = names.GANG
TIMEOUT_PREFIX = "schedule timeout of"
"""How a timed-out group's reason starts: ``schedule timeout of 60s exceeded (...): why``."""


class GangArgs(registries.ArgsModel):
    """Arguments of Gang."""

    default_schedule_timeout_seconds: int | None = pydantic.Field(default=None, ge=1)
    """Seconds a group without its own ``scheduleTimeoutSeconds`` may wait for room once its
    pods exist. Unset (the default) waits for ever, as the PodGroup API documents."""
    max_timeout_backoff_seconds: int = pydantic.Field(default=3600, ge=1)
    """The longest back-off of a group requeued after its timeout (the back-off starts at the
    timeout and doubles after each attempt). An hour: a gang that cannot fit is still
    retried every so often without crowding out the work that can."""


@dataclasses.dataclass(frozen=True)
class TimeoutState:
    """Where a group with a timeout is in its attempts (``Requeue``)."""

    attempt: int  # 1 for the first attempt
    started: float  # when the current attempt (or the back-off after it) started
    backoff_until: float | None  # set while backing off: when the next attempt starts
    backoff: float  # the length of the current (or last) back-off, seconds


def timeout_state(*, since: float, now: float, timeout: float, max_backoff: float) -> TimeoutState:
    """The attempts of a group whose quorum exists since ``since`` (module docstring): tried
    for ``timeout``, then backing off ``timeout`` doubling up to ``max_backoff``, and again."""
    start, attempt, backoff = since, 1, min(float(timeout), max_backoff)
    for _ in range(100_000):  # bounded: each turn covers at least ``timeout`` seconds
        tried_until = start + timeout
        if now <= tried_until:
            return TimeoutState(attempt, start, None, backoff)
        if now < tried_until + backoff:
            return TimeoutState(attempt, tried_until, tried_until + backoff, backoff)
        start = tried_until + backoff
        attempt += 1
        backoff = min(backoff * 2, max_backoff)
    return TimeoutState(attempt, start, None, backoff)


def quorum_status(group: podgroups.PodGroupInfo, /) -> statuses.Status:
    """``PENDING`` until ``minMember`` of the group's pods exist."""
    if group.created >= group.min_member:
        return statuses.SUCCESS
    return statuses.new(
        statuses.Code.PENDING,
        f"waiting for pods: {group.created}/{group.min_member} created, "
        f"minMember {group.min_member}",
        reason_code=reasons.ReasonCode.NOT_ENOUGH_PODS,
        details={"created": group.created, "minMember": group.min_member},
    )


def failed_status() -> statuses.Status:
    """``UNSCHEDULABLE_AND_UNRESOLVABLE``: the group failed for running past its maximum
    execution time (``onMaximumExecutionTime: Fail``) and is not placed again."""
    return statuses.new(
        statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "failed: ran past its maximumExecutionTimeSeconds; it is not placed again (recreate "
        "the PodGroup to run it again)",
        reason_code=reasons.ReasonCode.EXECUTION_TIME_EXCEEDED,
        details={"policy": "Fail"},
    )


def _quantity(name: str, milli: int) -> str:
    return quantities.format_milli(milli, resources.format_for(name))


def min_resources_status(
    group: podgroups.PodGroupInfo,
    /,
    *,
    nodes: nodetable.NodeTable,
    held: resources.ResourceList,
) -> statuses.Status:
    """``UNSCHEDULABLE`` when free capacity on schedulable nodes plus ``held`` (what the
    group's placed pods use) is below ``minResources`` for some resource."""
    if not group.min_resources:
        return statuses.SUCCESS
    free = np.clip(nodes.free(), 0, None)[~nodes.unschedulable].sum(axis=0)
    short: list[str] = []
    for name, needed in sorted(group.min_resources.items()):
        col = nodes.column.get(name)
        available = (int(free[col]) if col is not None else 0) + held[name]
        if available < needed:
            short.append(
                f"{name} (needs {_quantity(name, needed)}, {_quantity(name, available)} free)"
            )
    if not short:
        return statuses.SUCCESS
    return statuses.new(
        statuses.Code.UNSCHEDULABLE,
        "not enough free resources in the cluster for minResources: " + ", ".join(short),
        reason_code=reasons.ReasonCode.NOT_ENOUGH_RESOURCES,
    )


def ready_status(job: jobs.Job, /, *, pipelined: bool = False) -> statuses.Status:
    """``SUCCESS`` when ``minMember`` pods are placed (counting pipelined ones if asked).
    ``minMember 1`` is no gang: it says no pod could be placed (and the allocate action gives
    a pod's group of one its pod's reason alone)."""
    have = job.occupied() + (len(job.pipelined) if pipelined else 0)
    need = job.group.min_member
    if have >= need:
        return statuses.SUCCESS
    if need == 1:
        return statuses.new(statuses.Code.UNSCHEDULABLE, "no pod could be placed")
    return statuses.new(
        statuses.Code.UNSCHEDULABLE, f"gang needs minMember {need}, only {have} could be placed"
    )


def cluster_status(
    job: jobs.Job,
    /,
    *,
    vector: typing.Callable[[pods.PodInfo], npt.NDArray[np.int64]],
    nodes: nodetable.NodeTable,
    total: npt.NDArray[np.int64],
) -> statuses.Status:
    """``UNSCHEDULABLE_AND_UNRESOLVABLE`` (``ClusterTooSmall``) when a gang with nothing placed
    asks, for its ``minMember`` pods, more of some resource than ``total`` (the schedulable
    nodes' allocatable summed): it can never fit the cluster as it is. The need is a bound
    below the real one (per resource, the ``minMember`` smallest asks of its pending pods, or
    ``minResources`` if larger), so "never" is never said of a gang that could fit."""
    group = job.group
    if (
        group.min_member < 2
        or group.placed + group.succeeded
        or len(job.pending) < group.min_member
    ):
        return statuses.SUCCESS
    asks = np.sort(np.array([vector(p) for p in job.pending]), axis=0)
    need = np.asarray(asks[: group.min_member].sum(axis=0), dtype=np.int64)
    if group.min_resources:
        need = np.maximum(need, nodes.vector(group.min_resources, memo=False))
    over = np.flatnonzero(need > total)
    if not len(over):
        return statuses.SUCCESS
    col = int(over[0])
    name = nodes.resources[col]
    needs, has = int(need[col]), int(total[col])
    return statuses.new(
        statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        f"can never fit: needs {_quantity(name, needs)} {name}, the cluster has "
        f"{_quantity(name, has)}",
        reason_code=reasons.ReasonCode.CLUSTER_TOO_SMALL,
        details={"resource": name, "needs": needs, "has": has},
    )


def timed_out(timeout: float, *, waited: float, why: reasons.Reason | None) -> reasons.Reason:
    """A ``Fail`` group's reason once its timeout passed: ``Timeout``, ``why`` it was not
    placed kept in the message and as the ``cause`` detail."""
    cause = why.message if why is not None else "not placed"
    return reasons.Reason(
        code=reasons.ReasonCode.GANG_TIMED_OUT,
        message=f"{TIMEOUT_PREFIX} {timeout}s exceeded (waiting {int(waited)}s): {cause}",
        plugin=NAME,
        details={
            **(why.details if why is not None else {}),
            "timeoutSeconds": timeout,
            "cause": why.code.value if why is not None else reasons.ReasonCode.UNSCHEDULABLE.value,
        },
    )


def backing_off(timeout: float, state: TimeoutState, *, left: int) -> statuses.Status:
    """A ``Requeue`` group's status between attempts: ``Timeout``, retried in ``left`` s."""
    return statuses.new(
        statuses.Code.UNSCHEDULABLE,
        f"{TIMEOUT_PREFIX} {timeout}s exceeded (attempt {state.attempt}): "
        f"backing off {int(state.backoff)}s, retrying in {left}s at the back of its queue",
        reason_code=reasons.ReasonCode.GANG_TIMED_OUT,
        details={"timeoutSeconds": timeout, "attempt": state.attempt},
    )


quorum_since = podgroups.quorum_since
"""When the group's ``minMember``-th live pod was created (the timeout's clock starts then)."""


def _held(members: collections.abc.Iterable[pods.PodInfo]) -> resources.ResourceList:
    total = resources.ResourceList()
    for pod in members:
        if pod.node_name is not None and not pod.terminal:
            total += pod.requests
    return total


class Gang(interfaces.SessionPlugin):
    """Session plugin (job valid, ready, pipelined; timeouts at close)."""

    name = NAME

    def __init__(self, args: GangArgs) -> None:
        self._default_timeout = args.default_schedule_timeout_seconds
        self._max_backoff = args.max_timeout_backoff_seconds

    def _state(self, session: sessions.Session, job: jobs.Job) -> TimeoutState | None:
        """The timed attempts of a ``Requeue`` group below quorum; None without a timeout."""
        group = job.group
        timeout = group.schedule_timeout_seconds or self._default_timeout
        if timeout is None or group.fail_on_timeout or job.occupied() >= group.min_member:
            return None
        since = quorum_since(group, members=session.snapshot.members(job.key))
        if since is None:
            return None
        return timeout_state(
            since=since, now=session.snapshot.now, timeout=timeout, max_backoff=self._max_backoff
        )

    def _revisit_at(self, session: sessions.Session, job: jobs.Job) -> float | None:
        """When the group's timeout changes what this plugin says: its attempt ends, its
        back-off ends, or (``Fail``) its timeout passes. Parked jobs wake then."""
        group = job.group
        timeout = group.schedule_timeout_seconds or self._default_timeout
        if timeout is None:
            return None
        since = quorum_since(group, members=session.snapshot.members(job.key))
        if since is None:
            return None
        now = session.snapshot.now
        if group.fail_on_timeout:
            return since + timeout if since + timeout >= now else None
        state = timeout_state(since=since, now=now, timeout=timeout, max_backoff=self._max_backoff)
        if state.backoff_until is not None:
            return state.backoff_until
        return state.started + timeout

    def on_session_open(self, session: sessions.Session) -> None:
        snapshot = session.snapshot
        session.hooks.revisit_at.add(lambda job: self._revisit_at(session, job), plugin=NAME)
        # The session's jobs only: parked groups are not ordered (and there may be many).
        timed = self._default_timeout is not None or any(
            job.group.schedule_timeout_seconds for job in session.jobs.values()
        )
        states: dict[str, TimeoutState | None] = {}
        # What the schedulable nodes have in all (a gang asking more can never fit), and each
        # gang's verdict on it, once a session: every action asks.
        nodes = session.nodes
        total = np.asarray(nodes.allocatable[~nodes.unschedulable].sum(axis=0), dtype=np.int64)
        too_big: dict[str, statuses.Status] = {}

        def state(job: jobs.Job) -> TimeoutState | None:
            if job.key not in states:
                states[job.key] = self._state(session, job)
            return states[job.key]

        def valid(job: jobs.Job) -> statuses.Status:
            if job.group.invalid is not None:
                # Never worth trying, whichever action asks (allocate says so first; backfill,
                # reclaim and preempt must not place it either).
                return statuses.new(
                    statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    job.group.invalid,
                    reason_code=reasons.ReasonCode.INVALID,
                )
            if job.group.execution_failure is not None:
                # Failed for running past its maximumExecutionTimeSeconds (the timelimit
                # action): a Failed group is never placed again.
                return failed_status()
            status = quorum_status(job.group)
            if not status.is_success():
                return status
            current = state(job) if timed else None
            if current is not None and current.backoff_until is not None:
                timeout = job.group.schedule_timeout_seconds or self._default_timeout
                assert timeout is not None  # a state exists only with a timeout (_state)
                left = max(int(current.backoff_until - snapshot.now), 1)
                return backing_off(timeout, current, left=left)
            if job.key not in too_big:
                too_big[job.key] = cluster_status(
                    job, vector=session.vector, nodes=session.nodes, total=total
                )
            if not too_big[job.key].is_success():
                return too_big[job.key]
            if not job.group.min_resources:
                return statuses.SUCCESS  # asked by every action: skip the members' walk
            held = _held(snapshot.members(job.key))
            return min_resources_status(job.group, nodes=session.nodes, held=held)

        def queued_at(job: jobs.Job) -> float:
            return job.queued_at

        session.hooks.job_valid.add(valid, plugin=NAME)
        session.hooks.job_ready.add(ready_status, plugin=NAME)
        session.hooks.job_pipelined.add(lambda job: ready_status(job, pipelined=True), plugin=NAME)
        if timed:
            # A requeued group's place is as if it arrived when its current attempt began
            # (every queue order reads ``queued_at``; this key is priority-then-FIFO's).
            for job in session.jobs.values():
                current = state(job)
                if current is not None and current.attempt > 1:
                    job.queued_at = current.started
            session.hooks.job_order.add_key(queued_at, plugin=NAME)

    def on_session_close(self, session: sessions.Session) -> None:
        now = session.snapshot.now
        for key in sorted(session.jobs):
            job = session.jobs[key]
            timeout = job.group.schedule_timeout_seconds or self._default_timeout
            if timeout is None or job.occupied() >= job.group.min_member:
                continue
            if not job.group.fail_on_timeout:
                continue  # Requeue: job_valid said so while it backs off
            since = quorum_since(job.group, members=session.snapshot.members(key))
            if since is None or now - since <= timeout:
                continue
            why = session.group_why.get(key)
            session.reject_job(job, reason=timed_out(timeout, waited=now - since, why=why))


def new(args: GangArgs, handle: handles.ExtendedHandle) -> Gang:
    """Build the plugin."""
    return Gang(args)
