"""A Reservation booked for later (``spec.startAt``, issue #33) through the whole operator.

The operator runs in the test's loop and the emulator on its thread, with simulated nodes, both
on one virtual clock (time moves only when the test advances it; the operator leads without a
Lease, which a jump of the clock would expire); everything is read from the emulator's store or
with the real ``kubectl``, and every wait is on a condition.

Two nodes of 4 cpu. A Reservation of one whole node starts 10 minutes ahead; the default
``reservationDrainSeconds`` (an hour) is longer, so its drain begins at once. We test these
aspects:

- before ``startAt`` it is Pending and places nothing, although a node is free: its
  ``Scheduled`` condition's reason is ``NotStarted``, saying when it starts and which node
  drains for it;
- a pod declaring an hour of run time (it would outlive ``startAt``) goes to the other node;
  a second one waits, told the room is held for the reservation; a pod declaring one minute
  (it ends in time) is placed on the drained node;
- once that pod is gone and the clock passes ``startAt``, the reservation is Available on
  the drained node;
- a Reservation whose ``startAt`` was already past when created is held invalid, its
  ``Valid`` condition naming the field, and never placed.
"""

from __future__ import annotations

import collections.abc
import datetime
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


def _stamp(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def reservation(name: str, *, start: float) -> str:
    return f"""
apiVersion: scheduling.berth.io/v1alpha1
kind: Reservation
metadata: {{name: {name}}}
spec:
  startAt: "{_stamp(start)}"
  owners: [{{labelSelector: {{matchLabels: {{app: big}}}}}}]
  template:
    spec:
      containers: [{{name: hold, resources: {{requests: {{cpu: "4"}}}}}}]
"""


def pod(name: str, *, runs: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{scheduling.berth.io/expected-runtime: "{runs}"}}
spec:
  schedulerName: berth-scheduler
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "4"}}}}}}]
"""


def stored(emulator: testing.RunningEmulator, plural: str, name: str) -> dict[str, typing.Any]:
    api = emulator.api
    version = "scheduling.berth.io/v1alpha1" if plural == "reservations" else "v1"
    resource = emulator.call(api.resource, version, plural)
    return emulator.call(api.storage.get, resource.key, "default", name) or {}


def condition(emulator: testing.RunningEmulator, name: str, kind: str) -> dict[str, typing.Any]:
    status = stored(emulator, "reservations", name).get("status") or {}
    return next((c for c in status.get("conditions") or () if c.get("type") == kind), {})


def node_of(emulator: testing.RunningEmulator, name: str) -> str | None:
    return typing.cast("str | None", stored(emulator, "pods", name).get("spec", {}).get("nodeName"))


def pod_told(emulator: testing.RunningEmulator, name: str) -> str:
    found = (stored(emulator, "pods", name).get("status") or {}).get("conditions") or ()
    return " ".join(str(c.get("message")) for c in found if c.get("type") == "PodScheduled")


@pytest.fixture
def clock() -> clocks.VirtualClock:
    return clocks.VirtualClock(time.time())


@pytest.fixture
def emulator(
    tmp_path: pathlib.Path, clock: clocks.VirtualClock
) -> collections.abc.Iterator[testing.RunningEmulator]:
    running_emulator = testing.start_emulator(tmp_path, clock=clock)
    try:
        yield running_emulator
    finally:
        running_emulator.threaded.stop()


async def test_a_reservation_booked_for_later_drains_a_node_and_holds_it_from_its_start(
    emulator: testing.RunningEmulator, clock: clocks.VirtualClock
) -> None:
    emulator.start_kubelets(["2x cpu=4,memory=8Gi"])
    start = clock.now() + 600
    async with running.operator_on(emulator, clock=clock, elect=False):
        await kubectl(emulator, "apply", "-f", "-", input=reservation("tonight", start=start))

        def draining() -> bool:
            message = str(condition(emulator, "tonight", "Scheduled").get("message"))
            return "draining" in message

        await conftest.until(draining, timeout=60)
        scheduled = condition(emulator, "tonight", "Scheduled")
        assert scheduled["status"] == "False"
        assert scheduled["reason"] == "NotStarted"
        prefix = f"starts at {_stamp(start)}; draining "
        assert scheduled["message"].startswith(prefix), scheduled["message"]
        drained = scheduled["message"].removeprefix(prefix).removesuffix(" for it meanwhile")
        status = stored(emulator, "reservations", "tonight")["status"]
        assert status["phase"] == "Pending"
        assert not status.get("nodeName")

        # An hour-long pod would outlive startAt: it goes to the other node, and the next one
        # waits, told why.
        await kubectl(emulator, "apply", "-f", "-", input=pod("long-0", runs="1h"))
        await conftest.until(lambda: node_of(emulator, "long-0") is not None, timeout=60)
        assert node_of(emulator, "long-0") != drained
        await kubectl(emulator, "apply", "-f", "-", input=pod("long-1", runs="1h"))
        await conftest.until(
            lambda: "room held for reservation default/tonight" in pod_told(emulator, "long-1"),
            timeout=60,
        )
        assert f"which starts at {_stamp(start)}" in pod_told(emulator, "long-1")
        assert node_of(emulator, "long-1") is None

        # A minute-long pod ends in time: it backfills the drained node.
        await kubectl(emulator, "apply", "-f", "-", input=pod("short", runs="1m"))
        await conftest.until(lambda: node_of(emulator, "short") is not None, timeout=60)
        assert node_of(emulator, "short") == drained

        # It ends (deleted here, as if finished); at startAt the reservation holds the node.
        await kubectl(emulator, "delete", "pod", "short", "--wait=false")
        await conftest.until(lambda: not stored(emulator, "pods", "short"), timeout=60)
        clock.advance(start - clock.now() + 1)
        await conftest.until(
            lambda: (
                stored(emulator, "reservations", "tonight")["status"].get("phase") == "Available"
            ),
            timeout=60,
        )
        status = stored(emulator, "reservations", "tonight")["status"]
        assert status["nodeName"] == drained
        assert node_of(emulator, "long-1") is None  # still kept off the held node


async def test_a_start_already_past_is_held_invalid_naming_the_field(
    emulator: testing.RunningEmulator, clock: clocks.VirtualClock
) -> None:
    emulator.start_kubelets(["1x cpu=4,memory=8Gi"])
    async with running.operator_on(emulator, clock=clock, elect=False):
        await kubectl(
            emulator, "apply", "-f", "-", input=reservation("late", start=clock.now() - 3600)
        )
        await conftest.until(
            lambda: condition(emulator, "late", "Valid").get("status") == "False", timeout=60
        )
        valid = condition(emulator, "late", "Valid")
        assert valid["reason"] == "Invalid"
        assert valid["message"].startswith(
            "spec.startAt: startAt is before the reservation was created"
        ), valid["message"]
        assert stored(emulator, "reservations", "late")["status"].get("phase") == "Pending"
        assert not stored(emulator, "reservations", "late")["status"].get("nodeName")
