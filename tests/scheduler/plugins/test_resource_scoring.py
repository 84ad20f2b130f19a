"""NodeResourcesFit's scoringStrategy: Berth's one resource score, a strategy per resource.

We test these aspects:
- each strategy's arithmetic on the shared three-node cluster (Kubernetes' integer shares and
  weighted mean, with default and custom weights; RequestedToCapacityRatio follows its shape),
  the order it gives (LeastAllocated spreads, MostAllocated packs), and that scores follow
  placements;
- resources a node lacks are left out of its mean;
- a resource with its own strategy (pack GPUs, spread cpu) in one weighted mean, and an
  extended resource the pod does not request left out of the mean (as in Kubernetes);
- ``scarce``: a cpu-only pod scores GPU nodes in the lower half, others in the upper half,
  and scores exactly as before when no node offers the scarce resource;
- bad args are refused with their path; without a strategy NodeResourcesFit does not score;
- a profile naming the retired LeastAllocated or MostAllocated plugin is refused with what to
  write instead.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.actions import registry as actions_registry
from berth.scheduler.framework import errors, interfaces, profiles
from berth.scheduler.plugins import node_resources_fit, registry
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
        # a: cpu (4-2)/4=50, mem (32-8)/32=75 -> 62; b: cpu 87, mem 75 -> 81; c: cpu over -> 0,
        # mem 50 -> 25.
        ({"type": "LeastAllocated"}, {"a": 62, "b": 81, "c": 25}),
        # cpu weighted 3: a (150+75)/4=56; b (261+75)/4=84; c (0+50)/4=12.
        (
            {"resources": [{"name": "cpu", "weight": 3}, {"name": "memory"}]},
            {"a": 56, "b": 84, "c": 12},
        ),
        ({"resources": [{"name": "memory"}]}, {"a": 75, "b": 75, "c": 50}),
        # a: cpu 2/4=50, mem 8/32=25 -> 37; b: cpu 12, mem 25 -> 18; c: cpu capped 100, mem 50
        # -> 75.
        ({"type": "MostAllocated"}, {"a": 37, "b": 18, "c": 75}),
        # memory weighted 3: a (50+75)/4=31; b (12+75)/4=21; c (100+150)/4=62.
        (
            {
                "type": "MostAllocated",
                "resources": [{"name": "cpu"}, {"name": "memory", "weight": 3}],
            },
            {"a": 31, "b": 21, "c": 62},
        ),
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
    ids=[
        "least",
        "least-cpu-weighted",
        "least-memory-only",
        "most",
        "most-memory-weighted",
        "ratio-linear",
        "ratio-peak",
    ],
)
def test_strategies(strategy: dict[str, typing.Any], expected: dict[str, int]) -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    pod = harness.info(**score_cluster.POD)
    assert harness.scores(plugin(strategy), pod, nodes) == expected


@pytest.mark.parametrize(
    ("kind", "order"),
    [("LeastAllocated", ["b", "a", "c"]), ("MostAllocated", ["c", "a", "b"])],
    ids=["least-spreads-to-the-emptiest", "most-packs-onto-the-fullest"],
)
def test_the_order_the_strategies_give(kind: str, order: list[str]) -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    got = harness.scores(plugin({"type": kind}), harness.info(**score_cluster.POD), nodes)
    assert sorted(got, key=lambda n: -got[n]) == order


def test_scores_follow_placements() -> None:
    nodes = harness.snapshot(*score_cluster.NODES).nodes
    scorer = plugin({"type": "LeastAllocated"})
    pod = harness.info(**score_cluster.POD)
    harness.scores(scorer, pod, nodes)
    nodes.assume(nodes.index["b"], nodes.vector(pod.requests))
    # b: cpu (8-2)/8=75, mem (16-8)/16=50 -> 62.
    assert harness.scores(scorer, pod, nodes)["b"] == 62


def test_resources_a_node_lacks_are_left_out_of_its_mean() -> None:
    nodes = harness.snapshot(b.node("plain", cpu="4"), b.node("gpu", cpu="4", gpu=2)).nodes
    strategy = {"resources": [{"name": "cpu"}, {"name": b.GPU, "weight": 2}]}
    # A GPU pod: plain (filtered out in a cycle) cpu 75 only; gpu: cpu 75, gpu 50 x2 -> 58.
    gpu_pod = harness.info(cpu="1", memory=None, gpu=1)
    assert harness.scores(plugin(strategy), gpu_pod, nodes) == {"gpu": 58, "plain": 75}
    # A cpu-only pod: the GPUs it does not request are left out on both nodes (Kubernetes skips
    # an extended resource the pod does not request), so the idle GPUs are no extra room.
    pod = harness.info(cpu="1", memory=None)
    assert harness.scores(plugin(strategy), pod, nodes) == {"gpu": 75, "plain": 75}


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


@pytest.mark.parametrize("retired", ["LeastAllocated", "MostAllocated"])
def test_a_profile_naming_a_retired_resource_plugin_is_told_what_to_write(retired: str) -> None:
    profile = profiles.parse(
        {
            "plugins": [
                {"name": "NodeResourcesFit"},
                {"name": retired, "weight": 2},
                {"name": "DefaultBinder"},
            ],
            "disabled": [retired],
        }
    )
    with pytest.raises(errors.ProfileError) as caught:
        profiles.resolve(
            profile,
            registry=registry.in_tree_registry(),
            actions={a.name for a in actions_registry.default_actions()},
        )
    advice = (
        f"plugin {retired} was folded into NodeResourcesFit: use NodeResourcesFit with "
        f"args.scoringStrategy.type {retired}"
    )
    assert str(caught.value).splitlines()[1:] == [
        f"  plugins[1].name: {advice}",
        f"  disabled[0]: {advice}",
    ]
