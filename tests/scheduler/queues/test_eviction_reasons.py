"""What a pod evicted for another queue's job is told (issue 16).

We test these aspects, as a table of one-cycle scenarios, by the exact text every evicted
pod's decision carries (the Event and the pod's condition show it):
- reclaim within the reclaiming queue's own guarantee, and within a parent queue's guarantee;
- reclaim toward the reclaiming queue's weighted fair share;
- priority across queues (the preempting queue sets ``preemptAcrossQueues``), and priority
  inside one queue, which names no queue.
"""

from __future__ import annotations

import dataclasses

import pytest

from berth.scheduler.framework import decisions
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, gang, queue, t

NODE = b.node("n1", cpu="4", memory="64Gi")


def running(prefix: str, count: int, *, queue_name: str, priority: int = 0) -> list[runs.Obj]:
    """``count`` one-cpu pods of ``queue_name`` on n1, running for ten minutes (past the
    minimum runtime)."""
    return [
        cpu_pod(
            f"{prefix}{i}",
            queue=queue_name,
            node="n1",
            priority=priority,
            created=t(-600 + i),
        )
        for i in range(count)
    ]


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    objects: list[runs.Obj]
    reasons: dict[str, str]  # evicted pod -> its reason (every evicted pod is listed)


CASES = [
    Case(
        "reclaim-within-the-queues-own-guarantee",
        [
            NODE,
            queue("a", guaranteed={"cpu": "2"}),
            queue("b"),
            *running("b", 4, queue_name="b"),
            *gang("train", 2, queue="a", created=t(-10)),
        ],
        {
            f"b{i}": "reclaimed by queue a for pod group default/train: within its guarantee"
            for i in (2, 3)
        },
    ),
    Case(
        "reclaim-within-a-parent-queues-guarantee",
        [
            NODE,
            queue("org", guaranteed={"cpu": "2"}),
            queue("a", parent="org"),
            queue("b"),
            *running("b", 4, queue_name="b"),
            *gang("train", 2, queue="a", created=t(-10)),
        ],
        {
            f"b{i}": "reclaimed by queue a for pod group default/train: "
            "within the guarantee of parent queue org"
            for i in (2, 3)
        },
    ),
    Case(
        "reclaim-toward-the-fair-share",
        [
            NODE,
            queue("a"),
            queue("b"),
            *running("b", 4, queue_name="b"),
            *gang("train", 2, queue="a", created=t(-10)),
        ],
        {
            f"b{i}": "reclaimed by queue a for pod group default/train: toward its fair share"
            for i in (2, 3)
        },
    ),
    Case(
        "priority-across-queues",
        [
            NODE,
            {**queue("hi"), "spec": {"preemptAcrossQueues": True}},
            queue("lo", reclaimable=False),  # not reclaim: priority alone takes the room
            *running("lo", 4, queue_name="lo", priority=1),
            *gang("hi", 2, queue="hi", priority=100, created=t(-10)),
        ],
        {f"lo{i}": "preempted by pod group default/hi (priority 100) of queue hi" for i in (2, 3)},
    ),
    Case(
        "priority-inside-one-queue",
        [
            NODE,
            queue("q"),
            *running("low", 4, queue_name="q", priority=1),
            *gang("hi", 2, queue="q", priority=100, created=t(-10)),
        ],
        {f"low{i}": "preempted by pod group default/hi (priority 100)" for i in (2, 3)},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_an_evicted_pod_says_who_took_the_room_and_why(case: Case) -> None:
    outcome = runs.Run(*case.objects).cycle()
    reasons = {d.name: d.reason for d in outcome.result.of_kind(decisions.EvictPod)}
    assert reasons == case.reasons
