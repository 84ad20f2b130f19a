"""Priority: higher priority first, then older first — plain pods, jobs, tasks, victims.

We test these aspects:
- QueueSort ``less``: priority, then creation time (a table);
- in a cycle with room for one pod: plain pods, jobs (by PriorityClass, or their highest
  member) and tasks within a job are served in priority order, ties going to the older;
- preemption may take only lower-priority victims.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.framework import jobs
from berth.scheduler.plugins import priority
from berth.scheduler.snapshot import podgroups
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]


@pytest.mark.parametrize(
    ("a", "b_", "expected"),
    [
        ((10, 0.0), (1, 0.0), True),
        ((1, 0.0), (10, 0.0), False),
        ((5, 1.0), (5, 2.0), True),
        ((5, 2.0), (5, 1.0), False),
        ((5, 1.0), (5, 1.0), False),
        ((-1, 0.0), (0, 9.0), False),
    ],
    ids=["higher-first", "lower-later", "older-first", "newer-later", "full-tie", "negative"],
)
def test_less(a: tuple[int, float], b_: tuple[int, float], expected: bool) -> None:
    first = harness.info(name="a", priority=a[0], created=b.EPOCH + a[1])
    second = harness.info(name="b", priority=b_[0], created=b.EPOCH + b_[1])
    assert priority.Priority().less(first, second) is expected


ROOM_FOR_ONE = b.node("only", cpu="1", memory="4Gi")


@pytest.mark.parametrize(
    ("objs", "winner"),
    [
        (
            [b.pod("low", cpu="1", priority=10), b.pod("high", cpu="1", priority=100)],
            "default/high",
        ),
        (
            [
                b.pod("newer", cpu="1", priority=5, created=b.EPOCH + 5),
                b.pod("older", cpu="1", priority=5, created=b.EPOCH + 1),
            ],
            "default/older",
        ),
        (
            [
                b.priority_class("gold", 1000),
                b.pod_group("bronze-job"),
                b.pod("bronze", group="bronze-job", cpu="1", created=b.EPOCH - 10),
                b.pod_group("gold-job", priority_class="gold"),
                b.pod("gold", group="gold-job", cpu="1"),
            ],
            "default/gold",
        ),
        (
            [
                b.pod("plain-queued", queue="default", cpu="1", priority=1, created=b.EPOCH - 10),
                b.pod("urgent", queue="default", cpu="1", priority=50),
            ],
            "default/urgent",
        ),
        (
            [
                b.pod_group("job"),
                b.pod("task-low", group="job", cpu="1", priority=1, created=b.EPOCH - 10),
                b.pod("task-high", group="job", cpu="1", priority=50),
            ],
            "default/task-high",
        ),
    ],
    ids=[
        "plain-by-priority",
        "plain-tie-older",
        "job-by-class",
        "implicit-job-by-pod",
        "task-order",
    ],
)
def test_the_higher_priority_gets_the_last_room(objs: list[Obj], winner: str) -> None:
    bound, reasons, _ = harness.cycle(ROOM_FOR_ONE, *objs)
    assert bound == {winner: "only"}
    losers = {f"default/{o['metadata']['name']}" for o in objs if o["kind"] == "Pod"} - {winner}
    for loser in losers:
        assert reasons[loser].endswith("0/1 nodes fit: 1 Insufficient cpu")


def test_preemption_takes_only_lower_priority_victims() -> None:
    group = podgroups.pod_group_info(b.pod_group("g"))
    job = jobs.Job(
        podgroups.with_members(group, members=[harness.info(name="m", group="g", priority=10)]),
        pending=[],
    )
    assert priority.may_preempt(job, harness.info(name="v", priority=9))
    assert not priority.may_preempt(job, harness.info(name="v", priority=10))
