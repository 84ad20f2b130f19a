"""What ``kubectl describe pod`` shows about a pod that waits, over ten minutes of waiting.

We test these aspects (the operator runs in the test's loop on a virtual clock an hour behind
the wall clock, the emulator on its thread with simulated nodes; everything is read with the
real ``kubectl``):

- a pod too big for every node has exactly one Event in ``kubectl describe pod``, a
  ``FailedScheduling`` Warning from ``berth-scheduler`` whose message is the reason;
- after ten (virtual) minutes of waiting, cycles repeating the same reason, the pod still has
  at most three Event objects, and the one ``FailedScheduling`` Event counts the repeats
  (``count``, and ``(xN over ...)`` in ``kubectl describe``).
"""

from __future__ import annotations

import json
import re
import time
import typing

import pytest

from berth.emulator import testing
from berth.util import clocks
from tests.kube import conftest
from tests.operator import running
from tests.operator.running import kubectl

pytestmark = pytest.mark.slow

HUGE = """
apiVersion: v1
kind: Pod
metadata: {name: huge-0}
spec:
  schedulerName: berth-scheduler
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "64"}}}]
"""


def events_of(emulator: testing.RunningEmulator, uid: str) -> list[dict[str, typing.Any]]:
    api = emulator.api
    resource = emulator.call(api.resource, "v1", "events")
    return [
        e
        for e in emulator.call(api.storage.list, resource.key)
        if e["involvedObject"].get("uid") == uid
    ]


def event_rows(described: str) -> list[str]:
    """The rows of the ``Events:`` table of ``kubectl describe``."""
    _, _, tail = described.partition("\nEvents:")
    return [line for line in tail.splitlines()[3:] if line.strip()]


async def test_a_waiting_pod_has_one_event_counting_ten_minutes_of_repeats(
    emulator: testing.RunningEmulator,
) -> None:
    emulator.start_kubelets(["2x cpu=4,memory=8Gi"], speedup=30)
    clock = clocks.VirtualClock(time.time() - 3600)
    async with running.operator_on(emulator, clock=clock):
        await kubectl(emulator, "apply", "-f", "-", input=HUGE)
        pod = json.loads(await kubectl(emulator, "get", "pod", "huge-0", "-o", "json"))
        uid = pod["metadata"]["uid"]
        await conftest.until(lambda: bool(events_of(emulator, uid)), timeout=60)
        described = await kubectl(emulator, "describe", "pod", "huge-0")
        (row,) = event_rows(described)
        assert re.match(
            r"\s*Warning\s+FailedScheduling\s+\S+\s+berth-scheduler\s+0/2 nodes fit:"
            r" 2 Insufficient cpu",
            row,
        ), described

        for minute in range(1, 11):
            clock.advance(60)

            def counted(minute: int = minute) -> bool:
                return any(e.get("count", 0) > minute for e in events_of(emulator, uid))

            await conftest.until(counted, timeout=60)
        found = events_of(emulator, uid)
        assert len(found) <= 3, found
        (failed,) = [e for e in found if e["reason"] == "FailedScheduling"]
        assert failed["count"] >= 11
        assert failed["reportingComponent"] == "berth-scheduler"
        assert failed["involvedObject"]["resourceVersion"]
        described = await kubectl(emulator, "describe", "pod", "huge-0")
        (row,) = event_rows(described)
        assert re.search(rf"\(x{failed['count']} over \S+\)\s+berth-scheduler", row), described
