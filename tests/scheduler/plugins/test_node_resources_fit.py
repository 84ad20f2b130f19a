"""NodeResourcesFit: requests must fit in what a node has left.

We test these aspects:
- cpu, memory, ephemeral-storage, extended resources (nvidia.com/gpu and others) and the pod
  count, each alone and with running pods already on the node;
- init containers and overhead size the pod (the largest init container can be what does
  not fit);
- reasons ``Insufficient <resource>`` and ``Too many pods``, a node counted once per short
  resource, largest count first;
- bad input: a resource no node offers fails every node as unresolvable; a negative or
  malformed quantity is rejected at PreFilter with its text; ignoredResources are skipped;
- the fit mask follows placements made through the table (incremental refresh).
"""

from __future__ import annotations

import typing

import numpy as np
import pytest

from berth.scheduler.framework import cyclestate, statuses
from berth.scheduler.plugins import node_resources_fit
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

C = b.container
Fit = node_resources_fit.NodeResourcesFit
ARGS = node_resources_fit.NodeResourcesFitArgs()

CLUSTER = [
    b.node("small", cpu="2", memory="4Gi", pods=3, storage="10Gi"),
    b.node("big", cpu="16", memory="64Gi", pods=110, storage="100Gi"),
    b.node("gpu", cpu="8", memory="32Gi", gpu=4, storage="50Gi"),
    b.pod("busy-1", node="small", cpu="1", memory="1Gi"),
    b.pod("busy-2", node="small", cpu="500m", memory="1Gi"),
    b.pod("trainer", node="gpu", cpu="1", memory="1Gi", gpu=3),
]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"cpu": "500m", "memory": "1Gi"}, ["big", "gpu", "small"]),
        ({"cpu": "600m", "memory": "1Gi"}, ["big", "gpu"]),
        ({"cpu": "100m", "memory": "3Gi"}, ["big", "gpu"]),
        ({"cpu": "9", "memory": "1Gi"}, ["big"]),
        ({"requests": {"ephemeral-storage": "20Gi"}}, ["big", "gpu"]),
        ({"cpu": "1", "gpu": 1}, ["gpu"]),
        ({"cpu": "1", "gpu": 2}, []),
        (
            {
                "containers": [C(requests={"cpu": "100m"})],
                "init_containers": [C("warm", requests={"cpu": "7"})],
            },
            ["big", "gpu"],
        ),
        (
            {"containers": [C(requests={"cpu": "400m"})], "overhead": {"cpu": "200m"}},
            ["big", "gpu"],
        ),
        ({"cpu": None, "memory": None}, ["big", "gpu", "small"]),
    ],
    ids=[
        "fits-everywhere",
        "cpu-short-on-small",
        "memory-short-on-small",
        "only-big-has-cpu",
        "ephemeral-storage",
        "one-gpu-left",
        "two-gpus-not-left",
        "init-container-too-big",
        "overhead-tips-it",
        "best-effort",
    ],
)
def test_requests_fit_what_is_left(fields: dict[str, typing.Any], expected: list[str]) -> None:
    nodes = harness.snapshot(*CLUSTER).nodes
    assert harness.passing(Fit(ARGS), harness.info(**fields), nodes) == sorted(expected)


def test_pod_count_is_a_resource() -> None:
    nodes = harness.snapshot(
        b.node("tiny", pods=2), b.pod("a", node="tiny"), b.pod("b", node="tiny"), b.node("roomy")
    ).nodes
    pod = harness.info()
    assert harness.passing(Fit(ARGS), pod, nodes) == ["roomy"]
    assert harness.why(Fit(ARGS), pod, nodes) == "1/2 nodes fit: 1 Too many pods"


@pytest.mark.parametrize(
    ("fields", "message", "code"),
    [
        (
            {"cpu": "12", "gpu": 2},
            "0/3 nodes fit: 3 Insufficient nvidia.com/gpu, 2 Insufficient cpu",
            statuses.Code.UNSCHEDULABLE,
        ),
        (
            {"cpu": "3", "memory": "40Gi"},
            "1/3 nodes fit: 2 Insufficient memory, 1 Insufficient cpu",
            statuses.Code.UNSCHEDULABLE,
        ),
        (
            {"requests": {"example.com/fpga": "1", "cpu": "1"}},
            "0/3 nodes fit: 3 Insufficient example.com/fpga",
            statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ),
    ],
    ids=["gpu-and-cpu", "memory-and-cpu", "resource-no-node-has"],
)
def test_reasons(fields: dict[str, typing.Any], message: str, code: statuses.Code) -> None:
    nodes = harness.snapshot(*CLUSTER).nodes
    pod = harness.info(**fields)
    assert harness.why(Fit(ARGS), pod, nodes) == message
    assert harness.run_filter(Fit(ARGS), pod, nodes).code is code


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"cpu": "-500m"}, "cpu: negative quantity '-500m'"),
        ({"memory": "lots"}, "memory: 'lots' is not a quantity"),
    ],
    ids=["negative", "malformed"],
)
def test_bad_quantities_are_rejected_at_pre_filter(
    fields: dict[str, typing.Any], fragment: str
) -> None:
    nodes = harness.snapshot(*CLUSTER).nodes
    status = Fit(ARGS).pre_filter(cyclestate.CycleState(), harness.info(**fields), nodes)
    assert status.code is statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message().startswith("invalid resource request: containers[0] (main) ")
    assert fragment in status.message()


def test_ignored_resources_are_not_checked() -> None:
    nodes = harness.snapshot(*CLUSTER).nodes
    plugin = Fit(
        node_resources_fit.NodeResourcesFitArgs.model_validate(
            {"ignoredResources": [b.GPU, "example.com/fpga"]}
        )
    )
    pod = harness.info(cpu="100m", gpu=8)
    assert harness.passing(plugin, pod, nodes) == ["big", "gpu", "small"]
    fpga = harness.info(requests={"example.com/fpga": "1"})
    assert harness.passing(plugin, fpga, nodes) == ["big", "gpu", "small"]


def test_the_mask_follows_placements() -> None:
    nodes = harness.snapshot(b.node("a", cpu="1"), b.node("b", cpu="1")).nodes
    plugin = Fit(ARGS)
    pod = harness.info(cpu="600m", memory=None)
    vec = nodes.vector(pod.requests)
    assert harness.passing(plugin, pod, nodes) == ["a", "b"]
    nodes.assume(0, vec)
    assert harness.passing(plugin, pod, nodes) == ["b"]
    nodes.assume(1, vec)
    assert harness.passing(plugin, pod, nodes) == []
    nodes.forget(0, vec)
    assert harness.passing(plugin, pod, nodes) == ["a"]
    assert np.array_equal(
        harness.run_filter(plugin, pod, nodes).passed, (nodes.free() >= vec).all(axis=1)
    )
