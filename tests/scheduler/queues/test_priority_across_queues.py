"""Priority across queues (``spec.preemptAcrossQueues``; issue 16, "Must show" 4).

A 4-cpu node is full of queue ``lo``'s priority-1 pods, all started this instant (so
fair-share reclaim, which waits for a minimum runtime, cannot act); queue ``hi`` submits a
priority-100 gang of two.

We test these aspects (one cycle each):
- off by default: priority does not cross queues;
- on: the gang preempts the two newest ``lo`` pods, and the eviction names the queue;
- only what a queue holds above its fair share, and never below its guarantee;
- never a victim of equal or higher priority;
- the policy belongs to the preempting queue: ``lo`` setting it does not expose itself.
"""

from __future__ import annotations

import dataclasses

import pytest

from berth.scheduler.framework import decisions
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, gang, queue, t


def lo_pods(priority: int = 1) -> list[runs.Obj]:
    out = []
    for i in range(4):
        pod = cpu_pod(f"lo{i}", queue="lo", node="n1", priority=priority, created=t(-100 + i))
        pod["status"]["startTime"] = b.timestamp(t(0))
        out.append(pod)
    return out


def with_policy(obj: runs.Obj, on: bool) -> runs.Obj:
    if on:
        obj["spec"]["preemptAcrossQueues"] = True
    return obj


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    hi: runs.Obj
    lo: runs.Obj
    lo_priority: int
    evicted: set[str]


CASES = [
    Case("off-by-default", queue("hi"), queue("lo"), 1, set()),
    Case("on", with_policy(queue("hi"), True), queue("lo"), 1, {"lo2", "lo3"}),
    Case(
        "not-below-a-guarantee",
        with_policy(queue("hi"), True),
        queue("lo", guaranteed={"cpu": "4"}),
        1,
        set(),
    ),
    Case("not-equal-priority", with_policy(queue("hi"), True), queue("lo"), 100, set()),
    Case(
        "the-victims-policy-does-not-count", queue("hi"), with_policy(queue("lo"), True), 1, set()
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_priority_across_queues(case: Case) -> None:
    run = runs.Run(
        b.node("n1", cpu="4", memory="64Gi"),
        case.hi,
        case.lo,
        *lo_pods(case.lo_priority),
        *gang("hi", 2, queue="hi", priority=100, created=t(-10)),
    )
    outcome = run.cycle()
    assert outcome.evicted == case.evicted
    if case.evicted:
        assert set(outcome.bound) == {"hi-0", "hi-1"}
        reasons = {d.name: d.reason for d in outcome.result.of_kind(decisions.EvictPod)}
        assert reasons["lo3"] == "preempted by pod group default/hi (priority 100) of queue hi"


def test_only_what_a_queue_holds_above_its_share() -> None:
    # Weights 1:3 split the node 1/3: lo holds one core above its share. Two high-priority
    # pods of hi (groups of one) ask: the first takes that core, the second finds lo at its
    # share and waits.
    run = runs.Run(
        b.node("n1", cpu="4", memory="64Gi"),
        with_policy(queue("hi", weight=1), True),
        queue("lo", weight=3),
        *lo_pods(1),
        *[cpu_pod(f"hi{i}", queue="hi", priority=100, created=t(-10 + i)) for i in range(2)],
    )
    outcome = run.cycle()
    assert outcome.evicted == {"lo3"}
    assert set(outcome.bound) == {"hi0"}
