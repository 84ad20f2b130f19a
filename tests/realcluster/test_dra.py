"""GPUs through DRA on the real control plane (v1.36: resource.k8s.io/v1, its resourceclaim
controller in kube-controller-manager, the real kube-scheduler beside Berth).

Each test publishes a fake driver's ResourceSlices on KWOK nodes. We test these aspects:
- scheduler mode, a gang of four pods each claiming two GPUs through a template, on nodes
  created with a node spec's ``devices=`` (its DeviceClass and slices accepted by the API
  server) with room for three members' devices: no claim is allocated, no pod bound, and the
  PodGroup's condition names the claim that could not be met; once a fourth node's slice is
  published all four are bound together, each claim allocated on its pod's node and reserved
  for it — written by Berth, as the API server (with its 1.36 authorization of claim status
  writes) accepts it;
- scheduler mode, a Reservation whose template claims two GPUs through a template: it is
  placed on the one node with two, its status listing the devices; a pod that is no owner waits
  for devices, and the owner is bound there with its own claim allocated (by Berth, accepted by
  the API server) on the very devices held; the reservation is then Succeeded;
- admission mode, two pods wanting the one free device: Berth pins one, only to the node of
  that device, and kube-scheduler allocates its claim and binds it there; the other waits gated,
  told why, nothing deleted and recreated; within 30 seconds of the first pod going (its claim
  released by the resourceclaim controller) the second is admitted and bound there.
"""

from __future__ import annotations

import json
import pathlib
import time
import typing

import pytest
import yaml

from berth.api import keys
from berth.emulator import kubelets
from berth.realcluster import install, nodes, processes
from berth.scheduler.plugins import registry as plugin_registry
from tests.realcluster import cluster, dra, pods

pytestmark = pytest.mark.realcluster

Obj = dict[str, typing.Any]


def _eventually(what: str, check: typing.Callable[[], typing.Any], timeout: float = 90.0) -> None:
    processes.wait_until(what, check, timeout=timeout, interval=0.5)


def _bound(real: cluster.RealCluster, namespace: str) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in real.pods(namespace)
        if p["spec"].get("nodeName")
    }


def _bound_once_first_goes(real: cluster.RealCluster, namespace: str) -> float:
    """Delete the pod ``first`` (its claim's device is freed) and wait for the pod ``second``
    to be bound; the seconds that took."""
    real.kubectl("delete", "pod", "first", "-n", namespace, "--wait=false")
    freed = time.monotonic()
    _eventually(
        "the second pod bound once the first pod's device is freed",
        lambda: bool(real.json("get", "pod", "second", "-n", namespace)["spec"].get("nodeName")),
        timeout=60.0,
    )
    return time.monotonic() - freed


def test_a_gang_claiming_gpus_waits_whole_and_starts_whole(real: cluster.RealCluster) -> None:
    real.berth()
    namespace = real.namespace()
    queue = f"q-{namespace}"
    driver = dra.driver_name("gang")
    tag = driver.partition(".")[0]
    # Three KWOK nodes whose fake driver publishes two GPUs each (the node spec's devices=, as
    # `berth up --real` applies it), and a fourth whose GPUs appear later.
    pools = [
        kubelets.parse_pool(f"3x cpu=4,memory=16Gi devices={driver}:2 label=dra={tag} name={tag}"),
        kubelets.parse_pool(f"1x cpu=4,memory=16Gi label=dra={tag} name={tag}-late"),
    ]
    real.create(*nodes.node_manifests(pools))
    real.kubectl("wait", "--for=condition=Ready", "nodes", "-l", f"dra={tag}",
                 f"--timeout={cluster.WAIT}")  # fmt: skip
    real.create(*nodes.device_manifests(pools))
    try:
        real.create(pods.queue(queue))
        real.create(dra.template("two-gpus", cls=driver, count=2), namespace=namespace)
        gang = pods.gang(
            "train", 4, queue=queue, cpu="100m", extra_spec=dra.claims_from("two-gpus")
        )
        real.create(*gang, namespace=namespace)
        _eventually("the four claims made", lambda: len(dra.claims(real, namespace)) == 4)

        def reason() -> str | None:
            group = real.json("get", "podgroup", "train", "-n", namespace)
            for condition in (group.get("status") or {}).get("conditions") or ():
                if condition["type"] == "Scheduled" and condition["status"] == "False":
                    message = str(condition.get("message") or "")
                    # Before Berth's cache has seen the claims the controller made, the
                    # reason says it waits for them; the one to check comes after.
                    return message if "too few free devices for resourceclaim" in message else None
            return None

        _eventually("the gang's reason names a claim short of devices", reason)
        message = reason()
        assert message is not None
        assert f"too few free devices for resourceclaim {namespace}/train-" in message, message
        assert f"2 of deviceclass {driver}" in message
        assert _bound(real, namespace) == {}
        assert not any(dra.allocated_pools(c) for c in dra.claims(real, namespace))

        real.create(dra.node_slice(driver, f"{tag}-late-0", count=2))
        _eventually("the whole gang bound", lambda: len(_bound(real, namespace)) == 4)
        bound = _bound(real, namespace)
        assert sorted(bound.values()) == sorted(
            [*(f"{tag}-{i}" for i in range(3)), f"{tag}-late-0"]
        )
        uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in real.pods(namespace)}
        for claim in dra.claims(real, namespace):
            pod = dra.owner(claim)
            assert pod is not None
            assert dra.allocated_pools(claim) == {bound[pod]}
            assert dra.consumers(claim) == [uids[pod]]
            assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    finally:
        real.kubectl("delete", "resourceslices", "--field-selector", f"spec.driver={driver}",
                     "--wait=false")  # fmt: skip
        real.kubectl("delete", "deviceclass", driver, "--wait=false")
        real.kubectl("delete", "nodes", "-l", f"dra={tag}", "--wait=false")


def test_admission_mode_pins_only_where_the_free_device_is(real: cluster.RealCluster) -> None:
    real.berth(mode="admission")
    namespace = real.namespace()
    driver = dra.driver_name("adm")
    node = "pool0-4"
    with dra.devices(real, driver, {node: 1}):
        real.create(dra.template("one-gpu", cls=driver), namespace=namespace)
        for name in ("first", "second"):
            real.create(
                pods.pod(
                    name,
                    queue="default",
                    scheduler=None,
                    extra_spec=dra.claims_from("one-gpu"),
                ),
                namespace=namespace,
            )
            if name == "first":
                real.wait(f"pod/{name}", jsonpath="{.status.phase}", value="Running",
                          namespace=namespace)  # fmt: skip
        first = real.json("get", "pod", "first", "-n", namespace)
        assert first["spec"]["nodeName"] == node
        assert first["metadata"]["annotations"][keys.ADMITTED_NODE_ANNOTATION] == node
        [made] = [c for c in dra.claims(real, namespace) if dra.owner(c) == "first"]
        assert dra.allocated_pools(made) == {node}  # kube-scheduler allocated it there

        def told() -> str | None:
            listed = real.json("get", "events", "-n", namespace)["items"]
            for event in listed:
                if event["involvedObject"]["name"] == "second" and event["reason"] == "NotAdmitted":
                    return str(event["message"])
            return None

        _eventually("the second pod told why it waits", told)
        message = told()
        assert message is not None and "resourceclaim" in message, message
        second = real.json("get", "pod", "second", "-n", namespace)
        uid = second["metadata"]["uid"]
        assert keys.ADMISSION_GATE in [g["name"] for g in second["spec"]["schedulingGates"]]

        admitted_after = _bound_once_first_goes(real, namespace)
        second = real.json("get", "pod", "second", "-n", namespace)
        assert second["spec"]["nodeName"] == node
        assert second["metadata"]["uid"] == uid  # the same pod: never deleted and recreated
        assert admitted_after < 30.0, admitted_after
        rejected = real.kubectl(
            "get", "events", "-n", namespace, "--field-selector", "reason=AdmissionRejected",
            "-o", "json",
        )  # fmt: skip
        assert json.loads(rejected.stdout)["items"] == []


def _events(real: cluster.RealCluster, namespace: str, reason: str, name: str) -> list[Obj]:
    listed = real.json("get", "events", "-n", namespace, "--field-selector", f"reason={reason}")
    return [e for e in listed["items"] if e["involvedObject"]["name"] == name]


def test_admission_mode_refused_for_a_claim_backs_off_and_comes_back_when_it_frees(
    real: cluster.RealCluster, tmp_path: pathlib.Path
) -> None:
    # Without DynamicResources Berth pins a pod where its device is taken; kube-scheduler, which
    # allocates claims as it binds, refuses it there. That is the disagreement to handle.
    profile = plugin_registry.default_profile().model_dump(by_alias=True, exclude_none=True)
    profile["disabled"] = ["DynamicResources"]
    config = tmp_path / "profile.yaml"
    config.write_text(yaml.safe_dump(profile))
    real.berth(mode="admission", settings={"BERTH_CONFIG": str(config)})
    namespace = real.namespace()
    driver = dra.driver_name("refused")
    node = "pool0-4"
    on_node = {"nodeSelector": {"kubernetes.io/hostname": node}, **dra.claims_from("one-gpu")}
    with dra.devices(real, driver, {node: 1}):
        real.create(dra.template("one-gpu", cls=driver), namespace=namespace)
        real.create(pods.pod("first", queue="default", scheduler=None, extra_spec=on_node),
                    namespace=namespace)  # fmt: skip
        real.wait("pod/first", jsonpath="{.status.phase}", value="Running", namespace=namespace)
        real.create(pods.pod("second", queue="default", scheduler=None, extra_spec=on_node),
                    namespace=namespace)  # fmt: skip
        _eventually(
            "kube-scheduler's refusal of the second pod taken",
            lambda: bool(_events(real, namespace, "AdmissionRejected", "second")),
            timeout=120.0,
        )
        [rejected] = _events(real, namespace, "AdmissionRejected", "second")
        assert f"resourceclaim {namespace}/second-gpu-" in rejected["message"], rejected
        assert "not allocated there" in rejected["message"]

        def waits_told() -> str | None:
            for event in _events(real, namespace, "NotAdmitted", "second"):
                if f"kube-scheduler refused it on {node}" in event["message"]:
                    return str(event["message"])
            return None

        # Recreated gated, it waits, told why: the node refused it for the claim.
        _eventually("the recreated second pod told why it waits", waits_told)
        told = waits_told()
        assert told is not None and "resourceclaim" in told, told
        second = real.json("get", "pod", "second", "-n", namespace)
        assert keys.ADMISSION_GATE in [g["name"] for g in second["spec"]["schedulingGates"]]
        assert not second["spec"].get("nodeName")
        # Not pinned there again while the device stays taken (the count of deletions below
        # covers the whole test: a loop would show there).
        assert len(_events(real, namespace, "AdmissionRejected", "second")) == 1
        admitted_after = _bound_once_first_goes(real, namespace)
        bound = real.json("get", "pod", "second", "-n", namespace)
        assert bound["spec"]["nodeName"] == node
        assert bound["metadata"]["uid"] == second["metadata"]["uid"]
        assert admitted_after < 30.0, admitted_after
        [made] = [c for c in dra.claims(real, namespace) if dra.owner(c) == "second"]
        assert dra.allocated_pools(made) == {node}
    deletions = [
        r.at
        for r in real.audited()
        if r.user == install.USER
        and r.verb == "delete"
        and r.resource == "pods"
        and r.namespace == namespace
        and r.name == "second"
    ]
    assert len(deletions) == 1, deletions  # never more than once a minute: once in all
    assert len(_events(real, namespace, "AdmissionRejected", "second")) == 1


def _pod_waits_for_devices(real: cluster.RealCluster, namespace: str, name: str) -> str | None:
    pod = real.json("get", "pod", name, "-n", namespace)
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            message = str(condition.get("message") or "")
            return message if "too few free devices" in message else None
    return None


def test_a_reservation_holds_gpus_for_its_owner(real: cluster.RealCluster) -> None:
    real.berth()
    namespace = real.namespace()
    driver = dra.driver_name("resv")
    node = "pool0-3"
    with dra.devices(real, driver, {node: 2}):
        real.create(dra.template("two-gpus", cls=driver, count=2), namespace=namespace)
        holder = pods.pod("hold", cpu="100m", extra_spec=dra.claims_from("two-gpus"))
        real.create(
            {
                "apiVersion": keys.API_VERSION,
                "kind": "Reservation",
                "metadata": {"name": "train-gpus"},
                "spec": {
                    "template": {"spec": holder["spec"]},
                    "owners": [{"labelSelector": {"matchLabels": {"app": "train"}}}],
                },
            },
            namespace=namespace,
        )

        def available() -> Obj | None:
            status = real.json("get", "resv", "train-gpus", "-n", namespace).get("status") or {}
            return status if status.get("phase") == "Available" else None

        _eventually("the reservation Available", available)
        status = available()
        assert status is not None and status["nodeName"] == node
        held = sorted((d["driver"], d["pool"], d["device"]) for d in status["devices"])
        assert len(held) == 2 and {pool for _, pool, _ in held} == {node}, status
        assert dra.claims(real, namespace) == []  # what it holds is no ResourceClaim

        gpus = dra.claims_from("two-gpus")
        real.create(pods.pod("stranger", cpu="100m", extra_spec=gpus), namespace=namespace)
        _eventually(
            "the stranger waiting for devices",
            lambda: _pod_waits_for_devices(real, namespace, "stranger"),
        )
        real.create(
            pods.pod("trainer", cpu="100m", labels={"app": "train"}, extra_spec=gpus),
            namespace=namespace,
        )
        _eventually("the trainer bound", lambda: "trainer" in _bound(real, namespace))
        assert _bound(real, namespace) == {"trainer": node}
        [claim] = [c for c in dra.claims(real, namespace) if dra.owner(c) == "trainer"]
        results = claim["status"]["allocation"]["devices"]["results"]
        assert sorted((r["driver"], r["pool"], r["device"]) for r in results) == held
        trainer = real.json("get", "pod", "trainer", "-n", namespace)
        assert dra.consumers(claim) == [trainer["metadata"]["uid"]]
        _eventually(
            "the reservation used",
            lambda: (
                (available() is None)
                and real.json("get", "resv", "train-gpus", "-n", namespace)["status"]["phase"]
                == "Succeeded"
            ),
        )
        assert "stranger" not in _bound(real, namespace)
