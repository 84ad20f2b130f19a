"""The stand-in for kube-scheduler (``berth.emulator.binder``) on the emulator.

We test these aspects:

- a pod of the default scheduler is bound to the node its required node affinity pins it to
  (admission mode's pin), even when another node sorts first;
- an unpinned pod goes to the first node (by name) that passes the filters: node selector,
  untolerated ``NoSchedule`` taints, room beside the pods already bound there;
- a pod no node can take gets ``PodScheduled=False/Unschedulable`` with kube-scheduler's
  message (``0/2 nodes are available: 2 Insufficient cpu.``), and is bound once room appears;
- gated pods and pods of another scheduler (Berth's) are left alone.
"""

from __future__ import annotations

import time
import typing

import pytest

from berth.emulator import testing

Object = dict[str, typing.Any]


@pytest.fixture
def cluster(emulator: testing.RunningEmulator) -> testing.RunningEmulator:
    emulator.start_kubelets(
        ["1x cpu=4 name=a label=disk=ssd", "1x cpu=4 name=b taint=dedicated=gpu:NoSchedule"],
        speedup=100,
    )
    emulator.threaded.run(emulator.server.start_binder())
    return emulator


def pod(name: str, *, cpu: str = "1", **spec: typing.Any) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
            **spec,
        },
    }


def create(cluster: testing.RunningEmulator, body: Object) -> None:
    pods = cluster.call(cluster.api.resource, "v1", "pods")
    cluster.call(cluster.api.create, pods, body, namespace="default")


def get(cluster: testing.RunningEmulator, name: str) -> Object:
    pods = cluster.call(cluster.api.resource, "v1", "pods")
    found: Object = cluster.call(cluster.api.get, pods, namespace="default", name=name)
    return found


def eventually(
    cluster: testing.RunningEmulator, name: str, test: typing.Callable[[Object], bool]
) -> Object:
    deadline = time.monotonic() + 10
    current = get(cluster, name)
    while not test(current):
        assert time.monotonic() < deadline, current
        time.sleep(0.02)
        current = get(cluster, name)
    return current


def pinned(node: str) -> Object:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip


def test_a_pinned_pod_is_bound_to_its_node(cluster: testing.RunningEmulator) -> None:
    tolerates = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    create(cluster, pod("p", affinity=pinned("b-0"), tolerations=tolerates))
    bound = eventually(cluster, "p", lambda p: bool(p["spec"].get("nodeName")))
    assert bound["spec"]["nodeName"] == "b-0"


def test_unpinned_pods_go_to_the_first_node_that_passes_the_filters(
    cluster: testing.RunningEmulator,
) -> None:
    create(cluster, pod("first", cpu="3"))
    assert (
        eventually(cluster, "first", lambda p: bool(p["spec"].get("nodeName")))["spec"]["nodeName"]
        == "a-0"
    )
    # a-0 has 1 cpu left and b-0's taint is not tolerated: nothing fits 2 cpu.
    create(cluster, pod("second", cpu="2"))
    waiting = eventually(
        cluster, "second", lambda p: bool((p.get("status") or {}).get("conditions"))
    )
    (condition,) = waiting["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert condition["message"] == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s)."
    )
    assert not waiting["spec"].get("nodeName")
    # Room appears (the first pod goes): the waiting pod is bound.
    pods = cluster.call(cluster.api.resource, "v1", "pods")
    cluster.call(cluster.api.delete, pods, namespace="default", name="first")
    bound = eventually(cluster, "second", lambda p: bool(p["spec"].get("nodeName")))
    assert bound["spec"]["nodeName"] == "a-0"
    # A node selector no node matches (b-0 fails on its taint first, as kube-scheduler's
    # filters run in that order).
    create(cluster, pod("picky", nodeSelector={"disk": "hdd"}))
    picky = eventually(cluster, "picky", lambda p: bool((p.get("status") or {}).get("conditions")))
    assert picky["status"]["conditions"][0]["message"] == (
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s)."
    )


def test_gated_pods_and_other_schedulers_pods_are_left_alone(
    cluster: testing.RunningEmulator,
) -> None:
    create(cluster, pod("gated", schedulingGates=[{"name": "example.com/hold"}]))
    create(cluster, pod("berths", schedulerName="berth-scheduler"))
    create(cluster, pod("marker"))  # bound after the others were looked at
    eventually(cluster, "marker", lambda p: bool(p["spec"].get("nodeName")))
    for name in ("gated", "berths"):
        assert not get(cluster, name)["spec"].get("nodeName"), name
    gated = get(cluster, "gated")
    assert [c["reason"] for c in gated["status"]["conditions"]] == ["SchedulingGated"]
