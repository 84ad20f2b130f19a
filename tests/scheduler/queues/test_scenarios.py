"""Queue scenarios on the in-memory cluster: exact placements and evictions (issue 5, "Must
show" 1), one default-profile cycle each (allocate, backfill, reclaim, preempt).

We test these aspects:
- guarantee restored by reclaim: the newest pods of the borrowing queue go, the gang lands
  where they were;
- lending an idle guarantee and taking it back (two cycles on the same cluster);
- weights 1:2:3 splitting spare capacity;
- nested queues: a parent's guarantee shared by its children, each child reclaiming;
- a limit capping a lone queue (with its reason), and a gang larger than the limit told it
  can never start;
- priority between sibling queues;
- a closed queue admits nothing new but lets a running group finish;
- preemption within a queue (lowest priority, newest first), not across queues, and not by
  pods with ``preemptionPolicy: Never``;
- no victim is chosen when the reclaimer's gang would still not fit;
- gang-safe victims: a spare member alone, or the whole gang, never a gang below minMember.
"""

from __future__ import annotations

import dataclasses

import pytest

from berth.scheduler.framework import decisions
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, gang, queue, t

N4x2 = [b.node("n1", cpu="4"), b.node("n2", cpu="4")]


def running(pods: list[runs.Obj], *, node: str) -> list[runs.Obj]:
    """``pods`` (a group and its pods) with every pod already running on ``node``."""
    return [
        {**p, "spec": {**p["spec"], "nodeName": node}, "status": {"phase": "Running"}}
        if p["kind"] == "Pod"
        else p
        for p in pods
    ]


def never(pods: list[runs.Obj]) -> list[runs.Obj]:
    """``pods`` with ``preemptionPolicy: Never`` (as admission copies it from the class)."""
    return [
        {**p, "spec": {**p["spec"], "preemptionPolicy": "Never"}} if p["kind"] == "Pod" else p
        for p in pods
    ]


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    objects: list[runs.Obj]
    bound: dict[str, str]  # every pod bound this cycle -> its node
    evicted: set[str] = dataclasses.field(default_factory=set)
    group_reasons: dict[str, str] = dataclasses.field(default_factory=dict)


CASES = [
    Case(
        "guarantee-restored-by-reclaim",
        [
            *N4x2,
            queue("a", guaranteed={"cpu": "4"}),
            queue("b"),
            *[
                cpu_pod(f"b{i}", queue="b", node="n1" if i < 4 else "n2", created=t(-100 + i))
                for i in range(8)
            ],
            *gang("train", 4, queue="a", created=t(-10)),
        ],
        {f"train-{i}": "n2" for i in range(4)},
        {"b4", "b5", "b6", "b7"},
    ),
    Case(
        "weights-1-2-3-split-spare-capacity",
        [
            b.node("n1", cpu="6"),
            b.node("n2", cpu="6"),
            queue("w1", weight=1),
            queue("w2", weight=2),
            queue("w3", weight=3),
            *[
                cpu_pod(f"{q}-{i}", queue=q, created=t(-100 + i))
                for i in range(12)
                for q in ("w1", "w2", "w3")
            ],
        ],
        {
            "w1-0": "n1",
            "w1-1": "n1",
            "w2-0": "n2",
            "w2-1": "n1",
            "w2-2": "n2",
            "w2-3": "n1",
            "w3-0": "n1",
            "w3-1": "n2",
            "w3-2": "n2",
            "w3-3": "n1",
            "w3-4": "n2",
            "w3-5": "n2",
        },
    ),
    Case(
        "nested-queues-share-their-parents-guarantee",
        [
            *[b.node(f"n{i}", cpu="4") for i in (1, 2, 3)],
            queue("team", guaranteed={"cpu": "8"}),
            queue("team-a", parent="team"),
            queue("team-b", parent="team"),
            queue("other"),
            *[
                cpu_pod(f"o{i}", queue="other", node=f"n{i // 4 + 1}", created=t(-100 + i))
                for i in range(12)
            ],
            *gang("ta", 4, queue="team-a", created=t(-10)),
            *gang("tb", 4, queue="team-b", created=t(-9)),
        ],
        {**{f"ta-{i}": "n3" for i in range(4)}, **{f"tb-{i}": "n2" for i in range(4)}},
        {f"o{i}" for i in range(4, 12)},
    ),
    Case(
        "a-limit-caps-a-lone-queue",
        [
            b.node("n1", cpu="8"),
            queue("a", limit={"cpu": "3"}),
            *gang("big", 4, queue="a", created=t(-20)),
            *[cpu_pod(f"a{i}", queue="a", created=t(-10 + i)) for i in range(5)],
        ],
        {"a0": "n1", "a1": "n1", "a2": "n1"},
        group_reasons={
            # Four one-cpu pods under a 3-cpu limit: no amount of waiting places the gang.
            "big": "can never fit: needs 4 cpu, queue limit 3",
            "pod:a3": "queue a at limit for cpu (3/3)",
            "pod:a4": "queue a at limit for cpu (3/3)",
        },
    ),
    Case(
        "the-higher-priority-sibling-queue-goes-first",
        [
            b.node("n1", cpu="4"),
            queue("hi", priority=10),
            queue("lo"),
            *[cpu_pod(f"lo{i}", queue="lo", created=t(-100 + i)) for i in range(4)],
            *[cpu_pod(f"hi{i}", queue="hi", created=t(-50 + i)) for i in range(4)],
        ],
        {f"hi{i}": "n1" for i in range(4)},
    ),
    Case(
        "a-closed-queue-admits-nothing-new-but-lets-a-running-group-go-on",
        [
            b.node("n1", cpu="4"),
            queue("c", state="Closed"),
            *gang("new", 1, queue="c", created=t(-10)),
            *gang("old", 2, queue="c", min_member=1, created=t(-100))[:2],
            cpu_pod("old-1", group="old", node="n1", created=t(-100)),
        ],
        {"old-0": "n1"},
        group_reasons={"new": "queue c is closed"},
    ),
    Case(
        "preemption-within-a-queue-takes-the-newest-lowest-priority-pods",
        [
            *N4x2,
            queue("q"),
            queue("r"),
            *[
                cpu_pod(f"low{i}", queue="q", node="n1", priority=1, created=t(-100 + i))
                for i in range(4)
            ],
            *[
                cpu_pod(f"r{i}", queue="r", node="n2", priority=1, created=t(-100 + i))
                for i in range(4)
            ],
            *gang("hi", 2, queue="q", priority=100, created=t(-10)),
        ],
        {"hi-0": "n1", "hi-1": "n1"},
        {"low2", "low3"},
    ),
    Case(
        # r is not reclaimable, so fair-share reclaim stays out of it: only priority could
        # move q's gang in, and priority does not cross queues.
        "preemption-never-crosses-queues",
        [
            b.node("n1", cpu="4"),
            queue("q"),
            queue("r", reclaimable=False),
            *[
                cpu_pod(f"r{i}", queue="r", node="n1", priority=1, created=t(-100 + i))
                for i in range(4)
            ],
            *gang("hi", 2, queue="q", priority=100, created=t(-10)),
        ],
        {},
        group_reasons={
            "hi": "gang needs minMember 2, only 0 could be placed; "
            "0/1 nodes fit: 1 Insufficient cpu"
        },
    ),
    Case(
        "pods-with-preemption-policy-never-do-not-preempt",
        [
            b.node("n1", cpu="4"),
            queue("q"),
            *[
                cpu_pod(f"low{i}", queue="q", node="n1", priority=1, created=t(-100 + i))
                for i in range(4)
            ],
            *never(gang("hi", 2, queue="q", priority=100, created=t(-10))),
        ],
        {},
    ),
    Case(
        "no-victim-when-the-reclaimers-gang-would-still-not-fit",
        [
            *N4x2,
            queue("a", guaranteed={"cpu": "8"}),
            queue("b"),
            queue("c", reclaimable=False),
            *[cpu_pod(f"b{i}", queue="b", node="n1", created=t(-100 + i)) for i in range(4)],
            *[cpu_pod(f"c{i}", queue="c", node="n2", created=t(-100 + i)) for i in range(4)],
            *gang("wide", 8, queue="a", created=t(-10)),
        ],
        {},
    ),
    Case(
        "a-gang-gives-up-a-spare-member-alone",
        [
            b.node("n1", cpu="4"),
            queue("a", guaranteed={"cpu": "4"}),
            queue("b"),
            *running(gang("g", 4, queue="b", min_member=3, created=t(-100)), node="n1"),
            *gang("one", 1, queue="a", created=t(-10)),
        ],
        {"one-0": "n1"},
        {"g-0"},
    ),
    Case(
        "a-gang-that-cannot-spare-enough-goes-whole",
        [
            b.node("n1", cpu="4"),
            queue("a", guaranteed={"cpu": "4"}),
            queue("b"),
            *running(gang("g", 4, queue="b", min_member=3, created=t(-100)), node="n1"),
            *gang("two", 2, queue="a", created=t(-10)),
        ],
        {"two-0": "n1", "two-1": "n1"},
        {"g-0", "g-1", "g-2", "g-3"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_scenario(case: Case) -> None:
    outcome = runs.Run(*case.objects).cycle()
    assert outcome.bound == case.bound
    assert outcome.evicted == case.evicted
    for group, reason in case.group_reasons.items():
        assert outcome.group_reasons[group] == reason


def test_an_idle_guarantee_is_lent_and_taken_back() -> None:
    run = runs.Run(
        *N4x2,
        queue("a", guaranteed={"cpu": "4"}),
        queue("b"),
        *[cpu_pod(f"b{i}", queue="b", created=t(-100 + i)) for i in range(8)],
    )
    lent = run.cycle()
    assert lent.bound == {f"b{i}": ("n1" if i % 2 == 0 else "n2") for i in range(8)}
    assert lent.queues["b"].fair_share["cpu"] == 8000  # a's idle guarantee is in b's share
    run.put(*gang("train", 4, queue="a", created=t(-10)))
    taken = run.cycle()
    assert taken.evicted == {"b4", "b5", "b6", "b7"}
    assert taken.bound == {"train-0": "n1", "train-1": "n2", "train-2": "n1", "train-3": "n2"}
    assert taken.queues["a"].allocated["cpu"] == 4000
    assert taken.queues["b"].allocated["cpu"] == 4000
    assert taken.queues["b"].fair_share["cpu"] == 4000


def test_evictions_name_who_took_the_room() -> None:
    case = CASES[0]
    outcome = runs.Run(*case.objects).cycle()
    reasons = {d.name: d.reason for d in outcome.result.of_kind(decisions.EvictPod)}
    assert reasons["b7"] == "reclaimed by queue a for pod group default/train: within its guarantee"
    preempted = runs.Run(*CASES[6].objects).cycle()
    reasons = {d.name: d.reason for d in preempted.result.of_kind(decisions.EvictPod)}
    assert reasons["low3"] == "preempted by pod group default/hi (priority 100)"
