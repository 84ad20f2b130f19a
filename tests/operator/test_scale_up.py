"""What the autoscaler did for a waiting gang, on the PodGroup, through the whole operator.

The operator runs in the test's loop on a virtual clock an hour behind the wall clock, the
emulator on its thread with simulated nodes, and Karpenter's NodePools are served (an
autoscaler is expected); the test writes the Events Karpenter would. Everything is read with
the real ``kubectl``. We test these aspects (docs/autoscaling.md, "When the autoscaler
cannot"):

- a gang too big for the nodes reads ``Unschedulable``; once Karpenter's Warning
  ``FailedScheduling`` Event is on one member, the PodGroup's ``ScaleUp`` condition is
  ``False``, ``AutoscalerCannotFit``, quoting it; the ``Scheduled`` condition keeps its reason
  and carries the words; a Warning Event on the PodGroup says it once;
- a gang nobody acts on: after ``answerTimeout`` (virtual) its ``ScaleUp`` condition is
  ``NoAutoscalerActed``; nothing is asked of the autoscaler for either gang (no PodTemplate,
  no request);
- a gang Karpenter cannot fit leaves its list: every member's ``PodScheduled`` reason becomes
  ``AutoscalerCannotFit`` (which no autoscaler reads), its ``FailedScheduling`` Event says
  why and until when; five (virtual) minutes later the members read ``Unschedulable`` again
  and stay so on Karpenter's old word; Karpenter's new word holds them again, for ten;
- admission mode, a gated gang Karpenter can only partly fit (the test writes Karpenter
  v1.15's ``Provisioning`` conditions on its two buffers: one shape fits, the other stays
  ``False``): ``answerTimeout`` (virtual) later both buffers are gone, the PodGroup's
  ``ScaleUp`` condition is ``AutoscalerCannotFit`` saying until when, its pods stay gated and
  unbound; five (virtual) minutes later it asks again with new buffers.
"""

from __future__ import annotations

import asyncio
import json
import time
import typing

import pytest

from berth.emulator import testing
from berth.status import conditions
from berth.util import clocks
from tests.kube import conftest
from tests.kube.test_capacity_requests import serve, serve_karpenter
from tests.operator import running
from tests.operator.running import kubectl

pytestmark = pytest.mark.slow

Obj = dict[str, typing.Any]


def gang(name: str) -> str:
    pods = "".join(
        f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}-{i}, labels: {{scheduling.berth.io/pod-group: {name}}}}}
spec:
  schedulerName: berth-scheduler
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "16"}}}}}}]
"""
        for i in range(2)
    )
    return f"""
apiVersion: scheduling.berth.io/v1alpha1
kind: PodGroup
metadata: {{name: {name}}}
spec: {{minMember: 2, queue: default}}
{pods}"""


async def condition(emulator: testing.RunningEmulator, group: str, kind: str) -> Obj | None:
    found = json.loads(await kubectl(emulator, "get", "podgroup", group, "-o", "json"))
    return typing.cast("Obj | None", conditions.find(found.get("status") or {}, kind))


async def wait_condition(
    emulator: testing.RunningEmulator, group: str, kind: str, reason: str
) -> Obj:
    seen: list[Obj | None] = [None]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        seen[0] = await condition(emulator, group, kind)
        if seen[0] is not None and seen[0].get("reason") == reason:
            return seen[0]
        await asyncio.sleep(0.2)
    raise AssertionError(f"{group}'s {kind} condition never read {reason}: {seen[0]}")


FAILED = (
    'Failed to schedule pod, incompatible with nodepool "autoscaled", daemonset overhead='
    '{"pods":"0"}, no instance type has enough resources'
)


def karpenter_failed(emulator: testing.RunningEmulator, pod: Obj, name: str, *, at: float) -> None:
    """Write the Warning ``FailedScheduling`` Event Karpenter writes on a pod it cannot fit."""
    stamp = conditions.timestamp(at)
    conftest.create(
        emulator,
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name},
            "involvedObject": {
                "kind": "Pod",
                "namespace": "default",
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
                "apiVersion": "v1",
            },
            "reason": "FailedScheduling",
            "message": FAILED,
            "type": "Warning",
            "source": {"component": "karpenter"},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        },
        plural="events",
    )


async def pod_scheduled(emulator: testing.RunningEmulator, name: str) -> Obj | None:
    """The pod's PodScheduled condition, or None before the scheduler first wrote one."""
    pod = json.loads(await kubectl(emulator, "get", "pod", name, "-o", "json"))
    found = [c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    return typing.cast("Obj", found[0]) if found else None


async def wait_pods_read(
    emulator: testing.RunningEmulator, names: list[str], reason: str
) -> list[Obj]:
    deadline = time.monotonic() + 60
    seen: list[Obj | None] = []
    while time.monotonic() < deadline:
        # A pod the scheduler has not yet looked at has no condition: wait for it too.
        seen = [await pod_scheduled(emulator, name) for name in names]
        read = [c for c in seen if c is not None]
        if len(read) == len(names) and {c["reason"] for c in read} == {reason}:
            return read
        await asyncio.sleep(0.2)
    raise AssertionError(f"the pods' PodScheduled never all read {reason}: {seen}")


async def test_the_group_says_what_karpenter_could_not_do_and_that_nobody_acted(
    emulator: testing.RunningEmulator,
) -> None:
    emulator.start_kubelets(["2x cpu=4,memory=8Gi"], speedup=30)
    serve_karpenter(emulator)
    clock = clocks.VirtualClock(time.time() - 3600)
    async with running.operator_on(emulator, clock=clock):
        await kubectl(emulator, "apply", "-f", "-", input=gang("big"))
        await wait_condition(emulator, "big", "Scheduled", "ClusterTooSmall")
        pod = json.loads(await kubectl(emulator, "get", "pod", "big-0", "-o", "json"))
        (scheduled,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert scheduled["reason"] == "Unschedulable"  # the ask an autoscaler reads
        karpenter_failed(emulator, pod, "big-0.karpenter", at=clock.now())
        scale_up = await wait_condition(emulator, "big", "ScaleUp", "AutoscalerCannotFit")
        assert scale_up["status"] == "False"
        assert scale_up["message"].startswith(
            "Karpenter cannot place 1 of its 2 waiting pods on any node it could add, and the "
            f"gang is placed whole or not at all (pod default/big-0: {FAILED}); its pods wait "
            "as AutoscalerCannotFit, off the autoscalers' list, until "
        )
        said = await condition(emulator, "big", "Scheduled")
        assert said is not None and said["reason"] == "ClusterTooSmall"
        assert said["message"].endswith(scale_up["message"])
        listed = json.loads(
            await kubectl(
                emulator,
                "get",
                "events",
                "--field-selector",
                "involvedObject.kind=PodGroup,reason=AutoscalerCannotFit",
                "-o",
                "json",
            )
        )
        (event,) = listed["items"]
        assert (event["type"], event["involvedObject"]["name"]) == ("Warning", "big")

        # A second gang that no autoscaler acts on.
        await kubectl(emulator, "apply", "-f", "-", input=gang("idle"))
        await wait_condition(emulator, "idle", "Scheduled", "ClusterTooSmall")
        assert await condition(emulator, "idle", "ScaleUp") is None
        clock.advance(121)
        absent = await wait_condition(emulator, "idle", "ScaleUp", "NoAutoscalerActed")
        assert absent["status"] == "False"
        assert absent["message"].startswith(
            "no autoscaler has acted on its 2 Unschedulable pods in 120s"
        )
        # Nothing asked of the autoscaler for either gang.
        assert (
            json.loads(await kubectl(emulator, "get", "podtemplates", "-o", "json"))["items"] == []
        )


async def test_a_gang_karpenter_cannot_fit_leaves_its_list_and_is_shown_again_later(
    emulator: testing.RunningEmulator,
) -> None:
    emulator.start_kubelets(["2x cpu=4,memory=8Gi"], speedup=30)
    serve_karpenter(emulator)
    # The clock starts at the wall clock's time (the API server stamps an Event's creation
    # with it), so that Karpenter's words written before the hold read as old once the virtual
    # clock has passed its end.
    clock = clocks.VirtualClock(time.time())
    members = ["big-0", "big-1"]
    async with running.operator_on(emulator, clock=clock):
        await kubectl(emulator, "apply", "-f", "-", input=gang("big"))
        await wait_pods_read(emulator, members, "Unschedulable")
        pod = json.loads(await kubectl(emulator, "get", "pod", "big-0", "-o", "json"))
        karpenter_failed(emulator, pod, "big-0.karpenter", at=clock.now())
        held = await wait_pods_read(emulator, members, "AutoscalerCannotFit")
        message = held[0]["message"]
        assert {c["message"] for c in held} == {message}
        assert message.startswith(
            "pod group default/big: Karpenter cannot place 1 of its 2 waiting pods"
        )
        assert "its pods are kept off the autoscalers' list until" in message
        assert "(backoff 5m0s)" in message
        # Each member's Event says why.
        deadline = time.monotonic() + 60
        said: dict[str, str] = {}
        while time.monotonic() < deadline and set(said) != set(members):
            listed = json.loads(
                await kubectl(
                    emulator,
                    "get",
                    "events",
                    "--field-selector",
                    "involvedObject.kind=Pod,reason=FailedScheduling",
                    "-o",
                    "json",
                )
            )
            said = {
                e["involvedObject"]["name"]: e["message"]
                for e in listed["items"]
                if e["message"] == message
            }
            await asyncio.sleep(0.2)
        assert set(said) == set(members)

        # The hold ends: the pods are shown to the autoscalers again...
        clock.advance(301)
        await wait_pods_read(emulator, members, "Unschedulable")
        # ... and Karpenter's old word does not hold them again.
        clock.advance(30)
        await asyncio.sleep(7)  # more than a pass of the capacity requests (5 s)
        now_read = [await pod_scheduled(emulator, n) for n in members]
        assert [c and c["reason"] for c in now_read] == ["Unschedulable"] * len(members)
        # Karpenter says it again: held again, twice as long.
        karpenter_failed(emulator, pod, "big-0.karpenter-2", at=clock.now())
        again = await wait_pods_read(emulator, members, "AutoscalerCannotFit")
        assert "(backoff 10m0s)" in again[0]["message"]


def gated_mixed_gang(name: str) -> str:
    """Two members of 8 cpu and one of 64 (two pod shapes), held by admission's gate."""
    pods = "".join(
        f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}-{i}, labels: {{scheduling.berth.io/pod-group: {name}}}}}
spec:
  schedulingGates: [{{name: scheduling.berth.io/admission}}]
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""
        for i, cpu in enumerate((8, 8, 64))
    )
    return f"""
apiVersion: scheduling.berth.io/v1alpha1
kind: PodGroup
metadata: {{name: {name}}}
spec: {{minMember: 3, queue: default}}
{pods}"""


async def buffers(emulator: testing.RunningEmulator) -> list[Obj]:
    listed = json.loads(await kubectl(emulator, "get", "capacitybuffers", "-o", "json"))
    return sorted(listed["items"], key=lambda b: b["metadata"]["name"])


async def wait_buffers(emulator: testing.RunningEmulator, names: list[str]) -> list[Obj]:
    deadline = time.monotonic() + 60
    seen: list[Obj] = []
    while time.monotonic() < deadline:
        seen = await buffers(emulator)
        if [b["metadata"]["name"] for b in seen] == names:
            return seen
        await asyncio.sleep(0.2)
    raise AssertionError(f"the CapacityBuffers never were {names}: {seen}")


def karpenter_provisioning(
    emulator: testing.RunningEmulator, name: str, status: str, reason: str, message: str
) -> None:
    """Write the conditions Karpenter v1.15 writes on a buffer after a provisioning round."""
    api = emulator.api
    resource = emulator.call(api.resource, "autoscaling.x-k8s.io/v1beta1", "capacitybuffers")
    stamp = conditions.timestamp(time.time())
    said = [
        {"type": "ReadyForProvisioning", "status": "True", "reason": "Resolved"},
        {"type": "Provisioning", "status": status, "reason": reason, "message": message},
    ]
    emulator.call(
        api.patch,
        resource,
        {"status": {"conditions": [{**c, "lastTransitionTime": stamp} for c in said]}},
        namespace="default",
        name=name,
        patch_type="application/merge-patch+json",
        subresource="status",
    )


async def test_a_gated_gang_karpenter_can_only_partly_fit_stops_asking_for_a_backoff(
    emulator: testing.RunningEmulator,
) -> None:
    emulator.start_kubelets(["2x cpu=4,memory=8Gi"], speedup=30)
    serve(emulator, "CapacityBuffer")
    clock = clocks.VirtualClock(time.time())
    members = ["mixed-0", "mixed-1", "mixed-2"]
    async with running.operator_on(emulator, clock=clock):
        await kubectl(emulator, "apply", "-f", "-", input=gated_mixed_gang("mixed"))
        made = await wait_buffers(emulator, ["berth-pg-mixed-1-0", "berth-pg-mixed-1-1"])
        assert [b["spec"]["replicas"] for b in made] == [2, 1]
        karpenter_provisioning(
            emulator, "berth-pg-mixed-1-0", "True", "FitsExistingCapacity", "All 2 fit"
        )
        karpenter_provisioning(
            emulator,
            "berth-pg-mixed-1-1",
            "False",
            "RequiresNewCapacity",
            "0/1 virtual pods required new capacity, 1 failed",
        )
        await wait_condition(emulator, "mixed", "ScaleUp", "CapacityRequestPending")
        clock.advance(121)
        await wait_buffers(emulator, [])
        held = await wait_condition(emulator, "mixed", "ScaleUp", "AutoscalerCannotFit")
        assert held["status"] == "False"
        assert held["message"].startswith(
            "the autoscaler has room for 2 of its 3 waiting pods but, in 120s, none for 1 more, "
            "and the gang is placed whole or not at all (CapacityBuffer "
            "default/berth-pg-mixed-1-1: Provisioning=False (RequiresNewCapacity: "
        )
        withdrawn = "; it asks the autoscaler for nothing (its requests withdrawn), until "
        assert withdrawn in held["message"]
        for name in members:  # still held by the gate: nothing admitted, bound or evicted
            pod = json.loads(await kubectl(emulator, "get", "pod", name, "-o", "json"))
            assert pod["spec"].get("schedulingGates") and not pod["spec"].get("nodeName")
        # The hold ends: the gang asks again, with the next attempt's buffers.
        clock.advance(301)
        await wait_buffers(emulator, ["berth-pg-mixed-2-0", "berth-pg-mixed-2-1"])
