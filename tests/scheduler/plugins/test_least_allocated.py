"""LeastAllocated: the node with the most room left after the pod scores highest.

We test these aspects:
- Kubernetes' integer arithmetic per resource (free share x 100 / allocatable, 0 when the
  pod would exceed capacity) and the weighted mean, with default and custom weights;
- resources a node does not offer are left out of its mean (a GPU weight on a GPU-less node);
- the order the scores give (spread), and that they follow placements incrementally.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.plugins import least_allocated
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness, score_cluster

Args = least_allocated.LeastAllocatedArgs


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # a: cpu (4-2)/4=50, mem (32-8)/32=75 -> 62; b: cpu 87, mem 75 -> 81; c: cpu over -> 0,
        # mem 50 -> 25.
        ({}, {"a": 62, "b": 81, "c": 25}),
        # cpu weighted 3: a (150+75)/4=56; b (261+75)/4=84; c (0+50)/4=12.
        (
            {"resources": [{"name": "cpu", "weight": 3}, {"name": "memory"}]},
            {"a": 56, "b": 84, "c": 12},
        ),
        ({"resources": [{"name": "memory"}]}, {"a": 75, "b": 75, "c": 50}),
    ],
    ids=["default-weights", "cpu-weighted", "memory-only"],
)
def test_scores(args: dict[str, typing.Any], expected: dict[str, int]) -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    plugin = least_allocated.LeastAllocated(Args.model_validate(args))
    assert harness.scores(plugin, harness.info(**score_cluster.POD), nodes) == expected


def test_spreads_to_the_emptiest_node() -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    plugin = least_allocated.LeastAllocated(Args())
    got = harness.scores(plugin, harness.info(**score_cluster.POD), nodes)
    assert sorted(got, key=lambda n: -got[n]) == ["b", "a", "c"]


def test_resources_a_node_lacks_are_left_out_of_its_mean() -> None:
    nodes = harness.snapshot(b.node("plain", cpu="4"), b.node("gpu", cpu="4", gpu=2)).nodes
    args = Args.model_validate({"resources": [{"name": "cpu"}, {"name": b.GPU, "weight": 2}]})
    pod = harness.info(cpu="1", memory=None)
    # plain: cpu 75 only; gpu: cpu 75, gpu 100 x2 -> (75 + 200) / 3 = 91.
    assert harness.scores(least_allocated.LeastAllocated(args), pod, nodes) == {
        "gpu": 91,
        "plain": 75,
    }


def test_scores_follow_placements() -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    plugin = least_allocated.LeastAllocated(Args())
    pod = harness.info(**score_cluster.POD)
    harness.scores(plugin, pod, nodes)
    nodes.assume(nodes.index["b"], nodes.vector(pod.requests))
    # b: cpu (8-2)/8=75, mem (16-8)/16=50 -> 62.
    assert harness.scores(plugin, pod, nodes)["b"] == 62


def test_args_are_validated() -> None:
    with pytest.raises(ValueError, match="weight"):
        Args.model_validate({"resources": [{"name": "cpu", "weight": 0}]})
    with pytest.raises(ValueError, match="at least 1 item"):
        Args.model_validate({"resources": []})
