"""A ProvisioningRequest refused, on the real control plane (issue 29, bad input).

There is no Cluster Autoscaler in the harness, so the test installs the ProvisioningRequest API
(``autoscaling.x-k8s.io/v1``; a CRD of our own with an open schema and a status subresource,
as the API server serves Cluster Autoscaler's) and plays the autoscaler's part: it writes on
Berth's request the conditions Cluster Autoscaler writes when it cannot provide the capacity
(its ``provreq`` conditions package, ``best-effort-atomic-scale-up`` class):

- ``Accepted=True`` (reason ``Accepted``) and ``Provisioned=False`` (reason
  ``CapacityIsNotFound``, "Capacity is not found, CA will try to find it later."): it looked
  and found no capacity, and will try again itself;
- ``Failed=True`` (reason ``CapacityIsNotFound``, "CA could not find requested capacity"): it
  gave up on the request (the ``noRetry`` parameter, or its own retries exhausted).

We test that a gang whose queue asks for a ProvisioningRequest (scheduler mode) and that only
more capacity could place gets one request for its two pods, and that the PodGroup's
``ScaleUp`` condition says what the autoscaler could not do: first ``CapacityRequestPending``
quoting ``Provisioned=False``, then ``False``, ``CapacityRequestRefused``, quoting ``Failed``,
with a Warning Event. Nothing loops: the refused request stays until ``retryAfter`` (5 s here)
has passed, is then deleted and made again as the next attempt, and a second refusal waits
twice as long (the audit log's creations); the pods stay ``Unschedulable``, and nothing is
bound or evicted.
"""

from __future__ import annotations

import collections.abc
import contextlib
import json
import time
import typing

import pytest

from berth.api import autoscaling
from berth.realcluster import processes
from tests import open_crds
from tests.realcluster import cluster, pods

pytestmark = pytest.mark.realcluster

Obj = dict[str, typing.Any]
CRD = "provisioningrequests.autoscaling.x-k8s.io"
CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
RETRY = 5.0  # the test's autoscaling.retryAfter


def crd() -> Obj:
    """The ProvisioningRequest API as the API server serves it (schema left open)."""
    return open_crds.crd(
        group=autoscaling.GROUP,
        kind="ProvisioningRequest",
        plural="provisioningrequests",
        version="v1",
        short_names=["provreq"],
    )


@contextlib.contextmanager
def provisioning_requests_served(real: cluster.RealCluster) -> collections.abc.Iterator[None]:
    real.create(crd())
    try:
        real.kubectl("wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=120s")
        yield
    finally:
        real.kubectl("delete", "crd", CRD, "--wait=false")


def wait_for(
    real: cluster.RealCluster, what: str, ready: collections.abc.Callable[[], bool]
) -> None:
    processes.wait_until(
        what, ready, timeout=120.0, watch=list(real.plane.processes.values()), interval=0.5
    )


def requests(real: cluster.RealCluster, namespace: str) -> dict[str, Obj]:
    items = real.json("get", "provisioningrequests", "-n", namespace)["items"]
    return {r["metadata"]["name"]: r for r in items}


def scale_up(real: cluster.RealCluster, namespace: str, group: str) -> Obj:
    found = real.json("get", "podgroup", group, "-n", namespace)
    for c in (found.get("status") or {}).get("conditions") or []:
        if c.get("type") == "ScaleUp":
            return typing.cast("Obj", c)
    return {}


def answer(
    real: cluster.RealCluster, namespace: str, name: str, *conditions: tuple[str, str, str, str]
) -> None:
    """Write ``conditions`` (type, status, reason, message) on a request's status, as Cluster
    Autoscaler does."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {
        "conditions": [
            {
                "type": kind,
                "status": value,
                "reason": reason,
                "message": message,
                "lastTransitionTime": now,
                "observedGeneration": 1,
            }
            for kind, value, reason, message in conditions
        ]
    }
    patch = json.dumps({"status": status})
    real.kubectl(
        "patch", "provisioningrequest", name, "-n", namespace, "--subresource=status",
        "--type=merge", "-p", patch,
    )  # fmt: skip


ACCEPTED = ("Accepted", "True", "Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler")
NOT_FOUND = (
    "Provisioned",
    "False",
    "CapacityIsNotFound",
    "Capacity is not found, CA will try to find it later.",
)
FAILED = ("Failed", "True", "CapacityIsNotFound", "CA could not find requested capacity")


def test_a_refused_provisioning_request_is_told_on_the_group_and_asked_again_after_a_backoff(
    real: cluster.RealCluster,
) -> None:
    namespace = real.namespace()
    queue = f"provreq-{namespace}"
    with provisioning_requests_served(real):
        asks = {"provisioningRequest": {"provisioningClassName": CLASS}}
        real.create(pods.queue(queue, autoscaling=asks))
        try:
            _refused(real, namespace, queue)
        finally:
            real.kubectl("delete", "queue", queue, "--wait=false")


def _refused(real: cluster.RealCluster, namespace: str, queue: str) -> None:
    real.berth(mode="scheduler", settings={"BERTH_AUTOSCALING__RETRY_AFTER": f"{RETRY:g}s"})
    started = time.time()
    # 64 cpu a pod: no node of the plane has that many; only new capacity could place them.
    real.create(*pods.gang("big", 2, queue=queue, cpu="64"), namespace=namespace)
    members = ["big-0", "big-1"]
    wait_for(
        real, "Berth's ProvisioningRequest", lambda: "berth-pg-big-1" in requests(real, namespace)
    )
    made = requests(real, namespace)["berth-pg-big-1"]
    assert made["spec"]["provisioningClassName"] == CLASS
    assert sum(p["count"] for p in made["spec"]["podSets"]) == 2
    # Its pods consume it (Cluster Autoscaler's regular scale-up leaves them to the request).
    wait_for(
        real,
        "the pods annotated to consume it",
        lambda: all(
            (p["metadata"].get("annotations") or {}).get(autoscaling.CONSUME_ANNOTATION)
            == "berth-pg-big-1"
            for p in real.pods(namespace)
        ),
    )

    # The autoscaler looked, and found no capacity: the group quotes it.
    answer(real, namespace, "berth-pg-big-1", ACCEPTED, NOT_FOUND)
    wait_for(
        real,
        "the group quoting the autoscaler's Provisioned=False",
        lambda: "CapacityIsNotFound" in scale_up(real, namespace, "big").get("message", ""),
    )
    said = scale_up(real, namespace, "big")
    assert said["reason"] == "CapacityRequestPending", said
    assert "Provisioned=False (CapacityIsNotFound: Capacity is not found" in said["message"]

    # It gives up: the group says it refused, and when Berth asks again.
    refused_at = time.time()
    answer(real, namespace, "berth-pg-big-1", ACCEPTED, NOT_FOUND, FAILED)
    wait_for(
        real,
        "the group saying the autoscaler refused",
        lambda: scale_up(real, namespace, "big").get("reason") == "CapacityRequestRefused",
    )
    said = scale_up(real, namespace, "big")
    assert said["status"] == "False", said
    assert said["message"].startswith(
        f"the autoscaler refused 2 pods' capacity with ProvisioningRequest "
        f"{namespace}/berth-pg-big-1: Failed=True (CapacityIsNotFound: CA could not find "
        "requested capacity); asking again at "
    ), said
    warnings = [
        e
        for e in real.json("get", "events", "-n", namespace)["items"]
        if e.get("reason") == "CapacityRequestRefused" and e.get("type") == "Warning"
    ]
    assert [e["involvedObject"]["kind"] for e in warnings] == ["PodGroup"], warnings

    # After retryAfter, the next attempt; refused again, the one after waits twice as long.
    wait_for(real, "the second attempt", lambda: "berth-pg-big-2" in requests(real, namespace))
    assert "berth-pg-big-1" not in requests(real, namespace)
    refused_again = time.time()
    answer(real, namespace, "berth-pg-big-2", ACCEPTED, NOT_FOUND, FAILED)
    wait_for(real, "the third attempt", lambda: "berth-pg-big-3" in requests(real, namespace))

    audited = [r for r in real.audited() if r.namespace == namespace and r.at >= started]
    creations = sorted(
        r.at
        for r in audited
        if r.resource == "provisioningrequests" and r.verb == "create" and r.succeeded
    )
    assert len(creations) == 3, creations  # one request per attempt, never one per pass
    assert creations[1] - refused_at >= RETRY - 1, (creations, refused_at)
    assert creations[2] - refused_again >= 2 * RETRY - 1, (creations, refused_again)
    # The pods still ask for capacity (their condition), nothing was bound or evicted.
    for pod in real.pods(namespace):
        (mark,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert (mark["status"], mark["reason"]) == ("False", "Unschedulable"), pod
    assert sorted(p["metadata"]["name"] for p in real.pods(namespace)) == members
    assert not [r for r in audited if r.resource in ("pods/eviction", "pods/binding")]
