"""The queue hierarchy's hard rules, with the exact texts users see (issue 16, "Must show" 5).

We test these aspects:
- a Closed parent closes every queue under it, at any depth: new groups wait with
  ``queue team-a is closed: its parent queue org is Closed``; a group that already runs there
  may still complete; opening the parent again admits the waiting work;
- a gang whose quorum exceeds a limit on its queue's path says so permanently —
  ``can never fit: needs 20 cpu, queue limit 16`` (its own queue),
  ``can never fit: needs 20 cpu, parent queue org limit 16`` (an ancestor), and for
  ``minResources`` — while a gang that fits the limit but not now waits for room;
- the permanent reason stays the same cycle after cycle, and goes once the limit is raised.
"""

from __future__ import annotations

import pytest

from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, gang, queue, t

NODES = [b.node(f"n{i}", cpu="16", memory="64Gi") for i in range(3)]  # 48 cpu


def test_a_closed_parent_closes_every_queue_under_it() -> None:
    run = runs.Run(
        *NODES,
        queue("org", state="Closed"),
        queue("dept", parent="org"),
        queue("team-a", parent="dept"),
        queue("team-b", parent="org"),
        *gang("ga", 2, queue="team-a", created=t(-10)),
        *gang("gb", 2, queue="team-b", created=t(-9)),
    )
    outcome = run.cycle()
    assert outcome.bound == {}
    assert outcome.group_reasons == {
        "ga": "queue team-a is closed: its parent queue org is Closed",
        "gb": "queue team-b is closed: its parent queue org is Closed",
    }
    run.put(queue("org"))
    assert set(run.cycle().bound) == {"ga-0", "ga-1", "gb-0", "gb-1"}


def test_a_group_already_running_under_a_closed_parent_may_complete() -> None:
    group, first, second = gang("ga", 2, queue="team-a", min_member=1, created=t(-10))
    first = {**first, "spec": {**first["spec"], "nodeName": "n0"}, "status": {"phase": "Running"}}
    run = runs.Run(
        *NODES,
        queue("org", state="Closed"),
        queue("team-a", parent="org"),
        group,
        first,
        second,
        *gang("new", 1, queue="team-a", created=t(-5)),
    )
    outcome = run.cycle()
    assert set(outcome.bound) == {"ga-1"}
    assert outcome.group_reasons["new"] == "queue team-a is closed: its parent queue org is Closed"


@pytest.mark.parametrize(
    ("queues", "group", "reason"),
    [
        (
            [queue("team", limit={"cpu": "16"})],
            gang("big", 20, queue="team"),
            "can never fit: needs 20 cpu, queue limit 16",
        ),
        (
            [queue("org", limit={"cpu": "16"}), queue("team", parent="org")],
            gang("big", 20, queue="team"),
            "can never fit: needs 20 cpu, parent queue org limit 16",
        ),
        (
            [queue("team", limit={"cpu": "16"})],
            [
                b.pod_group("big", min_member=2, queue="team", min_resources={"cpu": "20"}),
                cpu_pod("big-0", group="big"),
                cpu_pod("big-1", group="big"),
            ],
            "can never fit: needs 20 cpu, queue limit 16",
        ),
        (
            [queue("team", limit={"memory": "8Gi"})],
            gang("big", 10, queue="team"),
            "can never fit: needs 10Gi memory, queue limit 8Gi",
        ),
    ],
    ids=["own-limit", "parent-limit", "min-resources", "memory"],
)
def test_a_gang_above_a_limit_can_never_fit(
    queues: list[runs.Obj], group: list[runs.Obj], reason: str
) -> None:
    run = runs.Run(*NODES, *queues, *group)
    for _ in range(3):  # the same words every cycle: nothing to wait for
        outcome = run.cycle()
        assert outcome.bound == {}
        assert outcome.group_reasons["big"] == reason
        assert outcome.pod_reasons["big-0"] == f"pod group default/big: {reason}"
        run.clock.advance(60)


def test_a_gang_within_the_limit_waits_for_room_instead() -> None:
    run = runs.Run(
        *NODES,
        queue("team", limit={"cpu": "16"}),
        *[cpu_pod(f"r{i}", queue="team", node="n0", created=t(-100 + i)) for i in range(10)],
        *gang("g", 8, queue="team", created=t(-10)),
    )
    reason = run.cycle().group_reasons["g"]
    assert not reason.startswith("can never fit")
    assert "queue team at limit for cpu (16/16)" in reason


def test_raising_the_limit_lifts_the_permanent_reason() -> None:
    run = runs.Run(*NODES, queue("team", limit={"cpu": "16"}), *gang("big", 20, queue="team"))
    assert run.cycle().group_reasons["big"] == "can never fit: needs 20 cpu, queue limit 16"
    run.put(queue("team", limit={"cpu": "24"}))
    assert len(run.cycle().bound) == 20
