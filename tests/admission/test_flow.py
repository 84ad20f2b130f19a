"""Admission mode end to end: Berth admits gated pods, a stand-in kube-scheduler binds them.

Runs on the emulator with simulated nodes, Berth's informers, cache, scheduler and
:class:`~berth.kube.admission.admission.Admission` (``tests/admission/stack.py``), and the tests'
small stand-in for kube-scheduler (it binds an ungated pod pinned by a required node affinity to
that node, an unpinned one to any node with room — enough to exercise the protocol). We test these
aspects:
- a gang of 8 stays gated (nothing pinned) while 8 do not fit within its queue's limit, and the
  PodGroup's reason says why; once they fit, all 8 are pinned before any gate is removed, and
  each is bound on the node Berth chose;
- a plain pod is never touched by Berth; a gated pod with neither group nor queue is ungated
  with an Event (bad input) and placed by kube-scheduler;
- a pod whose binding fails is rejected after the bind timeout: its capacity is released, it is
  recreated gated (a bare pod), its group's reason says why, and the group is admitted again;
- a pod its scheduler reports Unschedulable where Berth pinned it is rejected at once;
- a reservation's owner is pinned to the reserved node;
- the PodGroup why-pending reason is the same for a gated group and a Berth-scheduled one;
- a gated gang that cannot fit waits parked (queueing hints): once nothing changes, cycles
  decide nothing, and it keeps its reason.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import keys
from berth.emulator import faults, testing
from berth.scheduler.framework import decisions
from tests.admission import stack

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster(emulator: testing.RunningEmulator) -> testing.RunningEmulator:
    stack.install_crds(emulator)
    emulator.start_kubelets(["4x cpu=4,memory=16Gi"], speedup=100, start_delay=0)
    return emulator


def _queue(name: str, *, cpu_limit: str) -> dict[str, typing.Any]:
    return {
        "apiVersion": keys.API_VERSION,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"limit": {"cpu": cpu_limit}},
    }


def _group(name: str, *, min_member: int, queue: str = "default") -> dict[str, typing.Any]:
    return {
        "apiVersion": keys.API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "queue": queue},
    }


def _bound(obj: dict[str, typing.Any] | None) -> bool:
    return obj is not None and bool(obj["spec"].get("nodeName"))


async def test_gang_of_8_is_ungated_together_only_when_it_fits_its_queue(
    cluster: testing.RunningEmulator,
) -> None:
    stack.create(cluster, keys.API_VERSION, "queues", _queue("q", cpu_limit="6"))
    stack.create(cluster, keys.API_VERSION, "podgroups", _group("train", min_member=8, queue="q"))
    for i in range(8):
        stack.create(
            cluster, "v1", "pods", stack.pod(f"train-{i}", labels={keys.POD_GROUP_LABEL: "train"})
        )
    async with stack.stand_in(cluster) as kube_scheduler, stack.BerthStack(cluster) as berth:
        await stack.eventually(
            lambda: berth.group_reason("default/train") is not None, what="a reason"
        )
        reason = berth.group_reason("default/train")
        assert reason is not None and "limit" in reason
        for obj in stack.all_pods(cluster):
            assert stack.gates(obj) == [keys.ADMISSION_GATE]
            assert keys.ADMITTED_NODE_ANNOTATION not in (obj["metadata"].get("annotations") or {})
        start = cluster.call(lambda: cluster.api.storage.resource_version)
        queues = cluster.api.resource(keys.API_VERSION, "queues")
        cluster.call(
            cluster.api.patch,
            queues,
            {"spec": {"limit": {"cpu": "8"}}},
            namespace=None,
            name="q",
            patch_type="application/merge-patch+json",
        )
        await stack.eventually(
            lambda: all(_bound(stack.get_pod(cluster, f"train-{i}")) for i in range(8)),
            what="the gang bound",
        )
        changes = cluster.call(
            cluster.api.storage.changes_since, start, key=("", "pods"), namespace="default"
        )
    pinned_at, ungated_at = {}, {}
    for index, change in enumerate(changes):
        obj = change.object
        name = obj["metadata"]["name"]
        if keys.ADMITTED_NODE_ANNOTATION in (obj["metadata"].get("annotations") or {}):
            pinned_at.setdefault(name, index)
        if not obj["spec"].get("schedulingGates"):
            ungated_at.setdefault(name, index)
    assert len(pinned_at) == len(ungated_at) == 8
    assert max(pinned_at.values()) < min(ungated_at.values())  # all pinned before any released
    for i in range(8):
        obj = stack.get_pod(cluster, f"train-{i}")
        assert obj is not None
        assert (
            obj["spec"]["nodeName"] == obj["metadata"]["annotations"][keys.ADMITTED_NODE_ANNOTATION]
        )
        assert kube_scheduler.bound[f"train-{i}"] == obj["spec"]["nodeName"]


async def test_a_gated_gang_that_cannot_fit_waits_parked(cluster: testing.RunningEmulator) -> None:
    stack.create(cluster, keys.API_VERSION, "queues", _queue("q", cpu_limit="6"))
    stack.create(cluster, keys.API_VERSION, "podgroups", _group("train", min_member=8, queue="q"))
    for i in range(8):
        stack.create(
            cluster, "v1", "pods", stack.pod(f"train-{i}", labels={keys.POD_GROUP_LABEL: "train"})
        )
    async with stack.stand_in(cluster), stack.BerthStack(cluster) as berth:
        await stack.eventually(
            lambda: berth.group_reason("default/train") is not None, what="a reason"
        )
        reason = berth.group_reason("default/train")

        def idle() -> bool:
            last = berth.results[-10:]
            return len(last) == 10 and all(not r.decisions for r in last)

        await stack.eventually(idle, what="cycles that decide nothing")
        assert berth.group_reason("default/train") == reason
        # Something unrelated changes: a cycle runs, and the parked gang is not tried again.
        seen = len(berth.results)
        stack.create(cluster, keys.API_VERSION, "podgroups", _group("other", min_member=1))

        def ran() -> bool:
            last = berth.source.last
            return last is not None and "default/other" in last.pod_groups

        await stack.eventually(ran, what="a cycle seeing the other group")
        await stack.eventually(lambda: len(berth.results) > seen + 5, what="more cycles")
        tried = [
            d
            for r in berth.results[seen:]
            for d in r.of_kind(decisions.Unschedulable)
            if d.key == "default/train"
        ]
        assert tried == []
        assert berth.group_reason("default/train") == reason
        assert all(stack.gates(o) == [keys.ADMISSION_GATE] for o in stack.all_pods(cluster))


def _events(emulator: testing.RunningEmulator, reason: str) -> list[dict[str, typing.Any]]:
    found = emulator.call(emulator.api.storage.list, ("", "events"), "default")
    return [e for e in found if e.get("reason") == reason]


async def test_plain_pods_are_never_berths(cluster: testing.RunningEmulator) -> None:
    stack.create(cluster, "v1", "pods", stack.pod("web", gated=False, labels={"app": "web"}))
    stack.create(cluster, "v1", "pods", stack.pod("stray", labels={"app": "stray"}))
    async with stack.stand_in(cluster), stack.BerthStack(cluster) as berth:
        await stack.eventually(
            lambda: (
                _bound(stack.get_pod(cluster, "web")) and _bound(stack.get_pod(cluster, "stray"))
            ),
            what="both placed by kube-scheduler",
        )
        await stack.eventually(lambda: bool(_events(cluster, "NotBerths")), what="the Event")
        assert not berth.admission.allocations
    for name in ("web", "stray"):
        obj = stack.get_pod(cluster, name)
        assert obj is not None and stack.gates(obj) == []
        assert keys.ADMITTED_NODE_ANNOTATION not in (obj["metadata"].get("annotations") or {})
        assert "affinity" not in obj["spec"]
    (event,) = _events(cluster, "NotBerths")
    assert event["involvedObject"]["name"] == "stray"
    assert "neither a PodGroup" in event["message"]


async def test_failed_bind_is_rejected_recreated_gated_and_retried(
    cluster: testing.RunningEmulator,
) -> None:
    stack.create(cluster, keys.API_VERSION, "podgroups", _group("pair", min_member=2))
    for i in range(2):
        stack.create(
            cluster, "v1", "pods", stack.pod(f"pair-{i}", labels={keys.POD_GROUP_LABEL: "pair"})
        )
    first_uid = stack.get_pod(cluster, "pair-1")["metadata"]["uid"]  # type: ignore[index]
    cluster.faults.add(
        faults.Fault("POST", "/api/v1/namespaces/default/pods/pair-1/binding", status=500)
    )
    # The bind timeout rejects pair-1 (its binding fails); pair-0 must bind within it, and the
    # stand-in may take seconds under load: a timeout of 0.5 s made the test a race.
    async with stack.stand_in(cluster), stack.BerthStack(cluster, bind_timeout=5) as berth:
        await stack.eventually(
            lambda: berth.admission.rejected >= 1, timeout=60, what="the rejection"
        )
        await stack.eventually(
            lambda: any(
                "rejected" in (r.group_reasons.get("default/pair") or "") for r in berth.results
            ),
            what="the group's reason",
        )
        # Admitted again after its backoff (5 s after a first refusal), bound by the stand-in.
        await stack.eventually(
            lambda: _bound(stack.get_pod(cluster, "pair-1")),
            timeout=60,
            what="pair-1 admitted again",
        )
        await stack.eventually(
            lambda: bool(_events(cluster, "AdmissionRejected")), what="the Events"
        )
    again = stack.get_pod(cluster, "pair-1")
    assert again is not None and again["metadata"]["uid"] != first_uid
    assert (
        again["spec"]["nodeName"] == again["metadata"]["annotations"][keys.ADMITTED_NODE_ANNOTATION]
    )
    assert _bound(stack.get_pod(cluster, "pair-0"))
    reasons = [r.group_reasons.get("default/pair") or "" for r in berth.results]
    assert any(
        "admission of pod default/pair-1 on" in r and "not bound within" in r for r in reasons
    )
    kinds = {e["involvedObject"]["kind"] for e in _events(cluster, "AdmissionRejected")}
    assert kinds == {"Pod", "PodGroup"}


async def test_unschedulable_report_rejects_at_once(cluster: testing.RunningEmulator) -> None:
    stack.create(
        cluster, "v1", "pods", stack.pod("solo", cpu="3", labels={keys.QUEUE_LABEL: "default"})
    )
    async with (
        stack.stand_in(cluster) as kube_scheduler,
        stack.BerthStack(cluster, bind_timeout=30) as berth,
    ):
        kube_scheduler.paused = True
        await stack.eventually(lambda: bool(berth.admission.allocations), what="an admission")
        (allocation,) = berth.admission.allocations.values()
        await stack.eventually(
            lambda: not stack.gates(stack.get_pod(cluster, "solo") or {"spec": {}}),
            what="the gate removed",
        )
        # Somebody else's pod takes the room first: the pinned pod cannot go there any more.
        intruder = stack.pod("intruder", cpu="2", gated=False)
        intruder["spec"]["nodeName"] = allocation.node
        stack.create(cluster, "v1", "pods", intruder)
        await stack.eventually(lambda: kube_scheduler.knows("intruder"), what="the intruder seen")
        kube_scheduler.resume()
        await stack.eventually(lambda: berth.admission.rejected == 1, timeout=10, what="rejection")
        await stack.eventually(lambda: _bound(stack.get_pod(cluster, "solo")), what="placed again")
    solo = stack.get_pod(cluster, "solo")
    assert solo is not None and solo["spec"]["nodeName"] != allocation.node


async def test_reservation_owner_is_pinned_to_the_reserved_node(
    cluster: testing.RunningEmulator,
) -> None:
    stack.create(
        cluster,
        keys.API_VERSION,
        "reservations",
        {
            "apiVersion": keys.API_VERSION,
            "kind": "Reservation",
            "metadata": {"name": "hold"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "c", "image": "x", "resources": {"requests": {"cpu": "3"}}}
                        ]
                    }
                },
                "owners": [{"labelSelector": {"matchLabels": {"app": "train"}}}],
            },
        },
    )
    async with stack.stand_in(cluster), stack.BerthStack(cluster):
        resource = cluster.api.resource(keys.API_VERSION, "reservations")

        def reserved() -> str | None:
            got = cluster.call(cluster.api.get, resource, namespace="default", name="hold")
            return typing.cast(str | None, (got.get("status") or {}).get("nodeName"))

        await stack.eventually(lambda: reserved() is not None, what="the reservation placed")
        node = reserved()
        labels = {"app": "train", keys.QUEUE_LABEL: "default"}
        stack.create(cluster, "v1", "pods", stack.pod("owner", cpu="3", labels=labels))
        await stack.eventually(lambda: _bound(stack.get_pod(cluster, "owner")), what="owner bound")
    owner = stack.get_pod(cluster, "owner")
    assert owner is not None
    assert owner["metadata"]["annotations"][keys.ADMITTED_NODE_ANNOTATION] == node
    assert owner["spec"]["nodeName"] == node


async def test_why_pending_is_the_same_in_both_modes(cluster: testing.RunningEmulator) -> None:
    for name, gated in (("sched", False), ("gated", True)):
        stack.create(cluster, keys.API_VERSION, "podgroups", _group(name, min_member=3))
        for i in range(3):
            stack.create(
                cluster,
                "v1",
                "pods",
                stack.pod(
                    f"{name}-{i}",
                    cpu="5",  # bigger than any node
                    labels={keys.POD_GROUP_LABEL: name},
                    gated=gated,
                    scheduler=None if gated else stack.SCHEDULER_NAME,
                ),
            )
    async with stack.BerthStack(cluster) as berth:
        await stack.eventually(
            lambda: (
                berth.group_reason("default/sched") is not None
                and berth.group_reason("default/gated") is not None
            ),
            what="both reasons",
        )
        scheduled, admitted = (
            berth.group_reason("default/sched"),
            berth.group_reason("default/gated"),
        )

        def marked() -> bool:
            found = [stack.get_pod(cluster, f"sched-{i}") for i in range(3)]
            return all(
                any(
                    c.get("reason") == "Unschedulable"
                    for c in (obj or {}).get("status", {}).get("conditions") or []
                )
                for obj in found
            )

        # The scheduler-mode gang is short of nodes only: autoscalers may act on its pods.
        await stack.eventually(marked, what="the sched gang marked Unschedulable")
    assert scheduled is not None and "Insufficient cpu" in scheduled
    assert admitted == scheduled.replace("sched-", "gated-")
    for i in range(3):
        obj = stack.get_pod(cluster, f"gated-{i}")
        assert obj is not None
        conditions = obj.get("status", {}).get("conditions") or []
        assert not any(c.get("reason") == "Unschedulable" for c in conditions)


async def test_a_gate_removed_by_someone_else_is_noticed_with_a_reason(
    cluster: testing.RunningEmulator,
) -> None:
    # A queue too small for the gang: Berth keeps it gated; a user removes a pod's gate.
    stack.create(cluster, keys.API_VERSION, "queues", _queue("q", cpu_limit="1"))
    stack.create(cluster, keys.API_VERSION, "podgroups", _group("big", min_member=4, queue="q"))
    for i in range(4):
        stack.create(
            cluster, "v1", "pods", stack.pod(f"big-{i}", labels={keys.POD_GROUP_LABEL: "big"})
        )
    async with stack.stand_in(cluster), stack.BerthStack(cluster) as berth:
        await stack.eventually(
            lambda: berth.group_reason("default/big") is not None, what="a reason"
        )
        cluster.call(
            cluster.api.patch,
            cluster.api.resource("v1", "pods"),
            [{"op": "remove", "path": "/spec/schedulingGates"}],
            namespace="default",
            name="big-0",
            patch_type="application/json-patch+json",
        )
        await stack.eventually(
            lambda: bool(_events(cluster, "AdmissionBypassed")), what="the Event"
        )
        assert berth.admission.gate_bypasses == 1
    (event,) = _events(cluster, "AdmissionBypassed")
    assert event["involvedObject"]["name"] == "big-0"
    assert "removed by someone other than Berth" in event["message"]
    for i in range(1, 4):  # the rest of the gang stays held
        obj = stack.get_pod(cluster, f"big-{i}")
        assert obj is not None and stack.gates(obj) == [keys.ADMISSION_GATE]


async def test_a_forged_admitted_node_marker_is_charged_nowhere_and_said(
    cluster: testing.RunningEmulator,
) -> None:
    # A queue of 1 cpu: "first" runs in it, "forger" waits at the limit; its owner removes the
    # gate and writes Berth's marker, as if Berth had admitted it.
    stack.create(cluster, keys.API_VERSION, "queues", _queue("q", cpu_limit="1"))
    on_q = {keys.QUEUE_LABEL: "q"}
    stack.create(cluster, "v1", "pods", stack.pod("first", labels=on_q))
    async with stack.stand_in(cluster), stack.BerthStack(cluster) as berth:
        await stack.eventually(lambda: _bound(stack.get_pod(cluster, "first")), what="first")
        stack.create(cluster, "v1", "pods", stack.pod("forger", labels=on_q))
        await stack.eventually(
            lambda: "default/forger" in berth.admission.not_admitted.told,
            what="forger held at the limit",
        )
        node = stack.get_pod(cluster, "first")["spec"]["nodeName"]  # type: ignore[index]
        cluster.call(
            cluster.api.patch,
            cluster.api.resource("v1", "pods"),
            [
                {"op": "remove", "path": "/spec/schedulingGates"},
                {
                    "op": "add",
                    "path": "/metadata/annotations",
                    "value": {keys.ADMITTED_NODE_ANNOTATION: node},
                },
            ],
            namespace="default",
            name="forger",
            patch_type="application/json-patch+json",
        )
        await stack.eventually(lambda: _bound(stack.get_pod(cluster, "forger")), what="forger")
        await stack.eventually(
            lambda: bool(_events(cluster, "AdmissionBypassed")), what="the Event"
        )
        assert berth.admission.forged_markers == 1 and berth.admission.gate_bypasses == 0
        usage = berth.cache.snapshot(0.0).queue_usage["q"]
        assert usage.allocated.get("cpu") == 1000  # "first" only
        # The queue's tenants still get their limit: "first" ends, "next" is admitted.
        stack.create(cluster, "v1", "pods", stack.pod("next", labels=on_q))
        cluster.call(
            cluster.api.delete,
            cluster.api.resource("v1", "pods"),
            namespace="default",
            name="first",
        )
        await stack.eventually(lambda: _bound(stack.get_pod(cluster, "next")), what="next")
    (event,) = _events(cluster, "AdmissionBypassed")
    assert event["involvedObject"]["name"] == "forger"
    assert "was not written by Berth" in event["message"]
    assert "charged to no queue" in event["message"]
