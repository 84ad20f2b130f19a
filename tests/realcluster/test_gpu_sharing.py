"""Shares of GPUs with KAI-Scheduler's annotations, on the real control plane.

Two KWOK nodes advertise two ``nvidia.com/gpu`` each and label their GPUs' memory as GPU
feature discovery does; the pods ask shares with ``gpu-fraction`` / ``gpu-memory`` and request
no ``nvidia.com/gpu``. We test these aspects:

- the real API server keeps the device Berth chose on the pod (``runai-gpu``, carried by the
  binding): four 0.75 shares take the four devices, one each;
- with a quarter left on every device a half waits, saying no GPU has 0.5 free;
- the queue's status counts the shares (3 GPUs for four 0.75), and its ``nvidia.com/gpu``
  limit holds a gang of four quarters back whole (room for two under the limit, none start);
  raising the limit starts all four, every device then holding exactly one GPU's worth;
- reclaim for a queue's guaranteed half of a GPU held by another queue's quarters evicts two
  quarters through the Eviction API, no more: the half runs on their device, which then holds
  exactly one GPU's worth;
- a reservation pod holds each shared device as KAI's node tooling looks for it (in
  ``runai-reservation``, on the node, one ``nvidia.com/gpu``, the shares' ``runai-gpu-group``),
  counted once (a whole-GPU pod still gets the other device), and goes with the last share,
  giving the device to a waiting whole-GPU pod; a bad share (``gpu-fraction: "1.5"``) waits
  naming the annotation and reserves nothing.
"""

from __future__ import annotations

import collections
import typing
import uuid

import pytest

from berth.emulator import kubelets
from berth.realcluster import nodes, processes
from tests.realcluster import cluster, pods

pytestmark = pytest.mark.realcluster

Obj = dict[str, typing.Any]
WAIT_SECONDS = 120.0
RESERVATIONS = "runai-reservation"  # where Berth keeps the reservation pods of shared GPUs


def shared(pod: Obj, annotations: dict[str, str], *, room: str) -> Obj:
    pod["metadata"].setdefault("annotations", {}).update(annotations)
    pod["spec"]["nodeSelector"] = {"gpu-room": room}
    return pod


def device_load(real: cluster.RealCluster, namespace: str) -> dict[tuple[str, str], int]:
    """Thousandths of a GPU on each (node, device index), read from the pods' annotations."""
    load: dict[tuple[str, str], int] = collections.Counter()
    for pod in real.pods(namespace):
        node = pod["spec"].get("nodeName")
        annotations = pod["metadata"].get("annotations") or {}
        if not node or "runai-gpu" not in annotations:
            continue
        if "gpu-fraction" in annotations:
            amount = round(1000 * float(annotations["gpu-fraction"]))
        else:  # gpu-memory on a 40000 MiB GPU
            amount = -(-1000 * int(annotations["gpu-memory"]) // 40000)
        for index in annotations["runai-gpu"].split(","):
            load[node, index] += amount
    return dict(load)


def bound(real: cluster.RealCluster, namespace: str) -> set[str]:
    return {p["metadata"]["name"] for p in real.pods(namespace) if p["spec"].get("nodeName")}


def wait_for(what: str, check: typing.Callable[[], typing.Any], real: cluster.RealCluster) -> None:
    processes.wait_until(
        what,
        lambda: bool(check()),
        timeout=WAIT_SECONDS,
        watch=[b.process for b in real.started],
        interval=1.0,
    )


def gpu_nodes(real: cluster.RealCluster, room: str, *, count: int, gpus: int) -> None:
    """``count`` KWOK nodes of ``gpus`` 40000 MiB GPUs, labelled ``gpu-room=ROOM``, Ready."""
    pool = kubelets.parse_pool(
        f"{count}x cpu=8,memory=32Gi,nvidia.com/gpu={gpus} label=nvidia.com/gpu.memory=40000 "
        f"label=gpu-room={room} name={room}"
    )
    real.create(*nodes.node_manifests([pool]))
    real.kubectl("wait", "--for=condition=Ready", "nodes", "-l", f"gpu-room={room}",
                 f"--timeout={cluster.WAIT}")  # fmt: skip


def test_shares_of_gpus_on_kwok_nodes(real: cluster.RealCluster) -> None:
    room = f"gpu-{uuid.uuid4().hex[:6]}"
    try:
        gpu_nodes(real, room, count=2, gpus=2)
        real.berth()
        namespace = real.namespace()
        queue = pods.queue(room, limit={"nvidia.com/gpu": "3500m"})
        real.create(queue)

        def allocated() -> str | None:
            status = real.json("get", "bq", room).get("status") or {}
            return typing.cast(str | None, (status.get("allocated") or {}).get("nvidia.com/gpu"))

        bigs = [
            shared(pods.pod(f"big-{i}", cpu="100m", queue=room), {"gpu-fraction": "0.75"},
                   room=room)
            for i in range(4)
        ]  # fmt: skip
        real.create(*bigs, namespace=namespace)
        wait_for("four 0.75 shares to run", lambda: len(bound(real, namespace)) == 4, real)
        load = device_load(real, namespace)
        assert sorted(load.values()) == [750] * 4, load  # one device each, as the pods say
        wait_for("the queue to count 3 GPUs", lambda: allocated() == "3", real)

        half = shared(pods.pod("half", cpu="100m"), {"gpu-fraction": "0.5"}, room=room)
        real.create(half, namespace=namespace)

        def half_reason() -> str:
            found = real.json("get", "pod", "half", "-n", namespace)
            for condition in found["status"].get("conditions") or []:
                if condition["type"] == "PodScheduled" and condition["status"] == "False":
                    return str(condition.get("message") or "")
            return ""

        wait_for("the half to say why it waits", lambda: "no GPU with 0.5 free" in half_reason(),
                 real)  # fmt: skip

        # A gang of four quarters: the limit (3.5) leaves room for two, so none starts.
        group = pods.pod_group("quarters", min_member=4, queue=room)
        members = [
            shared(pods.pod(f"quarters-{i}", cpu="100m", group="quarters"),
                   {"gpu-memory": "10000"} if i == 0 else {"gpu-fraction": "0.25"}, room=room)
            for i in range(4)
        ]  # fmt: skip
        real.create(group, *members, namespace=namespace)

        def group_reason() -> str:
            found = real.json("get", "bpg", "quarters", "-n", namespace)
            for condition in (found.get("status") or {}).get("conditions") or []:
                if condition["reason"] == "QueueOverLimit":
                    return str(condition["message"])
            return ""

        wait_for("the gang to say the limit holds it", group_reason, real)
        assert group_reason() == (
            f"gang needs minMember 4, only 2 could be placed; queue {room} at limit for "
            "nvidia.com/gpu (3500m/3500m)"
        )
        assert bound(real, namespace) == {f"big-{i}" for i in range(4)}
        real.kubectl("patch", "bq", room, "--type=merge", "-p",
                     '{"spec":{"limit":{"nvidia.com/gpu":"4"}}}')  # fmt: skip
        everyone = {f"big-{i}" for i in range(4)} | {f"quarters-{i}" for i in range(4)}
        wait_for("the whole gang to run", lambda: bound(real, namespace) == everyone, real)
        load = device_load(real, namespace)
        assert sorted(load.values()) == [1000] * 4, load
        wait_for("the queue to count 4 GPUs", lambda: allocated() == "4", real)
        assert "half" not in bound(real, namespace)
    finally:
        real.stop_berth()  # first: else it makes the reservation pods of its shares again
        real.kubectl("delete", "pods", "-n", RESERVATIONS, "--all", "--wait=false")
        real.kubectl("delete", "nodes", "-l", f"gpu-room={room}", "--wait=false")
        real.kubectl("delete", "bq", room, "--ignore-not-found", "--wait=false")


def test_reclaim_frees_exactly_the_shares_it_evicts(real: cluster.RealCluster) -> None:
    room = f"gpu-{uuid.uuid4().hex[:6]}"
    lab, prod = f"{room}-lab", f"{room}-prod"
    try:
        gpu_nodes(real, room, count=1, gpus=1)
        real.berth()
        namespace = real.namespace()
        real.create(
            pods.queue(lab, reclaimMinRuntimeSeconds=0),
            pods.queue(prod, guaranteed={"nvidia.com/gpu": "500m"}),
        )
        quarters = [
            shared(pods.pod(f"lab-{i}", cpu="100m", queue=lab), {"gpu-fraction": "0.25"},
                   room=room)
            for i in range(4)
        ]  # fmt: skip
        real.create(*quarters, namespace=namespace)
        wait_for("lab's quarters to fill the GPU", lambda: len(bound(real, namespace)) == 4, real)
        half = shared(pods.pod("prod-0", cpu="100m", queue=prod), {"gpu-fraction": "0.5"},
                      room=room)  # fmt: skip
        real.create(half, namespace=namespace)
        wait_for("prod's half to run", lambda: "prod-0" in bound(real, namespace), real)
        wait_for("the evicted quarters to go", lambda: len(real.pods(namespace)) == 3, real)
        load = device_load(real, namespace)
        assert load == {(f"{room}-0", "0"): 1000}, load
        evicted = [
            r.name
            for r in real.audited()
            if r.resource == "pods/eviction" and r.succeeded and r.namespace == namespace
        ]
        assert len(evicted) == 2 and all(name.startswith("lab-") for name in evicted), evicted
    finally:
        real.stop_berth()  # first: else it makes the reservation pods of its shares again
        real.kubectl("delete", "pods", "-n", RESERVATIONS, "--all", "--wait=false")
        real.kubectl("delete", "nodes", "-l", f"gpu-room={room}", "--wait=false")
        real.kubectl("delete", "bq", lab, prod, "--ignore-not-found", "--wait=false")


def reservation_pods(real: cluster.RealCluster, node_prefix: str) -> list[Obj]:
    return [
        p
        for p in real.pods(RESERVATIONS)
        if (p["spec"].get("nodeName") or "").startswith(node_prefix)
        and not p["metadata"].get("deletionTimestamp")
    ]


def test_a_reservation_pod_holds_each_shared_gpu_as_kai_does(real: cluster.RealCluster) -> None:
    """KAI's node-side tooling finds a share's device through a reservation pod: in
    ``runai-reservation``, on the share's node, labelled with the share's ``runai-gpu-group``,
    holding one ``nvidia.com/gpu`` from the device plugin (the fake GPU operator's status
    updater looks a share up exactly so). Berth keeps one per shared device, counts its GPU once
    (a whole-GPU pod still gets the node's other device), and deletes it once the device's last
    share is gone, which gives the device to a waiting whole-GPU pod."""
    room = f"gpu-{uuid.uuid4().hex[:6]}"
    try:
        gpu_nodes(real, room, count=1, gpus=2)
        real.berth()
        namespace = real.namespace()
        node = f"{room}-0"
        for i in range(2):  # one at a time: the second packs beside the first (GpuSharing)
            real.create(shared(pods.pod(f"half-{i}", cpu="100m"), {"gpu-fraction": "0.5"},
                               room=room), namespace=namespace)  # fmt: skip
            name = f"half-{i}"

            def runs(name: str = name) -> bool:
                return name in bound(real, namespace)

            wait_for(f"{name} to run", runs, real)
        assert device_load(real, namespace) == {(node, "0"): 1000}

        def linked() -> bool:
            holders = reservation_pods(real, node)
            if len(holders) != 1:
                return False
            groups = {
                # The reservation pod and each share's label are separate writes: a share
                # may still have no labels at all when the reservation pod is seen.
                (p["metadata"].get("labels") or {}).get("runai-gpu-group")
                for p in real.pods(namespace)
                if p["metadata"]["name"].startswith("half-")
            }
            return groups == {holders[0]["metadata"]["labels"]["runai-gpu-group"]}

        wait_for("one reservation pod, linked to both shares by its group", linked, real)
        # Bad input waits, naming the annotation, and reserves nothing.
        real.create(shared(pods.pod("bad", cpu="100m"), {"gpu-fraction": "1.5"}, room=room),
                    namespace=namespace)  # fmt: skip

        def bad_reason() -> str:
            found = real.json("get", "pod", "bad", "-n", namespace)
            for condition in found["status"].get("conditions") or []:
                if condition["type"] == "PodScheduled" and condition["status"] == "False":
                    return str(condition.get("message") or "")
            return ""

        wait_for("the bad share to say why", lambda: "annotation gpu-fraction" in bad_reason(),
                 real)  # fmt: skip
        assert "must be more than 0 and less than 1" in bad_reason()
        assert len(reservation_pods(real, node)) == 1
        [holder] = reservation_pods(real, node)
        assert holder["spec"]["nodeName"] == node
        assert holder["metadata"]["name"].startswith("gpu-reservation-")
        assert holder["metadata"]["annotations"]["runai-gpu"] == "0"
        [container] = holder["spec"]["containers"]
        assert container["resources"]["requests"]["nvidia.com/gpu"] == "1"

        # Its GPU is the shared device, not one more: a whole GPU is still free.
        whole = [shared(pods.pod(f"whole-{i}", cpu="100m"), {}, room=room) for i in range(2)]
        for pod in whole:
            pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
            pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        real.create(whole[0], namespace=namespace)
        wait_for("a whole GPU beside the shared one", lambda: "whole-0" in bound(real, namespace),
                 real)  # fmt: skip
        real.create(whole[1], namespace=namespace)

        def whole_1_waits() -> bool:
            found = real.json("get", "pod", "whole-1", "-n", namespace)
            return any(
                c["type"] == "PodScheduled" and c["status"] == "False"
                for c in found["status"].get("conditions") or []
            )

        wait_for("the second whole GPU to wait", whole_1_waits, real)
        assert "whole-1" not in bound(real, namespace)

        # The shares go: their reservation pod goes, and the device is whole-1's.
        real.kubectl("delete", "pod", "half-0", "half-1", "-n", namespace, "--wait=false")
        wait_for("the reservation pod to go", lambda: not reservation_pods(real, node), real)
        wait_for("whole-1 to run", lambda: "whole-1" in bound(real, namespace), real)
        assert not reservation_pods(real, node)
    finally:
        real.stop_berth()  # first: else it makes the reservation pods of its shares again
        real.kubectl("delete", "pods", "-n", RESERVATIONS, "--all", "--wait=false")
        real.kubectl("delete", "nodes", "-l", f"gpu-room={room}", "--wait=false")
