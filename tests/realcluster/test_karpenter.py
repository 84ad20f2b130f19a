"""Karpenter in the harness: a real autoscaler beside the real control plane.

A control plane of its own (one 2-cpu KWOK node), so that nothing the other real-cluster tests
leave waiting makes Karpenter buy nodes, with Karpenter v1.15 and its KWOK provider running and
one NodePool of :data:`berth.realcluster.karpenter.INSTANCE_TYPES`. We test these aspects:

- pods of kube-scheduler that fit no node (three 3-cpu pods, one asking for 4 GPUs) are marked
  ``Unschedulable`` by kube-scheduler; Karpenter launches NodeClaims for them, their KWOK nodes
  appear and become Ready, and kube-scheduler binds every pod there (the GPU pod on a GPU
  machine);
- once the pods are gone, Karpenter consolidates the nodes it launched (empty for its
  ``consolidateAfter``): no NodeClaim and no node of the pool is left;
- every process (Karpenter included) is stopped when the plane stops.

Skipped without the control plane's binaries or Karpenter's (``hack/build-k8s --with
karpenter``).
"""

from __future__ import annotations

import collections.abc
import json
import pathlib
import shutil
import tempfile
import typing

import pytest

from berth.emulator import kubelets
from berth.realcluster import binaries, controlplane, karpenter, processes
from tests.realcluster import pods

pytestmark = pytest.mark.realcluster

POOL = "autoscaled"
WAIT = 180.0  # Karpenter batches pending pods for up to 10 s, then launches, registers, ...


@pytest.fixture(scope="module")
def plane(request: pytest.FixtureRequest) -> collections.abc.Iterator[controlplane.ControlPlane]:
    try:
        found = binaries.find()
        directory = binaries.extra("karpenter")
    except binaries.BinariesMissing as missing:
        pytest.skip(f"no real control plane with Karpenter: {missing}")
    logs = pathlib.Path(tempfile.mkdtemp(prefix="berth-karpenter-"))
    plane = controlplane.ControlPlane(
        logs, pools=[kubelets.parse_pool("1x cpu=2,memory=8Gi", index=0)], binaries=found
    )
    with plane:
        karpenter.Karpenter(
            plane,
            node_pools=[karpenter.node_pool(POOL, consolidate_after="5s")],
            directory=directory,
        ).start()
        yield plane
    assert not any(p.running() for p in plane.processes.values())
    if request.session.testsfailed:
        print(f"Karpenter plane logs: {logs / 'logs'}")
    else:
        shutil.rmtree(logs, ignore_errors=True)


def listed(plane: controlplane.ControlPlane, *args: str) -> list[dict[str, typing.Any]]:
    out = plane.kubectl("get", *args, "-o", "json").stdout
    items: list[dict[str, typing.Any]] = json.loads(out)["items"]
    return items


def wait_for(plane: controlplane.ControlPlane, what: str, ready: typing.Callable[[], bool]) -> None:
    processes.wait_until(
        what, ready, timeout=WAIT, watch=list(plane.processes.values()), interval=1.0
    )


def test_karpenter_adds_nodes_for_pods_that_fit_none_and_removes_them_after(
    plane: controlplane.ControlPlane,
) -> None:
    train = pods.pod("train", cpu="3", memory="1Gi", scheduler=None)
    resources = train["spec"]["containers"][0]["resources"]
    resources["requests"][karpenter.GPU] = "4"
    resources["limits"] = {karpenter.GPU: "4"}
    plane.apply(
        [*(pods.pod(f"web-{i}", cpu="3", memory="1Gi", scheduler=None) for i in range(2)), train]
    )

    def unschedulable() -> bool:
        conditions = [
            c
            for pod in listed(plane, "pods")
            for c in pod["status"].get("conditions", [])
            if c["type"] == "PodScheduled"
        ]
        return len(conditions) == 3 and all(c["reason"] == "Unschedulable" for c in conditions)

    wait_for(plane, "kube-scheduler to mark the pods Unschedulable", unschedulable)

    def all_bound() -> bool:
        found = listed(plane, "pods")
        return len(found) == 3 and all(
            p["spec"].get("nodeName") and p["status"].get("phase") == "Running" for p in found
        )

    wait_for(plane, "the pods to run on Karpenter's nodes", all_bound)
    claims = listed(plane, "nodeclaims")
    assert claims, "Karpenter launched no NodeClaim"
    nodes = {
        n["metadata"]["name"]: n
        for n in listed(plane, "nodes", "-l", f"{karpenter.NODE_POOL_LABEL}={POOL}")
    }
    placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in listed(plane, "pods")}
    assert set(placed.values()) <= set(nodes), (placed, sorted(nodes))
    instance = {
        name: node["metadata"]["labels"]["node.kubernetes.io/instance-type"]
        for name, node in nodes.items()
    }
    # The cheapest launch that holds all three: the GPU pod on a GPU machine (the CPU pods may
    # share it: nothing keeps them off, as no taint does).
    assert instance[placed["train"]] in {"gpu-4x", "gpu-8x"}
    ready = {
        name: [c["status"] for c in n["status"]["conditions"] if c["type"] == "Ready"]
        for name, n in nodes.items()
    }
    assert all(status == ["True"] for status in ready.values()), ready

    plane.kubectl("delete", "pods", "--all", "--wait=true", "--timeout=120s")
    wait_for(
        plane,
        "Karpenter to consolidate its empty nodes",
        lambda: (
            not listed(plane, "nodeclaims")
            and not listed(plane, "nodes", "-l", f"{karpenter.NODE_POOL_LABEL}={POOL}")
        ),
    )
    assert [n["metadata"]["name"] for n in listed(plane, "nodes")] == ["pool0-0"]
