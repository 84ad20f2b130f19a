"""GPUs through DRA with ``berth up`` and real kubectl: examples/dra-gpus (issue 27).

Three nodes with two GPUs each of a fake driver (``devices=gpu.example.com:2``) and a node
``late-0`` without; then the example's steps. We test these aspects:
- a gang of four pods each claiming two GPUs through a template, with room for three members'
  devices: no claim allocated, no pod bound, and the PodGroup's condition names the claim that
  could not be met and its DeviceClass; once late-0's slice is applied, all four are bound, each
  claim allocated on its pod's node and reserved for it;
- queue quota in devices: a queue limited to four GPUs of the class runs two 2-GPU pods and holds
  the third with a reason naming the class; a claim shared by two pods is counted once (two
  servers sharing a one-GPU claim and a third one-GPU pod all run under a two-GPU limit);
- a Reservation holding two GPUs (its template names the claim template): its status lists the
  two devices of its node; three 2-GPU pods that are no owners take the other nodes' GPUs and
  the third waits for devices; the owner is bound on the reservation's node with its own claim
  allocated on the very devices listed, and the reservation is Succeeded.
"""

from __future__ import annotations

import pathlib

import pytest

from tests.workloads import cluster

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dra-gpus"
GPU_NODES = "3x cpu=16,memory=64Gi devices=gpu.example.com:2 name=gpu"
LATE = ("--nodes", "1x cpu=16,memory=64Gi name=late")

Obj = dict[str, object]


def _bound(kubectl: cluster.Kubectl) -> dict[str, str]:
    pods = kubectl.items("pods")
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")}


def _claims(kubectl: cluster.Kubectl) -> list[dict[str, object]]:
    return kubectl.items("resourceclaims")


def _scheduled_condition(kubectl: cluster.Kubectl, group: str) -> dict[str, str] | None:
    status = kubectl.get("bpg", group).get("status") or {}
    for condition in status.get("conditions") or ():
        if condition.get("type") == "Scheduled":
            return dict(condition)
    return None


def _failed_scheduling(kubectl: cluster.Kubectl, pod: str) -> str | None:
    for event in kubectl.items("events"):
        if event["involvedObject"]["name"] == pod and event["reason"] == "FailedScheduling":
            return str(event["message"])
    return None


@pytest.mark.slow
def test_a_gang_waits_for_every_members_devices_then_starts_whole(tmp_path: pathlib.Path) -> None:
    with cluster.berth_up(tmp_path, nodes=GPU_NODES, extra=LATE) as kubectl:
        assert len(kubectl.items("resourceslices")) == 3
        kubectl("apply", "-f", str(EXAMPLE / "template.yaml"), "-f", str(EXAMPLE / "gang.yaml"))
        claims = cluster.eventually(
            lambda: (found := _claims(kubectl)) and len(found) == 4 and found,
            what="the four claims made from the template",
            timeout=60,
        )

        def waiting() -> dict[str, str] | None:
            condition = _scheduled_condition(kubectl, "gpu-train")
            return condition if condition and condition.get("status") == "False" else None

        condition = cluster.eventually(waiting, what="the gang's reason", timeout=60)
        message = condition["message"]
        assert "too few free devices for resourceclaim default/gpu-train-" in message, message
        assert "2 of deviceclass gpu.example.com" in message
        assert _bound(kubectl) == {}
        assert not any((c.get("status") or {}).get("allocation") for c in _claims(kubectl))
        assert len(claims) == 4

        kubectl("apply", "-f", str(EXAMPLE / "late-node.yaml"))
        bound = cluster.eventually(
            lambda: (found := _bound(kubectl)) and len(found) == 4 and found,
            what="the whole gang bound",
            timeout=60,
        )
        assert sorted(bound.values()).count("late-0") == 1
        pods = {p["metadata"]["name"]: p for p in kubectl.items("pods")}
        for claim in _claims(kubectl):
            owner = claim["metadata"]["ownerReferences"][0]["name"]
            status = claim["status"]
            pools = {r["pool"] for r in status["allocation"]["devices"]["results"]}
            assert pools == {bound[owner]}, claim["metadata"]["name"]
            uids = [c["uid"] for c in status["reservedFor"]]
            assert uids == [pods[owner]["metadata"]["uid"]]


@pytest.mark.slow
def test_queue_quota_counts_devices_of_a_class_and_a_shared_claim_once(
    tmp_path: pathlib.Path,
) -> None:
    with cluster.berth_up(tmp_path, nodes=GPU_NODES, extra=LATE) as kubectl:
        kubectl("apply", "-f", str(EXAMPLE / "late-node.yaml"))
        kubectl("apply", "-f", str(EXAMPLE / "template.yaml"))
        kubectl("apply", "-f", str(EXAMPLE / "quota.yaml"), "-f", str(EXAMPLE / "shared.yaml"))
        notebooks = {"notebook-a", "notebook-b", "notebook-c"}
        shared = {"server-0", "server-1", "solo"}

        def settled() -> dict[str, str] | None:
            bound = _bound(kubectl)
            return bound if len(notebooks & bound.keys()) == 2 and shared <= bound.keys() else None

        bound = cluster.eventually(settled, what="two notebooks and the shared trio", timeout=60)
        [held] = notebooks - bound.keys()
        why = cluster.eventually(
            lambda: _failed_scheduling(kubectl, held), what="why the third waits", timeout=30
        )
        assert "queue team-gpu at limit for deviceclass/gpu.example.com" in why, why
        assert bound["server-0"] == bound["server-1"]  # one claim: its device is on one node
        [model] = [c for c in _claims(kubectl) if c["metadata"]["name"] == "model"]
        assert len(model["status"]["reservedFor"]) == 2


@pytest.mark.slow
def test_a_reservation_holds_gpus_for_its_owner(tmp_path: pathlib.Path) -> None:
    with cluster.berth_up(tmp_path, nodes=GPU_NODES) as kubectl:
        kubectl("apply", "-f", str(EXAMPLE / "template.yaml"))
        kubectl("apply", "-f", str(EXAMPLE / "reservation.yaml"))

        def available() -> dict[str, object] | None:
            status = kubectl.get("resv", "train-gpus").get("status") or {}
            return status if status.get("phase") == "Available" else None

        status = cluster.eventually(available, what="the reservation Available", timeout=60)
        node = status["nodeName"]
        held = [(d["pool"], d["device"]) for d in status["devices"]]
        assert len(held) == 2 and {pool for pool, _ in held} == {node}, status
        assert _claims(kubectl) == []  # what it holds is no ResourceClaim of the API

        kubectl("apply", "-f", str(EXAMPLE / "reservation-users.yaml"))
        others = {"other-a", "other-b", "other-c"}
        bound = cluster.eventually(
            lambda: (found := _bound(kubectl)) and len(others & found.keys()) == 2 and found,
            what="two of the three others bound",
            timeout=60,
        )
        assert node not in bound.values()
        [waiting] = others - bound.keys()
        why = cluster.eventually(
            lambda: _failed_scheduling(kubectl, waiting), what="why the third waits", timeout=30
        )
        assert "too few free devices" in why, why

        kubectl("apply", "-f", str(EXAMPLE / "trainer.yaml"))
        trainer_node = cluster.eventually(
            lambda: _bound(kubectl).get("gpu-trainer"), what="the trainer bound", timeout=60
        )
        assert trainer_node == node
        [claim] = [
            c
            for c in _claims(kubectl)
            if c["metadata"]["ownerReferences"][0]["name"] == "gpu-trainer"
        ]
        results = claim["status"]["allocation"]["devices"]["results"]
        assert sorted((r["pool"], r["device"]) for r in results) == sorted(held)
        cluster.eventually(
            lambda: (
                (kubectl.get("resv", "train-gpus").get("status") or {}).get("phase") == "Succeeded"
            ),
            what="the reservation used",
            timeout=30,
        )
        assert waiting not in _bound(kubectl)
