"""The in-memory cluster: objects, the cache behind them, and decisions applied to them.

We test these aspects:
- created objects get sortable uids, a creation time from the clock and a resourceVersion;
  replacing an object keeps its uid, creation time and (for a pod) its node;
- the snapshot source shows pending pods and node usage;
- every decision kind changes the objects as the API server would, and stale ones (a pod
  deleted or recreated meanwhile) are ignored;
- pods finish: a plain pod is deleted, a group goes when all its pods have finished;
- PodGroups get the operator's status from the last snapshot and cycle: nothing before the
  first snapshot, the cycle's reason code, placed once the settled snapshot shows its pods
  bound; applying the group's manifest again keeps its status;
- unknown kinds and nameless objects are refused.
"""

from __future__ import annotations

import typing

import numpy as np
import pytest

from berth.api import keys, resources
from berth.scheduler.framework import decisions, pending, reasons
from berth.sim import cluster
from berth.util import clocks

START = 1_767_225_600.0


def waiting(message: str) -> reasons.Reason:
    """A why-pending reason as the scheduler hands it on (the sink renders the message)."""
    return reasons.new(reasons.ReasonCode.UNSCHEDULABLE, message)


@pytest.fixture
def sim() -> cluster.InMemoryCluster:
    c = cluster.InMemoryCluster(clock=clocks.VirtualClock(START))
    for name in ("n1", "n2"):
        c.put(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name},
                "status": {"allocatable": {"cpu": "4", "pods": "10"}},
            }
        )
    return c


def pod(name: str, *, group: str | None = None, cpu: str = "1") -> dict[str, typing.Any]:
    labels = {keys.POD_GROUP_LABEL: group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "a", "labels": labels},
        "spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": cpu}}}]},
    }


def group(name: str, *, min_member: int) -> dict[str, typing.Any]:
    return {
        "apiVersion": keys.API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "a"},
        "spec": {"minMember": min_member, "queue": "default"},
    }


def apply(sim: cluster.InMemoryCluster, *items: decisions.Decision) -> list[cluster.Applied]:
    sim.apply(decisions.CycleResult(session_id="test", decisions=items))
    return sim.drain()


def bind(sim: cluster.InMemoryCluster, name: str, node: str) -> list[cluster.Applied]:
    stored = sim.get("Pod", namespace="a", name=name)
    assert stored is not None
    uid = stored["metadata"]["uid"]
    return apply(sim, decisions.BindPod(namespace="a", name=name, uid=uid, node=node))


def free_cpu(sim: cluster.InMemoryCluster) -> list[int]:
    table = sim.snapshot().nodes
    return [int(v) for v in table.free()[:, table.column[resources.CPU]]]


def test_created_objects_get_uids_times_and_versions(sim: cluster.InMemoryCluster) -> None:
    first = sim.put(pod("p1"))
    second = sim.put(pod("p2"))
    assert first["metadata"]["uid"] < second["metadata"]["uid"]
    assert first["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert first["spec"]["schedulerName"] == keys.DEFAULT_SCHEDULER_NAME
    assert first["status"] == {"phase": "Pending"}


def test_replacing_keeps_identity_and_node(sim: cluster.InMemoryCluster) -> None:
    first = sim.put(pod("p1"))
    bind(sim, "p1", "n2")
    replaced = sim.put(pod("p1", cpu="2"))
    assert replaced["metadata"]["uid"] == first["metadata"]["uid"]
    assert replaced["spec"]["nodeName"] == "n2"
    assert replaced["status"]["phase"] == "Running"
    assert free_cpu(sim) == [4000, 2000]


def test_the_snapshot_shows_pending_pods_and_usage(sim: cluster.InMemoryCluster) -> None:
    sim.put(pod("p1"))
    sim.put(pod("p2"))
    assert [p.name for p in sim.snapshot().pending] == ["p1", "p2"]
    assert bind(sim, "p1", "n1") == [
        cluster.Bound(key="a/p1", uid=sim.objects("Pod")[0]["metadata"]["uid"], node="n1")
    ]
    snapshot = sim.snapshot()
    assert [p.name for p in snapshot.pending] == ["p2"]
    assert free_cpu(sim) == [3000, 4000]
    assert snapshot.now == START


def test_stale_decisions_are_ignored(sim: cluster.InMemoryCluster) -> None:
    sim.put(pod("p1"))
    applied = apply(
        sim,
        decisions.BindPod(namespace="a", name="p1", uid="not-its-uid", node="n1"),
        decisions.EvictPod(namespace="a", name="gone", uid="u", node="n1", reason="x"),
    )
    assert applied == []
    assert "nodeName" not in sim.objects("Pod")[0]["spec"]


def test_a_bound_pod_is_not_bound_twice(sim: cluster.InMemoryCluster) -> None:
    sim.put(pod("p1"))
    bind(sim, "p1", "n1")
    assert bind(sim, "p1", "n2") == []
    assert sim.objects("Pod")[0]["spec"]["nodeName"] == "n1"


def test_eviction_deletes_the_pod_and_frees_its_node(sim: cluster.InMemoryCluster) -> None:
    stored = sim.put(pod("p1"))
    bind(sim, "p1", "n1")
    uid = stored["metadata"]["uid"]
    applied = apply(
        sim, decisions.EvictPod(namespace="a", name="p1", uid=uid, node="n1", reason="reclaim")
    )
    assert applied == [cluster.Evicted(key="a/p1", uid=uid, node="n1", reason="reclaim")]
    assert sim.objects("Pod") == []
    assert free_cpu(sim) == [4000, 4000]


def test_annotations_nominations_and_reasons(sim: cluster.InMemoryCluster) -> None:
    uid = sim.put(pod("p1"))["metadata"]["uid"]
    sim.put(group("g", min_member=2))
    sim.snapshot()  # what the cycle deciding these saw
    applied = apply(
        sim,
        decisions.AnnotatePod(namespace="a", name="p1", uid=uid, annotations={"x": "y"}),
        decisions.NominatePod(namespace="a", name="p1", uid=uid, node="n2"),
        decisions.Unschedulable(
            subject=decisions.Subject.POD, key="a/p1", reason=waiting("0/2 nodes fit")
        ),
        decisions.Unschedulable(
            subject=decisions.Subject.GROUP, key="a/g", reason=waiting("waiting")
        ),
        decisions.MarkPending(
            group="a/g",
            pods=(pending.PodPending(key="a/p1", reason=waiting("0/2 nodes fit"), capacity=True),),
        ),
    )
    stored = sim.get("Pod", namespace="a", name="p1")
    assert stored is not None
    assert stored["metadata"]["annotations"] == {"x": "y"}
    assert stored["status"]["nominatedNodeName"] == "n2"
    (condition,) = stored["status"]["conditions"]
    assert (condition["type"], condition["reason"], condition["message"]) == (
        "PodScheduled",
        "Unschedulable",
        "0/2 nodes fit",
    )
    pod_group = sim.get("PodGroup", namespace="a", name="g")
    assert pod_group is not None
    assert pod_group["status"]["conditions"][0]["type"] == "Scheduled"
    assert [type(a).__name__ for a in applied] == ["Waiting", "Waiting"]


def test_a_reservation_becomes_available(sim: cluster.InMemoryCluster) -> None:
    sim.put(
        {
            "apiVersion": keys.API_VERSION,
            "kind": "Reservation",
            "metadata": {"name": "r", "namespace": "a"},
            "spec": {
                "template": {"spec": {"containers": [{"name": "m"}]}},
                "owners": [{"object": {"name": "p1"}}],
            },
        }
    )
    applied = apply(
        sim,
        decisions.SetReservationAvailable(
            namespace="a", name="r", node="n1", allocatable=resources.ResourceList.of(cpu=2000)
        ),
    )
    assert applied == [cluster.ReservationPlaced(key="a/r", node="n1")]
    stored = sim.get("Reservation", namespace="a", name="r")
    assert stored is not None
    conditions = stored["status"].pop("conditions")
    assert stored["status"] == {"phase": "Available", "nodeName": "n1", "allocatable": {"cpu": "2"}}
    # Sorted by type, as the live operator writes them (one status owner for both).
    assert [(c["type"], c["status"]) for c in conditions] == [
        ("Ready", "True"),
        ("Scheduled", "True"),
    ]


def test_a_finished_plain_pod_is_deleted(sim: cluster.InMemoryCluster) -> None:
    uid = sim.put(pod("p1"))["metadata"]["uid"]
    bind(sim, "p1", "n1")
    assert not sim.succeed_pod("a/p1", uid="another-uid")
    assert sim.succeed_pod("a/p1", uid=uid)
    assert sim.objects("Pod") == []
    assert free_cpu(sim) == [4000, 4000]
    assert not sim.succeed_pod("a/p1", uid=uid)


def test_a_group_goes_when_all_its_pods_have_finished(sim: cluster.InMemoryCluster) -> None:
    sim.put(group("g", min_member=2))
    uids = [sim.put(pod(name, group="g"))["metadata"]["uid"] for name in ("g-0", "g-1")]
    bind(sim, "g-0", "n1")
    bind(sim, "g-1", "n2")
    assert [p["metadata"]["name"] for p in sim.pods_of_group("a", name="g")] == ["g-0", "g-1"]
    assert sim.succeed_pod("a/g-0", uid=uids[0])
    assert sim.get("PodGroup", namespace="a", name="g") is not None
    assert free_cpu(sim) == [4000, 3000]  # a finished pod holds nothing
    assert sim.succeed_pod("a/g-1", uid=uids[1])
    assert sim.objects("PodGroup") == [] and sim.objects("Pod") == []
    assert not np.any(sim.snapshot().nodes.requested[:, 0])


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"kind": "ConfigMap", "metadata": {"name": "c"}}, "does not store ConfigMap"),
        ({"kind": "Pod", "metadata": {}}, "needs metadata.name"),
    ],
    ids=["kind", "name"],
)
def test_unknown_kinds_and_nameless_objects_are_refused(
    sim: cluster.InMemoryCluster, obj: dict[str, typing.Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        sim.put(obj)


def test_deleting_returns_the_object(sim: cluster.InMemoryCluster) -> None:
    sim.put(pod("p1"))
    assert sim.delete("Pod", namespace="a", name="p1") is not None
    assert sim.delete("Pod", namespace="a", name="p1") is None
    assert sim.snapshot().pending == ()


def test_a_group_gets_the_operators_status_from_the_last_cycle(
    sim: cluster.InMemoryCluster,
) -> None:
    uids = [sim.put(pod(f"p{i}", group="g"))["metadata"]["uid"] for i in range(2)]
    sim.put(group("g", min_member=2))
    stored = sim.get("PodGroup", namespace="a", name="g")
    assert stored is not None and "status" not in stored  # no cycle yet: nothing to say
    sim.snapshot()
    no_room = reasons.new(reasons.ReasonCode.NOT_ENOUGH_RESOURCES, "0/2 nodes fit")
    sim.apply(decisions.CycleResult(session_id="1", group_why={"a/g": no_room}))
    stored = sim.get("PodGroup", namespace="a", name="g")
    assert stored is not None
    (scheduled,) = stored["status"]["conditions"]
    assert (stored["status"]["phase"], scheduled["reason"], scheduled["message"]) == (
        "Inqueue",
        "NotEnoughResources",
        "0/2 nodes fit",
    )
    sim.put(group("g", min_member=2))  # applied again: the status stays the owner's
    again = sim.get("PodGroup", namespace="a", name="g")
    assert again is not None and again["status"]["phase"] == "Inqueue"
    sim.snapshot()
    apply(
        sim,
        *(
            decisions.BindPod(namespace="a", name=f"p{i}", uid=uid, node="n1")
            for i, uid in enumerate(uids)
        ),
    )
    sim.settled_snapshot()
    placed = sim.get("PodGroup", namespace="a", name="g")
    assert placed is not None
    assert (placed["status"]["phase"], placed["status"]["running"]) == ("Running", 2)
    assert placed["status"]["conditions"][0]["status"] == "True"
