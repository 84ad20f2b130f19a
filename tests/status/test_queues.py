"""A Queue's status (``berth.status.queues``), computed purely.

We test these aspects:

- tree validation (table): a root, a chain, a missing parent, a cycle, its own parent;
- with the queue plugin's summary: allocated, requested, fair share, children and counts as
  published, the summary's problem making the queue invalid;
- without a summary: the snapshot's placed and pending pods charged to the queue and its
  ancestors, group counts, children from the tree;
- the ``Valid`` condition and its transition time; the Events of becoming invalid or valid.
"""

from __future__ import annotations

import pytest

from berth.api import resources
from berth.scheduler.framework import decisions
from berth.status import observations, queues
from tests.scheduler import builders as b

NOW = b.EPOCH + 100


@pytest.mark.parametrize(
    ("parents", "name", "problem"),
    [
        ({"a": None}, "a", None),
        ({"a": None, "b": "a", "c": "b"}, "c", None),
        ({"b": "a"}, "b", "parent queue a does not exist"),
        ({"a": "b", "b": "a"}, "a", "queue hierarchy has a cycle: a -> b -> a"),
        ({"a": "a"}, "a", "queue hierarchy has a cycle: a -> a"),
    ],
    ids=["root", "chain", "missing-parent", "cycle", "own-parent"],
)
def test_tree_problem(parents: dict[str, str | None], name: str, problem: str | None) -> None:
    assert queues.tree_problem(name, parents=parents) == problem


def observe(
    queue: dict[str, object], *, status: dict[str, object] | None = None
) -> observations.ObservedObject:
    seen = observations.observe(
        "Queue", body=dict(queue) | {"status": status or {}}, parse_time=lambda _: 0.0
    )
    assert seen is not None
    return seen


def test_summary_is_published_as_status() -> None:
    team = b.queue("team", parent="org")
    snap = b.cache_of(b.queue("org"), team).snapshot(NOW)
    summary = decisions.QueueStatusSummary(
        allocated=resources.ResourceList({"cpu": 2000, "pods": 2000}),
        requested=resources.ResourceList({"cpu": 500}),
        fair_share=resources.ResourceList({"cpu": 4000}),
        pending=1,
        running=2,
    )
    status = queues.desired_status(observe(team), snapshot=snap, summary=summary, usage={}, now=NOW)
    assert status["allocated"] == {"cpu": "2", "pods": "2"}
    assert status["requested"] == {"cpu": "500m"}
    assert status["fairShare"] == {"cpu": "4"}
    assert (status["pending"], status["running"], status["children"]) == (1, 2, [])
    (valid,) = status["conditions"]
    assert (valid["type"], valid["status"]) == ("Valid", "True")


def test_summary_problem_makes_the_queue_invalid() -> None:
    team = b.queue("team")
    snap = b.cache_of(team).snapshot(NOW)
    summary = decisions.QueueStatusSummary(
        allocated=resources.ResourceList(),
        requested=resources.ResourceList(),
        fair_share=resources.ResourceList(),
        pending=0,
        running=0,
        problem="limit is below guaranteed for cpu",
    )
    status = queues.desired_status(observe(team), snapshot=snap, summary=summary, usage={}, now=NOW)
    (valid,) = status["conditions"]
    assert (valid["status"], valid["reason"], valid["message"]) == (
        "False",
        "Invalid",
        "limit is below guaranteed for cpu",
    )


def test_without_a_summary_the_snapshot_gives_usage_up_the_tree() -> None:
    objects = [
        b.node("n1", cpu="8"),
        b.queue("org"),
        b.queue("team", parent="org"),
        *b.gang("run", 2, queue="team", cpu="1", memory=None, node="n1"),
        b.pod("wait", queue="team", cpu="3", memory=None),
    ]
    snap = b.cache_of(*objects).snapshot(NOW)
    usage = queues.usage_by_queue(snap)
    team = queues.desired_status(
        observe(objects[2]), snapshot=snap, summary=None, usage=usage, now=NOW
    )
    assert team["allocated"] == {"cpu": "2", "pods": "2"}
    assert team["requested"] == {"cpu": "3", "pods": "1"}
    assert (team["running"], team["pending"]) == (1, 1)
    assert "fairShare" not in team
    org = queues.desired_status(
        observe(objects[1]), snapshot=snap, summary=None, usage=usage, now=NOW
    )
    assert org["allocated"] == {"cpu": "2", "pods": "2"}
    assert org["children"] == ["team"]


def test_missing_parent_is_reported() -> None:
    orphan = b.queue("orphan", parent="nowhere")
    snap = b.cache_of(orphan).snapshot(NOW)
    status = queues.desired_status(observe(orphan), snapshot=snap, summary=None, usage={}, now=NOW)
    (valid,) = status["conditions"]
    assert valid["message"] == "parent queue nowhere does not exist"
    # The transition time stays while the condition's status does.
    again = queues.desired_status(
        observe(orphan, status=status), snapshot=snap, summary=None, usage={}, now=NOW + 30
    )
    assert again["conditions"][0]["lastTransitionTime"] == valid["lastTransitionTime"]


def valid(status: str, message: str) -> dict[str, object]:
    return {"conditions": [{"type": "Valid", "status": status, "message": message}]}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ({}, valid("True", "ok"), []),
        ({}, valid("False", "cycle"), [("Warning", "InvalidQueue", "cycle")]),
        (valid("False", "cycle"), valid("False", "cycle"), []),
        (valid("False", "cycle"), valid("True", "ok"), [("Normal", "Valid", "ok")]),
    ],
    ids=["valid", "becomes-invalid", "still-invalid", "valid-again"],
)
def test_transition_events(
    old: dict[str, object], new: dict[str, object], expected: list[tuple[str, str, str]]
) -> None:
    assert queues.transition_events(old, new) == expected
