"""A PodGroup's status (``berth.status.podgroups``), computed purely.

We test these aspects:

- the phase for member counts and the scheduler's reason (table), the timeout included;
- the CamelCase reason the ``Reason`` column shows is the scheduler's reason code, whatever
  the message says (table);
- the desired status: counts, phase, the ``Scheduled`` condition (True once placed; False with
  the scheduler's reason, or "waiting for pods" before quorum), other conditions kept, and the
  transition time kept while the condition does not change; per sub-group counts; nothing for
  a group the snapshot does not know yet;
- the Events a change is worth: placed, unschedulable (a new reason), failed, finished — and
  none for waiting on pods or for an unchanged status.
"""

from __future__ import annotations

import pytest

from berth.scheduler.framework import reasons
from berth.scheduler.snapshot import snapshots
from berth.status import conditions, observations, podgroups, scale_up
from tests.scheduler import builders as b

NOW = b.EPOCH + 100
P = podgroups.Phase
C = reasons.ReasonCode


def why(code: reasons.ReasonCode, message: str) -> reasons.Reason:
    return reasons.new(code, message)


def counts(
    m: int,
    *,
    created: int = 0,
    scheduled: int = 0,
    running: int = 0,
    succeeded: int = 0,
    failed: int = 0,
    members: int | None = None,
) -> podgroups.Counts:
    total = members if members is not None else created + failed
    return podgroups.Counts(m, created, scheduled, running, succeeded, failed, total)


@pytest.mark.parametrize(
    ("given", "reason", "fail_on_timeout", "phase"),
    [
        (counts(4, created=2), None, True, P.PENDING),
        (counts(4, created=4), None, True, P.INQUEUE),
        (
            counts(4, created=4),
            why(C.NOT_ENOUGH_RESOURCES, "0/3 nodes fit: 3 Insufficient cpu"),
            True,
            P.INQUEUE,
        ),
        (counts(4, created=4, scheduled=4), None, True, P.SCHEDULED),
        (counts(4, created=4, scheduled=4, running=4), None, True, P.RUNNING),
        (counts(4, created=4, scheduled=4, running=2, succeeded=2), None, True, P.RUNNING),
        (counts(4, created=4, scheduled=4, succeeded=4), None, True, P.FINISHED),
        (counts(4, created=1, scheduled=4, succeeded=1, failed=3), None, True, P.FAILED),
        (
            counts(4, created=4),
            why(C.GANG_TIMED_OUT, "schedule timeout of 60s exceeded (waiting 61s): x"),
            True,
            P.FAILED,
        ),
        (
            counts(4, created=4),
            why(C.GANG_TIMED_OUT, "schedule timeout of 60s exceeded (attempt 1): x"),
            False,
            P.INQUEUE,
        ),
        # The code decides, not the words: a message that reads like a timeout is not one.
        (
            counts(4, created=4),
            why(C.UNSCHEDULABLE, "schedule timeout of 60s exceeded (waiting 61s): x"),
            True,
            P.INQUEUE,
        ),
        (counts(1), None, True, P.PENDING),
    ],
    ids=[
        "too-few-pods",
        "quorum",
        "quorum-unschedulable",
        "bound",
        "running",
        "running-and-done",
        "finished",
        "members-failed",
        "timed-out-fail",
        "timed-out-requeue",
        "timeout-words-only",
        "no-members",
    ],
)
def test_phase(
    given: podgroups.Counts,
    reason: reasons.Reason | None,
    fail_on_timeout: bool,
    phase: podgroups.Phase,
) -> None:
    assert podgroups.phase_of(given, reason=reason, fail_on_timeout=fail_on_timeout) is phase


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (C.GANG_TIMED_OUT, "schedule timeout of 60s exceeded (waiting 61s): 0/3 nodes fit"),
        (C.QUEUE_NOT_FOUND, "queue team-z does not exist"),
        (C.QUEUE_CLOSED, "queue team-a is closed"),
        (C.NOT_LEAF_QUEUE, "queue research is not a leaf queue"),
        (C.QUEUE_AT_LIMIT, "queue team-a at limit for cpu (needs 2, 1 left)"),
        (C.QUEUE_OVER_SHARE, "queue team-b is over its share"),
        (C.NOT_ENOUGH_RESOURCES, "not enough free resources for minResources: cpu"),
        # Nothing reads the words: an invalid queue whose problem names a missing parent is
        # QueueInvalid (a substring match once made it QueueNotFound).
        (C.QUEUE_INVALID, "queue a is invalid: parent queue b does not exist"),
        (C.UNSCHEDULABLE, "queue team-z does not exist"),
    ],
    ids=[
        "timeout",
        "no-queue",
        "closed",
        "not-leaf",
        "limit",
        "share",
        "min-resources",
        "invalid-naming-another-problem",
        "words-of-another-code",
    ],
)
def test_condition_reason_is_the_reason_code(code: reasons.ReasonCode, text: str) -> None:
    objects = b.gang("g", 2, cpu="100")
    snap = snapshot_of(*objects)
    status = podgroups.desired_status(
        observe(objects[0]), snapshot=snap, reason=why(code, text), now=NOW
    )
    assert status is not None
    (condition,) = status["conditions"]
    assert (condition["reason"], condition["message"]) == (code.value, text)


def observe(
    group: dict[str, object], *, status: dict[str, object] | None = None
) -> observations.ObservedObject:
    body = dict(group) | {"status": status or {}}
    seen = observations.observe("PodGroup", body=body, parse_time=lambda _: b.EPOCH)
    assert seen is not None
    return seen


def snapshot_of(*objects: dict[str, object]) -> snapshots.Snapshot:
    return b.cache_of(b.node("n1", cpu="8"), *objects).snapshot(NOW)


def test_waiting_for_pods_before_quorum() -> None:
    group = b.pod_group("g", min_member=3)
    snap = snapshot_of(group, b.pod("g-0", group="g"))
    status = podgroups.desired_status(observe(group), snapshot=snap, reason=None, now=NOW)
    assert status is not None
    assert status["phase"] == "Pending"
    (condition,) = status["conditions"]
    assert condition["status"] == "False"
    assert condition["reason"] == "NotEnoughPods"
    assert condition["message"] == "waiting for pods: 1/3 created, minMember 3"


def test_unschedulable_group_carries_the_schedulers_reason() -> None:
    objects = b.gang("g", 2, cpu="100")
    snap = snapshot_of(*objects)
    text = "gang needs minMember 2, only 0 could be placed; 0/1 nodes fit: 1 Insufficient cpu"
    reason = why(C.NOT_ENOUGH_RESOURCES, text)
    status = podgroups.desired_status(observe(objects[0]), snapshot=snap, reason=reason, now=NOW)
    assert status is not None
    assert status["phase"] == "Inqueue"
    (condition,) = status["conditions"]
    assert (condition["reason"], condition["message"]) == ("NotEnoughResources", text)


def test_placed_group_counts_members_and_keeps_other_conditions() -> None:
    group = b.pod_group("g", min_member=2)
    members = [
        b.pod("g-0", group="g", node="n1"),
        b.pod("g-1", group="g", node="n1", phase="Pending"),
    ]
    snap = snapshot_of(group, *members)
    other = {"type": "Audited", "status": "True", "reason": "Ok", "message": ""}
    seen = observe(group, status={"conditions": [other]})
    status = podgroups.desired_status(seen, snapshot=snap, reason=None, now=NOW)
    assert status is not None
    assert (status["phase"], status["scheduled"], status["running"]) == ("Scheduled", 2, 1)
    types = [c["type"] for c in status["conditions"]]
    assert types == ["Audited", "Scheduled"]
    assert status["conditions"][1]["status"] == "True"


def test_sub_groups_show_their_own_counts() -> None:
    group = b.pod_group("g", min_member=3)
    group["spec"]["subGroups"] = [
        {"name": "launcher", "selector": {"matchLabels": {"role": "launcher"}}},
        {"name": "workers", "minMember": 2, "selector": {"matchLabels": {"role": "worker"}}},
    ]
    members = [
        b.pod("g-0", group="g", node="n1", labels={"role": "launcher"}),
        b.pod("g-1", group="g", node="n1", phase="Pending", labels={"role": "worker"}),
        b.pod("g-2", group="g", labels={"role": "worker"}),
    ]
    snap = snapshot_of(group, *members)
    status = podgroups.desired_status(observe(group), snapshot=snap, reason=None, now=NOW)
    assert status is not None
    assert status["subGroups"] == [
        {"name": "launcher", "minMember": 1, "scheduled": 1, "running": 1},
        {"name": "workers", "minMember": 2, "scheduled": 1, "running": 0},
    ]


def test_transition_time_is_kept_while_the_condition_holds() -> None:
    group = b.pod_group("g", min_member=3)
    snap = snapshot_of(group)
    first = podgroups.desired_status(observe(group), snapshot=snap, reason=None, now=NOW)
    assert first is not None
    later = podgroups.desired_status(
        observe(group, status=first), snapshot=snap, reason=None, now=NOW + 50
    )
    assert later == first
    changed = podgroups.desired_status(
        observe(group, status=first),
        snapshot=snap,
        reason=why(C.QUEUE_CLOSED, "queue q is closed"),
        now=NOW + 60,
    )
    assert changed is not None
    assert changed["conditions"][0]["lastTransitionTime"] == conditions.timestamp(NOW + 60)


def test_group_the_snapshot_does_not_know_gets_no_status() -> None:
    group = b.pod_group("new")
    assert (
        podgroups.desired_status(observe(group), snapshot=snapshot_of(), reason=None, now=NOW)
        is None
    )


def condition(status: str, reason: str, message: str) -> dict[str, object]:
    return {"type": "Scheduled", "status": status, "reason": reason, "message": message}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ({}, {"phase": "Pending", "conditions": [condition("False", "NotEnoughPods", "w")]}, []),
        (
            {},
            {"phase": "Inqueue", "conditions": [condition("False", "Unschedulable", "no")]},
            [("Warning", "FailedScheduling", "no")],
        ),
        (
            {"phase": "Inqueue", "conditions": [condition("False", "Unschedulable", "no")]},
            {"phase": "Inqueue", "conditions": [condition("False", "Unschedulable", "no")]},
            [],
        ),
        (
            {"phase": "Inqueue", "conditions": [condition("False", "Unschedulable", "no")]},
            {"phase": "Running", "conditions": [condition("True", "Scheduled", "4 placed")]},
            [("Normal", "Scheduled", "4 placed")],
        ),
        (
            {"phase": "Inqueue", "conditions": [condition("False", "Unschedulable", "no")]},
            {"phase": "Failed", "conditions": [condition("False", "Timeout", "timed out")]},
            [("Warning", "FailedScheduling", "timed out"), ("Warning", "Failed", "timed out")],
        ),
        (
            {"phase": "Running", "conditions": [condition("True", "Scheduled", "4 placed")]},
            {"phase": "Finished", "conditions": [condition("True", "Scheduled", "4 placed")]},
            [("Normal", "Finished", "every member finished")],
        ),
    ],
    ids=["waiting-for-pods", "unschedulable", "unchanged", "placed", "timed-out", "finished"],
)
def test_transition_events(
    old: dict[str, object], new: dict[str, object], expected: list[tuple[str, str, str]]
) -> None:
    assert podgroups.transition_events(old, new) == expected


def test_a_waiting_group_says_what_the_autoscaler_did_and_a_placed_one_not() -> None:
    objects = b.gang("g", 2, cpu="100")
    snap = snapshot_of(*objects)
    reason = why(C.NOT_ENOUGH_RESOURCES, "0/1 nodes fit: 1 Insufficient cpu")
    verdict = scale_up.ScaleUp(
        scale_up.ScaleUpReason.AUTOSCALER_CANNOT_FIT,
        "Karpenter cannot place 2 of its 2 waiting pods on any node it could add, ...",
    )
    status = podgroups.desired_status(
        observe(objects[0]), snapshot=snap, reason=reason, now=NOW, scale_up=verdict
    )
    assert status is not None
    found = conditions.find(status, scale_up.CONDITION_SCALE_UP)
    assert found is not None
    assert (found["status"], found["reason"], found["message"]) == (
        "False",
        "AutoscalerCannotFit",
        verdict.message,
    )
    # The Scheduled condition still says why the group waits.
    scheduled = conditions.find(status, "Scheduled")
    assert scheduled is not None and scheduled["reason"] == "NotEnoughResources"
    # Placed: the ScaleUp condition goes.
    group = b.pod_group("p", min_member=1)
    placed = snapshot_of(group, b.pod("p-0", group="p", node="n1"))
    seen = observe(group, status={"conditions": [dict(found)]})
    after = podgroups.desired_status(seen, snapshot=placed, reason=None, now=NOW, scale_up=verdict)
    assert after is not None
    assert [c["type"] for c in after["conditions"]] == ["Scheduled"]
