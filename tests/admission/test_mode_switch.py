"""Restarting Berth with the other ``--mode`` loses no pod.

The pods are what differ between the modes (gated by the webhook in admission mode, naming
Berth's scheduler in scheduler mode); Berth's leader wiring handles both kinds in either mode
(``tests/admission/stack.py``), so a restart with the other flag finds every pod it must care
for. The tests' stand-in for kube-scheduler binds admitted pods. We test these aspects:
- pods kube-scheduler bound under admission mode stay counted on their nodes after the switch;
- a pod admitted (pinned, ungated) but not yet bound when Berth stopped is adopted: the new
  leader counts it on the node it was pinned to, and kube-scheduler binds it there;
- gated pods left waiting are admitted by the new leader;
- pods created for scheduler mode in between are bound by Berth itself;
- nothing over-commits a node (no pod fails kubelet admission) and no pod is lost or doubled.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import keys
from berth.emulator import testing
from tests.admission import stack

pytestmark = pytest.mark.timeout(60)


def _bound(obj: dict[str, typing.Any] | None) -> bool:
    return obj is not None and bool(obj["spec"].get("nodeName"))


async def test_restart_with_the_other_mode_loses_no_pod(emulator: testing.RunningEmulator) -> None:
    stack.install_crds(emulator)
    emulator.start_kubelets(["4x cpu=4,memory=16Gi"], speedup=100, start_delay=0)
    stack.create(
        emulator,
        keys.API_VERSION,
        "queues",
        {
            "apiVersion": keys.API_VERSION,
            "kind": "Queue",
            "metadata": {"name": "hold"},
            "spec": {"limit": {"cpu": "0"}},
        },
    )
    stack.create(
        emulator,
        keys.API_VERSION,
        "podgroups",
        {
            "apiVersion": keys.API_VERSION,
            "kind": "PodGroup",
            "metadata": {"name": "a"},
            "spec": {"minMember": 4},
        },
    )
    for i in range(4):
        stack.create(
            emulator, "v1", "pods", stack.pod(f"a-{i}", cpu="2", labels={keys.POD_GROUP_LABEL: "a"})
        )
    for i in range(2):
        labels = {keys.QUEUE_LABEL: "hold"}
        stack.create(emulator, "v1", "pods", stack.pod(f"late-{i}", cpu="1", labels=labels))

    async with stack.stand_in(emulator) as kube_scheduler:
        # Admission mode: the gang is admitted and bound by kube-scheduler.
        async with stack.BerthStack(emulator):
            await stack.eventually(
                lambda: all(_bound(stack.get_pod(emulator, f"a-{i}")) for i in range(4)),
                what="gang a bound",
            )
            kube_scheduler.paused = True
            labels = {keys.QUEUE_LABEL: "default"}
            stack.create(emulator, "v1", "pods", stack.pod("inflight", cpu="2", labels=labels))
            await stack.eventually(
                lambda: not stack.gates(stack.get_pod(emulator, "inflight") or {"spec": {"x": 1}}),
                what="inflight admitted",
            )
            assert "inflight" not in kube_scheduler.bound
        pinned = stack.get_pod(emulator, "inflight")
        assert pinned is not None and not _bound(pinned)
        node = pinned["metadata"]["annotations"][keys.ADMITTED_NODE_ANNOTATION]

        # Restart in scheduler mode: pods naming Berth's scheduler arrive meanwhile.
        for i in range(2):
            body = stack.pod(f"s-{i}", cpu="2", gated=False, scheduler=stack.SCHEDULER_NAME)
            body["metadata"]["labels"] = {keys.QUEUE_LABEL: "default"}
            stack.create(emulator, "v1", "pods", body)
        async with stack.BerthStack(emulator, bind_timeout=30) as second:
            await stack.eventually(
                lambda: "default/inflight" in second.admission.allocations, what="adoption"
            )
            await stack.eventually(
                lambda: all(_bound(stack.get_pod(emulator, f"s-{i}")) for i in range(2)),
                what="Berth's own pods bound",
            )
            snapshot = second.source.last
            assert snapshot is not None
            assert "default/inflight" in snapshot.node_infos[node].pods  # counted where pinned
            placed = {
                p.key
                for n in snapshot.node_infos.values()
                for p in map(snapshot.pods.get, n.pods)
                if p
            }
            assert {f"default/a-{i}" for i in range(4)} <= placed  # kube-scheduler's bindings
            queues = emulator.api.resource(keys.API_VERSION, "queues")
            emulator.call(
                emulator.api.patch,
                queues,
                {"spec": {"limit": {"cpu": "2"}}},
                namespace=None,
                name="hold",
                patch_type="application/merge-patch+json",
            )
            kube_scheduler.resume()
            await stack.eventually(
                lambda: all(_bound(p) for p in stack.all_pods(emulator)), what="everything bound"
            )
            assert second.admission.rejected == 0

    names = sorted(p["metadata"]["name"] for p in stack.all_pods(emulator))
    assert names == sorted(
        [*(f"a-{i}" for i in range(4)), "inflight", "late-0", "late-1", "s-0", "s-1"]
    )
    inflight = stack.get_pod(emulator, "inflight")
    assert inflight is not None and inflight["spec"]["nodeName"] == node
    await stack.eventually(
        lambda: all(
            p.get("status", {}).get("phase") == "Running" for p in stack.all_pods(emulator)
        ),
        what="every pod running (a kubelet would fail an over-committed one)",
    )
