"""Pods with PersistentVolumeClaims on the real control plane, Berth beside kube-scheduler.

kube-controller-manager's PV binder runs here, but no provisioner: volumes are created ahead
(static provisioning, local volumes with node affinity), and the binder binds a
``WaitForFirstConsumer`` claim to a fitting volume once the claim names its selected node.
We test these aspects:

- a pod whose claim is of a ``WaitForFirstConsumer`` class, with the only fitting volume on one
  node: Berth reserves that volume for the claim (its ``claimRef``, as kube-scheduler's volume
  binder does), holds the binding until the PV binder has bound the claim, and binds the pod
  there; kube-scheduler, given the same shapes on its own class and volume, does the same;
- a ``ReadWriteOncePod`` claim used by a running pod: a second pod using it waits, its reason
  saying why;
- an unbound claim of an ``Immediate`` class nothing provisions: the pod waits, its reason
  naming the claim, and the cycle goes on for another pod (named apart from the other files'
  pods: their audit checks look at names).
"""

from __future__ import annotations

import typing

import pytest

from berth.api import keys
from berth.realcluster import install, processes
from tests.realcluster import cluster, pods

pytestmark = pytest.mark.realcluster

Obj = dict[str, typing.Any]
HOST = "kubernetes.io/hostname"
SELECTED = "volume.kubernetes.io/selected-node"


def _class(
    name: str, *, wait: bool = True, provisioner: str = "kubernetes.io/no-provisioner"
) -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer" if wait else "Immediate",
    }


def _volume(
    name: str, *, cls: str, node: str, modes: list[str], claim: tuple[str, str] | None = None
) -> Obj:
    spec: Obj = {
        "storageClassName": cls,
        "capacity": {"storage": "1Gi"},
        "accessModes": modes,
        "local": {"path": f"/mnt/{name}"},
        "nodeAffinity": {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOST, "operator": "In", "values": [node]}]}
                ]
            }
        },
    }
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": spec,
    }


def _claim(name: str, *, cls: str, modes: list[str], volume: str | None = None) -> Obj:
    spec: Obj = {
        "storageClassName": cls,
        "accessModes": modes,
        "resources": {"requests": {"storage": "1Gi"}},
    }
    if volume is not None:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": spec,
    }


def _using(claim: str) -> Obj:
    return {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}


def _waiting_reason(real: cluster.RealCluster, name: str, namespace: str) -> str:
    found = real.json("get", "pod", name, "-n", namespace)
    for condition in (found.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or "")
    return ""


@pytest.fixture
def storage(real: cluster.RealCluster) -> typing.Iterator[list[str]]:
    """Cluster-scoped names (classes, volumes) the test creates; deleted after it."""
    made: list[str] = []
    yield made
    for kind_name in made:
        real.kubectl("delete", kind_name, "--wait=false", check=False)


@pytest.mark.timeout(300)
def test_wait_for_first_consumer_claim_gets_the_volumes_node_as_with_kube_scheduler(
    real: cluster.RealCluster, storage: list[str]
) -> None:
    real.berth()
    namespace = real.namespace()
    rwo = ["ReadWriteOnce"]
    for who, node in (("berth", "small-1"), ("kube", "small-1")):
        cls = f"local-{who}-{namespace}"
        volume = f"pv-{who}-{namespace}"
        real.create(_class(cls), _volume(volume, cls=cls, node=node, modes=rwo))
        storage += [f"storageclass/{cls}", f"persistentvolume/{volume}"]
        real.create(_claim(f"data-{who}", cls=cls, modes=rwo), namespace=namespace)
    scheduler = {"berth": keys.DEFAULT_SCHEDULER_NAME, "kube": None}
    for who in ("berth", "kube"):
        real.create(
            pods.pod(f"p-{who}", scheduler=scheduler[who], extra_spec=_using(f"data-{who}")),
            namespace=namespace,
        )
    for who in ("berth", "kube"):
        real.wait(f"pod/p-{who}", jsonpath="{.status.phase}", value="Running", namespace=namespace)
        claim = real.json("get", "pvc", f"data-{who}", "-n", namespace)
        assert claim["status"]["phase"] == "Bound"
        assert claim["spec"]["volumeName"] == f"pv-{who}-{namespace}"
        assert SELECTED not in (claim["metadata"].get("annotations") or {})  # nothing provisions
        placed = real.json("get", "pod", f"p-{who}", "-n", namespace)
        assert placed["spec"]["nodeName"] == "small-1"
    # Berth reserved the volume before it posted the binding, once each.
    volume = f"pv-berth-{namespace}"
    berths = [
        (r.resource, r.verb, r.name)
        for r in real.audited()
        if r.user == install.USER and r.succeeded
        and (r.namespace == namespace or r.name == volume)
        and r.resource in ("persistentvolumes", "persistentvolumeclaims", "pods/binding")
    ]  # fmt: skip
    assert berths == [
        ("persistentvolumes", "patch", volume),
        ("pods/binding", "create", "p-berth"),
    ], berths


@pytest.mark.timeout(300)
def test_a_second_user_of_a_read_write_once_pod_claim_waits(
    real: cluster.RealCluster, storage: list[str]
) -> None:
    real.berth()
    namespace = real.namespace()
    cls, volume = f"rwop-{namespace}", f"pv-rwop-{namespace}"
    rwop = ["ReadWriteOncePod"]
    real.create(
        _class(cls), _volume(volume, cls=cls, node="small-0", modes=rwop, claim=(namespace, "solo"))
    )
    storage += [f"storageclass/{cls}", f"persistentvolume/{volume}"]
    real.create(_claim("solo", cls=cls, modes=rwop, volume=volume), namespace=namespace)
    real.wait("pvc/solo", jsonpath="{.status.phase}", value="Bound", namespace=namespace)
    real.create(pods.pod("first", extra_spec=_using("solo")), namespace=namespace)
    real.wait("pod/first", jsonpath="{.status.phase}", value="Running", namespace=namespace)
    real.create(pods.pod("second", extra_spec=_using("solo")), namespace=namespace)
    processes.wait_until(
        "the second user explained",
        lambda: "ReadWriteOncePod" in _waiting_reason(real, "second", namespace),
        timeout=60.0,
        interval=0.5,
    )
    assert not real.json("get", "pod", "second", "-n", namespace)["spec"].get("nodeName")


@pytest.mark.timeout(300)
def test_an_unbound_immediate_claim_makes_its_pod_wait_naming_it(
    real: cluster.RealCluster, storage: list[str]
) -> None:
    real.berth()
    namespace = real.namespace()
    cls = f"immediate-{namespace}"
    real.create(_class(cls, wait=False, provisioner="example.com/nobody"))
    storage.append(f"storageclass/{cls}")
    real.create(_claim("later", cls=cls, modes=["ReadWriteOnce"]), namespace=namespace)
    real.create(pods.pod("waits", extra_spec=_using("later")), namespace=namespace)
    real.create(pods.pod("bystander"), namespace=namespace)
    real.wait("pod/bystander", jsonpath="{.status.phase}", value="Running", namespace=namespace)
    processes.wait_until(
        "the pod explained",
        lambda: (
            f"pod has unbound immediate PersistentVolumeClaims ({namespace}/later"
            in _waiting_reason(real, "waits", namespace)
        ),
        timeout=60.0,
        interval=0.5,
    )
