"""Admission mode beside the real kube-scheduler: Berth decides, kube-scheduler binds.

We test these aspects (kube-scheduler's bindings are counted in the API server's audit log):
- a gang waits gated, all of it, while its queue has no room, and once room is made all its pods
  are ungated and bound by kube-scheduler on exactly the nodes Berth pinned them to;
- a plain pod (no group, no queue) is never gated and kube-scheduler places it alone;
- a pod kube-scheduler rejects where Berth pinned it (a taint kube-scheduler honours and this
  Berth, run without TaintToleration, does not) goes through the reject path: an
  AdmissionRejected Event naming the taint, recreated without its pin; once the taint is gone
  (the cause of the refusal) Berth forgets the refusal, pins it there again and kube-scheduler
  binds it: deleted once, never in a loop;
- restarting Berth in scheduler mode loses no pod: gated pods left waiting are admitted and
  kube-scheduler binds them, pods for Berth's own scheduler are bound by Berth, each pod once;
- the API server asks Berth's validating webhook (Kopf's) about Queues: a parent that does not
  exist yet is a warning kubectl prints, a parent that closes a cycle is refused, naming the
  field, on create and on update.
"""

from __future__ import annotations

import json
import pathlib
import typing

import pytest
import yaml

from berth.api import keys
from berth.realcluster import install, processes
from berth.scheduler.plugins import registry as plugin_registry
from tests.realcluster import cluster, pods

pytestmark = pytest.mark.realcluster

KUBE_SCHEDULER = "system:kube-scheduler"
Obj = dict[str, typing.Any]


def _gated(pod: Obj) -> bool:
    return keys.ADMISSION_GATE in [g["name"] for g in pod["spec"].get("schedulingGates") or ()]


def _binders(real: cluster.RealCluster, namespace: str) -> dict[str, list[str]]:
    """Who bound each pod of ``namespace`` (successful bindings, from the audit log)."""
    out: dict[str, list[str]] = {}
    for request in real.audited():
        if (
            request.resource == "pods/binding"
            and request.succeeded
            and request.namespace == namespace
        ):
            out.setdefault(request.name, []).append(request.user)
    return out


def _eventually(what: str, check: typing.Callable[[], bool], timeout: float = 60.0) -> None:
    processes.wait_until(what, check, timeout=timeout, interval=0.5)


def test_a_gang_waits_gated_then_kube_scheduler_binds_it_where_berth_chose(
    real: cluster.RealCluster,
) -> None:
    real.berth(mode="admission")
    namespace = real.namespace()
    queue = f"q-{namespace}"
    real.create(pods.queue(queue, limit={"cpu": "3"}))
    real.create(*pods.gang("g", 4, queue=queue, cpu="1", scheduler=None), namespace=namespace)
    real.wait(
        "podgroup/g",
        jsonpath='{.status.conditions[?(@.type=="Scheduled")].status}',
        value="False",
        namespace=namespace,
    )
    members = real.pods(namespace)
    assert len(members) == 4
    assert all(_gated(p) and not p["spec"].get("nodeName") for p in members)

    real.kubectl("patch", "queue", queue, "--type=merge", "-p", '{"spec":{"limit":{"cpu":"4"}}}')
    for i in range(4):
        real.wait(f"pod/g-{i}", jsonpath="{.status.phase}", value="Running", namespace=namespace)
    for member in real.pods(namespace):
        annotations = member["metadata"]["annotations"]
        assert member["spec"]["nodeName"] == annotations[keys.ADMITTED_NODE_ANNOTATION]
        assert not _gated(member)
    binders = _binders(real, namespace)
    assert binders == {f"g-{i}": [KUBE_SCHEDULER] for i in range(4)}


def test_a_plain_pod_is_left_to_kube_scheduler(real: cluster.RealCluster) -> None:
    real.berth(mode="admission")
    namespace = real.namespace()
    real.create(pods.pod("plain", scheduler=None), namespace=namespace)
    real.wait("pod/plain", jsonpath="{.status.phase}", value="Running", namespace=namespace)
    plain = real.json("get", "pod", "plain", "-n", namespace)
    assert not plain["spec"].get("schedulingGates")
    assert keys.ADMITTED_NODE_ANNOTATION not in (plain["metadata"].get("annotations") or {})
    assert _binders(real, namespace) == {"plain": [KUBE_SCHEDULER]}
    assert not [r for r in real.audited() if r.user == install.USER and r.name == "plain"]


def _events(real: cluster.RealCluster, namespace: str, reason: str, name: str) -> list[Obj]:
    listed = real.json("get", "events", "-n", namespace, "--field-selector", f"reason={reason}")
    return [e for e in listed["items"] if e["involvedObject"]["name"] == name]


def _refusal(real: cluster.RealCluster, name: str, namespace: str) -> str:
    """The message of the pod's ``PodScheduled=False`` condition ("" while it has none)."""
    found = real.json("get", "pod", name, "-n", namespace)
    for condition in (found.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or "")
    return ""


def _refuses_a_probe(real: cluster.RealCluster, namespace: str, *, spec: Obj) -> bool:
    """Whether kube-scheduler refused the latest probe pod (``spec``, pinned to the one tainted
    node) for a taint: its cache has the taint. kube-scheduler 1.36 says "node(s) had
    untolerated taint(s)" without naming the taint; the pin makes it ours. A probe it bound
    (its informer had not seen the taint yet) is replaced."""
    listed = real.pods(namespace)
    if not listed or listed[-1]["spec"].get("nodeName"):
        name = f"probe-{len(listed):03d}"  # listed by name: the newest last
        real.create(pods.pod(name, scheduler=None, extra_spec=spec), namespace=namespace)
        return False
    return "untolerated taint" in _refusal(real, listed[-1]["metadata"]["name"], namespace)


def test_a_pod_kube_scheduler_rejects_is_sent_back_once_and_admitted_when_the_taint_goes(
    real: cluster.RealCluster, tmp_path: pathlib.Path
) -> None:
    # Berth runs without TaintToleration, so it pins a pod to the one node its selector allows
    # although that node is tainted; kube-scheduler, which honours the taint, refuses the pin.
    # No race with kube-scheduler's informer: the taint is set, and kube-scheduler has been
    # seen refusing a probe pod for it, before the pod exists. Once Berth took the rejection
    # the taint goes: the cause is gone, so Berth may pin the pod there again.
    profile = plugin_registry.default_profile().model_dump(by_alias=True, exclude_none=True)
    profile["disabled"] = ["TaintToleration"]
    config = tmp_path / "profile.yaml"
    config.write_text(yaml.safe_dump(profile))
    real.berth(mode="admission", settings={"BERTH_CONFIG": str(config)})
    namespace = real.namespace()
    node = "small-0"
    taint = f"berth-test-{namespace}"
    on_node = {"nodeSelector": {"kubernetes.io/hostname": node}}
    probes = real.namespace()  # kube-scheduler may bind a probe: not in the test's namespace
    real.kubectl("taint", "node", node, f"{taint}=refuse:NoSchedule")
    try:
        _eventually(
            "kube-scheduler refusing a probe pod for the taint",
            lambda: _refuses_a_probe(real, probes, spec=on_node),
            timeout=120.0,
        )
        created = real.kubectl(
            "create", "-n", namespace, "-o", "json", "-f", "-",
            input=json.dumps(
                pods.pod("solo", queue="default", scheduler=None, extra_spec=on_node)
            ),
        )  # fmt: skip
        first = json.loads(created.stdout)["metadata"]["uid"]
        _eventually(
            "an AdmissionRejected Event for solo",
            lambda: bool(_events(real, namespace, "AdmissionRejected", "solo")),
            timeout=120.0,
        )
    finally:
        real.kubectl("taint", "node", node, f"{taint}:NoSchedule-")

    def recreated() -> bool:  # a bare pod is recreated, gated, without its pin
        found = real.kubectl("get", "pod", "solo", "-n", namespace, "-o", "json", check=False)
        return found.returncode == 0 and json.loads(found.stdout)["metadata"]["uid"] != first

    _eventually("solo recreated", recreated)
    [rejected] = _events(real, namespace, "AdmissionRejected", "solo")
    assert f"untolerated taint {{{taint}: refuse}}" in rejected["message"], rejected
    # The taint is gone: Berth forgets the refusal and pins solo there again; kube-scheduler
    # binds it.
    real.wait("pod/solo", jsonpath="{.status.phase}", value="Running", namespace=namespace)
    solo = real.json("get", "pod", "solo", "-n", namespace)
    assert solo["spec"]["nodeName"] == node
    assert solo["metadata"]["uid"] != first
    assert len(_events(real, namespace, "AdmissionRejected", "solo")) == 1
    assert _binders(real, namespace) == {"solo": [KUBE_SCHEDULER]}
    deletions = [
        r
        for r in real.audited()
        if r.user == install.USER and r.verb == "delete" and r.resource == "pods"
        and r.namespace == namespace and r.name == "solo"
    ]  # fmt: skip
    assert len(deletions) == 1, deletions


def test_switching_to_scheduler_mode_loses_no_pod(real: cluster.RealCluster) -> None:
    admission = real.berth(mode="admission")
    namespace = real.namespace()
    queue = f"q-{namespace}"
    real.create(pods.queue(queue, limit={"cpu": "2"}))
    for i in range(4):
        real.create(pods.pod(f"a-{i}", cpu="1", queue=queue, scheduler=None), namespace=namespace)

    def split() -> bool:
        listed = real.pods(namespace)
        return (
            sum(bool(p["spec"].get("nodeName")) for p in listed) == 2
            and sum(_gated(p) for p in listed) == 2
        )

    _eventually("two admitted, two waiting gated", split)
    admission.stop()
    real.stop_berth()
    real.berth(mode="scheduler")
    real.kubectl("patch", "queue", queue, "--type=merge", "-p", '{"spec":{"limit":{"cpu":"6"}}}')
    for i in range(2):
        real.create(pods.pod(f"s-{i}", cpu="1", queue=queue), namespace=namespace)
    names = [f"a-{i}" for i in range(4)] + [f"s-{i}" for i in range(2)]
    for name in names:
        real.wait(f"pod/{name}", jsonpath="{.status.phase}", value="Running", namespace=namespace)
    binders = _binders(real, namespace)
    assert sorted(binders) == sorted(names)
    assert all(len(users) == 1 for users in binders.values()), binders
    assert {binders[f"s-{i}"][0] for i in range(2)} == {install.USER}
    assert {binders[f"a-{i}"][0] for i in range(4)} == {KUBE_SCHEDULER}


def test_a_queue_closing_a_cycle_is_refused_by_the_api_server(real: cluster.RealCluster) -> None:
    real.berth(mode="admission")
    suffix = real.namespace()
    a, b = f"a-{suffix}", f"b-{suffix}"
    made = real.kubectl("create", "-f", "-", input=json.dumps(pods.queue(a, parent=b)))
    assert f"Warning: spec.parent: queue {b} does not exist" in made.stderr
    refused = real.kubectl(
        "create", "-f", "-", input=json.dumps(pods.queue(b, parent=a)), check=False
    )
    assert refused.returncode != 0
    assert f"spec.parent: {a} would make a cycle of queues ({b} -> {a} -> {b})" in refused.stderr
    real.create(pods.queue(b))
    # An update is asked too: b may not take a as its parent now that a hangs off b.
    patched = real.kubectl(
        "patch", "queue", b, "--type=merge", "-p", json.dumps({"spec": {"parent": a}}), check=False
    )
    assert patched.returncode != 0
    assert f"spec.parent: {a} would make a cycle of queues ({b} -> {a} -> {b})" in patched.stderr
