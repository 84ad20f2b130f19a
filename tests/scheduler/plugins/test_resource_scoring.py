"""NodeResourcesFit's scoringStrategy: one resource score, a strategy per resource.

We test these aspects:
- each strategy's arithmetic on the shared three-node cluster (LeastAllocated and
  MostAllocated match the older plugins; RequestedToCapacityRatio follows its shape);
- a resource with its own strategy (pack GPUs, spread cpu) in one weighted mean, and an
  extended resource the pod does not request left out of the mean (as in Kubernetes);
- ``scarce``: a cpu-only pod scores GPU nodes in the lower half, others in the upper half,
  and scores exactly as before when no node offers the scarce resource;
- bad args are refused with their path; without a strategy NodeResourcesFit does not score.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.actions import registry as actions_registry
from berth.scheduler.framework import errors, interfaces, profiles
from berth.scheduler.plugins import (
    least_allocated,
    most_allocated,
    node_resources_fit,
    registry,
)
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness, score_cluster

Args = node_resources_fit.NodeResourcesFitArgs


def plugin(strategy: dict[str, typing.Any]) -> interfaces.ScorePlugin:
    built = node_resources_fit.new(
        Args.model_validate({"scoringStrategy": strategy}),
        typing.cast("typing.Any", None),
    )
    assert isinstance(built, interfaces.ScorePlugin)
    return built


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ({"type": "LeastAllocated"}, {"a": 62, "b": 81, "c": 25}),
        ({"type": "MostAllocated"}, {"a": 37, "b": 18, "c": 75}),
        # Shape (0 -> 0, 100 -> 10): MostAllocated's shares, through integer interpolation.
        (
            {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
                },
            },
            {"a": 37, "b": 18, "c": 75},
        ),
        # Shape peaking at half use: a cpu 50 -> 100, mem 25 -> 50: 75; b cpu 12 -> 24, mem
        # 25 -> 50: 37; c cpu 100+ -> 0, mem 50 -> 100: 50.
        (
            {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [
                        {"utilization": 0, "score": 0},
                        {"utilization": 50, "score": 10},
                        {"utilization": 100, "score": 0},
                    ]
                },
            },
            {"a": 75, "b": 37, "c": 50},
        ),
    ],
    ids=["least", "most", "ratio-linear", "ratio-peak"],
)
def test_strategies(strategy: dict[str, typing.Any], expected: dict[str, int]) -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    pod = harness.info(**score_cluster.POD)
    assert harness.scores(plugin(strategy), pod, nodes) == expected


def test_least_and_most_match_the_older_plugins() -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    pod = harness.info(**score_cluster.POD)
    old_least = least_allocated.LeastAllocated(least_allocated.LeastAllocatedArgs())
    old_most = most_allocated.MostAllocated(most_allocated.MostAllocatedArgs())
    assert harness.scores(plugin({"type": "LeastAllocated"}), pod, nodes) == harness.scores(
        old_least, pod, nodes
    )
    assert harness.scores(plugin({"type": "MostAllocated"}), pod, nodes) == harness.scores(
        old_most, pod, nodes
    )


GPU_NODES = [
    b.node("busy", cpu="64", memory="512Gi", gpu=8),
    b.node("idle", cpu="64", memory="512Gi", gpu=8),
    b.pod("on-busy", node="busy", cpu="32", memory="256Gi", gpu=6),
]
PACK_GPUS = {
    "type": "LeastAllocated",
    "resources": [
        {"name": "cpu"},
        {"name": "memory"},
        {"name": b.GPU, "weight": 50, "type": "MostAllocated"},
    ],
}


def test_a_gpu_pod_packs_although_cpu_would_spread() -> None:
    nodes = harness.snapshot(*GPU_NODES).nodes
    pod = harness.info(cpu="4", memory="32Gi", gpu=1)
    # busy: cpu 43, mem 43, gpu 87 x50 -> (43 + 43 + 4350) / 52 = 85;
    # idle: cpu 93, mem 93, gpu 12 x50 -> (93 + 93 + 600) / 52 = 15.
    assert harness.scores(plugin(PACK_GPUS), pod, nodes) == {"busy": 85, "idle": 15}


def test_an_extended_resource_the_pod_does_not_request_is_left_out() -> None:
    nodes = harness.snapshot(*GPU_NODES).nodes
    pod = harness.info(cpu="4", memory="32Gi")
    # cpu and memory only: busy (43 + 43) / 2, idle (93 + 93) / 2 — spread, as before.
    assert harness.scores(plugin(PACK_GPUS), pod, nodes) == {"busy": 43, "idle": 93}


MIXED = [
    b.node("cpu-node", cpu="64", memory="512Gi"),
    b.node("gpu-node", cpu="64", memory="512Gi", gpu=8),
    b.pod("on-cpu", node="cpu-node", cpu="48", memory="384Gi"),
]


def test_scarce_keeps_cpu_pods_on_cpu_nodes() -> None:
    nodes = harness.snapshot(*MIXED).nodes
    pod = harness.info(cpu="4", memory="32Gi")
    scarce = {**PACK_GPUS, "scarce": [b.GPU]}
    # cpu-node: (18 + 18) / 2 = 18 -> 50 + 9; gpu-node: 93 -> 46.
    assert harness.scores(plugin(scarce), pod, nodes) == {"cpu-node": 59, "gpu-node": 46}
    # A GPU pod is scored on the plain mean (only the GPU node offers GPUs anyway).
    gpu_pod = harness.info(cpu="4", memory="32Gi", gpu=1)
    assert harness.scores(plugin(scarce), gpu_pod, nodes)["gpu-node"] == (93 + 93 + 600) // 52


def test_scarce_changes_nothing_without_such_nodes() -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    pod = harness.info(**score_cluster.POD)
    plain = harness.scores(plugin({"type": "LeastAllocated"}), pod, nodes)
    scarce = harness.scores(plugin({"type": "LeastAllocated", "scarce": [b.GPU]}), pod, nodes)
    assert scarce == plain


def test_without_a_strategy_nodes_resources_fit_only_filters() -> None:
    built = node_resources_fit.new(Args(), typing.cast("typing.Any", None))
    assert not isinstance(built, interfaces.ScorePlugin)


@pytest.mark.parametrize(
    ("strategy", "problem"),
    [
        (
            {"type": "RequestedToCapacityRatio"},
            "plugins[0].args.scoringStrategy: Value error, requestedToCapacityRatio.shape is "
            "required by the RequestedToCapacityRatio strategy",
        ),
        (
            {"type": "Packed"},
            "plugins[0].args.scoringStrategy.type: Input should be 'LeastAllocated', "
            "'MostAllocated' or 'RequestedToCapacityRatio'",
        ),
        (
            {"resources": [{"name": "cpu"}, {"name": "cpu", "weight": 2}]},
            "plugins[0].args.scoringStrategy: Value error, resource cpu is listed twice",
        ),
        (
            {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]
                },
            },
            "plugins[0].args.scoringStrategy.requestedToCapacityRatio.shape: Value error, "
            "utilization values must be strictly increasing",
        ),
    ],
    ids=["ratio-without-shape", "unknown-type", "duplicate-resource", "shape-not-increasing"],
)
def test_bad_strategies_are_refused_with_their_path(
    strategy: dict[str, typing.Any], problem: str
) -> None:
    profile = profiles.parse(
        {"plugins": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}]}
    )
    with pytest.raises(errors.ProfileError) as caught:
        profiles.resolve(
            profile,
            registry=registry.in_tree_registry(),
            actions={a.name for a in actions_registry.default_actions()},
        )
    assert problem in str(caught.value)
