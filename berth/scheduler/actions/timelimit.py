"""timelimit: a group that ran past its maximum execution time is requeued or failed.

Runs first in the session (Kueue's ``maximumExecutionTimeSeconds``, Slurm's time limit), so
that the room it frees is placed in the same session. A group's limit is its own
``spec.maximumExecutionTimeSeconds``, else its queue's, else the nearest ancestor queue's
(a pod of no PodGroup, its queue's); without one nothing happens to it. Its clock starts
when the group started whole: when its ``minMember``-th pod started running
(``status.startTime``; pods that failed do not count). Once ``now`` reaches that start plus
the limit, every placed pod of the group is evicted in one statement, and the group's reason
is ``MaximumExecutionTimeExceeded`` (:func:`exceeded`), which its status and Events carry:

- ``onMaximumExecutionTime: Requeue`` (the default; a pod of no group too): its controller
  recreates the pods, and the group waits in its queue again; its clock starts afresh when it
  runs whole again.
- ``Fail``: the group is marked (:class:`~berth.scheduler.framework.decisions.
  ExceedExecutionTime`: the annotation ``scheduling.berth.io/maximum-execution-time-exceeded``,
  which outlives its pods), its status becomes ``Failed`` with that reason, and the Gang
  plugin never places it again (a pod placed before the mark was seen is evicted here at
  once).

Either way the group gets a Warning Event of that reason (from the same decision), beside
each evicted pod's.

The session's :attr:`~berth.scheduler.framework.sessions.Session.revisit_at` is the earliest
deadline still ahead (a group placed in the session counts from now), so that a loop that
skips quiet sessions (and ``berth sim``'s virtual clock) looks again then.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import logging

from berth.api import podgroups as api_podgroups
from berth.scheduler.framework import decisions, reasons, sessions
from berth.scheduler.snapshot import cowmaps, podgroups, pods, queues, snapshots

__all__ = [
    "NAME",
    "Deadline",
    "TimeLimit",
    "deadline_of",
    "exceeded",
    "failed_again",
    "limit_of",
    "new",
    "queue_limit",
    "started_whole",
]

NAME = "timelimit"

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Deadline:
    """When a running group reaches its limit."""

    limit: int  # seconds, maximumExecutionTimeSeconds in force
    started: float  # when the group started whole
    fail: bool  # onMaximumExecutionTime: Fail

    @property
    def at(self) -> float:
        """The instant the limit is reached."""
        return self.started + self.limit


def limit_of(
    group: podgroups.PodGroupInfo,
    /,
    *,
    found: collections.abc.Mapping[str, queues.QueueInfo],
) -> int | None:
    """The maximum execution time in force for ``group``: its own, else its queue's or the
    nearest ancestor's in ``found`` (queues by name; a cycle in the tree stops the walk)."""
    if group.max_execution_seconds is not None:
        return group.max_execution_seconds
    return queue_limit(group.queue, found=found)


def queue_limit(
    queue: str, /, *, found: collections.abc.Mapping[str, queues.QueueInfo]
) -> int | None:
    """The maximum execution time ``queue`` gives a group of no limit of its own: its own or
    the nearest ancestor's in ``found`` (a cycle in the tree stops the walk)."""
    name: str | None = queue
    seen: set[str] = set()
    while name is not None and name not in seen:
        seen.add(name)
        info = found.get(name)
        if info is None:
            return None
        if info.max_execution_seconds is not None:
            return info.max_execution_seconds
        name = info.parent
    return None


def started_whole(
    group: podgroups.PodGroupInfo, /, *, members: tuple[pods.PodInfo, ...]
) -> float | None:
    """When the group's ``minMember``-th pod started running; None while fewer have (pods
    that failed or are going away do not count: an evicted run is over)."""
    started = sorted(
        p.start_time
        for p in members
        if p.start_time is not None
        and p.node_name is not None
        and p.phase != "Failed"
        and not p.deleting
    )
    if len(started) < group.min_member:
        return None
    return started[group.min_member - 1]


def deadline_of(
    group: podgroups.PodGroupInfo, /, *, snapshot: snapshots.Snapshot
) -> Deadline | None:
    """The group's deadline, when it has a limit and runs whole; None otherwise."""
    limit = limit_of(group, found=snapshot.queues)
    if limit is None:
        return None
    since = started_whole(group, members=snapshot.members(group.key))
    if since is None:
        return None
    return Deadline(limit=limit, started=since, fail=group.fail_past_execution_time)


def exceeded(group: podgroups.PodGroupInfo, deadline: Deadline, *, now: float) -> reasons.Reason:
    """The reason of a group evicted for running past its limit (the status, the Events)."""
    policies = api_podgroups.ExecutionTimePolicy
    policy = policies.FAIL if deadline.fail else policies.REQUEUE
    outcome = "failed" if deadline.fail else "evicted, waiting in its queue to run again"
    return reasons.new(
        reasons.ReasonCode.EXECUTION_TIME_EXCEEDED,
        f"ran past its maximumExecutionTimeSeconds of {deadline.limit}s "
        f"(running whole for {int(now - deadline.started)}s): {outcome}",
        plugin=NAME,
        maximumExecutionTimeSeconds=deadline.limit,
        policy=policy.value,
        ranSeconds=round(now - deadline.started, 3),
    )


def failed_again(group: podgroups.PodGroupInfo) -> reasons.Reason:
    """The reason of a Failed group whose pods were placed again before its status said so."""
    return reasons.new(
        reasons.ReasonCode.EXECUTION_TIME_EXCEEDED,
        f"{group.title} failed: ran past its maximumExecutionTimeSeconds; it is not placed again",
        plugin=NAME,
        policy=api_podgroups.ExecutionTimePolicy.FAIL.value,
    )


class TimeLimit:
    """The timelimit action; see the module docstring."""

    name = NAME

    def execute(self, session: sessions.Session) -> None:
        snapshot = session.snapshot
        logger.debug("Enter timelimit (session %s)", session.id)
        now = snapshot.now
        ahead: list[float] = []
        evicted = 0
        # Every cycle: of the thousands of groups (every plain pod is one) only the placed
        # ones with a limit or a failure mark can be acted on. The snapshot's index of placed
        # groups yields just those, without walking the rest, and only they are sorted (by
        # key, so that evictions come in the same order every time).
        placed = snapshot.placed_groups
        concerned = dict(cowmaps.items_in_any_order(placed.self_limited))
        for queue, groups in placed.by_queue.items():
            if queue_limit(queue, found=snapshot.queues) is not None:
                concerned.update(cowmaps.items_in_any_order(groups))
        for _, group in sorted(concerned.items()):
            if group.execution_failure is not None:
                evicted += self._evict(session, group, reason=failed_again(group))
                continue
            deadline = deadline_of(group, snapshot=snapshot)
            if deadline is None:
                continue
            if now < deadline.at:
                ahead.append(deadline.at)
                continue
            evicted += self._evict(session, group, reason=exceeded(group, deadline, now=now))
        session.hooks.cycle_revisit_at.add(
            lambda: _next_deadline(session, ahead=ahead), plugin=NAME
        )
        logger.debug("Leave timelimit (session %s): %d pods evicted", session.id, evicted)

    def _evict(
        self, session: sessions.Session, group: podgroups.PodGroupInfo, *, reason: reasons.Reason
    ) -> int:
        placed = [
            p
            for p in session.snapshot.members(group.key)
            if p.node_name is not None
            and not p.terminal
            and not p.deleting  # evicted already, going away
            and p.node_name in session.nodes.index
        ]
        if not placed:
            return 0
        statement = session.statement()
        for pod in placed:
            statement.evict(pod, reason=reason.message, cause=reason.code)
        statement.commit()
        session.group_why[group.key] = reason
        if not group.implicit and group.execution_failure is None:
            # The group's own Event, and for Fail the mark that keeps it Failed once its
            # pods are gone (the cycles then say nothing of it).
            fail = reason.details.get("policy") == api_podgroups.ExecutionTimePolicy.FAIL.value
            session.recorder.record(
                decisions.ExceedExecutionTime(
                    namespace=group.namespace,
                    name=group.name,
                    uid=group.uid,
                    reason=reason,
                    fail=fail,
                )
            )
        return len(placed)


def _next_deadline(session: sessions.Session, *, ahead: list[float]) -> float | None:
    """The earliest deadline still ahead, counting the groups placed this session (they start
    now at the earliest: a later start only moves their deadline later, which the session
    then sees)."""
    snapshot = session.snapshot
    times = list(ahead)
    placed = {snapshot.pods[k].pod_group for k in session.placed if k in snapshot.pods}
    for key in sorted(k for k in placed if k is not None):
        group = snapshot.pod_groups.get(key)
        limit = limit_of(group, found=snapshot.queues) if group is not None else None
        if limit is not None:
            times.append(snapshot.now + limit)
    return min(times) if times else None


def new() -> TimeLimit:
    """Build the action."""
    return TimeLimit()
