"""Kubernetes Events (``berth.kube.transport.events.EventRecorder``) and the snapshot source.

We test these aspects:

- an Event lands as ``kubectl get events`` reads it: involved object (uid and resourceVersion
  included), reason, message, type, source, reporting component and instance, timestamps;
  cluster-scoped objects' Events go to ``default``; Events of one object recorded at one
  instant are named apart (the object's name, then client-go's time suffix);
- repeats are aggregated: one Event per object and reason, whose ``count`` and
  ``lastTimestamp`` grow when the reason repeats after the repeat window or its message
  changes; the same again sooner is not counted; ``kubectl describe`` finds the Event by uid
  and shows the repeats;
- the limits per object: writes are capped by a burst that refills with time, a held-back
  repeat is written with the next one let through, other objects are not affected;
- recording never blocks or raises: when the API server refuses, Events are dropped and
  counted;
- ``CacheSource`` leaves out pods in binding backoff (with queueing hints, a pod whose backoff
  ends is tried again though the cache did not change) and remembers its last snapshot; its
  node view shows allocatable, requested and free per resource; it hands on the cache's
  indexes of pending pods by group and of placed groups (unless it left pods out).
"""

from __future__ import annotations

import asyncio
import collections.abc

import pytest

from berth.emulator import faults, testing
from berth.kube.informers import snapshots
from berth.kube.transport import clients, events
from berth.scheduler import loop
from berth.scheduler.plugins import registry
from berth.scheduler.snapshot import cache as cluster_cache
from berth.util import clocks
from tests.kube import conftest

POD = events.ObjectRef("Pod", "p", "default", "uid-1", "v1", "42")


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
        "resourceVersion": "42",
    }
    assert (event["reason"], event["message"], event["type"]) == (
        "FailedScheduling",
        "why",
        "Warning",
    )
    assert event["source"] == {"component": "berth-scheduler"}
    assert event["reportingComponent"] == "berth-scheduler"
    assert event["reportingInstance"]  # the replica (the host name unless told)
    assert event["lastTimestamp"] == event["firstTimestamp"] == "2026-01-01T00:00:00Z"
    assert event["count"] == 1
    printed = emulator.kubectl("get", "events", "-o", "name").stdout
    assert printed.startswith("event/p.")


async def test_events_of_one_object_at_one_instant_get_names_of_their_own(
    emulator: testing.RunningEmulator, recorder: events.EventRecorder
) -> None:
    for reason in ("FailedScheduling", "Preempted", "Scheduled"):
        recorder.record(POD, type=events.NORMAL, reason=reason, message="m")
    await recorder.drain()
    names = [e["metadata"]["name"] for e in stored_events(emulator)]  # type: ignore[index]
    assert len(set(names)) == 3
    assert all(name.startswith("p.") for name in names)


async def test_cluster_scoped_objects_events_go_to_default(
    emulator: testing.RunningEmulator, recorder: events.EventRecorder
) -> None:
    queue = events.ObjectRef("Queue", "team-a", api_version="scheduling.berth.io/v1alpha1")
    recorder.record(queue, type=events.WARNING, reason="InvalidQueue", message="cycle")
    await recorder.drain()
    (event,) = stored_events(emulator)
    assert event["metadata"]["namespace"] == "default"  # type: ignore[index]


async def test_repeats_are_counted_into_one_event(
    emulator: testing.RunningEmulator,
    recorder: events.EventRecorder,
    virtual_clock: clocks.VirtualClock,
) -> None:
    created = conftest.create(emulator, conftest.pod("p"), plural="pods")
    meta = created["metadata"]
    pod = events.ObjectRef("Pod", "p", "default", meta["uid"], "v1", meta["resourceVersion"])
    why = "0/4 nodes are available: 4 Insufficient cpu"
    for _ in range(3):  # every cycle says it again; within the window nothing is counted
        recorder.record(pod, type=events.WARNING, reason="FailedScheduling", message=why)
    await recorder.drain()
    for _ in range(10):  # ten minutes of waiting, one cycle every 6 s
        for _ in range(10):
            virtual_clock.advance(6)
            recorder.record(pod, type=events.WARNING, reason="FailedScheduling", message=why)
        await recorder.drain()
    (event,) = stored_events(emulator)
    assert (event["reason"], event["message"], event["count"]) == ("FailedScheduling", why, 11)
    assert event["involvedObject"]["uid"] == meta["uid"]
    assert event["firstTimestamp"] == "2026-01-01T00:00:00Z"
    assert event["lastTimestamp"] == "2026-01-01T00:10:00Z"
    assert recorder.posted == 1
    described = emulator.kubectl("describe", "pod", "p").stdout
    assert "(x11 over" in described, described


async def test_a_new_message_replaces_the_old_one_and_counts(
    emulator: testing.RunningEmulator, recorder: events.EventRecorder
) -> None:
    recorder.record(POD, type=events.WARNING, reason="FailedScheduling", message="one")
    await recorder.drain()
    recorder.record(POD, type=events.WARNING, reason="FailedScheduling", message="two")
    recorder.record(POD, type=events.NORMAL, reason="Scheduled", message="placed")
    await recorder.drain()
    found = sorted((e["reason"], e["message"], e["count"]) for e in stored_events(emulator))
    assert found == [("FailedScheduling", "two", 2), ("Scheduled", "placed", 1)]


async def test_limits_per_object(
    emulator: testing.RunningEmulator,
    recorder: events.EventRecorder,
    virtual_clock: clocks.VirtualClock,
) -> None:
    record = recorder.record
    assert record(POD, type="Warning", reason="A", message="a")
    assert not record(POD, type="Warning", reason="A", message="a")  # the same, too soon
    assert record(POD, type="Warning", reason="B", message="b")
    assert record(POD, type="Warning", reason="C", message="c")
    assert not record(POD, type="Warning", reason="D", message="d")  # burst (3) spent
    other = events.ObjectRef("Pod", "q", "default", "uid-2")
    assert record(other, type="Warning", reason="A", message="a")
    await recorder.drain()
    assert recorder.posted == 4
    virtual_clock.advance(10)  # one token back: the held-back D is written with the next one
    assert record(POD, type="Warning", reason="D", message="d")
    assert not record(POD, type="Warning", reason="E", message="e")
    await recorder.drain()
    reasons = sorted(e["reason"] for e in stored_events(emulator))
    assert reasons == ["A", "A", "B", "C", "D"]
    assert recorder.suppressed == 3


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
    assert taken.pending_index is None  # not the cache's pending pods: sessions walk them
    assert taken.placed_index is not None
    assert source.last is taken
    view = source.node("n1")
    assert view is not None
    assert view["allocatableMilli"]["cpu"] == 4000  # type: ignore[index]
    assert view["requestedMilli"]["cpu"] == 100  # type: ignore[index]
    assert view["freeMilli"]["cpu"] == 3900  # type: ignore[index]
    assert view["pods"] == ["default/c"]
    assert source.node("nowhere") is None


def test_cache_source_hands_on_the_caches_indexes(virtual_clock: clocks.VirtualClock) -> None:
    """Without them every session would walk the whole standing backlog to leave out its
    parked work, and every group to find the placed ones."""
    cache = cluster_cache.ClusterCache()
    cache.add_node(conftest.node("n1", cpu="4"))
    for name in ("a", "b"):
        cache.add_pod(
            conftest.pod(name) | {"metadata": {"name": name, "namespace": "default", "uid": name}}
        )
    source = snapshots.CacheSource(cache, clock=virtual_clock, backoffs=Holding(set()))
    taken = source.snapshot()
    assert taken.pending_index is not None
    assert [p.key for p in taken.pending_index[None]] == ["default/a", "default/b"]
    assert taken.pending_changed == frozenset({None})
    assert taken.placed_index is not None


def test_a_pod_whose_backoff_ends_is_tried_though_the_cache_did_not_change(
    virtual_clock: clocks.VirtualClock,
) -> None:
    cache = cluster_cache.ClusterCache()
    cache.add_node(conftest.node("n1", cpu="4"))
    for name, cpu in (("a", "1"), ("big", "8")):
        cache.add_pod(
            conftest.pod(name, cpu=cpu)
            | {"metadata": {"name": name, "namespace": "default", "uid": name}}
        )
    backoffs = Holding({"default/a"})
    source = snapshots.CacheSource(cache, clock=virtual_clock, backoffs=backoffs)
    scheduler = loop.Scheduler(
        registry.default_profile(),
        registry=registry.in_tree_registry(),
        clock=virtual_clock,
        hints=True,
    )
    assert scheduler.run_session(source.snapshot()).bindings() == {}  # big waits, a backs off
    assert scheduler.run_session(source.snapshot()).decisions == ()  # nothing new
    backoffs.keys = set()  # a's backoff ended: only the source knows
    assert scheduler.run_session(source.snapshot()).bindings() == {"default/a": "n1"}
