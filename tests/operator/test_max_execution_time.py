"""Max run time through the whole operator (issue #33): a gang past its
``maximumExecutionTimeSeconds`` is evicted, and failed as it asks, with a reason and Events.

The operator runs in the test's loop and the emulator on its thread, with simulated nodes,
both on one virtual clock (so the kubelets' ``startTime`` and the scheduler's ``now`` agree;
time moves only when the test advances it; the operator leads without a Lease, which a jump
of the clock would expire); everything is read with
the real ``kubectl``, and every wait is on a condition.

We test these aspects:

- a gang of two running pods whose PodGroup allows 120 s and asks to fail: once the clock
  passes 120 s after both started, both pods are evicted with Events of reason
  ``MaximumExecutionTimeExceeded``; the PodGroup's phase is ``Failed`` and its ``Scheduled``
  condition's reason ``MaximumExecutionTimeExceeded``, its message saying the limit;
- a pod made for the failed group afterwards is never placed: it waits, saying the group
  failed past its limit;
- a gang with no limit of its own in a queue allowing 120 s (``Requeue``, the default): past
  it, its pods are evicted with those Events, the group gets a Warning Event saying it waits
  to run again, is not marked failed, and new members are placed again.
"""

from __future__ import annotations

import collections.abc
import json
import pathlib
import time
import typing

import pytest

from berth.emulator import testing
from berth.util import clocks
from tests.kube import conftest
from tests.operator import running
from tests.operator.running import kubectl

pytestmark = pytest.mark.slow

GROUP = """
apiVersion: scheduling.berth.io/v1alpha1
kind: PodGroup
metadata: {name: capped}
spec: {minMember: 2, maximumExecutionTimeSeconds: 120, onMaximumExecutionTime: Fail}
"""
QUEUED = """
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: hourly}
spec: {maximumExecutionTimeSeconds: 120}
---
apiVersion: scheduling.berth.io/v1alpha1
kind: PodGroup
metadata: {name: again}
spec: {minMember: 2, queue: hourly}
"""


def member(name: str, *, group: str = "capped") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{scheduling.berth.io/pod-group: {group}}}
spec:
  schedulerName: berth-scheduler
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def stored(emulator: testing.RunningEmulator, plural: str, name: str) -> dict[str, typing.Any]:
    api = emulator.api
    group, version = ("scheduling.berth.io", "v1alpha1") if plural == "podgroups" else ("", "v1")
    resource = emulator.call(api.resource, f"{group}/{version}".lstrip("/"), plural)
    return emulator.call(api.storage.get, resource.key, "default", name) or {}


def events(emulator: testing.RunningEmulator, *, name: str) -> list[dict[str, typing.Any]]:
    api = emulator.api
    resource = emulator.call(api.resource, "v1", "events")
    return [
        e
        for e in emulator.call(api.storage.list, resource.key)
        if e["involvedObject"].get("name") == name
    ]


def phase(emulator: testing.RunningEmulator, plural: str, name: str) -> str | None:
    return (stored(emulator, plural, name).get("status") or {}).get("phase")


def scheduled(emulator: testing.RunningEmulator) -> dict[str, typing.Any]:
    status = stored(emulator, "podgroups", "capped").get("status") or {}
    return next((c for c in status.get("conditions") or () if c.get("type") == "Scheduled"), {})


@pytest.fixture
def clock() -> clocks.VirtualClock:
    return clocks.VirtualClock(time.time())


@pytest.fixture
def emulator(
    tmp_path: pathlib.Path, clock: clocks.VirtualClock
) -> collections.abc.Iterator[testing.RunningEmulator]:
    """An emulator on the test's clock: its kubelets' ``startTime`` and the scheduler's
    ``now`` are read from one clock, which moves only when the test advances it."""
    running_emulator = testing.start_emulator(tmp_path, clock=clock)
    try:
        yield running_emulator
    finally:
        running_emulator.threaded.stop()


async def test_a_gang_past_its_limit_is_evicted_and_failed_with_events(
    emulator: testing.RunningEmulator, clock: clocks.VirtualClock
) -> None:
    emulator.start_kubelets(["2x cpu=4,memory=8Gi"], speedup=30)
    async with running.operator_on(emulator, clock=clock, elect=False):
        await kubectl(emulator, "apply", "-f", "-", input=GROUP)
        for name in ("capped-0", "capped-1"):
            await kubectl(emulator, "apply", "-f", "-", input=member(name))
        await conftest.until(
            lambda: all(phase(emulator, "pods", n) == "Running" for n in ("capped-0", "capped-1")),
            timeout=60,
        )
        await conftest.until(
            lambda: phase(emulator, "podgroups", "capped") == "Running", timeout=60
        )

        assert scheduled(emulator).get("status") == "True"

        clock.advance(150)  # 150 s after both started: past the 120 s limit
        await conftest.until(lambda: phase(emulator, "podgroups", "capped") == "Failed", timeout=60)
        condition = scheduled(emulator)
        assert condition["reason"] == "MaximumExecutionTimeExceeded", condition
        assert "ran past its maximumExecutionTimeSeconds of 120s" in condition["message"]
        assert condition["message"].endswith(": failed"), condition["message"]
        await conftest.until(
            lambda: not any(stored(emulator, "pods", n) for n in ("capped-0", "capped-1")),
            timeout=60,
        )
        for name in ("capped-0", "capped-1", "capped"):
            await conftest.until(
                lambda name=name: (
                    "MaximumExecutionTimeExceeded"
                    in {e["reason"] for e in events(emulator, name=name)}
                ),
                timeout=60,
            )
            assert "Preempted" not in {e["reason"] for e in events(emulator, name=name)}

        # A new member of the failed group is never placed: it waits, saying why.
        for name in ("capped-2", "capped-3"):
            await kubectl(emulator, "apply", "-f", "-", input=member(name))

        def told() -> bool:
            pod = stored(emulator, "pods", "capped-2")
            found = (pod.get("status") or {}).get("conditions") or ()
            return any(
                c.get("type") == "PodScheduled"
                and "maximumExecutionTimeSeconds" in str(c.get("message"))
                for c in found
            )

        await conftest.until(told, timeout=60)
        pod = json.loads(await kubectl(emulator, "get", "pod", "capped-2", "-o", "json"))
        assert not pod["spec"].get("nodeName"), pod["spec"]
        assert phase(emulator, "podgroups", "capped") == "Failed"


async def test_a_gang_past_its_queues_limit_is_evicted_and_runs_again(
    emulator: testing.RunningEmulator, clock: clocks.VirtualClock
) -> None:
    emulator.start_kubelets(["2x cpu=4,memory=8Gi"], speedup=30)
    first, second = ("again-0", "again-1"), ("again-2", "again-3")
    async with running.operator_on(emulator, clock=clock, elect=False):
        await kubectl(emulator, "apply", "-f", "-", input=QUEUED)
        for name in first:
            await kubectl(emulator, "apply", "-f", "-", input=member(name, group="again"))
        await conftest.until(
            lambda: all(phase(emulator, "pods", n) == "Running" for n in first), timeout=60
        )
        clock.advance(150)  # past the queue's 120 s limit
        await conftest.until(
            lambda: not any(stored(emulator, "pods", n) for n in first), timeout=60
        )

        def group_told() -> list[str]:
            return [
                e["message"]
                for e in events(emulator, name="again")
                if e["reason"] == "MaximumExecutionTimeExceeded"
            ]

        await conftest.until(lambda: bool(group_told()), timeout=60)
        (message,) = group_told()
        assert "ran past its maximumExecutionTimeSeconds of 120s" in message, message
        assert message.endswith("waiting in its queue to run again"), message
        for name in first:
            await conftest.until(
                lambda name=name: (
                    "MaximumExecutionTimeExceeded"
                    in {e["reason"] for e in events(emulator, name=name)}
                ),
                timeout=60,
            )

        # Requeued, not failed: its controller's new pods are placed again.
        for name in second:
            await kubectl(emulator, "apply", "-f", "-", input=member(name, group="again"))
        await conftest.until(
            lambda: all(phase(emulator, "pods", n) == "Running" for n in second), timeout=60
        )
        await conftest.until(lambda: phase(emulator, "podgroups", "again") == "Running", timeout=60)
        annotations = stored(emulator, "podgroups", "again")["metadata"].get("annotations") or {}
        assert "scheduling.berth.io/maximum-execution-time-exceeded" not in annotations
