"""Queues no one can squat, on the real control plane in admission mode (#32, must-show 2).

A queue of 1 cpu admits one namespace (the tenant's). We test these aspects:
- a pod of another namespace with the queue's label, opted out of the gate, runs through
  kube-scheduler and is charged to the queue nowhere: ``status.allocated`` shows only what
  Berth admitted;
- the queue label added to a running foreign pod after creation is refused by the API server
  (Berth's webhook, asked on updates that change the label), with the queue's message;
- Berth's markers (``admitted-node``, ``reservation-allocated``) written by anyone but Berth
  are refused at the door (the chart's ``markers`` policy), on update and on create, before and
  after a leader restart: a new leader never finds a forged marker to trust;
- a tenant's pod that removes Berth's gate itself runs, gets an ``AdmissionBypassed`` Event
  saying the gate was removed by someone other than Berth, and is charged nowhere;
- with both squatters running, the queue's tenant still gets its limit: a new pod is admitted
  once the first one is gone.
"""

from __future__ import annotations

import json
import typing

import pytest

from berth.api import keys
from berth.realcluster import processes
from tests.realcluster import cluster, pods

pytestmark = pytest.mark.realcluster

Obj = dict[str, typing.Any]


def _eventually(what: str, check: typing.Callable[[], bool], timeout: float = 90.0) -> None:
    processes.wait_until(what, check, timeout=timeout, interval=0.5)


_REFUSED = "metadata.annotations[{}]: only Berth writes this marker"


def _gated(pod: Obj) -> bool:
    return keys.ADMISSION_GATE in [g["name"] for g in pod["spec"].get("schedulingGates") or ()]


def _forge(
    real: cluster.RealCluster, namespace: str, name: str, key: str, value: str, *also: Obj
) -> bool:
    """Whether the API server refuses the administrator's patch writing Berth's marker ``key``
    on pod ``name`` (with ``also``), naming the marker."""
    found = real.json("get", "pod", name, "-n", namespace)
    patch: list[Obj] = [*also]
    if not found["metadata"].get("annotations"):
        patch.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    path = f"/metadata/annotations/{key.replace('/', '~1')}"
    patch.append({"op": "add", "path": path, "value": value})
    refused = real.kubectl(
        "patch", "pod", name, "-n", namespace, "--type=json", "-p", json.dumps(patch), check=False
    )
    return refused.returncode != 0 and _REFUSED.format(key) in refused.stderr


def _allocated_cpu(real: cluster.RealCluster, queue: str) -> str:
    status = real.json("get", "queue", queue).get("status") or {}
    return str((status.get("allocated") or {}).get("cpu") or "0")


def _events(real: cluster.RealCluster, namespace: str, reason: str, name: str) -> list[Obj]:
    listed = real.json("get", "events", "-n", namespace, "--field-selector", f"reason={reason}")
    return [e for e in listed["items"] if e["involvedObject"]["name"] == name]


def test_squatters_are_charged_nowhere_and_the_tenant_keeps_its_limit(
    real: cluster.RealCluster,
) -> None:
    real.berth(mode="admission")
    tenant, foreign = real.namespace(), real.namespace()
    real.kubectl("label", "namespace", tenant, f"team={tenant}")
    queue = f"q-{tenant}"
    real.create(
        pods.queue(queue, limit={"cpu": "1"}, namespaceSelector={"matchLabels": {"team": tenant}})
    )
    on_queue = {keys.QUEUE_LABEL: queue}

    # 1. The opt-out label, from a foreign namespace: kube-scheduler runs it, uncharged.
    opted_out = {**on_queue, keys.ADMISSION_LABEL: "disabled"}
    real.create(pods.pod("squat", cpu="1", labels=opted_out, scheduler=None), namespace=foreign)
    # 2. The label added after creation: refused at the door.
    real.create(pods.pod("later", cpu="500m", scheduler=None), namespace=foreign)
    for name in ("squat", "later"):
        real.wait(f"pod/{name}", jsonpath="{.status.phase}", value="Running", namespace=foreign)
    relabel = real.kubectl(
        "label", "pod", "later", "-n", foreign, f"{keys.QUEUE_LABEL}={queue}", check=False
    )
    assert relabel.returncode != 0
    assert f"queue {queue} does not admit pods of namespace {foreign}" in relabel.stderr

    # The tenant's first pod is admitted and takes the whole limit.
    real.create(pods.pod("first", cpu="1", labels=on_queue, scheduler=None), namespace=tenant)
    real.wait("pod/first", jsonpath="{.status.phase}", value="Running", namespace=tenant)
    node = real.json("get", "pod", "first", "-n", tenant)["spec"]["nodeName"]

    # 3. A forged marker: the tenant's second pod waits at the limit; writing Berth's marker is
    # refused by the API server, with the gate removal it came with.
    real.create(pods.pod("forger", cpu="1", labels=on_queue, scheduler=None), namespace=tenant)
    _eventually(
        "forger held at the queue's limit",
        lambda: bool(_events(real, tenant, "NotAdmitted", "forger")),
    )
    ungate = {"op": "remove", "path": "/spec/schedulingGates"}
    assert _forge(real, tenant, "forger", keys.ADMITTED_NODE_ANNOTATION, node, ungate)
    assert _gated(real.json("get", "pod", "forger", "-n", tenant))
    # 4. The gate removed by the tenant alone: it runs, is told, and is charged nowhere.
    real.kubectl("patch", "pod", "forger", "-n", tenant, "--type=json", "-p", json.dumps([ungate]))
    real.wait("pod/forger", jsonpath="{.status.phase}", value="Running", namespace=tenant)
    _eventually(
        "an AdmissionBypassed Event for forger",
        lambda: bool(_events(real, tenant, "AdmissionBypassed", "forger")),
    )
    (event,) = _events(real, tenant, "AdmissionBypassed", "forger")
    assert "removed by someone other than Berth" in event["message"]
    _eventually("the queue charged 1 cpu", lambda: _allocated_cpu(real, queue) == "1")

    # 5. A leader restart: the new leader wrote no marker, and still none can be forged — on a
    # running pod, nor on one created with it (nor a Reservation's consumption marker).
    real.stop_berth()
    real.berth(mode="admission")
    assert _forge(real, tenant, "forger", keys.ADMITTED_NODE_ANNOTATION, node)
    assert _forge(real, tenant, "forger", keys.RESERVATION_ALLOCATED_ANNOTATION, "r")
    marked = pods.pod("marked", cpu="1", labels=on_queue, scheduler=None)
    marked["metadata"]["annotations"] = {keys.ADMITTED_NODE_ANNOTATION: node}
    made = real.kubectl("create", "-n", tenant, "-f", "-", input=json.dumps(marked), check=False)
    assert made.returncode != 0
    assert _REFUSED.format(keys.ADMITTED_NODE_ANNOTATION) in made.stderr, made.stderr

    # The tenant still gets its limit: "first" goes, "next" is admitted beside the squatters.
    real.create(pods.pod("next", cpu="1", labels=on_queue, scheduler=None), namespace=tenant)
    real.kubectl("delete", "pod", "first", "-n", tenant, "--wait=false")
    real.wait("pod/next", jsonpath="{.status.phase}", value="Running", namespace=tenant)
    _eventually("the queue charged 1 cpu", lambda: _allocated_cpu(real, queue) == "1")
