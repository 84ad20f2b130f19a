"""Shares of GPUs with KAI-Scheduler's annotations, through ``berth up`` and the real kubectl.

The nodes advertise ``nvidia.com/gpu`` and label their GPUs' memory as GPU feature discovery
does (``nvidia.com/gpu.memory``); the pods ask shares with ``gpu-fraction`` and ``gpu-memory``
and request no ``nvidia.com/gpu``. We test these aspects:

- each placed share carries the index of its device (``runai-gpu``), and no device ever holds
  more than one GPU's worth: with a quarter left on every device, a half waits and says so
  although the node's GPUs hold a whole GPU free in all;
- a queue's ``nvidia.com/gpu`` limit counts shares: under a limit of 0.75 three quarters run
  and the fourth waits, and ``kubectl get bq`` shows the fraction allocated;
- a gang of shares starts whole or not at all, and its pods spread over the devices by share;
- reclaim for a queue's guaranteed half of a GPU held by another queue's quarters evicts two
  quarters, no more: the half runs on their device, which holds exactly one GPU's worth, and
  each queue counts half a GPU.
"""

from __future__ import annotations

import collections
import pathlib
import typing

import pytest

from tests.workloads import cluster

pytestmark = pytest.mark.slow

Obj = dict[str, typing.Any]
NODES = "2x cpu=8,memory=32Gi,nvidia.com/gpu=2 label=nvidia.com/gpu.memory=40000"
THOUSANDTHS = {"0.25": 250, "0.5": 500, "0.75": 750}


def pod(name: str, share: dict[str, str], *, labels: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": share, "labels": labels or {}},
        "spec": {
            "schedulerName": "berth-scheduler",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


def fraction(value: str) -> dict[str, str]:
    return {"gpu-fraction": value}


def placed(kubectl: cluster.Kubectl) -> dict[str, tuple[str, str | None]]:
    """Each bound pod's node and ``runai-gpu`` annotation."""
    return {
        p["metadata"]["name"]: (
            p["spec"]["nodeName"],
            (p["metadata"].get("annotations") or {}).get("runai-gpu"),
        )
        for p in kubectl.items("pods")
        if p["spec"].get("nodeName")
    }


def device_load(kubectl: cluster.Kubectl) -> dict[tuple[str, str], int]:
    """Thousandths of a GPU held on each (node, device index), read from the pods."""
    load: dict[tuple[str, str], int] = collections.Counter()
    for p in kubectl.items("pods"):
        node = p["spec"].get("nodeName")
        annotations = p["metadata"].get("annotations") or {}
        if not node or "runai-gpu" not in annotations:
            continue
        if "gpu-fraction" in annotations:
            amount = THOUSANDTHS[annotations["gpu-fraction"]]
        else:  # gpu-memory on a 40000 MiB GPU
            amount = -(-1000 * int(annotations["gpu-memory"]) // 40000)
        for index in annotations["runai-gpu"].split(","):
            load[node, index] += amount
    return dict(load)


def waiting_reason(kubectl: cluster.Kubectl, name: str) -> str:
    for condition in kubectl.get("pod", name)["status"].get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return str(condition.get("message") or "")
    return ""


def test_shares_get_a_device_and_never_overcommit_it(tmp_path: pathlib.Path) -> None:
    with cluster.berth_up(tmp_path, nodes=NODES) as kubectl:
        # Three quarters on each of the four GPUs (two can never share one device).
        threes = [pod(f"big-{i}", fraction("0.75")) for i in range(4)]
        kubectl.apply(*threes)
        cluster.eventually(lambda: len(placed(kubectl)) == 4, what="four 0.75 shares to run")
        where = placed(kubectl)
        assert all(index is not None and index in ("0", "1") for _, index in where.values())
        assert len(set(where.values())) == 4, where  # one device each
        # A quarter is left on every device: a whole GPU in all, but no half on any one.
        kubectl.apply(pod("half", fraction("0.5")))
        message = cluster.eventually(
            lambda: waiting_reason(kubectl, "half"), what="the half to say why it waits"
        )
        assert "0/2 nodes fit: 2 no GPU with 0.5 free" in message, message
        # The quarters fill the devices exactly: one by gpu-memory (10000 of 40000 MiB).
        quarters = [pod(f"quarter-{i}", fraction("0.25")) for i in range(3)]
        quarters.append(pod("quarter-3", {"gpu-memory": "10000"}))
        kubectl.apply(*quarters)
        cluster.eventually(lambda: len(placed(kubectl)) == 8, what="the four quarters to run")
        load = device_load(kubectl)
        assert load == {device: 1000 for device in load} and len(load) == 4, load
        assert "half" not in placed(kubectl)
        # A big share's going leaves its device the room of the half.
        kubectl("delete", "pod", "big-0", "--wait=false")
        cluster.eventually(lambda: "half" in placed(kubectl), what="the half to run")
        assert max(device_load(kubectl).values()) <= 1000


def test_queue_limit_counts_shares(tmp_path: pathlib.Path) -> None:
    with cluster.berth_up(tmp_path, nodes=NODES) as kubectl:
        queue = {
            "apiVersion": "scheduling.berth.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "notebooks"},
            "spec": {"limit": {"nvidia.com/gpu": "750m"}},
        }
        kubectl.apply(queue)
        label = {"scheduling.berth.io/queue": "notebooks"}
        kubectl.apply(*(pod(f"nb-{i}", fraction("0.25"), labels=label) for i in range(4)))
        cluster.eventually(lambda: len(placed(kubectl)) == 3, what="three quarters to run")

        def allocated() -> str | None:
            status = kubectl.get("bq", "notebooks").get("status") or {}
            return typing.cast(str | None, (status.get("allocated") or {}).get("nvidia.com/gpu"))

        cluster.eventually(lambda: allocated() == "750m", what="the queue to count 0.75 GPU")
        (waiting,) = {f"nb-{i}" for i in range(4)} - set(placed(kubectl))
        message = cluster.eventually(
            lambda: waiting_reason(kubectl, waiting), what="the fourth to say why it waits"
        )
        assert "queue notebooks at limit for nvidia.com/gpu (750m/750m)" in message, message
        assert "notebooks" in kubectl("get", "bq", "notebooks")
        # The limit, not the devices, holds it: raising it lets the fourth quarter in.
        kubectl.apply({**queue, "spec": {"limit": {"nvidia.com/gpu": "1"}}})
        cluster.eventually(lambda: len(placed(kubectl)) == 4, what="the fourth quarter to run")
        cluster.eventually(lambda: allocated() == "1", what="the queue to count 1 GPU")


def test_gang_of_shares_starts_whole_or_not_at_all(tmp_path: pathlib.Path) -> None:
    with cluster.berth_up(
        tmp_path, nodes="1x cpu=8,memory=32Gi,nvidia.com/gpu=2 label=nvidia.com/gpu.memory=40000"
    ) as kubectl:
        kubectl.apply(pod("blocker", fraction("0.5")))
        cluster.eventually(lambda: "blocker" in placed(kubectl), what="the blocker to run")
        group = {
            "apiVersion": "scheduling.berth.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "serve"},
            "spec": {"minMember": 4},
        }
        kubectl.apply(group)
        member = {"scheduling.berth.io/pod-group": "serve"}
        # Four halves need both GPUs whole; with the blocker's half taken only three fit.
        kubectl.apply(*(pod(f"serve-{i}", fraction("0.5"), labels=member) for i in range(4)))

        def waiting_condition() -> Obj | None:
            found = kubectl.get("bpg", "serve")
            for condition in (found.get("status") or {}).get("conditions") or []:
                if condition["reason"] == "NotEnoughResources":
                    return typing.cast(Obj, condition)
            return None

        condition = cluster.eventually(waiting_condition, what="the gang to say why it waits")
        assert "gang needs minMember 4, only 3 could be placed" in condition["message"]
        assert set(placed(kubectl)) == {"blocker"}
        kubectl("delete", "pod", "blocker", "--wait=false")
        names = {f"serve-{i}" for i in range(4)}
        cluster.eventually(lambda: set(placed(kubectl)) == names, what="the whole gang to run")
        load = device_load(kubectl)
        assert sorted(load.values()) == [1000, 1000], load


def test_reclaim_evicts_shares_and_frees_exactly_theirs(tmp_path: pathlib.Path) -> None:
    with cluster.berth_up(
        tmp_path, nodes="1x cpu=8,memory=32Gi,nvidia.com/gpu=1 label=nvidia.com/gpu.memory=40000"
    ) as kubectl:
        queues = [
            {
                "apiVersion": "scheduling.berth.io/v1alpha1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": spec,
            }
            for name, spec in (
                ("lab", {"reclaimMinRuntimeSeconds": 0}),
                ("prod", {"guaranteed": {"nvidia.com/gpu": "500m"}}),
            )
        ]
        kubectl.apply(*queues)
        lab = {"scheduling.berth.io/queue": "lab"}
        kubectl.apply(*(pod(f"lab-{i}", fraction("0.25"), labels=lab) for i in range(4)))
        cluster.eventually(lambda: len(placed(kubectl)) == 4, what="lab's quarters to fill the GPU")
        # prod's half is within its guarantee: reclaim takes two quarters, no more.
        kubectl.apply(pod("prod-0", fraction("0.5"), labels={"scheduling.berth.io/queue": "prod"}))
        cluster.eventually(
            lambda: "prod-0" in placed(kubectl), what="prod's half to run", timeout=60.0
        )
        assert placed(kubectl)["prod-0"][1] == "0"
        cluster.eventually(
            lambda: len(kubectl.items("pods")) == 3, what="the two evicted quarters to go"
        )
        assert device_load(kubectl) == {(placed(kubectl)["prod-0"][0], "0"): 1000}

        def allocated(queue: str) -> str | None:
            status = kubectl.get("bq", queue).get("status") or {}
            return typing.cast(str | None, (status.get("allocated") or {}).get("nvidia.com/gpu"))

        cluster.eventually(
            lambda: allocated("lab") == "500m" and allocated("prod") == "500m",
            what="each queue to count half a GPU",
        )
        events = kubectl("get", "events", "-o", "jsonpath={.items[*].message}")
        assert "reclaimed by queue prod" in events
