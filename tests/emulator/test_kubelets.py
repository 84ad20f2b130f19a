"""Simulated nodes and kubelets.

We test these aspects:
- pool SPECs parse (resources, labels, taints, DRA devices, name prefix) and bad ones are refused;
- a pool with ``devices=DRIVER:COUNT`` publishes a fake driver's DeviceClass and a ResourceSlice
  per node, which the API server accepts;
- nodes are created Ready, with allocatable, labels, taints and a Lease, and heartbeats renew;
- every node has its own pod subnet, also across pools started one after another;
- 100 pods bound by a client to 10 simulated nodes all report Running, each with an IP of its
  node's subnet that no other pod has;
- a pod with ``sim.berth.io/duration`` Succeeds on time under a speed-up factor;
- deleting or evicting a running pod terminates it (the kubelet confirms, the pod is gone);
- a binding that over-commits a node is refused by its kubelet (phase Failed, OutOfcpu).
"""

from __future__ import annotations

import ipaddress
import time
import typing

import kubernetes
import pytest

from berth.emulator import kubelets, testing


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "2x cpu=8,memory=32Gi",
            kubelets.NodePool("pool0", 2, {"pods": "110", "cpu": "8", "memory": "32Gi"}),
        ),
        (
            "1x cpu=8,nvidia.com/gpu=4 label=pool=gpu taint=dedicated=gpu:NoSchedule",
            kubelets.NodePool(
                "gpu",
                1,
                {"pods": "110", "cpu": "8", "nvidia.com/gpu": "4"},
                {"pool": "gpu"},
                ({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},),
            ),
        ),
        (
            "3x name=big cpu=64 taint=spot:NoExecute",
            kubelets.NodePool(
                "big",
                3,
                {"pods": "110", "cpu": "64"},
                {},
                ({"key": "spot", "effect": "NoExecute"},),
            ),
        ),
        ("1x", kubelets.NodePool("pool0", 1, {"pods": "110", "cpu": "4", "memory": "16Gi"})),
        (
            "4x cpu=16 devices=gpu.example.com:8,nic.example.com:2",
            kubelets.NodePool(
                "pool0",
                4,
                {"pods": "110", "cpu": "16"},
                devices=(("gpu.example.com", 8), ("nic.example.com", 2)),
            ),
        ),
    ],
    ids=["resources", "labels-and-taints", "name-and-valueless-taint", "defaults", "devices"],
)
def test_pool_specs(spec: str, expected: kubelets.NodePool) -> None:
    assert kubelets.parse_pool(spec) == expected


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "ten cpu=1",
        "2x cpu",
        "2x cpu=lots",
        "2x label=nokey",
        "2x taint=a=b:Sometimes",
        "2x devices=gpu:8",
        "2x devices=gpu.example.com",
        "2x devices=gpu.example.com:0",
        "2x devices=gpu.example.com:129",
        "2x devices=gpu.example.com:1,gpu.example.com:2",
    ],
    ids=[
        "empty",
        "no-count",
        "no-quantity",
        "bad-quantity",
        "bad-label",
        "bad-effect",
        "driver-without-domain",
        "devices-without-count",
        "no-devices",
        "too-many-devices",
        "driver-twice",
    ],
)
def test_bad_pool_specs(spec: str) -> None:
    with pytest.raises(kubelets.PoolSpecError):
        kubelets.parse_pool(spec)


def test_pools_with_devices_publish_a_fake_drivers_slices(
    emulator: testing.RunningEmulator,
) -> None:
    emulator.start_kubelets(["2x cpu=8 devices=gpu.example.com:3 name=g", "1x name=plain"])
    api = emulator.api
    slices = emulator.call(api.storage.list, ("resource.k8s.io", "resourceslices"), None)
    assert sorted(s["metadata"]["name"] for s in slices) == [
        "g-0-gpu.example.com",
        "g-1-gpu.example.com",
    ]
    first = next(s for s in slices if s["spec"]["nodeName"] == "g-0")
    assert first["spec"]["pool"] == {"name": "g-0", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in first["spec"]["devices"]] == ["gpu-0", "gpu-1", "gpu-2"]
    classes = emulator.call(api.storage.list, ("resource.k8s.io", "deviceclasses"), None)
    assert [c["metadata"]["name"] for c in classes] == ["gpu.example.com"]
    expression = classes[0]["spec"]["selectors"][0]["cel"]["expression"]
    assert expression == 'device.driver == "gpu.example.com"'


def _wait(predicate: typing.Callable[[], bool], *, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _pods(emulator: testing.RunningEmulator) -> list[dict[str, typing.Any]]:
    pods = emulator.call(emulator.api.resource, "v1", "pods")
    return emulator.call(emulator.api.list, pods, namespace="default").items


def _bind(core: kubernetes.client.CoreV1Api, name: str, node: str) -> None:
    core.create_namespaced_pod_binding(
        name,
        "default",
        {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}},
        _preload_content=False,
    )


def _pod(
    name: str, *, cpu: str = "100m", annotations: dict[str, str] | None = None
) -> dict[str, typing.Any]:
    return {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]
        },
    }


def test_nodes_are_ready_with_leases_and_heartbeats(
    emulator: testing.RunningEmulator, client: kubernetes.client.ApiClient
) -> None:
    emulator.start_kubelets(
        ["2x cpu=8,memory=32Gi label=pool=gpu taint=dedicated=gpu:NoSchedule"],
        speedup=100.0,
        heartbeat=10.0,
    )
    core = kubernetes.client.CoreV1Api(client)
    nodes = core.list_node().items
    assert [n.metadata.name for n in nodes] == ["gpu-0", "gpu-1"]
    node = nodes[0]
    assert node.status.allocatable == {"pods": "110", "cpu": "8", "memory": "32Gi"}
    assert node.metadata.labels["pool"] == "gpu"
    assert [(t.key, t.value, t.effect) for t in node.spec.taints] == [
        ("dedicated", "gpu", "NoSchedule")
    ]
    assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
    leases = kubernetes.client.CoordinationV1Api(client)
    first = leases.read_namespaced_lease("gpu-0", "kube-node-lease").metadata.resource_version
    _wait(
        lambda: (
            leases.read_namespaced_lease("gpu-0", "kube-node-lease").metadata.resource_version
            != first
        )
    )


def test_every_node_has_its_own_pod_subnet(
    emulator: testing.RunningEmulator, client: kubernetes.client.ApiClient
) -> None:
    emulator.start_kubelets(["2x cpu=1"])
    emulator.start_kubelets(["2x cpu=1,pods=300 name=big"])
    nodes = kubernetes.client.CoreV1Api(client).list_node().items
    subnets = {n.metadata.name: ipaddress.ip_network(n.spec.pod_cidr) for n in nodes}
    assert sorted(subnets) == ["big-0", "big-1", "pool0-0", "pool0-1"]
    assert [subnets["big-0"].prefixlen, subnets["pool0-0"].prefixlen] == [23, 24]
    listed = list(subnets.values())
    assert not any(a.overlaps(b) for i, a in enumerate(listed) for b in listed[i + 1 :])


def test_hundred_pods_on_ten_nodes_all_run(
    emulator: testing.RunningEmulator, client: kubernetes.client.ApiClient
) -> None:
    emulator.start_kubelets(["10x cpu=8,memory=32Gi"], speedup=50.0)
    core = kubernetes.client.CoreV1Api(client)
    for i in range(100):
        core.create_namespaced_pod("default", _pod(f"p{i}"))
        _bind(core, f"p{i}", f"pool0-{i % 10}")
    _wait(lambda: all(p["status"]["phase"] == "Running" for p in _pods(emulator)), timeout=20)
    running = core.list_namespaced_pod("default", field_selector="status.phase=Running").items
    assert len(running) == 100
    assert {p.spec.node_name for p in running} == {f"pool0-{i}" for i in range(10)}
    assert all(p.status.container_statuses[0].ready for p in running)
    subnets = {
        n.metadata.name: ipaddress.ip_network(n.spec.pod_cidr) for n in core.list_node().items
    }
    assert len({p.status.pod_ip for p in running}) == 100
    assert all(ipaddress.ip_address(p.status.pod_ip) in subnets[p.spec.node_name] for p in running)


def test_duration_annotation_succeeds_on_time(
    emulator: testing.RunningEmulator, client: kubernetes.client.ApiClient
) -> None:
    speedup = 100.0
    emulator.start_kubelets(["1x cpu=8"], speedup=speedup, start_delay=0.0)
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_pod(
        "default", _pod("job", annotations={kubelets.DURATION_ANNOTATION: "90s"})
    )
    _bind(core, "job", "pool0-0")

    def phase() -> str:
        return str(core.read_namespaced_pod("job", "default").status.phase)

    _wait(lambda: phase() == "Running")
    running_at = time.monotonic()
    _wait(lambda: phase() == "Succeeded")
    elapsed = time.monotonic() - running_at
    assert 0.7 <= elapsed <= 90 / speedup + 0.6, elapsed
    status = core.read_namespaced_pod("job", "default").status
    assert status.container_statuses[0].state.terminated.reason == "Completed"


@pytest.mark.parametrize("how", ["delete", "evict"])
def test_deleted_and_evicted_pods_terminate(
    emulator: testing.RunningEmulator, client: kubernetes.client.ApiClient, how: str
) -> None:
    emulator.start_kubelets(["1x cpu=8"], speedup=100.0, start_delay=0.0)
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_pod("default", _pod("p"))
    _bind(core, "p", "pool0-0")
    _wait(lambda: core.read_namespaced_pod("p", "default").status.phase == "Running")
    if how == "delete":
        core.delete_namespaced_pod("p", "default")
    else:
        core.create_namespaced_pod_eviction("p", "default", {"metadata": {"name": "p"}})
    _wait(lambda: not core.list_namespaced_pod("default").items)


def test_over_committed_binding_is_refused_by_the_kubelet(
    emulator: testing.RunningEmulator, client: kubernetes.client.ApiClient
) -> None:
    emulator.start_kubelets(["1x cpu=1"], speedup=100.0, start_delay=0.0)
    core = kubernetes.client.CoreV1Api(client)
    for name in ("a", "b"):
        core.create_namespaced_pod("default", _pod(name, cpu="600m"))
        _bind(core, name, "pool0-0")
    _wait(lambda: {p["status"]["phase"] for p in _pods(emulator)} == {"Running", "Failed"})
    failed = core.read_namespaced_pod("b", "default").status
    assert (failed.phase, failed.reason) == ("Failed", "OutOfcpu")
