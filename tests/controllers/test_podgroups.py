"""The PodGroup controller's status (``berth.controllers.podgroups``), computed purely.

We test these aspects:

- the phase for member counts and the scheduler's reason (table), the timeout included;
- the CamelCase reason the ``Reason`` column shows, for each kind of why-pending text (table);
- the desired status: counts, phase, the ``Scheduled`` condition (True once placed; False with
  the scheduler's reason, or "waiting for pods" before quorum), other conditions kept, and the
  transition time kept while the condition does not change; per sub-group counts; nothing for
  a group the snapshot does not know yet;
- the Events a change is worth: placed, unschedulable (a new reason), failed, finished — and
  none for waiting on pods or for an unchanged status.
"""

from __future__ import annotations

import pytest

from berth.controllers import observed, podgroups
from berth.kube import conditions
from berth.scheduler.snapshot import snapshots
from tests.scheduler import builders as b

NOW = b.EPOCH + 100
P = podgroups.Phase


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
        (counts(4, created=4), "0/3 nodes fit: 3 Insufficient cpu", True, P.INQUEUE),
        (counts(4, created=4, scheduled=4), None, True, P.SCHEDULED),
        (counts(4, created=4, scheduled=4, running=4), None, True, P.RUNNING),
        (counts(4, created=4, scheduled=4, running=2, succeeded=2), None, True, P.RUNNING),
        (counts(4, created=4, scheduled=4, succeeded=4), None, True, P.FINISHED),
        (counts(4, created=1, scheduled=4, succeeded=1, failed=3), None, True, P.FAILED),
        (counts(4, created=4), "schedule timeout of 60s exceeded (waiting 61s): x", True, P.FAILED),
        (counts(4, created=4), "schedule timeout of 60s exceeded (attempt 1): x", False, P.INQUEUE),
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
        "no-members",
    ],
)
def test_phase(
    given: podgroups.Counts, reason: str | None, fail_on_timeout: bool, phase: podgroups.Phase
) -> None:
    assert podgroups.phase_of(given, reason=reason, fail_on_timeout=fail_on_timeout) is phase


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("schedule timeout of 60s exceeded (waiting 61s): 0/3 nodes fit", "Timeout"),
        ("waiting for pods: 3/8 created, minMember 8", "NotEnoughPods"),
        ("queue team-z does not exist", "QueueNotFound"),
        ("queue team-a is closed", "QueueClosed"),
        ("queue research is not a leaf queue", "NotLeafQueue"),
        ("queue team-a at limit for cpu (needs 2, 1 left)", "QueueOverLimit"),
        ("queue team-b is over its share", "QueueOverShare"),
        ("not enough free resources in the cluster for minResources: cpu", "NotEnoughResources"),
        (
            "gang needs minMember 4, only 2 could be placed; 0/3 nodes fit: 3 Insufficient cpu",
            "NotEnoughResources",
        ),
        ("node(s) didn't match Pod's node affinity/selector", "Unschedulable"),
    ],
    ids=[
        "timeout",
        "pods",
        "no-queue",
        "closed",
        "not-leaf",
        "limit",
        "share",
        "min-resources",
        "insufficient",
        "other",
    ],
)
def test_reason_code(text: str, code: str) -> None:
    assert podgroups.reason_code(text) == code


def observe(
    group: dict[str, object], *, status: dict[str, object] | None = None
) -> observed.ObservedObject:
    body = dict(group) | {"status": status or {}}
    seen = observed.observe("PodGroup", body=body, parse_time=lambda _: b.EPOCH)
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
    why = "gang needs minMember 2, only 0 could be placed; 0/1 nodes fit: 1 Insufficient cpu"
    status = podgroups.desired_status(observe(objects[0]), snapshot=snap, reason=why, now=NOW)
    assert status is not None
    assert status["phase"] == "Inqueue"
    (condition,) = status["conditions"]
    assert (condition["reason"], condition["message"]) == ("NotEnoughResources", why)


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
        observe(group, status=first), snapshot=snap, reason="queue q is closed", now=NOW + 60
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
