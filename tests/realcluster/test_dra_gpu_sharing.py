"""GPUs shared by DRA consumable capacity, Berth beside kube-scheduler, on the real control plane.

The upstream way to share a GPU: a driver publishes each GPU with ``allowMultipleAllocations``
and its memory as a capacity, and each claim asks for part of it (``capacity.requests``). Two
identical KWOK nodes, one for each scheduler (a node selector keeps each scheduler's pods on its
node), each with two such GPUs of a fake driver: ``gpu-0`` of 40Gi and ``gpu-1`` of 80Gi. The
same pods, one claim each from a template asking 30, 30, 40, 20 and 10 GiB, arrive one at a
time to both schedulers. We test these aspects:

- which claims fit on which device is the same for Berth and kube-scheduler, pod by pod (both
  take the first device, in the slice's order, with room): the 30s on ``gpu-0`` and ``gpu-1``,
  the 40 beside the second 30 on ``gpu-1``, the 10 on ``gpu-0``;
- the 20 that fits on no device (10Gi left on each) waits on both, Berth's reason naming its
  claim, while the 10 after it runs: no device is ever consumed past its capacity, each share
  consuming exactly what its claim asked (read from the claims the API server accepted, with a
  ``shareID`` per share; the ``real`` fixture fails on any write it refused Berth);
- Berth's queue is charged what the shares consume, as fractions of a device (30 of 40Gi is
  0.75 of ``gpu-0``): 1.875 devices for the four shares;
- once the 40 goes, the waiting 20 runs on ``gpu-1`` on both, and the queue says 1.625.
"""

from __future__ import annotations

import typing
import uuid

import pytest

from berth.api import dra, keys
from berth.emulator import kubelets
from berth.realcluster import nodes, processes
from tests.realcluster import cluster, pods

pytestmark = pytest.mark.realcluster

Obj = dict[str, typing.Any]
SETS = ("kube", "berth")
SCHEDULERS = {"kube": "default-scheduler", "berth": keys.DEFAULT_SCHEDULER_NAME}
GPUS = {"gpu-0": 40, "gpu-1": 80}  # GiB of memory, in the slice's order
ARRIVALS = (("a", 30), ("b", 30), ("c", 40), ("d", 20), ("e", 10))  # pod, GiB its claim asks
WAIT_SECONDS = 120.0


def _slice(driver: str, node: str) -> Obj:
    return {
        "apiVersion": dra.API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": name,
                    "allowMultipleAllocations": True,
                    "capacity": {"memory": {"value": f"{gib}Gi"}},
                }
                for name, gib in GPUS.items()
            ],
        },
    }


def _template(driver: str, gib: int) -> Obj:
    return {
        "apiVersion": dra.API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"gpu-{gib}gi"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": driver,
                                "capacity": {"requests": {"memory": f"{gib}Gi"}},
                            },
                        }
                    ]
                }
            }
        },
    }


def _pod(name: str, gib: int, *, label: str, queue: str) -> Obj:
    made = pods.pod(name, cpu="10m", queue=queue if label == "berth" else None)
    made["spec"]["schedulerName"] = SCHEDULERS[label]
    made["spec"]["nodeSelector"] = {"dra-share": label}
    made["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": f"gpu-{gib}gi"}]
    made["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return made


def _waiting(pod: Obj) -> str | None:
    """The message of the pod's PodScheduled=False condition (not a wait for its claim)."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            message = str(condition.get("message") or "")
            if "waiting for the resourceclaim controller" not in message:
                return message
    return None


def _gib(text: str) -> int:
    assert text.endswith("Gi"), text
    return int(text[:-2])


class Side:
    """One scheduler's node, namespace and what its claims say."""

    def __init__(self, real: cluster.RealCluster, label: str, node: str) -> None:
        self.real, self.label, self.node = real, label, node
        self.namespace = real.namespace()

    def pod(self, name: str) -> Obj:
        return self.real.json("get", "pod", name, "-n", self.namespace)

    def shares(self) -> dict[str, tuple[str, int, str]]:
        """Bound pod -> (device, GiB consumed, shareID), from its allocated claim."""
        # Pods first: a claim is allocated before its pod is bound, so every pod read bound
        # has its allocation in the claims read after.
        listed = self.real.pods(self.namespace)
        claims = {
            c["metadata"]["name"]: c
            for c in self.real.json("get", "resourceclaims", "-n", self.namespace)["items"]
        }
        out: dict[str, tuple[str, int, str]] = {}
        for pod in listed:
            if pod["spec"].get("nodeName") != self.node or pod["metadata"].get("deletionTimestamp"):
                continue
            statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or ()
            [name] = [s["resourceClaimName"] for s in statuses if s["name"] == "gpu"]
            claim = claims[name]
            allocation = claim["status"]["allocation"]
            assert pod["metadata"]["uid"] in [r["uid"] for r in claim["status"]["reservedFor"]]
            [result] = allocation["devices"]["results"]
            assert result["pool"] == self.node and result["driver"], result
            out[pod["metadata"]["name"]] = (
                str(result["device"]),
                _gib(result["consumedCapacity"]["memory"]),
                str(result.get("shareID") or ""),
            )
        return out


def _check_capacity(side: Side, shares: dict[str, tuple[str, int, str]]) -> None:
    asked = dict(ARRIVALS)
    used = dict.fromkeys(GPUS, 0)
    for pod, (device, gib, share) in shares.items():
        assert gib == asked[pod], (side.label, pod, gib)  # consumed exactly what it asked
        assert share, (side.label, pod, "a share without a shareID")
        used[device] += gib
    assert all(used[d] <= GPUS[d] for d in GPUS), (side.label, used)
    ids = [share for _, _, share in shares.values()]
    assert len(set(ids)) == len(ids), (side.label, ids)


@pytest.mark.timeout(600)
def test_consumable_capacity_shares_gpus_as_kube_scheduler_does(real: cluster.RealCluster) -> None:
    run = uuid.uuid4().hex[:6]
    driver = f"gpus-{run}.example.com"
    pools = [
        kubelets.parse_pool(
            f"1x cpu=4,memory=16Gi,pods=110 label=dra-share={label} name=ds-{label}-{run}"
        )
        for label in SETS
    ]
    made = nodes.node_manifests(pools)
    names = {label: str(n["metadata"]["name"]) for label, n in zip(SETS, made, strict=True)}
    queue = f"share-{run}"
    try:
        real.create(*made)
        real.kubectl("wait", "--for=condition=Ready", "nodes", "-l", "dra-share",
                     f"--timeout={cluster.WAIT}")  # fmt: skip
        real.create(
            {
                "apiVersion": dra.API_VERSION,
                "kind": "DeviceClass",
                "metadata": {"name": driver},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
            },
            *(_slice(driver, names[label]) for label in SETS),
            pods.queue(queue),
        )
        real.berth()
        sides = {label: Side(real, label, names[label]) for label in SETS}
        for side in sides.values():
            real.create(*(_template(driver, gib) for gib in sorted({g for _, g in ARRIVALS})),
                        namespace=side.namespace)  # fmt: skip
        for pod, gib in ARRIVALS:
            # One pod at a time to both: which device a claim gets is the arrival order's.
            for side in sides.values():
                real.create(_pod(pod, gib, label=side.label, queue=queue), namespace=side.namespace)

            def decided(pod: str = pod) -> bool:
                for side in sides.values():
                    found = side.pod(pod)
                    if not found["spec"].get("nodeName") and _waiting(found) is None:
                        return False
                return True

            processes.wait_until(f"both schedulers decided pod {pod}", decided,
                                 timeout=WAIT_SECONDS, interval=0.5)  # fmt: skip

        shares = {label: side.shares() for label, side in sides.items()}
        where = {label: {p: s[0] for p, s in found.items()} for label, found in shares.items()}
        # Side by side: the same claims fit, on the same devices.
        assert where["berth"] == where["kube"], where
        assert where["berth"] == {"a": "gpu-0", "b": "gpu-1", "c": "gpu-1", "e": "gpu-0"}
        for label, side in sides.items():
            _check_capacity(side, shares[label])
        reason = _waiting(sides["berth"].pod("d"))
        assert reason is not None and "had too few free devices for resourceclaim" in reason, reason
        assert f"{sides['berth'].namespace}/d-gpu-" in reason, reason
        assert _waiting(sides["kube"].pod("d")) is not None

        def charged() -> str | None:
            status = real.json("get", "bq", queue).get("status") or {}
            found = (status.get("allocated") or {}).get(dra.device_class_resource(driver))
            return typing.cast(str | None, found)

        processes.wait_until("the queue to be charged 1.875 devices",
                             lambda: charged() == "1875m", timeout=WAIT_SECONDS)  # fmt: skip

        # The 40 goes: the waiting 20 takes its room on gpu-1, on both.
        for side in sides.values():
            real.kubectl("delete", "pod", "c", "-n", side.namespace, "--wait=false")

        def d_runs() -> bool:
            return all(side.shares().get("d", ("",))[0] == "gpu-1" for side in sides.values())

        processes.wait_until("the 20 to run on gpu-1 on both", d_runs, timeout=WAIT_SECONDS)
        for label, side in sides.items():
            found = side.shares()
            assert {p: s[0] for p, s in found.items()} == {
                "a": "gpu-0", "b": "gpu-1", "d": "gpu-1", "e": "gpu-0"
            }, (label, found)  # fmt: skip
            _check_capacity(side, found)
        processes.wait_until("the queue to be charged 1.625 devices",
                             lambda: charged() == "1625m", timeout=WAIT_SECONDS)  # fmt: skip
    finally:
        real.kubectl("delete", "resourceslices", "--field-selector", f"spec.driver={driver}",
                     "--wait=false")  # fmt: skip
        real.kubectl("delete", "deviceclass", driver, "--ignore-not-found", "--wait=false")
        real.kubectl("delete", "bq", queue, "--ignore-not-found", "--wait=false")
        real.kubectl("delete", "nodes", "-l", "dra-share", "--wait=false")
