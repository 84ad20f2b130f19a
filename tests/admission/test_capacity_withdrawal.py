"""Admission mode with an autoscaler's CapacityBuffer: the buffer goes before the gang is pinned.

A gated gang short of capacity asks Karpenter with a CapacityBuffer (docs/autoscaling.md).
Once room appears and Berth admits the gang, the buffer must be gone *before* the pods bind: a
buffer still asking for its virtual pods after the real ones took the room makes Karpenter buy
a node nobody uses (it did, when the buffer went with the requests' next pass, about 0.7 s
after the pins). On the emulator (the CapacityBuffer CRD served with an open schema, the tests'
stand-in kube-scheduler binding), we test that:

- the gang's buffer is deleted before the first of its pods is pinned (the storage's one
  resourceVersion sequence orders the writes of both kinds), the gang is bound whole, and no
  buffer is made again for it.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import keys
from berth.emulator import testing
from tests.admission import stack
from tests.kube import test_capacity_requests as capacity

pytestmark = pytest.mark.timeout(60)

BUFFERS = ("autoscaling.x-k8s.io", "capacitybuffers")


@pytest.fixture
def cluster(emulator: testing.RunningEmulator) -> testing.RunningEmulator:
    stack.install_crds(emulator)
    capacity.serve(emulator, "CapacityBuffer")
    emulator.start_kubelets(["1x cpu=4,memory=16Gi"], speedup=100, start_delay=0)
    return emulator


def _pinned(obj: dict[str, typing.Any]) -> bool:
    return keys.ADMITTED_NODE_ANNOTATION in (obj["metadata"].get("annotations") or {})


async def test_a_gangs_buffer_is_deleted_before_its_pods_are_pinned(
    cluster: testing.RunningEmulator,
) -> None:
    (node,) = cluster.call(cluster.api.storage.list, ("", "nodes"))
    filler = stack.pod("filler", cpu="2", gated=False)
    filler["spec"]["nodeName"] = node["metadata"]["name"]
    stack.create(cluster, "v1", "pods", filler)
    stack.create(
        cluster,
        keys.API_VERSION,
        "podgroups",
        {
            "apiVersion": keys.API_VERSION,
            "kind": "PodGroup",
            "metadata": {"name": "train"},
            "spec": {"minMember": 3, "queue": "default"},
        },
    )
    members = [f"train-{i}" for i in range(3)]
    for name in members:
        labels = {keys.POD_GROUP_LABEL: "train"}
        stack.create(cluster, "v1", "pods", stack.pod(name, labels=labels))

    def buffers() -> list[dict[str, typing.Any]]:
        return list(cluster.call(cluster.api.storage.list, BUFFERS, "default"))

    async with (
        stack.stand_in(cluster) as kube_scheduler,
        stack.BerthStack(cluster, capacity_requests=True),
    ):
        await stack.eventually(lambda: bool(buffers()), what="the gang's CapacityBuffer")
        (buffer,) = buffers()
        assert buffer["spec"]["replicas"] == 3
        start = cluster.call(lambda: cluster.api.storage.resource_version)
        # Room appears (the filler leaves): Berth admits the gang.
        stack.delete_pod(cluster, "filler")
        await stack.eventually(
            lambda: all(name in kube_scheduler.bound for name in members), what="the gang bound"
        )
        pods = cluster.call(
            cluster.api.storage.changes_since, start, key=("", "pods"), namespace="default"
        )
        made = cluster.call(
            cluster.api.storage.changes_since, start, key=BUFFERS, namespace="default"
        )
    pinned = [c.rv for c in pods if c.object["metadata"]["name"] in members and _pinned(c.object)]
    assert pinned, "the gang was bound without a pin"
    (deleted,) = [c for c in made if c.type == "DELETED"]
    assert deleted.object["metadata"]["name"] == buffer["metadata"]["name"]
    assert deleted.rv < min(pinned)
    assert [c for c in made if c.type == "ADDED"] == []  # not asked for again
    assert buffers() == []
