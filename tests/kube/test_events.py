"""Kubernetes Events (``berth.kube.events.EventRecorder``) and the snapshot source.

We test these aspects:

- an Event lands as ``kubectl get events`` reads it: involved object, reason, message, type,
  source and timestamps; cluster-scoped objects' Events go to ``default``;
- the limits per object: the same reason and message again is suppressed for a while, a burst
  is capped and then refills with time, other objects are not affected;
- recording from another thread (Kopf's) is safe and posts on the recorder's loop;
- recording never blocks or raises: when the API server refuses, Events are dropped and
  counted;
- ``CacheSource`` leaves out pods in binding backoff and remembers its last snapshot; its node
  view shows allocatable, requested and free per resource.
"""

from __future__ import annotations

import asyncio
import collections.abc
import threading

import pytest

from berth.emulator import faults, testing
from berth.kube import clients, events, snapshots
from berth.scheduler.snapshot import cache as cluster_cache
from berth.util import clocks
from tests.kube import conftest

POD = events.ObjectRef("Pod", "p", "default", "uid-1")


@pytest.fixture
async def recorder(
    connection: clients.AsyncConnection, virtual_clock: clocks.VirtualClock
) -> collections.abc.AsyncIterator[events.EventRecorder]:
    recording = events.EventRecorder(
        connection.api, clock=virtual_clock, burst=3, refill_seconds=10, repeat_seconds=60
    )
    stop = asyncio.Event()
    task = asyncio.create_task(recording.run(stop))
    await asyncio.sleep(0)
    try:
        yield recording
    finally:
        stop.set()
        await task


def stored_events(emulator: testing.RunningEmulator) -> list[dict[str, object]]:
    api = emulator.api
    resource = emulator.call(api.resource, "v1", "events")
    return list(emulator.call(api.storage.list, resource.key))


async def test_an_event_lands_as_kubectl_reads_it(
    emulator: testing.RunningEmulator, recorder: events.EventRecorder
) -> None:
    assert recorder.record(POD, type=events.WARNING, reason="FailedScheduling", message="why")
    await recorder.drain()
    (event,) = stored_events(emulator)
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "namespace": "default",
        "uid": "uid-1",
    }
    assert (event["reason"], event["message"], event["type"]) == (
        "FailedScheduling",
        "why",
        "Warning",
    )
    assert event["source"] == {"component": "berth-scheduler"}
    assert event["lastTimestamp"] == "2026-01-01T00:00:00Z"
    printed = emulator.kubectl("get", "events", "-o", "name").stdout
    assert printed.startswith("event/p.")


async def test_cluster_scoped_objects_events_go_to_default(
    emulator: testing.RunningEmulator, recorder: events.EventRecorder
) -> None:
    queue = events.ObjectRef("Queue", "team-a", api_version="scheduling.berth.io/v1alpha1")
    recorder.record(queue, type=events.WARNING, reason="InvalidQueue", message="cycle")
    await recorder.drain()
    (event,) = stored_events(emulator)
    assert event["metadata"]["namespace"] == "default"  # type: ignore[index]


async def test_limits_per_object(
    recorder: events.EventRecorder, virtual_clock: clocks.VirtualClock
) -> None:
    record = recorder.record
    assert record(POD, type="Warning", reason="FailedScheduling", message="a")
    assert not record(POD, type="Warning", reason="FailedScheduling", message="a")  # repeat
    assert record(POD, type="Warning", reason="FailedScheduling", message="b")
    assert record(POD, type="Warning", reason="FailedScheduling", message="c")
    assert not record(POD, type="Warning", reason="FailedScheduling", message="d")  # burst spent
    other = events.ObjectRef("Pod", "q", "default")
    assert record(other, type="Warning", reason="FailedScheduling", message="a")
    virtual_clock.advance(10)  # one token back
    assert record(POD, type="Warning", reason="FailedScheduling", message="d")
    assert not record(POD, type="Warning", reason="FailedScheduling", message="e")
    virtual_clock.advance(60)  # the repeat window is over too
    assert record(POD, type="Warning", reason="FailedScheduling", message="a")
    assert recorder.suppressed == 3
    await recorder.drain()
    assert recorder.posted == 6


def test_objects_idle_past_the_windows_are_forgotten(virtual_clock: clocks.VirtualClock) -> None:
    # Every pod ever placed gets a Scheduled Event: the per-object limits must not keep them all.
    # (Not running: each record is admitted, then dropped; the limits are what is looked at.)
    recording = events.EventRecorder(
        object(),  # type: ignore[arg-type]
        clock=virtual_clock,
        burst=3,
        refill_seconds=10,
        repeat_seconds=60,
    )
    for i in range(100):
        pod = events.ObjectRef("Pod", f"p{i}", "default")
        recording.record(pod, type="Normal", reason="Scheduled", message="m")
    assert recording.tracked == 100
    virtual_clock.advance(30)
    recording.record(POD, type="Normal", reason="Scheduled", message="m")
    assert recording.tracked == 101  # within the windows: still remembered
    virtual_clock.advance(45)  # the first hundred idle past the repeat window
    recording.record(POD, type="Normal", reason="Scheduled", message="n")
    assert recording.tracked == 1
    assert recording.suppressed == 0


async def test_recording_from_another_thread_posts_on_the_loop(
    emulator: testing.RunningEmulator, recorder: events.EventRecorder
) -> None:
    def other_thread() -> None:
        for i in range(3):
            recorder.record(
                events.ObjectRef("PodGroup", f"g{i}", "default"),
                type="Normal",
                reason="Scheduled",
                message="placed",
            )

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    await conftest.until(lambda: recorder.posted == 3)
    assert len(stored_events(emulator)) == 3


async def test_refused_events_are_dropped_and_counted(
    emulator: testing.RunningEmulator, recorder: events.EventRecorder
) -> None:
    emulator.faults.add(faults.Fault("POST", "/api/v1/namespaces/*/events", status=403, times=2))
    for name in ("a", "b"):
        recorder.record(
            events.ObjectRef("Pod", name, "default"), type="Normal", reason="R", message="m"
        )
    await recorder.drain()
    assert (recorder.dropped, recorder.posted) == (2, 0)


def test_recording_before_the_recorder_runs_drops(virtual_clock: clocks.VirtualClock) -> None:
    recording = events.EventRecorder(object(), clock=virtual_clock)  # type: ignore[arg-type]
    assert not recording.record(POD, type="Normal", reason="R", message="m")
    assert recording.dropped == 1


class Holding:
    def __init__(self, keys: set[str]) -> None:
        self.keys = keys

    def holding(self, now: float) -> set[str]:
        return self.keys


def test_cache_source_leaves_out_pods_in_backoff(virtual_clock: clocks.VirtualClock) -> None:
    cache = cluster_cache.ClusterCache()
    cache.add_node(conftest.node("n1", cpu="4"))
    for name in ("a", "b"):
        cache.add_pod(
            conftest.pod(name) | {"metadata": {"name": name, "namespace": "default", "uid": name}}
        )
    cache.add_pod(
        conftest.pod("c", node="n1") | {"metadata": {"name": "c", "namespace": "default"}}
    )
    source = snapshots.CacheSource(cache, clock=virtual_clock, backoffs=Holding({"default/a"}))
    assert source.last is None
    taken = source.snapshot()
    assert [p.key for p in taken.pending] == ["default/b"]
    assert source.last is taken
    view = source.node("n1")
    assert view is not None
    assert view["allocatableMilli"]["cpu"] == 4000  # type: ignore[index]
    assert view["requestedMilli"]["cpu"] == 100  # type: ignore[index]
    assert view["freeMilli"]["cpu"] == 3900  # type: ignore[index]
    assert view["pods"] == ["default/c"]
    assert source.node("nowhere") is None
