"""Pods with DRA ResourceClaims through the operator's composition root, in both modes.

The emulator serves ``resource.k8s.io/v1`` and plays the resourceclaim controller; one node of
two has a slice of GPUs. We test these aspects:
- scheduler mode: a pod claiming a GPU through a template is bound by Berth on the node with the
  GPU, its claim allocated there and reserved for it before the binding;
- bad input: pods whose template does not exist, whose claim names a DeviceClass that does not
  exist, whose class's selector fails at run time on the devices, whose devices' pool is broken
  (a device named twice), whose claim is allocated (by someone else) and in use where the pod
  may not go, each wait with a reason naming the object and the field; the claim in use is left
  as it was; a plain pod applied with them is bound as before;
- a gated pod naming Berth's own scheduler (left by an admission-mode term) with a claim is
  ungated and bound by Berth only after its claim is allocated and reserved for it;
- admission mode, one free GPU and two pods wanting it: Berth pins one, only to the node whose
  GPU can meet its claim (kube-scheduler's stand-in binds it there); the other waits gated,
  told why (no device), and is admitted soon after the first pod goes — nothing is deleted and
  recreated.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import keys
from berth.emulator import patches, testing
from tests.admission import stack
from tests.scheduler import dra_builders as dra

pytestmark = pytest.mark.timeout(90)

GPU_NODE = "pool0-1"
Obj = dict[str, typing.Any]


@pytest.fixture
def cluster(emulator: testing.RunningEmulator) -> testing.RunningEmulator:
    stack.install_crds(emulator)
    emulator.start_kubelets(["2x cpu=4,memory=16Gi"], speedup=100, start_delay=0)
    stack.create(emulator, dra.API, "deviceclasses", dra.device_class("gpu"))
    stack.create(emulator, dra.API, "resourceslices", dra.node_slice(GPU_NODE, devices=dra.gpus(1)))
    template = dra.template("one-gpu", dra.request("gpu", cls="gpu"))
    stack.create(emulator, dra.API, "resourceclaimtemplates", template)
    return emulator


def _with_claims(obj: Obj, *, template: str = "one-gpu") -> Obj:
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    return obj


def _claims(emulator: testing.RunningEmulator) -> list[Obj]:
    listed = emulator.call(emulator.api.storage.list, ("resource.k8s.io", "resourceclaims"), None)
    return typing.cast(list[Obj], listed)


def _claim_of(emulator: testing.RunningEmulator, pod: str) -> Obj | None:
    for claim in _claims(emulator):
        owners = claim["metadata"].get("ownerReferences") or ()
        if any(o.get("name") == pod for o in owners):
            return claim
    return None


def _node(emulator: testing.RunningEmulator, name: str) -> str | None:
    found = stack.get_pod(emulator, name) or {}
    return typing.cast(str | None, found.get("spec", {}).get("nodeName"))


def _unschedulable(emulator: testing.RunningEmulator, name: str) -> str | None:
    obj = stack.get_pod(emulator, name)
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or "")
    return None


async def test_scheduler_mode_allocates_the_claim_and_binds_the_pod(
    cluster: testing.RunningEmulator,
) -> None:
    queued = {keys.QUEUE_LABEL: keys.DEFAULT_QUEUE}
    ours = stack.pod("ours", labels=queued, gated=False, scheduler=keys.DEFAULT_SCHEDULER_NAME)
    stack.create(cluster, "v1", "pods", _with_claims(ours))
    async with stack.BerthStack(cluster):
        await stack.eventually(lambda: _node(cluster, "ours") is not None, what="ours bound")
    assert _node(cluster, "ours") == GPU_NODE
    claim = _claim_of(cluster, "ours")
    assert claim is not None
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["pool"], r["device"]) for r in results] == [(GPU_NODE, "gpu-0")]
    uid = (stack.get_pod(cluster, "ours") or {})["metadata"]["uid"]
    assert [c["uid"] for c in claim["status"]["reservedFor"]] == [uid]


async def test_bad_claims_wait_naming_the_object_and_the_rest_is_scheduled(
    cluster: testing.RunningEmulator,
) -> None:
    queued = {keys.QUEUE_LABEL: keys.DEFAULT_QUEUE}
    berth = keys.DEFAULT_SCHEDULER_NAME
    no_template = stack.pod("no-template", labels=queued, gated=False, scheduler=berth)
    stack.create(cluster, "v1", "pods", _with_claims(no_template, template="missing"))
    stack.create(cluster, dra.API, "resourceclaims", dra.claim("odd", dra.request(cls="nope")))
    no_class = stack.pod("no-class", labels=queued, gated=False, scheduler=berth)
    no_class["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "odd"}]
    stack.create(cluster, "v1", "pods", no_class)
    # A class whose selector fails at run time on the devices (they have no attribute model).
    picky = dra.device_class(
        "picky", selectors=['device.attributes["gpu.example.com"].model == "a"']
    )
    stack.create(cluster, dra.API, "deviceclasses", picky)
    stack.create(cluster, dra.API, "resourceclaims", dra.claim("picky", dra.request(cls="picky")))
    # A pool whose two slices name one device twice.
    broken = "broken.example.com"
    stack.create(cluster, dra.API, "deviceclasses", dra.device_class("broken", driver=broken))
    for part in ("a", "b"):
        stack.create(cluster, dra.API, "resourceslices", dra.resource_slice(
            f"broken-{part}", driver=broken, pool="broken", count=2, node="pool0-0",
            devices=[dra.device("d-0")]))  # fmt: skip
    stack.create(
        cluster, dra.API, "resourceclaims", dra.claim("wrecked", dra.request(cls="broken"))
    )
    # A claim allocated (by someone else) to the GPU of a node the pod may not go to, and in
    # use there by a running pod.
    taken = dra.claim("taken")
    taken["metadata"].pop("uid")
    stack.create(cluster, dra.API, "resourceclaims", taken)
    holder = stack.pod("holder", gated=False, scheduler="someone-else")
    holder["spec"]["nodeName"] = GPU_NODE
    holder["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "taken"}]
    holder_uid = stack.create(cluster, "v1", "pods", holder)["metadata"]["uid"]
    in_use = dra.allocated(
        (dra.GPU_DRIVER, GPU_NODE, "gpu-0"), node=GPU_NODE, reserved_for=[("holder", holder_uid)]
    )
    cluster.call(
        cluster.api.patch,
        cluster.api.resource(dra.API, "resourceclaims"),
        {"status": in_use},
        namespace="default",
        name="taken",
        patch_type=patches.MERGE_PATCH,
        subresource="status",
    )
    for name, claim in (("picky", "picky"), ("wrecked", "wrecked"), ("elsewhere", "taken")):
        made = stack.pod(name, labels=queued, gated=False, scheduler=berth)
        made["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        if name == "elsewhere":
            made["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "pool0-0"}
        stack.create(cluster, "v1", "pods", made)
    plain = stack.pod("plain", labels=queued, gated=False, scheduler=berth)
    stack.create(cluster, "v1", "pods", plain)
    async with stack.BerthStack(cluster):
        await stack.eventually(lambda: _node(cluster, "plain") is not None, what="plain bound")
        for name in ("no-template", "no-class", "picky", "wrecked", "elsewhere"):
            await stack.eventually(
                lambda name=name: _unschedulable(cluster, name) is not None, what=f"{name} why"
            )
    missing = _unschedulable(cluster, "no-template")
    assert missing is not None
    assert "resourceclaimtemplate default/missing not found" in missing
    assert "spec.resourceClaims[0].resourceClaimTemplateName" in missing
    odd = _unschedulable(cluster, "no-class")
    assert odd is not None and "deviceclass nope does not exist" in odd
    assert "resourceclaim default/odd" in odd
    failing = _unschedulable(cluster, "picky")
    assert failing is not None and "deviceclass picky" in failing, failing
    assert "spec.selectors[1].cel.expression: no such key: 'model'" in failing, failing
    assert f"(on device gpu.example.com/{GPU_NODE}/gpu-0)" in failing, failing
    wrecked = _unschedulable(cluster, "wrecked")
    assert wrecked is not None and "duplicate device name d-0" in wrecked, wrecked
    assert "pool broken.example.com/broken" in wrecked, wrecked
    elsewhere = _unschedulable(cluster, "elsewhere")
    assert elsewhere is not None, elsewhere
    assert "node selector of resourceclaim default/taken's allocation" in elsewhere, elsewhere
    for name in ("no-template", "no-class", "picky", "wrecked", "elsewhere"):
        assert _node(cluster, name) is None
    taken_now = next(c for c in _claims(cluster) if c["metadata"]["name"] == "taken")
    assert taken_now["status"]["allocation"]["devices"]["results"][0]["pool"] == GPU_NODE
    assert [c["uid"] for c in taken_now["status"]["reservedFor"]] == [holder_uid]


async def test_admission_mode_pins_only_where_the_claim_can_be_met(
    cluster: testing.RunningEmulator,
) -> None:
    queued = {keys.QUEUE_LABEL: keys.DEFAULT_QUEUE}
    for name in ("first", "second"):
        stack.create(cluster, "v1", "pods", _with_claims(stack.pod(name, labels=queued)))
    async with stack.stand_in(cluster) as kube_scheduler, stack.BerthStack(cluster) as berth:
        await stack.eventually(
            lambda: any(_node(cluster, n) for n in ("first", "second")), what="one bound"
        )
        placed = next(n for n in ("first", "second") if _node(cluster, n))
        waiting = "second" if placed == "first" else "first"
        assert _node(cluster, placed) == GPU_NODE  # the one node whose GPU meets the claim
        await stack.eventually(
            lambda: any(
                e["reason"] == "NotAdmitted" and e["involvedObject"]["name"] == waiting
                for e in stack.events(cluster)
            ),
            what="why the other waits",
        )
        told = [
            e["message"]
            for e in stack.events(cluster)
            if e["reason"] == "NotAdmitted" and e["involvedObject"]["name"] == waiting
        ]
        assert "resourceclaim" in told[-1] and "devices" in told[-1]
        stored = stack.get_pod(cluster, waiting)
        assert stored is not None and stack.gates(stored) == [keys.ADMISSION_GATE]
        # The GPU frees when its pod goes; the waiting pod is admitted then, on that node.
        stack.delete_pod(cluster, placed)
        await stack.eventually(
            lambda: _node(cluster, waiting) is not None, timeout=30.0, what="the other admitted"
        )
        assert _node(cluster, waiting) == GPU_NODE
        assert kube_scheduler.bound == {placed: GPU_NODE, waiting: GPU_NODE}
        assert berth.admission.rejected == 0  # nothing deleted and recreated


async def test_a_gated_pod_of_berths_scheduler_gets_its_claim_written_before_binding(
    cluster: testing.RunningEmulator,
) -> None:
    queued = {keys.QUEUE_LABEL: keys.DEFAULT_QUEUE}
    gated = stack.pod("gated", labels=queued, gated=True, scheduler=keys.DEFAULT_SCHEDULER_NAME)
    stack.create(cluster, "v1", "pods", _with_claims(gated))
    async with stack.BerthStack(cluster):
        await stack.eventually(lambda: _node(cluster, "gated") is not None, what="gated bound")
    claim = _claim_of(cluster, "gated")
    assert claim is not None
    uid = (stack.get_pod(cluster, "gated") or {})["metadata"]["uid"]
    assert [c["uid"] for c in claim["status"]["reservedFor"]] == [uid]
    assert _node(cluster, "gated") == GPU_NODE
