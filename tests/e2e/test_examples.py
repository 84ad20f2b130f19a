"""The examples on a real cluster with the chart installed (``hack/kind-e2e.sh``).

We test these aspects:
- the chart's Deployment becomes Available and one replica holds the Lease;
- 01-queues: the Queues are accepted and the queue controller writes their status (children);
- 02-gang: the four pods of the gang are bound together (one cycle) and Running, and
  ``kubectl get bpg`` shows the group Running;
- 03-reservation: the Reservation becomes Available on a node; its owner, created afterwards,
  runs on that node, is annotated with the reservation, and ends it (allocateOnce: Succeeded);
- 04-plain-pod: a pod with neither group nor queue is placed by Berth and Running;
- the kubectl plugins on the real cluster: ``kubectl create reservation --dry-run=server``,
  ``kubectl berth queues`` and ``kubectl berth why podgroup/train``.

Every wait is a bounded ``kubectl wait``.
"""

from __future__ import annotations

import datetime

import pytest

from berth.api import keys
from tests.e2e import clusters

pytestmark = pytest.mark.e2e

EXAMPLES = clusters.EXAMPLES
GANG_SPREAD_SECONDS = 5.0
"""How far apart the gang's bindings may be: Berth binds a gang in one cycle."""


@pytest.fixture(scope="module")
def queues(kube: clusters.Kube, namespace: str) -> None:
    kube("apply", "-n", namespace, "-f", str(EXAMPLES / "01-queues"))
    kube.wait("queue/research", jsonpath="{.status.children[0]}", value="team-a")


def test_the_scheduler_is_available_and_one_replica_leads(
    kube: clusters.Kube, release_namespace: str
) -> None:
    kube(
        "wait", "-n", release_namespace, "deployment",
        "-l", "app.kubernetes.io/name=berth", "--for=condition=Available",
        f"--timeout={clusters.WAIT}",
    )  # fmt: skip
    leases = kube.json("get", "leases", "-n", release_namespace)["items"]
    holders = [lease["spec"].get("holderIdentity") for lease in leases]
    assert any(holders), f"no Lease in {release_namespace} has a holder: {leases}"


def test_queues_get_their_status(kube: clusters.Kube, queues: None) -> None:
    research = kube.json("get", "queue", "research")
    assert research["status"]["children"] == ["team-a", "team-b"]
    table = kube("get", "bq").stdout
    assert {"research", "team-a", "team-b"} <= {line.split()[0] for line in table.splitlines()}


def _scheduled_at(pod: dict[str, object]) -> datetime.datetime:
    status = pod["status"]
    assert isinstance(status, dict)
    for condition in status.get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "True":
            return datetime.datetime.fromisoformat(condition["lastTransitionTime"])
    raise AssertionError(f"pod {pod['metadata']['name']} has no PodScheduled=True: {status}")


def test_gang_pods_are_bound_together_and_run(
    kube: clusters.Kube, namespace: str, queues: None
) -> None:
    kube("apply", "-n", namespace, "-f", str(EXAMPLES / "02-gang"))
    selector = f"{keys.POD_GROUP_LABEL}=train"
    kube(
        "wait", "-n", namespace, "pod", "-l", selector,
        "--for=jsonpath={.status.phase}=Running", f"--timeout={clusters.WAIT}",
    )  # fmt: skip
    kube.wait("podgroup/train", jsonpath="{.status.phase}", value="Running", namespace=namespace)
    members = kube.json("get", "pods", "-n", namespace, "-l", selector)["items"]
    assert len(members) == 4
    assert all(pod["spec"].get("nodeName") for pod in members)
    times = sorted(_scheduled_at(pod) for pod in members)
    assert (times[-1] - times[0]).total_seconds() <= GANG_SPREAD_SECONDS
    table = kube("get", "bpg", "-n", namespace).stdout.splitlines()
    row = next(line.split() for line in table if line.startswith("train "))
    assert "Running" in row


def test_reservation_holds_a_node_for_its_owner(
    kube: clusters.Kube, namespace: str, queues: None
) -> None:
    kube("apply", "-n", namespace, "-f", str(EXAMPLES / "03-reservation" / "10-reservation.yaml"))
    kube.wait(
        "reservation/train-capacity", jsonpath="{.status.phase}", value="Available",
        namespace=namespace,
    )  # fmt: skip
    reserved = kube.json("get", "reservation", "train-capacity", "-n", namespace)
    node = reserved["status"]["nodeName"]
    assert node
    kube("apply", "-n", namespace, "-f", str(EXAMPLES / "03-reservation" / "20-owner.yaml"))
    kube.wait("pod/trainer", jsonpath="{.status.phase}", value="Running", namespace=namespace)
    owner = kube.json("get", "pod", "trainer", "-n", namespace)
    assert owner["spec"]["nodeName"] == node
    assert keys.RESERVATION_ALLOCATED_ANNOTATION in owner["metadata"].get("annotations", {})
    # allocateOnce (the default): the first owner ends the reservation.
    kube.wait(
        "reservation/train-capacity", jsonpath="{.status.phase}", value="Succeeded",
        namespace=namespace,
    )  # fmt: skip


def test_a_plain_pod_is_placed_by_berth(kube: clusters.Kube, namespace: str) -> None:
    kube("apply", "-n", namespace, "-f", str(EXAMPLES / "04-plain-pod"))
    kube.wait("pod/hello", jsonpath="{.status.phase}", value="Running", namespace=namespace)
    pod = kube.json("get", "pod", "hello", "-n", namespace)
    assert pod["spec"]["schedulerName"] == keys.DEFAULT_SCHEDULER_NAME
    assert pod["spec"].get("nodeName")


def test_kubectl_plugins_on_the_cluster(kube: clusters.Kube, namespace: str, queues: None) -> None:
    created = kube(
        "create", "reservation", "e2e-check", "--cpu", "1", "--owner-pod", "nobody",
        "-n", namespace, "--dry-run=server",
    )  # fmt: skip
    assert created.stdout == "reservation.scheduling.berth.io/e2e-check created (server dry run)\n"
    tree = kube("berth", "queues").stdout
    assert "research" in tree and "team-a" in tree and "fair share" in tree
    kube("apply", "-n", namespace, "-f", str(EXAMPLES / "02-gang"))
    why = kube("berth", "why", "podgroup/train", "-n", namespace).stdout
    assert why.startswith(f"PodGroup {namespace}/train: queue team-a, minMember 4")
    assert "Dry run of berth-scheduler over" in why
