"""Scenario table for GPU clusters: default-profile cycles, placements and reasons out.

- packing: a stream of 1-GPU pods fills one 8-GPU node after another, so 8-GPU pods find
  whole nodes (with spreading, the same stream leaves none whole);
- cpu-only pods stay on cpu nodes while those have room, and use GPU nodes when they must;
- clusters without GPUs keep spreading.
"""

from __future__ import annotations

import dataclasses
import typing

import pytest

from berth.scheduler.framework import profiles
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]


@dataclasses.dataclass(frozen=True)
class Scenario:
    id: str
    objects: list[Obj]
    bound: dict[str, str]  # every binding of the cycle: pod name -> node
    pods: dict[str, str] = dataclasses.field(default_factory=dict)  # pod name -> exact reason
    profile: profiles.Profile | None = None  # the default profile when None


def gpu_node(name: str, **fields: typing.Any) -> Obj:
    return b.node(name, cpu="64", memory="512Gi", gpu=8, **fields)


def small(i: int) -> Obj:
    return b.pod(f"one-{i}", cpu="4", memory="32Gi", gpu=1, created=b.EPOCH - 100 + i)


def whole(i: int) -> Obj:
    return b.pod(f"eight-{i}", cpu="32", memory="256Gi", gpu=8, created=b.EPOCH - 10 + i)


SPREAD = harness.profile_with(
    # every resource spread: the scoring before GPUs were packed (nor placed by fragmentation)
    without=("GpuSharing",),
    args={"NodeResourcesFit": {"scoringStrategy": {"type": "LeastAllocated"}}},
)

STREAM = [
    *(gpu_node(f"n{i}") for i in range(4)),
    *(small(i) for i in range(12)),
    whole(0),
    whole(1),
]

SCENARIOS = [
    Scenario(
        "one-gpu-pods-leave-whole-nodes-for-eight-gpu-pods",
        STREAM,
        {
            **{f"one-{i}": "n0" for i in range(8)},
            **{f"one-{i}": "n1" for i in range(8, 12)},
            "eight-0": "n2",
            "eight-1": "n3",
        },
    ),
    Scenario(
        "spreading-would-leave-no-whole-node",
        STREAM,
        {f"one-{i}": f"n{i % 4}" for i in range(12)},
        pods={
            "eight-0": "0/4 nodes fit: 4 Insufficient nvidia.com/gpu",
            "eight-1": "0/4 nodes fit: 4 Insufficient nvidia.com/gpu",
        },
        profile=SPREAD,
    ),
    Scenario(
        "packing-fills-the-fullest-node-first",
        [
            gpu_node("a"),
            gpu_node("b"),
            b.pod("on-a", node="a", gpu=2),
            b.pod("on-b", node="b", gpu=6),
            b.pod("p", gpu=2),
        ],
        {"p": "b"},
    ),
    Scenario(
        "cpu-pods-stay-off-gpu-nodes",
        [
            b.node("cpu", cpu="8", memory="64Gi"),
            gpu_node("gpu"),
            b.pod("busy", node="cpu", cpu="4", memory="32Gi"),
            b.pod("web", cpu="1", memory="1Gi"),
        ],
        # The emptier GPU node would win on spread alone.
        {"web": "cpu"},
    ),
    Scenario(
        "cpu-pods-use-gpu-nodes-when-they-must",
        [
            b.node("cpu", cpu="8", memory="64Gi"),
            gpu_node("gpu"),
            b.pod("busy", node="cpu", cpu="8", memory="8Gi"),
            b.pod("web", cpu="1", memory="1Gi"),
        ],
        {"web": "gpu"},
    ),
    Scenario(
        "cpu-only-clusters-still-spread",
        [
            *(b.node(f"c{i}", cpu="8", memory="64Gi") for i in range(3)),
            *(b.pod(f"w{i}", cpu="1", memory="1Gi", created=b.EPOCH - 10 + i) for i in range(6)),
        ],
        {f"w{i}": f"c{i % 3}" for i in range(6)},
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    bound, pods, _ = harness.cycle(*scenario.objects, profile=scenario.profile)
    assert bound == {f"default/{k}": v for k, v in scenario.bound.items()}
    for name, reason in scenario.pods.items():
        assert pods[f"default/{name}"] == reason
