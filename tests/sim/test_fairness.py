"""Weighted fair shares and Jain's index, the yardsticks of the report.

We test these aspects:
- the remainder after guarantees is split by weight, per resource;
- a queue capped by its limit gives the rest back to its siblings (water-filling);
- children share their parent's part; demand caps a share and the rest goes to others;
- Jain's index is 1 for equal ratios, 1/n for one winner, undefined for nothing.
"""

from __future__ import annotations

import pytest

from berth.api import resources
from berth.sim import fairness

R = resources.ResourceList


def shape(
    name: str,
    *,
    weight: int = 1,
    parent: str | None = None,
    guaranteed: dict[str, int] | None = None,
    limit: dict[str, int] | None = None,
) -> fairness.QueueShape:
    return fairness.QueueShape(
        name=name,
        parent=parent,
        weight=weight,
        guaranteed=R(guaranteed or {}),
        limit=R(limit) if limit is not None else None,
    )


@pytest.mark.parametrize(
    ("queues", "demand", "expected"),
    [
        (
            [shape("a"), shape("b", weight=3)],
            None,
            {"a": {"cpu": 2500}, "b": {"cpu": 7500}},
        ),
        (
            [shape("a", guaranteed={"cpu": 4000}), shape("b")],
            None,
            {"a": {"cpu": 7000}, "b": {"cpu": 3000}},
        ),
        (
            [shape("a", limit={"cpu": 1000}), shape("b"), shape("c")],
            None,
            {"a": {"cpu": 1000}, "b": {"cpu": 4500}, "c": {"cpu": 4500}},
        ),
        (
            [shape("p", weight=3), shape("q"), shape("x", parent="p"), shape("y", parent="p")],
            None,
            {"p": {"cpu": 7500}, "q": {"cpu": 2500}, "x": {"cpu": 3750}, "y": {"cpu": 3750}},
        ),
        (
            [shape("a"), shape("b", weight=3)],
            {"a": {"cpu": 8000}, "b": {"cpu": 1000}},
            {"a": {"cpu": 8000}, "b": {"cpu": 1000}},
        ),
        (
            [shape("a"), shape("b")],
            {"a": {"cpu": 9000}, "b": {"cpu": 9000}},
            {"a": {"cpu": 5000}, "b": {"cpu": 5000}},
        ),
    ],
    ids=[
        "weights",
        "guarantee-first",
        "limit-gives-back",
        "hierarchy",
        "demand-capped",
        "both-want",
    ],
)
def test_weighted_fair_shares(
    queues: list[fairness.QueueShape],
    demand: dict[str, dict[str, int]] | None,
    expected: dict[str, dict[str, int]],
) -> None:
    shares = fairness.weighted_fair_shares(R({"cpu": 10_000}), queues=queues, demand=demand)
    assert shares == {name: R(value) for name, value in expected.items()}


def test_each_resource_is_split_on_its_own() -> None:
    shares = fairness.weighted_fair_shares(
        R({"cpu": 8000, "nvidia.com/gpu": 4000}),
        queues=[shape("a", limit={"nvidia.com/gpu": 1000}), shape("b")],
    )
    assert shares["a"] == R({"cpu": 4000, "nvidia.com/gpu": 1000})
    assert shares["b"] == R({"cpu": 4000, "nvidia.com/gpu": 3000})


@pytest.mark.parametrize(
    ("values", "index"),
    [
        ([1.0, 1.0, 1.0], 1.0),
        ([2.0, 0.0], 0.5),
        ([3.0, 0.0, 0.0], 1 / 3),
        ([], None),
        ([0.0], None),
    ],
    ids=["equal", "one-of-two", "one-of-three", "none", "all-zero"],
)
def test_jain_index(values: list[float], index: float | None) -> None:
    assert fairness.jain_index(values) == (pytest.approx(index) if index is not None else None)
