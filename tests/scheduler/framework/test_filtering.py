"""NodeFilter and the "why pending" message built from filters.

We test these aspects:
- reasons are computed lazily, once; without ``explain`` every failing row gets ``reason``;
- each node is attributed to the first filter rejecting it, counted once per reason of that
  filter; counts are listed largest first, ties by text; uncovered rows are named;
- the status is UNSCHEDULABLE when a resolvable filter rejected some node, else unresolvable;
- the reason code: NotEnoughResources when capacity rejected a node, else the one kind every
  rejecting filter gave, else Unschedulable;
- an empty cluster has its own message.
"""

from __future__ import annotations

import numpy as np

from berth.scheduler.framework import filtering, reasons, statuses

Code = statuses.Code


def rows(*flags: int) -> filtering.BoolArray:
    return np.array([bool(f) for f in flags], dtype=np.bool_)


def test_reasons_are_lazy_and_computed_once() -> None:
    calls: list[int] = []

    def explain() -> filtering.Reasons:
        calls.append(1)
        return {"too small": rows(1, 0)}

    node_filter = filtering.NodeFilter(passed=rows(0, 1), explain=explain)
    assert calls == []
    assert node_filter.reasons().keys() == {"too small"}
    node_filter.reasons()
    assert calls == [1]


def test_without_explain_every_failing_row_gets_the_reason() -> None:
    node_filter = filtering.NodeFilter(passed=rows(1, 0, 0), reason="nope")
    assert list(node_filter.reasons()) == ["nope"]
    assert node_filter.reasons()["nope"].tolist() == [False, True, True]


def test_message_attributes_each_node_to_the_first_rejecting_filter() -> None:
    fit = filtering.NodeFilter(
        passed=rows(0, 0, 0, 1, 1),
        explain=lambda: {
            "Insufficient nvidia.com/gpu": rows(1, 1, 1, 0, 0),
            "Insufficient cpu": rows(1, 0, 0, 0, 0),
        },
    )
    taints = filtering.NodeFilter(
        passed=rows(0, 1, 1, 0, 0),  # row 0 already counted for Fit
        code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        reason="untolerated taint {dedicated: infer}",
    )
    status = filtering.unplaceable([("Fit", fit), ("Taints", taints)], rows=5)
    assert status == statuses.new(
        Code.UNSCHEDULABLE,
        "0/5 nodes fit: 3 Insufficient nvidia.com/gpu, 2 untolerated taint {dedicated: infer},"
        " 1 Insufficient cpu",
    )


def test_message_ties_are_ordered_by_text_and_uncovered_rows_are_named() -> None:
    first = filtering.NodeFilter(
        passed=rows(0, 0, 1, 1),
        code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        explain=lambda: {"b reason": rows(1, 0, 0, 0)},  # row 1 is not covered
    )
    second = filtering.NodeFilter(
        passed=rows(1, 1, 0, 0), code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason="a reason"
    )
    status = filtering.unplaceable([("First", first), ("Second", second)], rows=4)
    assert status == statuses.new(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "0/4 nodes fit: 2 a reason, 1 b reason, 1 rejected by First",
    )


def test_message_for_an_empty_cluster() -> None:
    assert filtering.unplaceable([], rows=0).message() == "0/0 nodes fit: no nodes in the cluster"


def test_helpers_build_uniform_filters() -> None:
    assert filtering.passing(3).passed.tolist() == [True, True, True]
    rejected = filtering.rejecting(2, reason="closed", code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    assert rejected.passed.tolist() == [False, False]
    assert filtering.unplaceable([("X", rejected)], rows=2).message() == "0/2 nodes fit: 2 closed"


def test_the_reason_code_is_the_kind_every_rejecting_filter_gave() -> None:
    code = reasons.ReasonCode

    def volumes(*flags: int) -> filtering.NodeFilter:
        return filtering.NodeFilter(
            passed=rows(*flags), reason="conflict", reason_code=code.VOLUME_NODE_CONFLICT
        )

    taint = filtering.NodeFilter(passed=rows(1, 1, 0), reason="taint")
    capacity = filtering.NodeFilter(
        passed=rows(1, 1, 0), reason="Insufficient cpu", reason_code=code.NOT_ENOUGH_RESOURCES
    )
    only_volumes = filtering.unplaceable([("v", volumes(0, 0, 0))], rows=3).reason()
    mixed = filtering.unplaceable([("v", volumes(0, 0, 1)), ("t", taint)], rows=3).reason()
    short = filtering.unplaceable([("v", volumes(0, 0, 1)), ("c", capacity)], rows=3).reason()
    assert only_volumes.code is code.VOLUME_NODE_CONFLICT
    assert mixed.code is code.UNSCHEDULABLE
    assert short.code is code.NOT_ENOUGH_RESOURCES
