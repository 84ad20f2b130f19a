"""The decision sink (``berth.kube.binder.decisions.ApiSink``) against the emulator.

We test these aspects:

- a binding: the cache assumes the pod at once, ``pods/binding`` is posted with the pod's UID,
  a ``Scheduled`` Event follows, latencies are observed;
- the binding's answers: already on this node (success), on another node (the assumption is
  forgotten, no retry), the pod gone (404, or deleted while queued: nothing sent, no retry),
  a server error (forgotten, backoff held 1 s doubling), a timeout (the same binding retried,
  bound once);
- eviction through the Eviction API with a ``Preempted`` Event; annotations (carried by the
  Binding when the same result binds the pod: no patch of the pod); nominations written once
  per node;
- a message that changes while its condition reason stays is written at most every ten
  seconds, its newest words then, even for a gang decided nothing since;
- a pod waiting for the same reason cycle after cycle has one ``FailedScheduling`` Event,
  counted once a minute (``(x3 over 2m)``), as kube-scheduler's recorder counts it;
- a pod's ``PodScheduled`` condition and ``FailedScheduling`` Event written only when the
  reason changes (``Unschedulable`` only for capacity, else the code), a gang's in one burst,
  a burst made stale by a newer decision never written, and one offered while an older
  patch of the pod is slow written after it (the newer reason stays), one the API server
  failed sent again; a gang the autoscaler cannot fit rewritten at once, in one burst, off
  the autoscalers' list (and back when its hold ends), without a new cycle, and held on the
  next cycle's decisions too;
- Reservation decisions: ``Available`` on a node, an owner allocated (allocate-once ends it
  ``Succeeded``), ``Expired``, and why a Pending one waits — published by the sink and written
  by what Kopf's Reservation status handler runs (``berth.controllers.reservation_statuses``).
"""

from __future__ import annotations

import asyncio
import collections.abc
import typing

import pytest

from berth.api import resources
from berth.controllers import reservation_statuses
from berth.emulator import faults, testing
from berth.kube.binder import binding, decisions
from berth.kube.transport import clients, events
from berth.scheduler.framework import decisions as d
from berth.scheduler.framework import pending, reasons
from berth.scheduler.snapshot import cache as cluster_cache
from berth.util import clocks
from tests.kube import conftest

Object = dict[str, typing.Any]
BINDING = "/api/v1/namespaces/{namespace}/pods/{name}/binding"
POD_STATUS = "/api/v1/namespaces/{namespace}/pods/{name}/status"


def waiting(message: str) -> reasons.Reason:
    """A why-pending reason as the scheduler hands it on (the sink renders the message)."""
    return reasons.new(reasons.ReasonCode.UNSCHEDULABLE, message)


class Observer:
    def __init__(self) -> None:
        self.bindings: list[str | None] = []
        self.e2e: list[float] = []

    def observe_binding(self, seconds: float, *, failure: str | None = None) -> None:
        self.bindings.append(failure)

    def observe_e2e(self, seconds: float) -> None:
        self.e2e.append(seconds)


class Harness:
    """An ApiSink with its workers and Event recorder running in the test's loop."""

    def __init__(
        self,
        emulator: testing.RunningEmulator,
        api: clients.AsyncApiClient,
        *,
        clock: clocks.Clock | None = None,
    ) -> None:
        self.emulator = emulator
        self.clock = clock or clocks.SystemClock()
        self.cache = cluster_cache.ClusterCache()
        self.observer = Observer()
        self.recorder = events.EventRecorder(api, clock=self.clock)
        self.outcomes: list[binding.BindOutcome] = []
        self.sink = decisions.ApiSink(
            api,
            cache=self.cache,
            clock=self.clock,
            recorder=self.recorder,
            observer=self.observer,
            last_snapshot=lambda: self.cache.snapshot(self.clock.now()),
            bind_timeout=0.5,
            on_bound=self.outcomes.append,
        )
        # What Kopf's Reservation status handler does with the facts the sink publishes.
        self.reservations = reservation_statuses.ReservationStatusWriter(
            api, facts=self.sink.reservation_facts, clock=self.clock, recorder=self.recorder
        )
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.tasks = [
            asyncio.create_task(self.sink.run(self.stop)),
            asyncio.create_task(self.recorder.run(self.stop)),
        ]

    async def settle(self) -> None:
        await asyncio.wait_for(self.sink.drain(), 10)
        await asyncio.wait_for(self.reservations.write_once(), 10)
        await asyncio.sleep(0)
        await asyncio.wait_for(self.recorder.drain(), 10)

    async def close(self) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)

    def add_pod(self, name: str, *, node: str | None = None) -> Object:
        created = conftest.create(self.emulator, conftest.pod(name, node=node), plural="pods")
        self.cache.add_pod(created)
        return created

    def stored(self, plural: str, name: str, *, api_version: str = "v1") -> Object | None:
        api = self.emulator.api
        resource = self.emulator.call(api.resource, api_version, plural)
        return self.emulator.call(api.storage.get, resource.key, "default", name)

    def events(self) -> list[tuple[str, str, str]]:
        return [
            (e["involvedObject"]["name"], e["reason"], e["message"]) for e in self.stored_events()
        ]

    def stored_events(self) -> list[Object]:
        api = self.emulator.api
        resource = self.emulator.call(api.resource, "v1", "events")
        return list(self.emulator.call(api.storage.list, resource.key))

    def apply(self, *decided: d.Decision) -> None:
        self.sink.apply(d.CycleResult(session_id="s", decisions=decided))

    def bind(self, pod: Object, node: str) -> d.BindPod:
        meta = pod["metadata"]
        return d.BindPod(namespace="default", name=meta["name"], uid=meta["uid"], node=node)

    def assumed_on(self, key: str) -> str | None:
        return self.cache.snapshot(self.clock.now()).pods[key].node_name

    def binding_requests(self, name: str) -> int:
        path = f"/api/v1/namespaces/default/pods/{name}/binding"
        return self.emulator.server.requests_by_path[("POST", path)]


@pytest.fixture
async def harness(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> collections.abc.AsyncIterator[Harness]:
    conftest.create(berth_crds, conftest.node("n1"), plural="nodes", namespace=None)
    conftest.create(berth_crds, conftest.node("n2"), plural="nodes", namespace=None)
    running = Harness(berth_crds, connection.api)
    try:
        yield running
    finally:
        await running.close()


@pytest.fixture
async def timed(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> collections.abc.AsyncIterator[tuple[Harness, clocks.VirtualClock]]:
    """A harness with one node and one pod ``p``, on virtual time (the test says when seconds
    pass, not the machine's load)."""
    conftest.create(berth_crds, conftest.node("n1"), plural="nodes", namespace=None)
    clock = clocks.VirtualClock(1_800_000_000.0)
    running = Harness(berth_crds, connection.api, clock=clock)
    running.add_pod("p")
    running.start()
    try:
        yield running, clock
    finally:
        await running.close()


async def test_binding_assumes_at_once_then_binds_and_explains(harness: Harness) -> None:
    pod = harness.add_pod("p")
    harness.apply(harness.bind(pod, "n1"))
    assert harness.assumed_on("default/p") == "n1"  # before any request went out
    harness.start()
    await harness.settle()
    stored = harness.stored("pods", "p")
    assert stored is not None and stored["spec"]["nodeName"] == "n1"
    assert harness.outcomes == [binding.BindOutcome("default/p", "n1", True, None)]
    assert ("p", "Scheduled", "Successfully assigned default/p to n1") in harness.events()
    assert harness.observer.bindings == [None]
    assert len(harness.observer.e2e) == 1
    assert harness.sink.bound == 1


async def test_already_bound_to_the_same_node_is_success(harness: Harness) -> None:
    pod = harness.add_pod("p")
    binding = {"target": {"name": "n1"}, "metadata": {"name": "p"}}
    harness.emulator.call(harness.emulator.api.bind, namespace="default", name="p", binding=binding)
    harness.apply(harness.bind(pod, "n1"))
    harness.start()
    await harness.settle()
    assert harness.outcomes[0].bound
    assert harness.sink.holding(harness.clock.now()) == set()


async def test_bound_elsewhere_forgets_the_assumption_without_retry(harness: Harness) -> None:
    pod = harness.add_pod("p")
    elsewhere = {"target": {"name": "n2"}, "metadata": {"name": "p"}}
    harness.emulator.call(
        harness.emulator.api.bind, namespace="default", name="p", binding=elsewhere
    )
    harness.apply(harness.bind(pod, "n1"))
    harness.start()
    await harness.settle()
    assert harness.outcomes == [binding.BindOutcome("default/p", "n1", False, "conflict")]
    # Held where it really is (what the watch will bring): no cycle tries it again meanwhile.
    assert harness.assumed_on("default/p") == "n2"
    assert harness.sink.holding(harness.clock.now()) == set()
    assert harness.binding_requests("p") == 1


async def test_a_binding_that_landed_but_was_answered_500_is_reconciled_not_retried(
    harness: Harness,
) -> None:
    pod = harness.add_pod("p")
    harness.emulator.faults.add(
        faults.Fault("POST", "/api/v1/namespaces/*/pods/*/binding", status=500, after=True)
    )
    harness.apply(harness.bind(pod, "n1"))
    harness.start()
    await harness.settle()
    assert harness.outcomes == [binding.BindOutcome("default/p", "n1", True, None)]
    assert harness.assumed_on("default/p") == "n1"  # the node's usage counts it
    assert harness.sink.holding(harness.clock.now()) == set()  # no backoff, no retry
    assert harness.binding_requests("p") == 1
    assert harness.sink.bound == 1


async def test_repeated_failures_are_capped_and_explained(harness: Harness) -> None:
    pod = harness.add_pod("p")
    for attempt in range(binding.FAILURES_BEFORE_REASON + 2):
        harness.emulator.faults.add(
            faults.Fault("POST", "/api/v1/namespaces/*/pods/*/binding", status=500)
        )
        harness.apply(harness.bind(pod, "n1"))
        if attempt == 0:
            harness.start()
        await harness.settle()
    now = harness.clock.now()
    assert harness.sink.holding(now + 10.5) == set()  # capped at 10 s however many failures
    failed = [e for e in harness.events() if e[1] == "FailedBinding"]
    assert len(failed) == 1  # said once, at the fifth failure
    assert "binding failed 5 times in a row" in failed[0][2]


async def test_the_binder_forgets_deleted_pods_it_is_not_binding(harness: Harness) -> None:
    harness.start()
    for i in range(50):
        harness.sink.pod_removed(f"default/gone-{i}")
    pod = harness.add_pod("p")
    harness.apply(harness.bind(pod, "n1"))
    await harness.settle()
    assert harness.outcomes[0].bound
    assert harness.sink._gone == set() and harness.sink._binding == set()


async def test_deleted_pod_is_not_retried(harness: Harness) -> None:
    pod = harness.add_pod("p")
    pods = harness.emulator.call(harness.emulator.api.resource, "v1", "pods")
    harness.emulator.call(harness.emulator.api.delete, pods, namespace="default", name="p")
    harness.apply(harness.bind(pod, "n1"))
    harness.start()
    await harness.settle()
    assert harness.outcomes == [binding.BindOutcome("default/p", "n1", False, "gone")]
    assert harness.sink.holding(harness.clock.now()) == set()


async def test_pod_deleted_while_queued_is_never_sent(harness: Harness) -> None:
    pod = harness.add_pod("p")
    harness.apply(harness.bind(pod, "n1"))
    harness.sink.pod_removed("default/p")
    harness.start()
    await harness.settle()
    assert harness.outcomes[0].failure == "gone"
    assert harness.binding_requests("p") == 0


async def test_server_error_forgets_the_pod_and_backs_off(harness: Harness) -> None:
    pod = harness.add_pod("p")
    harness.emulator.faults.add(
        faults.Fault("POST", "/api/v1/namespaces/*/pods/*/binding", status=500)
    )
    harness.apply(harness.bind(pod, "n1"))
    harness.start()
    await harness.settle()
    now = harness.clock.now()
    assert harness.outcomes[0].failure == "error"
    assert harness.assumed_on("default/p") is None
    assert harness.sink.holding(now) == {"default/p"}
    assert harness.sink.holding(now + 1.5) == set()
    assert harness.observer.bindings == ["error"]
    # The second failure doubles the backoff.
    harness.emulator.faults.add(
        faults.Fault("POST", "/api/v1/namespaces/*/pods/*/binding", status=500)
    )
    harness.apply(harness.bind(pod, "n1"))
    await harness.settle()
    assert harness.sink.holding(harness.clock.now() + 1.5) == {"default/p"}


async def test_timeout_retries_the_same_binding_and_binds_once(harness: Harness) -> None:
    pod = harness.add_pod("p")
    slow = faults.Fault("POST", "/api/v1/namespaces/*/pods/*/binding", delay=0.8)
    harness.emulator.faults.add(slow)
    harness.apply(harness.bind(pod, "n1"))
    harness.start()
    await harness.settle()
    assert harness.outcomes == [binding.BindOutcome("default/p", "n1", True, None)]
    assert harness.observer.bindings[0] == "timeout"
    assert harness.binding_requests("p") == 2
    stored = harness.stored("pods", "p")
    assert stored is not None and stored["spec"]["nodeName"] == "n1"


async def test_eviction_uses_the_eviction_api_and_explains(harness: Harness) -> None:
    pod = harness.add_pod("victim", node="n1")
    harness.apply(
        d.EvictPod(
            namespace="default",
            name="victim",
            uid=pod["metadata"]["uid"],
            node="n1",
            reason="preempted by default/vip",
        )
    )
    harness.start()
    await harness.settle()
    assert (
        harness.emulator.count("POST", "/api/v1/namespaces/{namespace}/pods/{name}/eviction") == 1
    )
    assert harness.stored("pods", "victim") is None
    assert ("victim", "Preempted", "Evicted from n1: preempted by default/vip") in harness.events()


async def test_annotations_and_nominations(harness: Harness) -> None:
    pod = harness.add_pod("p")
    uid = pod["metadata"]["uid"]
    nominate = d.NominatePod(namespace="default", name="p", uid=uid, node="n2")
    harness.apply(
        d.AnnotatePod(namespace="default", name="p", uid=uid, annotations={"a.io/b": "c"}),
        nominate,
    )
    harness.apply(nominate)  # the same node again: not written twice
    harness.start()
    await harness.settle()
    stored = harness.stored("pods", "p")
    assert stored is not None
    assert stored["metadata"]["annotations"]["a.io/b"] == "c"
    assert stored["status"]["nominatedNodeName"] == "n2"
    assert harness.emulator.count("PATCH", "/api/v1/namespaces/{namespace}/pods/{name}/status") == 1


async def test_annotations_of_a_pod_being_bound_ride_on_its_binding(harness: Harness) -> None:
    # The reservation plugin annotates in PreBind: scheduler mode then patches no pod at all.
    pod = harness.add_pod("p")
    uid = pod["metadata"]["uid"]
    harness.apply(
        d.AnnotatePod(namespace="default", name="p", uid=uid, annotations={"a.io/b": "c"}),
        harness.bind(pod, "n1"),
    )
    harness.start()
    await harness.settle()
    stored = harness.stored("pods", "p")
    assert stored is not None
    assert stored["spec"]["nodeName"] == "n1"
    assert stored["metadata"]["annotations"]["a.io/b"] == "c"
    assert harness.emulator.count("POST", BINDING) == 1
    assert harness.emulator.count("PATCH", "/api/v1/namespaces/{namespace}/pods/{name}") == 0


async def test_the_device_of_a_shared_gpu_rides_on_the_binding_and_counts_at_once(
    harness: Harness,
) -> None:
    manifest = conftest.pod("p")
    manifest["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
    pod = conftest.create(harness.emulator, manifest, plural="pods")
    harness.cache.add_pod(pod)
    uid = pod["metadata"]["uid"]
    harness.apply(
        d.AnnotatePod(namespace="default", name="p", uid=uid, annotations={"runai-gpu": "1"}),
        harness.bind(pod, "n1"),
    )
    # Assumed with its device before the binding is even sent: the next cycle counts it there.
    assumed = harness.cache.snapshot(harness.clock.now()).pods["default/p"]
    assert (assumed.node_name, assumed.gpu_devices) == ("n1", (1,))
    harness.start()
    await harness.settle()
    stored = harness.stored("pods", "p")
    assert stored is not None
    assert stored["spec"]["nodeName"] == "n1"
    assert stored["metadata"]["annotations"]["runai-gpu"] == "1"
    assert harness.emulator.count("PATCH", "/api/v1/namespaces/{namespace}/pods/{name}") == 0


def marked(group: str, *waiting: tuple[str, reasons.Reason, bool]) -> d.MarkPending:
    """A gang's MarkPending: ``(pod key, reason, waits for capacity)`` per pod."""
    return d.MarkPending(
        group=group,
        pods=tuple(
            pending.PodPending(key=key, reason=why, capacity=capacity)
            for key, why, capacity in waiting
        ),
    )


def scheduled_condition(harness: Harness, name: str) -> tuple[str, str, str]:
    stored = harness.stored("pods", name)
    assert stored is not None
    (condition,) = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
    return condition["status"], condition["reason"], condition["message"]


async def test_pod_reason_is_written_only_when_it_changes(harness: Harness) -> None:
    pod = harness.add_pod("p")
    harness.start()
    fits = waiting("0/2 nodes fit: 2 Insufficient cpu")
    harness.apply(marked("default/p", ("default/p", fits, True)))
    harness.apply(marked("default/p", ("default/p", fits, True)))
    await harness.settle()
    closed = reasons.new(reasons.ReasonCode.QUEUE_CLOSED, "queue q is closed")
    harness.apply(marked("default/p", ("default/p", closed, False)))
    await harness.settle()
    assert harness.emulator.count("PATCH", POD_STATUS) == 2
    # Not capacity: the reason is the code, which no autoscaler acts on.
    assert scheduled_condition(harness, "p") == ("False", "QueueClosed", "queue q is closed")
    # One Event for the pod's one reason: the new message replaced the old, counted.
    (event,) = [e for e in harness.stored_events() if e["reason"] == "FailedScheduling"]
    assert (event["message"], event["count"]) == ("queue q is closed", 2)
    assert event["involvedObject"]["uid"] == pod["metadata"]["uid"]
    assert event["involvedObject"]["resourceVersion"]


async def test_new_words_for_the_same_reason_wait_ten_seconds_then_land(
    timed: tuple[Harness, clocks.VirtualClock],
) -> None:
    # A starving gang's reason counts seconds: a cycle a second must not rewrite its pods
    # (and Event them) a second; a quiet cycle after ten seconds writes the newest words,
    # though the gang is parked and decided nothing since; a new reason is written at once.
    harness, clock = timed

    def starving(second: int) -> reasons.Reason:
        return waiting(f"starving for {300 + second}s: expected in {20 - second}s")

    harness.apply(marked("default/g", ("default/p", starving(0), True)))
    await harness.settle()
    for second in range(1, 10):
        clock.advance(1.0)
        harness.apply(marked("default/g", ("default/p", starving(second), True)))
        await harness.settle()
    assert harness.emulator.count("PATCH", POD_STATUS) == 1
    assert scheduled_condition(harness, "p")[2] == starving(0).message
    clock.advance(1.0)
    harness.apply()  # parked: the cycle decides nothing for it
    await harness.settle()
    assert harness.emulator.count("PATCH", POD_STATUS) == 2
    assert scheduled_condition(harness, "p") == ("False", "Unschedulable", starving(9).message)
    (event,) = [e for e in harness.stored_events() if e["reason"] == "FailedScheduling"]
    assert event["message"] == starving(9).message
    harness.apply()  # nothing more held back: nothing more written
    await harness.settle()
    assert harness.emulator.count("PATCH", POD_STATUS) == 2
    clock.advance(1.0)
    closed = reasons.new(reasons.ReasonCode.QUEUE_CLOSED, "queue q is closed")
    harness.apply(marked("default/g", ("default/p", closed, False)))
    await harness.settle()
    assert harness.emulator.count("PATCH", POD_STATUS) == 3
    assert scheduled_condition(harness, "p") == ("False", "QueueClosed", closed.message)


async def test_a_gang_still_gathering_its_members_is_told_after_five_seconds(
    timed: tuple[Harness, clocks.VirtualClock],
) -> None:
    # A Job's pods come within a second: the first members waiting for the rest are no news
    # (no condition, no Event) unless the wait lasts GATHERING seconds; a gang placed before
    # then cost no write but its bindings.
    harness, clock = timed
    made = {name: harness.add_pod(name) for name in ("quick-0", "quick-1", "slow-0", "slow-1")}

    def gathering(group: str, *names: str) -> d.MarkPending:
        why = reasons.new(
            reasons.ReasonCode.NOT_ENOUGH_PODS, f"pod group {group}: needs minMember 3, has 2"
        )
        return marked(f"default/{group}", *((f"default/{n}", why, False) for n in names))

    harness.apply(gathering("quick", "quick-0", "quick-1"), gathering("slow", "slow-0", "slow-1"))
    await harness.settle()
    clock.advance(1.0)
    harness.apply(
        harness.bind(made["quick-0"], "n1"),
        harness.bind(made["quick-1"], "n1"),
        gathering("slow", "slow-0", "slow-1"),
    )
    await harness.settle()
    assert harness.emulator.count("PATCH", POD_STATUS) == 0
    assert [e for e in harness.stored_events() if e["reason"] == "FailedScheduling"] == []
    clock.advance(4.0)
    harness.apply()  # parked since: the cycle decides nothing for it
    await harness.settle()
    assert harness.emulator.count("PATCH", POD_STATUS) == 2
    assert scheduled_condition(harness, "slow-0")[:2] == ("False", "NotEnoughPods")
    told = {
        e["involvedObject"]["name"]
        for e in harness.stored_events()
        if e["reason"] == "FailedScheduling"
    }
    assert told == {"slow-0", "slow-1"}


async def test_the_same_reason_every_cycle_is_counted_once_a_minute(
    timed: tuple[Harness, clocks.VirtualClock],
) -> None:
    harness, clock = timed
    fits = waiting("0/1 nodes fit: 1 Insufficient cpu")
    counts = []
    for second in range(131):  # a cycle a second, for two minutes and more
        if second:
            clock.advance(1.0)
        harness.apply(marked("default/p", ("default/p", fits, True)))
        await harness.settle()
        if second in (59, 60, 119, 120, 130):
            (event,) = [e for e in harness.stored_events() if e["reason"] == "FailedScheduling"]
            counts.append(event["count"])
    assert counts == [1, 2, 2, 3, 3]
    assert event["message"] == fits.message
    assert harness.emulator.count("PATCH", POD_STATUS) == 1


async def test_a_gang_is_written_in_one_burst_and_says_why(harness: Harness) -> None:
    for i in range(4):
        harness.add_pod(f"w-{i}")
    harness.start()
    room = waiting("0/2 nodes fit: 2 Insufficient nvidia.com/gpu")
    harness.apply(marked("default/g", *((f"default/w-{i}", room, True) for i in range(4))))
    await harness.settle()
    assert harness.sink.pending.bursts == 1
    for i in range(4):
        assert scheduled_condition(harness, f"w-{i}") == ("False", "Unschedulable", room.message)
    # The gang now waits for its queue: every member says so, in one more burst.
    limit = reasons.new(
        reasons.ReasonCode.QUEUE_AT_LIMIT, "pod group default/g: queue q at limit for cpu (8/8)"
    )
    harness.apply(marked("default/g", *((f"default/w-{i}", limit, False) for i in range(4))))
    await harness.settle()
    assert harness.sink.pending.bursts == 2
    assert {scheduled_condition(harness, f"w-{i}")[1] for i in range(4)} == {"QueueOverLimit"}
    messages = {e["involvedObject"]["name"]: e["message"] for e in harness.stored_events()}
    assert messages == {f"w-{i}": limit.message for i in range(4)}


async def test_a_superseded_burst_writes_nothing(harness: Harness) -> None:
    harness.add_pod("p")
    first = waiting("0/2 nodes fit: 2 Insufficient cpu")
    second = reasons.new(reasons.ReasonCode.NOT_ENOUGH_PODS, "gang needs minMember 3, has 2")
    # Both decided before a worker runs: the first burst is stale when its turn comes.
    harness.apply(marked("default/p", ("default/p", first, True)))
    harness.apply(marked("default/p", ("default/p", second, False)))
    harness.start()
    await harness.settle()
    assert scheduled_condition(harness, "p") == ("False", "NotEnoughPods", second.message)
    assert harness.emulator.count("PATCH", POD_STATUS) == 1


async def test_a_newer_reason_lands_after_an_older_one_still_in_flight(
    harness: Harness,
) -> None:
    # A gang first waits for its queue's limit, then (the limit raised) for nodes, while the
    # first patch is slow: the newer reason must be what stays on the pod, or an autoscaler
    # never learns that the pod needs a node.
    harness.add_pod("p")
    harness.emulator.faults.add(
        faults.Fault("PATCH", "/api/v1/namespaces/*/pods/p/status", delay=0.5)
    )
    harness.start()
    limited = reasons.new(reasons.ReasonCode.QUEUE_AT_LIMIT, "queue q at limit for cpu (8/8)")
    harness.apply(marked("default/g", ("default/p", limited, False)))
    for _ in range(500):  # bounded: the first patch is sent at once
        if harness.emulator.count("PATCH", POD_STATUS):
            break
        await asyncio.sleep(0.01)
    assert harness.emulator.count("PATCH", POD_STATUS) == 1
    room = waiting("0/2 nodes fit: 2 Insufficient cpu")
    harness.apply(marked("default/g", ("default/p", room, True)))
    await harness.settle()
    assert scheduled_condition(harness, "p") == ("False", "Unschedulable", room.message)
    assert harness.emulator.count("PATCH", POD_STATUS) == 2


async def test_a_failed_condition_write_is_sent_again(harness: Harness) -> None:
    # The API server times out the first write (as an overloaded one does): the gang is
    # decided once (parked afterwards), so the binder itself must send it again.
    harness.add_pod("p")
    harness.emulator.faults.add(
        faults.Fault("PATCH", "/api/v1/namespaces/*/pods/p/status", status=504)
    )
    harness.start()
    room = waiting("0/2 nodes fit: 2 Insufficient cpu")
    harness.apply(marked("default/g", ("default/p", room, True)))
    await harness.settle()
    assert scheduled_condition(harness, "p") == ("False", "Unschedulable", room.message)
    assert harness.emulator.count("PATCH", POD_STATUS) == 2
    assert harness.sink.pending.written("default/p") == ("Unschedulable", room.message)


async def test_a_held_gang_leaves_the_autoscalers_list_at_once_and_returns(
    harness: Harness,
) -> None:
    for i in range(3):
        harness.add_pod(f"h-{i}")
    harness.start()
    room = waiting("0/2 nodes fit: 2 Insufficient nvidia.com/gpu")
    gang = marked("default/h", *((f"default/h-{i}", room, True) for i in range(3)))
    harness.apply(gang)
    await harness.settle()
    verdict = reasons.new(
        reasons.ReasonCode.AUTOSCALER_CANNOT_FIT,
        "pod group default/h: Karpenter cannot place 1 of its 3 waiting pods",
        group="default/h",
    )
    # The hold rewrites the gang's pods from its last decision: no cycle needed.
    harness.sink.hold_pending({"default/h": verdict})
    await harness.settle()
    assert harness.sink.pending.bursts == 2
    for i in range(3):
        assert scheduled_condition(harness, f"h-{i}") == (
            "False",
            "AutoscalerCannotFit",
            verdict.message,
        )
    messages = {e["involvedObject"]["name"]: e["message"] for e in harness.stored_events()}
    assert messages == {f"h-{i}": verdict.message for i in range(3)}
    # The next cycle repeats the capacity decision: still held, nothing written.
    harness.apply(gang)
    await harness.settle()
    assert harness.sink.pending.bursts == 2
    # The hold ends: shown to the autoscalers again, in one burst.
    harness.sink.hold_pending({})
    await harness.settle()
    assert harness.sink.pending.bursts == 3
    assert {scheduled_condition(harness, f"h-{i}")[1] for i in range(3)} == {"Unschedulable"}


def _reservation(name: str) -> Object:
    return {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "r", "resources": {"requests": {"cpu": "2"}}}]}
            },
            "owners": [{"object": {"name": "trainer"}}],
        },
    }


async def test_reservation_lifecycle_decisions(harness: Harness) -> None:
    conftest.create(harness.emulator, _reservation("held"), plural="reservations")
    conftest.create(harness.emulator, _reservation("late"), plural="reservations")
    harness.start()
    held = resources.ResourceList({"cpu": 2000, "pods": 1000})
    harness.apply(
        d.SetReservationAvailable(namespace="default", name="held", node="n1", allocatable=held),
        d.AllocateReservation(
            namespace="default",
            name="held",
            owner="trainer",
            owner_uid="u1",
            requests=resources.ResourceList({"cpu": 2000}),
            succeeded=True,
        ),
        d.Unschedulable(
            subject=d.Subject.RESERVATION,
            key="default/late",
            reason=waiting("0/2 nodes fit: 2 Insufficient cpu"),
        ),
    )
    await harness.settle()
    status = (
        harness.stored("reservations", "held", api_version="scheduling.berth.io/v1alpha1") or {}
    )["status"]
    assert status["phase"] == "Succeeded"
    assert status["nodeName"] == "n1"
    assert status["allocatable"] == {"cpu": "2", "pods": "1"}
    assert status["allocated"] == {"cpu": "2"}
    assert status["currentOwners"] == [{"namespace": "default", "name": "trainer", "uid": "u1"}]
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "Succeeded")
    late = (
        harness.stored("reservations", "late", api_version="scheduling.berth.io/v1alpha1") or {}
    )["status"]
    (scheduled,) = late["conditions"]
    assert (scheduled["type"], scheduled["status"]) == ("Scheduled", "False")
    harness.apply(
        d.EndReservation(
            namespace="default",
            name="late",
            phase="Failed",
            reason="NodeGone",
            message="its node was deleted",
        )
    )
    await harness.settle()
    late = (
        harness.stored("reservations", "late", api_version="scheduling.berth.io/v1alpha1") or {}
    )["status"]
    assert late["phase"] == "Failed"
    reasons = {(e[0], e[1]) for e in harness.events()}
    assert {
        ("held", "Scheduled"),
        ("held", "Allocated"),
        ("late", "FailedScheduling"),
        ("late", "NodeGone"),
    } <= reasons


async def test_an_availability_landing_after_the_owner_never_revives_the_reservation(
    harness: Harness,
) -> None:
    # Both decisions come from one cycle (the owner was applied with its reservation); the
    # workers may write them in either order.
    conftest.create(harness.emulator, _reservation("held"), plural="reservations")
    harness.start()
    harness.apply(
        d.AllocateReservation(
            namespace="default",
            name="held",
            owner="trainer",
            owner_uid="u1",
            requests=resources.ResourceList({"cpu": 2000}),
            succeeded=True,
        )
    )
    await harness.settle()
    held = resources.ResourceList({"cpu": 2000, "pods": 1000})
    harness.apply(
        d.SetReservationAvailable(namespace="default", name="held", node="n1", allocatable=held)
    )
    await harness.settle()
    status = (
        harness.stored("reservations", "held", api_version="scheduling.berth.io/v1alpha1") or {}
    )["status"]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert (status["phase"], status["nodeName"]) == ("Succeeded", "n1")
    assert conditions == {"Scheduled": ("True", "Scheduled"), "Ready": ("False", "Succeeded")}


async def test_a_pod_not_tried_this_cycle_keeps_its_reason(harness: Harness) -> None:
    harness.add_pod("p")
    harness.start()
    why = "0/2 nodes fit: 2 Insufficient cpu"
    harness.apply(marked("default/p", ("default/p", waiting(why), True)))
    await harness.settle()
    # A cycle that did not try the pod decides nothing about it (pending.decide leaves it
    # out): only its Unschedulable record says "not tried", which writes nothing.
    harness.apply(d.Unschedulable(subject=d.Subject.POD, key="default/p", reason=d.NOT_TRIED))
    await harness.settle()
    assert scheduled_condition(harness, "p") == ("False", "Unschedulable", why)
    (event,) = harness.stored_events()
    assert (event["message"], event["count"]) == (why, 1)
