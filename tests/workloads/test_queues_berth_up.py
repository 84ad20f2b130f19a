"""Queues per namespace and who may use a queue, through ``berth up`` and the real kubectl.

We test these aspects:

- a Namespace labelled ``scheduling.berth.io/default-queue`` sends its pods that name no queue
  (plain ones, and ones whose group names none) to that queue: its status counts them; a pod
  elsewhere goes to ``default``;
- a pod naming a queue whose ``namespaceSelector`` does not admit its namespace (it got in: no
  webhook here) waits, saying so, and starts once the namespace is labelled to be admitted;
- a pod naming a queue that does not exist waits, saying so;
- a Job's derived group lands in its namespace's default queue.
"""

from __future__ import annotations

import collections.abc
import json
import typing

import pytest

from tests.workloads import cluster

pytestmark = pytest.mark.slow

Obj = dict[str, typing.Any]


def pod(name: str, *, labels: dict[str, str] | None = None, cpu: str = "500m") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "schedulerName": "berth-scheduler",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def namespace(name: str, **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def queue(name: str, selector: Obj | None = None) -> Obj:
    spec: Obj = {"namespaceSelector": selector} if selector is not None else {}
    return {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> collections.abc.Iterator[cluster.Kubectl]:
    with cluster.berth_up(tmp_path_factory.mktemp("up"), nodes="2x cpu=4,memory=16Gi") as kubectl:
        yield kubectl


def apply(kubectl: cluster.Kubectl, *objects: Obj, ns: str = "default") -> None:
    kubectl("apply", "-n", ns, "-f", "-", input="\n---\n".join(json.dumps(o) for o in objects))


def allocated_cpu(kubectl: cluster.Kubectl, name: str) -> str | None:
    found = kubectl.get("bq", name)
    return typing.cast(str | None, ((found.get("status") or {}).get("allocated") or {}).get("cpu"))


def reason(kubectl: cluster.Kubectl, name: str, ns: str) -> str:
    for condition in kubectl.get("pod", name, namespace=ns)["status"].get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return str(condition.get("message") or "")
    return ""


def node_of(kubectl: cluster.Kubectl, name: str, ns: str) -> str | None:
    return typing.cast(str | None, kubectl.get("pod", name, namespace=ns)["spec"].get("nodeName"))


def test_namespace_default_queue_takes_its_pods_that_name_none(kubectl: cluster.Kubectl) -> None:
    apply(
        kubectl,
        queue("research"),
        namespace("lab", **{"scheduling.berth.io/default-queue": "research"}),
    )
    apply(
        kubectl,
        pod("plain"),
        pod("says-default", labels={"scheduling.berth.io/queue": "default"}),
        ns="lab",
    )
    cluster.eventually(lambda: node_of(kubectl, "plain", "lab"), what="the plain pod to run")
    cluster.eventually(lambda: node_of(kubectl, "says-default", "lab"), what="the other to run")
    cluster.eventually(
        lambda: allocated_cpu(kubectl, "research") == "1",
        what="the namespace's queue to count both",
    )


def test_job_group_lands_in_the_namespace_queue(kubectl: cluster.Kubectl) -> None:
    apply(
        kubectl, queue("batch"), namespace("etl", **{"scheduling.berth.io/default-queue": "batch"})
    )
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "load"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {
                "spec": {"containers": [{"name": "m", "image": "i"}], "restartPolicy": "Never"}
            },
        },
    }
    apply(kubectl, job, ns="etl")
    uid = kubectl.get("job", "load", namespace="etl")["metadata"]["uid"]
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "load",
        "uid": uid,
        "controller": True,
    }
    pods = [pod(f"load-{i}") for i in (0, 1)]
    for p in pods:
        p["metadata"]["ownerReferences"] = [owner]
    apply(kubectl, *pods, ns="etl")
    groups = cluster.eventually(
        lambda: kubectl.items("bpg", namespace="etl"), what="the Job's derived group"
    )
    assert groups[0]["spec"]["queue"] == "batch"
    cluster.eventually(
        lambda: allocated_cpu(kubectl, "batch") == "1", what="the queue to count the Job"
    )


def test_pod_in_a_queue_that_does_not_admit_its_namespace_waits_until_it_does(
    kubectl: cluster.Kubectl,
) -> None:
    apply(kubectl, queue("team-a", {"matchLabels": {"team": "a"}}), namespace("ml", team="b"))
    apply(kubectl, pod("sneaky", labels={"scheduling.berth.io/queue": "team-a"}), ns="ml")
    message = cluster.eventually(lambda: reason(kubectl, "sneaky", "ml"), what="a reason")
    assert "queue team-a does not admit namespace ml (namespaceSelector team=a)" in message
    assert node_of(kubectl, "sneaky", "ml") is None
    apply(kubectl, namespace("ml", team="a"))
    cluster.eventually(
        lambda: node_of(kubectl, "sneaky", "ml"), what="the pod to run once admitted"
    )


def test_pod_naming_a_missing_queue_waits_and_says_so(kubectl: cluster.Kubectl) -> None:
    apply(kubectl, namespace("typo"))
    apply(kubectl, pod("lost", labels={"scheduling.berth.io/queue": "reserch"}), ns="typo")
    message = cluster.eventually(lambda: reason(kubectl, "lost", "typo"), what="a reason")
    assert "queue reserch does not exist" in message
