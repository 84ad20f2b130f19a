"""A PodGroup's status: phase, member counts, and the ``Scheduled`` condition saying why.

What a PodGroup's status should be is computed here, purely, from the scheduler's snapshot
(the group's members and their phases) and the last cycle's why-pending reason for the group
(:mod:`berth.status.cycles` gathers both). The live operator's Kopf status handler
(:mod:`berth.controllers.statuses`) writes it when it differs from the live object; ``berth
sim`` (:mod:`berth.sim.cluster`) writes it into its own objects.

Phase, for ``minMember`` m (first rule that holds):

- ``Failed``: the Gang plugin reported the schedule timeout (``scheduleTimeoutSeconds``)
  expired and the group asks for it (``onScheduleTimeout: Fail``; a requeued group stays
  ``Inqueue`` with the ``Timeout`` reason while it backs off); or the group ran past its
  ``maximumExecutionTimeSeconds`` and asks to fail (``onMaximumExecutionTime: Fail``; it
  stays so while the scheduler's annotation marks it, its reason
  ``MaximumExecutionTimeExceeded``); or every member finished and
  fewer than m succeeded;
- ``Finished``: every member finished and at least m succeeded;
- ``Running``: at least m members run or succeeded;
- ``Scheduled``: at least m members are bound to nodes (not all running yet);
- ``Inqueue``: at least m members exist, waiting to be placed together; or its pods were
  just evicted for running past its maximum execution time (``Requeue``);
- ``Pending``: fewer than m members exist yet.

While the group waits for an autoscaler, the ``ScaleUp`` condition says what the autoscaler
did for it (:mod:`berth.status.scale_up`); it goes once the group is placed, or waits for
something else.

The ``Scheduled`` condition is ``True`` once the group is placed; otherwise ``False`` with a
CamelCase reason (the ``Reason`` printer column of ``kubectl get bpg``) and the scheduler's
full explanation as its message (``kubectl describe bpg``). :func:`transition_events` turns a
change of condition into the Events a user sees in ``kubectl get events``.
"""

from __future__ import annotations

import collections.abc
import dataclasses

from berth.api import custom_objects, objects, podgroups
from berth.scheduler.framework import reasons
from berth.scheduler.snapshot import podgroups as pgsnap
from berth.scheduler.snapshot import pods, snapshots
from berth.status import conditions, observations
from berth.status import scale_up as scale_ups

__all__ = [
    "Counts",
    "counts_of",
    "desired_status",
    "phase_of",
    "positions",
    "sub_group_counts",
    "transition_events",
]

KIND = podgroups.KIND
Phase = podgroups.PodGroupPhase

INQUEUE = "Inqueue"
"""The condition reason of a group with enough pods that no cycle has explained yet (not a
scheduler's :class:`~berth.scheduler.framework.reasons.ReasonCode`: nothing keeps it)."""


@dataclasses.dataclass(frozen=True)
class Counts:
    """A group's members, counted for its status."""

    min_member: int
    created: int  # members that exist and are not being deleted (failed ones excluded)
    scheduled: int  # bound to a node, any phase
    running: int
    succeeded: int
    failed: int
    members: int  # every known member

    @property
    def finished(self) -> bool:
        """Every member ran to completion (and there is at least one)."""
        return self.members > 0 and self.succeeded + self.failed == self.members


def counts_of(min_member: int, members: collections.abc.Iterable[pods.PodInfo]) -> Counts:
    """Count ``members`` (the group's pods in the snapshot)."""
    created = scheduled = running = succeeded = failed = total = 0
    for pod in members:
        total += 1
        if pod.node_name is not None:
            scheduled += 1
        if pod.phase == "Succeeded":
            succeeded += 1
        elif pod.phase == "Failed":
            failed += 1
        elif pod.phase == "Running" and pod.node_name is not None and not pod.deleting:
            running += 1
        if pod.phase != "Failed" and not pod.deleting:
            created += 1
    return Counts(min_member, created, scheduled, running, succeeded, failed, total)


def phase_of(
    counts: Counts, *, reason: reasons.Reason | None, fail_on_timeout: bool
) -> podgroups.PodGroupPhase:
    """The phase for these counts and the scheduler's reason (see the module docstring)."""
    m = counts.min_member
    timed_out = reason is not None and reason.code is reasons.ReasonCode.GANG_TIMED_OUT
    if fail_on_timeout and timed_out:
        return Phase.FAILED
    if reason is not None and reason.code is reasons.ReasonCode.EXECUTION_TIME_EXCEEDED:
        # Its pods were evicted for running past its limit: failed, or waiting again.
        failed = reason.details.get("policy") == podgroups.ExecutionTimePolicy.FAIL.value
        return Phase.FAILED if failed else Phase.INQUEUE
    if counts.finished and counts.members >= m:
        return Phase.FINISHED if counts.succeeded >= m else Phase.FAILED
    if counts.running + counts.succeeded >= m:
        return Phase.RUNNING
    if counts.scheduled >= m:
        return Phase.SCHEDULED
    if counts.created >= m:
        return Phase.INQUEUE
    return Phase.PENDING


def desired_status(
    group: observations.ObservedObject,
    *,
    snapshot: snapshots.Snapshot,
    reason: reasons.Reason | None,
    now: float,
    position: tuple[int, int] | None = None,
    scale_up: scale_ups.ScaleUp | None = None,
) -> custom_objects.PodGroupStatus | None:
    """The status ``group`` should have; None while the snapshot does not know the group.
    ``position`` is the group's place in its queue's line and the line's length, while it
    waits (:func:`positions`); ``scale_up`` what the autoscaler did for it while it waits for
    one (the ``ScaleUp`` condition; gone once the group is placed)."""
    info = snapshot.pod_groups.get(group.key)
    if info is None:
        return None
    counts = counts_of(info.min_member, snapshot.members(group.key))
    if info.execution_failure is not None:
        # Failed past its maximum execution time (the mark outlives its pods and reasons).
        reason = reasons.new(
            reasons.ReasonCode.EXECUTION_TIME_EXCEEDED,
            info.execution_failure,
            policy=podgroups.ExecutionTimePolicy.FAIL.value,
        )
    phase = phase_of(counts, reason=reason, fail_on_timeout=info.fail_on_timeout)
    placed = phase in (Phase.SCHEDULED, Phase.RUNNING, Phase.FINISHED)
    if placed:
        condition = _condition(
            status="True",
            reason="Scheduled",
            message=f"{counts.scheduled} pod(s) placed, minMember {counts.min_member}",
        )
    else:
        why = reason or _own_reason(info, counts, phase=phase)
        condition = _condition(status="False", reason=why.code.value, message=why.message)
        if phase is Phase.INQUEUE and reason is None and info.invalid is None:
            condition["reason"] = INQUEUE
    _keep_transition_time(condition, current=group.status, now=now)
    status: custom_objects.PodGroupStatus = {
        "phase": phase.value,
        "scheduled": counts.scheduled,
        "running": counts.running,
        "succeeded": counts.succeeded,
        "failed": counts.failed,
        "conditions": scale_ups.with_condition(
            conditions.replaced(group.status, condition),
            None if placed else scale_up,
            now=now,
        ),
    }
    if position is not None and not placed and phase is not Phase.FAILED:
        status["queuePosition"], status["queuePending"] = position
    if info.sub_groups:
        status["subGroups"] = sub_group_counts(info, snapshot.members(group.key))
    return status


def sub_group_counts(
    info: pgsnap.PodGroupInfo, members: collections.abc.Iterable[pods.PodInfo]
) -> list[custom_objects.SubGroupStatus]:
    """``status.subGroups``: per role (a pod counts in the first role matching it), its
    minMember and its pods scheduled and running."""
    scheduled = [0] * len(info.sub_groups)
    running = [0] * len(info.sub_groups)
    for pod in members:
        index = next((i for i, role in enumerate(info.sub_groups) if role.matches(pod)), None)
        if index is None:
            continue
        if pod.node_name is not None:
            scheduled[index] += 1
        if pod.phase == "Running" and pod.node_name is not None and not pod.deleting:
            running[index] += 1
    return [
        {
            "name": role.name,
            "minMember": role.min_member,
            "scheduled": scheduled[i],
            "running": running[i],
        }
        for i, role in enumerate(info.sub_groups)
    ]


def positions(
    waiting: collections.abc.Mapping[str, collections.abc.Sequence[str]],
) -> dict[str, tuple[int, int]]:
    """Group key -> (its place in its queue's line, the line's length), from the last
    cycle's :attr:`~berth.scheduler.framework.decisions.CycleResult.waiting`."""
    return {
        key: (place, len(line))
        for line in waiting.values()
        for place, key in enumerate(line, start=1)
    }


def transition_events(
    old: custom_objects.ObjectStatus, new: custom_objects.ObjectStatus
) -> list[tuple[str, str, str]]:
    """``(type, reason, message)`` of the Events a status change from ``old`` to ``new`` is
    worth: placed, newly unschedulable (or for another reason), timed out, finished."""
    out: list[tuple[str, str, str]] = []
    before = conditions.find(old, podgroups.CONDITION_SCHEDULED)
    after = conditions.find(new, podgroups.CONDITION_SCHEDULED)
    if after is not None and (
        before is None
        or (before.get("status"), before.get("message"))
        != (after.get("status"), after.get("message"))
    ):
        message = str(after.get("message") or "")
        if after.get("status") == "True":
            out.append(("Normal", "Scheduled", message))
        elif after.get("reason") not in (
            INQUEUE,
            reasons.ReasonCode.NOT_ENOUGH_PODS.value,
            # The scheduler's decision posted it when it evicted the group's pods.
            reasons.ReasonCode.EXECUTION_TIME_EXCEEDED.value,
        ):
            out.append(("Warning", "FailedScheduling", message))
    old_phase, new_phase = old.get("phase"), new.get("phase")
    if new_phase != old_phase:
        if new_phase == Phase.FINISHED:
            out.append(("Normal", "Finished", "every member finished"))
        elif new_phase == Phase.FAILED:
            why = str((after or {}).get("message") or "members failed")
            out.append(("Warning", "Failed", why))
    return out


# Conditions ---------------------------------------------------------------------------------
def _own_reason(
    info: pgsnap.PodGroupInfo, counts: Counts, *, phase: podgroups.PodGroupPhase
) -> reasons.Reason:
    """Why the group waits when the last cycle said nothing about it."""
    if info.invalid is not None:
        return reasons.new(reasons.ReasonCode.INVALID, info.invalid)
    if phase is Phase.PENDING:
        return reasons.new(
            reasons.ReasonCode.NOT_ENOUGH_PODS,
            f"waiting for pods: {counts.created}/{counts.min_member} created, "
            f"minMember {counts.min_member}",
        )
    return reasons.new(
        reasons.ReasonCode.UNSCHEDULABLE, "waiting for the scheduler to place the group"
    )


def _condition(*, status: str, reason: str, message: str) -> objects.Condition:
    return {
        "type": podgroups.CONDITION_SCHEDULED,
        "status": status,
        "reason": reason,
        "message": message,
    }


def _keep_transition_time(
    condition: objects.Condition,
    *,
    current: custom_objects.ObjectStatus,
    now: float,
) -> None:
    # Stricter than conditions.updated: a new reason or message is a transition too, so the
    # time says since when the group has waited for *this* reason.
    previous = conditions.find(current, podgroups.CONDITION_SCHEDULED)
    same = previous is not None and all(
        previous.get(k) == condition[k] for k in ("status", "reason", "message")
    )
    if same and previous is not None and previous.get("lastTransitionTime"):
        condition["lastTransitionTime"] = previous["lastTransitionTime"]
    else:
        condition["lastTransitionTime"] = conditions.timestamp(now)
