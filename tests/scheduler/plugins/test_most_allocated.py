"""MostAllocated: the node most used after the pod scores highest (bin packing).

We test these aspects:
- Kubernetes' integer arithmetic per resource (used share x 100 / allocatable, capped at the
  allocatable) and the weighted mean, with default and custom weights;
- the order the scores give (pack onto the fullest node).
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.plugins import most_allocated
from tests.scheduler.plugins import harness, score_cluster

Args = most_allocated.MostAllocatedArgs


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # a: cpu 2/4=50, mem 8/32=25 -> 37; b: cpu 12, mem 25 -> 18; c: cpu capped 100, mem 50
        # -> 75.
        ({}, {"a": 37, "b": 18, "c": 75}),
        # memory weighted 3: a (50+75)/4=31; b (12+75)/4=21; c (100+150)/4=62.
        (
            {"resources": [{"name": "cpu"}, {"name": "memory", "weight": 3}]},
            {"a": 31, "b": 21, "c": 62},
        ),
    ],
    ids=["default-weights", "memory-weighted"],
)
def test_scores(args: dict[str, typing.Any], expected: dict[str, int]) -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    plugin = most_allocated.MostAllocated(Args.model_validate(args))
    assert harness.scores(plugin, harness.info(**score_cluster.POD), nodes) == expected


def test_packs_onto_the_fullest_node() -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    plugin = most_allocated.MostAllocated(Args())
    got = harness.scores(plugin, harness.info(**score_cluster.POD), nodes)
    assert sorted(got, key=lambda n: -got[n]) == ["c", "a", "b"]
