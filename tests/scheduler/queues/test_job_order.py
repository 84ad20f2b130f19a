"""Order within a queue, per queue (``spec.jobOrder``; issue 16, "Must show" 4).

One cycle over a queue with more waiting one-cpu groups than free cores; which groups get the
cores shows the order.

We test these aspects:
- PriorityFIFO (the default): highest priority first, then oldest;
- FIFO: oldest first, whatever the priority;
- NamespaceFair: namespaces take turns by what they hold, running pods included — a namespace
  that submitted first and most does not take every free core; inside a namespace, priority
  then age;
- each queue follows its own policy in the same cycle;
- a gang is one turn of its namespace, as large as its quorum.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, gang, queue, t


def ordered_queue(name: str, policy: str | None) -> runs.Obj:
    obj = queue(name)
    if policy is not None:
        obj["spec"]["jobOrder"] = policy
    return obj


def waiting(name: str, *, at: float, priority: int = 0, ns: str = "a", q: str = "q") -> runs.Obj:
    return cpu_pod(name, namespace=ns, queue=q, created=t(at), priority=priority)


def running(name: str, *, ns: str, q: str = "q") -> runs.Obj:
    return cpu_pod(name, namespace=ns, queue=q, node="n1", created=t(-1000))


MIXED = [
    waiting("old-low", at=-30, priority=1),
    waiting("mid-high", at=-20, priority=10),
    waiting("new-high", at=-10, priority=10),
    waiting("newest-low", at=-5, priority=1),
]


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    policy: str | None
    cpu: str  # the one node's cores
    pods: list[runs.Obj]
    bound: set[str]


CASES = [
    Case("default-is-priority-then-fifo", None, "2", MIXED, {"mid-high", "new-high"}),
    Case("priority-fifo", "PriorityFIFO", "2", MIXED, {"mid-high", "new-high"}),
    Case("fifo-ignores-priority", "FIFO", "2", MIXED, {"old-low", "mid-high"}),
    Case(
        "namespace-fair-takes-turns",
        "NamespaceFair",
        "4",
        [
            *[waiting(f"a{i}", at=-30 + i, ns="a") for i in range(4)],
            *[waiting(f"b{i}", at=-10 + i, ns="b") for i in range(4)],
        ],
        {"a0", "a1", "b0", "b1"},
    ),
    Case(
        "fifo-serves-the-first-namespace",
        "FIFO",
        "4",
        [
            *[waiting(f"a{i}", at=-30 + i, ns="a") for i in range(4)],
            *[waiting(f"b{i}", at=-10 + i, ns="b") for i in range(4)],
        ],
        {"a0", "a1", "a2", "a3"},
    ),
    Case(
        "namespace-fair-counts-what-runs",
        "NamespaceFair",
        "6",
        [
            running("a-run0", ns="a"),
            running("a-run1", ns="a"),
            *[waiting(f"a{i}", at=-30 + i, ns="a") for i in range(4)],
            *[waiting(f"b{i}", at=-10 + i, ns="b") for i in range(4)],
        ],
        {"b0", "b1", "b2", "a0"},
    ),
    Case(
        "namespace-fair-priority-inside-a-namespace",
        "NamespaceFair",
        "2",
        [
            waiting("a-old", at=-30, ns="a"),
            waiting("a-high", at=-20, ns="a", priority=10),
            waiting("b-new", at=-10, ns="b"),
        ],
        {"a-high", "b-new"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_job_order(case: Case) -> None:
    run = runs.Run(b.node("n1", cpu=case.cpu), ordered_queue("q", case.policy), *case.pods)
    outcome = run.cycle()
    assert set(outcome.bound) == case.bound


def test_each_queue_follows_its_own_order() -> None:
    run = runs.Run(
        b.node("n1", cpu="4"),
        ordered_queue("fifo", "FIFO"),
        ordered_queue("prio", None),
        waiting("f-old", at=-30, q="fifo"),
        waiting("f-mid", at=-20, q="fifo"),
        waiting("f-high", at=-10, q="fifo", priority=10),
        waiting("p-old", at=-30, q="prio"),
        waiting("p-mid", at=-20, q="prio"),
        waiting("p-high", at=-10, q="prio", priority=10),
    )
    assert set(run.cycle().bound) == {"f-old", "f-mid", "p-high", "p-old"}


def test_a_gang_is_one_turn_as_large_as_its_quorum() -> None:
    group, *members = gang("big", 3, queue="q", created=t(-30))
    run = runs.Run(
        b.node("n1", cpu="5"),
        ordered_queue("q", "NamespaceFair"),
        group,
        *members,
        *[waiting(f"b{i}", at=-10 + i, ns="b") for i in range(4)],
    )
    # The gang's turn weighs its three cores (0.6 of the node): b's first two one-cpu turns
    # (0.2, 0.4) come before it, its third ties with it and the older gang goes first.
    assert set(run.cycle().bound) == {"b0", "b1", "big-0", "big-1", "big-2"}
