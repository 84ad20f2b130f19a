"""One tenant's unrepresentable quantity stays that tenant's problem (issue 20).

A pod asking for ``memory: 10Pi`` (a typo for 10Gi that the API server accepts) overflows
int64 milli-units. We test these aspects, on the in-memory cluster with the default profile:

- the pod waits with a reason naming the container and the field; nothing else changes: a
  queue limited to 8 cpu stays at 8 while other tenants' pods are placed, cycle after cycle;
- a quantity past the bound is refused wherever it enters: a node's allocatable, a queue's
  limit, a PodGroup's minResources — each object gets its reason, the rest is scheduled;
- the sum of many in-range requests past the bound (a pod with many containers) waits too.
"""

from __future__ import annotations

import pytest

from berth.api import errors, quantities
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, queue


def limited_cluster() -> list[runs.Obj]:
    return [
        *[b.node(f"n{i}", cpu="4", memory="64Gi") for i in range(4)],
        queue("limited", limit={"cpu": "8"}),
        queue("other"),
        *[cpu_pod(f"l{i}", queue="limited", created=runs.t(-100 + i)) for i in range(12)],
    ]


def test_an_overflowing_request_makes_only_that_pod_wait_with_a_reason_naming_the_field() -> None:
    run = runs.Run(
        *limited_cluster(),
        cpu_pod("typo", queue="other", memory="10Pi", created=runs.t(-200)),
        cpu_pod("fine", queue="other", created=runs.t(-50)),
    )
    placed: dict[str, str] = {}
    for _ in range(3):
        outcome = run.cycle()
        placed |= outcome.bound
        assert "typo" not in outcome.bound
    assert "containers[0] (main) memory" in outcome.pod_reasons["typo"]
    assert "10Pi" in outcome.pod_reasons["typo"]
    assert "fine" in placed
    assert sum(1 for name in placed if name.startswith("l")) == 8  # the limit holds
    assert outcome.queues["limited"].allocated.get("cpu") == 8000


def test_the_sum_of_many_in_range_requests_past_the_bound_waits() -> None:
    huge = quantities.format_milli(quantities.MAX_MILLI // 2 + 1000)
    pod = cpu_pod("many", queue="other", memory=huge)
    pod["spec"]["containers"] = [dict(pod["spec"]["containers"][0], name=f"c{i}") for i in range(3)]
    run = runs.Run(*limited_cluster(), pod)
    outcome = run.cycle()
    assert "many" not in outcome.bound
    assert "memory" in outcome.pod_reasons["many"]
    assert "out of range" in outcome.pod_reasons["many"]


@pytest.mark.parametrize("text", ["10Pi", "9223372036854775807", "1e19", "-10Pi", "10E"])
def test_quantities_past_the_bound_are_refused_where_they_enter_the_scheduler(text: str) -> None:
    with pytest.raises(errors.QuantityError, match="out of range"):
        quantities.parse_bounded_milli(text)


def test_quantities_up_to_the_bound_parse() -> None:
    assert quantities.format_milli(quantities.MAX_MILLI, quantities.Format.BINARY_SI) == "128Ti"
    assert quantities.parse_bounded_milli("128Ti") == 128 * 2**40 * 1000
    assert quantities.parse_bounded_milli("64") == 64_000


def test_an_overflowing_node_queue_or_group_affects_only_itself() -> None:
    run = runs.Run(
        *limited_cluster(),
        b.node("giant", cpu="4", memory="100Ei"),
        queue("bad-limit", limit={"memory": "10Pi"}),
        cpu_pod("in-bad", queue="bad-limit", created=runs.t(-300)),
        cpu_pod("fine", queue="other", created=runs.t(-50)),
    )
    placed: dict[str, str] = {}
    for _ in range(2):
        outcome = run.cycle()
        placed |= outcome.bound
    assert "giant" not in placed.values()
    assert "in-bad" not in placed
    assert "fine" in placed
    assert sum(1 for name in placed if name.startswith("l")) == 8


def test_enough_of_the_largest_pods_in_one_queue_leave_the_other_queues_alone() -> None:
    # Each within the bound, together past int64: the queue's sums saturate instead of
    # overflowing the accounting for every queue's session.
    run = runs.Run(
        *limited_cluster(),
        queue("evil"),
        *[
            cpu_pod(f"e{i}", queue="evil", memory=quantities.MAX_TEXT, created=runs.t(-300 + i))
            for i in range(80)
        ],
    )
    outcome = run.cycle()
    assert outcome.result.errors == ()
    assert sum(1 for name in outcome.bound if name.startswith("l")) == 8
    assert not [name for name in outcome.bound if name.startswith("e")]
    assert "Insufficient memory" in outcome.pod_reasons.get("e0", "") + str(
        outcome.group_reasons.get("pod:e0", "")
    )
