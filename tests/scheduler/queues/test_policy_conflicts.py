"""A child queue whose policies contradict its parent's is refused (issue 16, bad input).

We test these aspects, as a table: for each contradiction the child's work waits with a
reason naming both fields and its status says so, while the parent, a sibling and their
work are unaffected (nothing half-applied); what is not a contradiction is accepted:
- a child ``limit`` or ``guaranteed`` amount above the nearest ancestor's ``limit`` (also
  across a parent that names no limit);
- a ``jobOrder`` or ``preemptAcrossQueues`` other than what an ancestor sets for its
  subtree; an ancestor holding the defaults (which the API server fills in) binds nobody;
- ``reclaimable: true`` below a queue that is not reclaimable is accepted: the parent's
  protection covers its subtree (the child's ``true`` may be the filled-in default);
- the refused child's own children wait too, naming it.
"""

from __future__ import annotations

import dataclasses
import typing

import pytest

from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import gang, t

NODE = b.node("n1", cpu="8", memory="64Gi")


def queue(name: str, **spec: typing.Any) -> runs.Obj:
    obj = b.queue(name)
    obj["spec"].update(spec)
    return obj


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    queues: list[runs.Obj]  # org (the parent), its child qa, and qa's sibling qb
    problem: str | None  # qa's problem; None: accepted


CASES = [
    Case(
        "child-limit-above-parent-limit",
        [queue("org", limit={"cpu": "4"}), queue("qa", parent="org", limit={"cpu": "6"})],
        "spec.limit.cpu 6 is above parent queue org's spec.limit.cpu 4",
    ),
    Case(
        "child-guarantee-above-parent-limit",
        [queue("org", limit={"cpu": "4"}), queue("qa", parent="org", guaranteed={"cpu": "5"})],
        "spec.guaranteed.cpu 5 is above parent queue org's spec.limit.cpu 4",
    ),
    Case(
        "child-limit-within-parent-limit",
        [queue("org", limit={"cpu": "4"}), queue("qa", parent="org", limit={"cpu": "4"})],
        None,
    ),
    Case(
        "an-explicit-reclaimable-child-is-still-protected",
        [queue("org", reclaimable=False), queue("qa", parent="org", reclaimable=True)],
        None,
    ),
    Case(
        "child-inherits-protection-when-unset",
        [queue("org", reclaimable=False), queue("qa", parent="org")],
        None,
    ),
    Case(
        "child-job-order-differs",
        [queue("org", jobOrder="FIFO"), queue("qa", parent="org", jobOrder="NamespaceFair")],
        "spec.jobOrder is NamespaceFair but parent queue org sets spec.jobOrder FIFO for its "
        "subtree",
    ),
    Case(
        "child-job-order-default-differs",
        [queue("org", jobOrder="FIFO"), queue("qa", parent="org")],
        "spec.jobOrder is PriorityFIFO but parent queue org sets spec.jobOrder FIFO for its "
        "subtree",
    ),
    Case(
        "child-job-order-agrees",
        [queue("org", jobOrder="FIFO"), queue("qa", parent="org", jobOrder="FIFO")],
        None,
    ),
    Case(
        "child-preempt-across-queues-differs",
        [queue("org", preemptAcrossQueues=True), queue("qa", parent="org")],
        "spec.preemptAcrossQueues is false but parent queue org sets spec.preemptAcrossQueues "
        "true for its subtree",
    ),
    Case(
        # The API server fills the defaults in: a parent's default binds no child.
        "a-parent-with-the-defaults-binds-nobody",
        [
            queue("org", jobOrder="PriorityFIFO", preemptAcrossQueues=False, reclaimable=True),
            queue("qa", parent="org", jobOrder="NamespaceFair", preemptAcrossQueues=True),
        ],
        None,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_child_contradicting_its_parent_waits_and_nothing_else_does(case: Case) -> None:
    org, qa = case.queues
    sibling = queue("qb", parent="org", **{k: v for k, v in org["spec"].items() if k != "limit"})
    run = runs.Run(
        NODE,
        org,
        qa,
        sibling,
        *gang("a", 1, queue="qa", created=t(-10)),
        *gang("b", 1, queue="qb", created=t(-10)),
    )
    outcome = run.cycle()
    assert outcome.queues["org"].problem is None
    assert outcome.queues["qb"].problem is None
    assert "b-0" in outcome.bound  # the sibling's work is placed either way
    if case.problem is None:
        assert outcome.queues["qa"].problem is None
        assert "a-0" in outcome.bound
    else:
        assert outcome.queues["qa"].problem == case.problem
        assert outcome.group_reasons["a"] == f"queue qa is invalid: {case.problem}"
        assert "a-0" not in outcome.bound


def test_a_limit_is_checked_against_the_nearest_ancestor_that_sets_one() -> None:
    run = runs.Run(
        NODE,
        queue("org", limit={"cpu": "4"}),
        queue("team", parent="org"),
        queue("qa", parent="team", limit={"cpu": "6"}),
        queue("leaf", parent="qa"),
        *gang("a", 1, queue="leaf", created=t(-10)),
    )
    outcome = run.cycle()
    assert outcome.queues["qa"].problem == (
        "spec.limit.cpu 6 is above parent queue org's spec.limit.cpu 4"
    )
    assert outcome.queues["team"].problem is None
    assert outcome.group_reasons["a"] == "queue leaf is invalid: parent queue qa is invalid"
