"""BalancedAllocation: nodes whose resources stay evenly used score highest.

We test these aspects:
- Kubernetes' formula: ``(1 - std) * 100`` truncated, std of the used fractions (capped at 1)
  being half their difference for two resources and the population std for more;
- resources a node does not offer are left out; one resource alone scores 100;
- the order the scores give.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.plugins import balanced_allocation
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness, score_cluster

Args = balanced_allocation.BalancedAllocationArgs


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # a: .5 vs .25 -> 87; b: .125 vs .25 -> 93; c: cpu capped 1 vs .5 -> 75.
        ({}, {"a": 87, "b": 93, "c": 75}),
        ({"resources": ["cpu"]}, {"a": 100, "b": 100, "c": 100}),
    ],
    ids=["cpu-and-memory", "one-resource"],
)
def test_scores(args: dict[str, typing.Any], expected: dict[str, int]) -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    plugin = balanced_allocation.BalancedAllocation(Args.model_validate(args))
    assert harness.scores(plugin, harness.info(**score_cluster.POD), nodes) == expected


def test_three_resources_use_the_population_std() -> None:
    nodes = harness.snapshot(b.node("n", cpu="4", memory="8Gi", gpu=4)).nodes
    args = Args.model_validate({"resources": ["cpu", "memory", b.GPU]})
    pod = harness.info(cpu="1", memory="4Gi", gpu=4)
    # fractions .25, .5, 1: mean 7/12, std = sqrt(((1/3)^2 + (1/12)^2 + (5/12)^2) / 3) = .3118
    # -> 68.
    assert harness.scores(balanced_allocation.BalancedAllocation(args), pod, nodes) == {"n": 68}


def test_a_resource_the_node_lacks_is_left_out() -> None:
    nodes = harness.snapshot(b.node("n", cpu="4", memory="8Gi")).nodes
    args = Args.model_validate({"resources": ["cpu", "memory", b.GPU]})
    pod = harness.info(cpu="1", memory="4Gi")
    # Only cpu .25 and memory .5 count: std .125 -> 87.
    assert harness.scores(balanced_allocation.BalancedAllocation(args), pod, nodes) == {"n": 87}


def test_prefers_the_most_even_node() -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    plugin = balanced_allocation.BalancedAllocation(Args())
    got = harness.scores(plugin, harness.info(**score_cluster.POD), nodes)
    assert sorted(got, key=lambda n: -got[n]) == ["b", "a", "c"]
