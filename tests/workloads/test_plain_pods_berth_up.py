"""Plain pods are charged to a queue, through ``berth up`` and the real kubectl.

A plain pod names Berth's scheduler and neither a group nor a queue (and has no owner to derive
a group from). We test these aspects:

- by default (setting ``admit_plain_pods``) it is a group of one in its namespace's default
  queue: the queue's status counts it, and at the queue's limit the next plain pod waits with
  the queue's reason, then starts once room is freed;
- in a namespace that names no default queue it is charged to ``default`` the same way (a
  ``Queue`` named ``default`` gives that queue a limit);
- with the setting off, a plain pod of a namespace naming no queue bypasses a full ``default``
  queue, while a namespace's default queue still takes its plain pods.
"""

from __future__ import annotations

import collections.abc
import pathlib
import typing

import pytest

from tests.workloads import cluster

pytestmark = pytest.mark.slow

Obj = dict[str, typing.Any]

NAMESPACE_QUEUE = "scheduling.berth.io/default-queue"


def plain_pod(name: str, *, cpu: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "berth-scheduler",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def namespace(name: str, **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def capped_queue(name: str, *, cpu: str) -> Obj:
    return {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"limit": {"cpu": cpu}},
    }


def allocated_cpu(kubectl: cluster.Kubectl, queue: str) -> str | None:
    status = kubectl.get("bq", queue).get("status") or {}
    return typing.cast(str | None, (status.get("allocated") or {}).get("cpu"))


def waiting_reason(kubectl: cluster.Kubectl, name: str, ns: str) -> str:
    for condition in kubectl.get("pod", name, namespace=ns)["status"].get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return str(condition.get("message") or "")
    return ""


def node_of(kubectl: cluster.Kubectl, name: str, ns: str) -> str | None:
    return typing.cast(str | None, kubectl.get("pod", name, namespace=ns)["spec"].get("nodeName"))


def fill_then_wait(kubectl: cluster.Kubectl, *, ns: str, queue: str) -> None:
    """In ``ns``, a plain pod fills ``queue`` (limit 1 cpu) and the next waits at its limit;
    it starts once the first is deleted."""
    kubectl.apply(plain_pod("first", cpu="1"), namespace=ns)
    cluster.eventually(lambda: node_of(kubectl, "first", ns), what="the first plain pod to run")
    cluster.eventually(
        lambda: allocated_cpu(kubectl, queue) == "1", what=f"queue {queue} to count it"
    )
    kubectl.apply(plain_pod("second", cpu="500m"), namespace=ns)
    message = cluster.eventually(
        lambda: waiting_reason(kubectl, "second", ns), what="the second plain pod's reason"
    )
    # The nodes have room (2 nodes of 4 cpu): only the queue's limit holds it back.
    assert f"queue {queue} at limit for cpu (1/1)" in message
    assert node_of(kubectl, "second", ns) is None
    kubectl("delete", "pod", "first", "-n", ns, "--wait=false")
    cluster.eventually(
        lambda: node_of(kubectl, "second", ns), what="the second to run once room is freed"
    )
    cluster.eventually(
        lambda: allocated_cpu(kubectl, queue) == "500m", what=f"queue {queue} to count it"
    )


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> collections.abc.Iterator[cluster.Kubectl]:
    with cluster.berth_up(tmp_path_factory.mktemp("up"), nodes="2x cpu=4,memory=16Gi") as kubectl:
        yield kubectl


def test_plain_pod_is_charged_to_its_namespace_queue_and_waits_at_its_limit(
    kubectl: cluster.Kubectl,
) -> None:
    kubectl.apply(
        capped_queue("research", cpu="1"), namespace("lab", **{NAMESPACE_QUEUE: "research"})
    )
    fill_then_wait(kubectl, ns="lab", queue="research")


def test_plain_pod_of_a_namespace_naming_no_queue_is_charged_to_default(
    kubectl: cluster.Kubectl,
) -> None:
    kubectl.apply(capped_queue("default", cpu="1"), namespace("scratch"))
    try:
        fill_then_wait(kubectl, ns="scratch", queue="default")
    finally:
        kubectl("delete", "bq", "default", "--ignore-not-found")


def test_with_the_setting_off_plain_pods_bypass_default_but_not_their_namespace_queue(
    tmp_path: pathlib.Path,
) -> None:
    with cluster.berth_up(
        tmp_path,
        nodes="2x cpu=4,memory=16Gi",
        settings={"BERTH_ADMIT_PLAIN_PODS": "false"},
    ) as kubectl:
        kubectl.apply(
            capped_queue("default", cpu="1"),
            capped_queue("research", cpu="1"),
            namespace("scratch"),
            namespace("lab", **{NAMESPACE_QUEUE: "research"}),
        )
        # Twice the default queue's limit, yet both run: neither is charged to any queue.
        kubectl.apply(plain_pod("a", cpu="1"), plain_pod("b", cpu="1"), namespace="scratch")
        for name in ("a", "b"):
            cluster.eventually(
                lambda name=name: node_of(kubectl, name, "scratch"), what=f"{name} to run"
            )
        assert allocated_cpu(kubectl, "default") in (None, "0")
        # The namespace's own queue still takes its plain pods, limit and all.
        fill_then_wait(kubectl, ns="lab", queue="research")
