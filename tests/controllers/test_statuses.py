"""The status writer (``berth.controllers.statuses``) against the emulator.

We test these aspects:

- merge patches (table): equal is empty, changed and new keys are set, nested maps are diffed,
  keys that went become null, lists are replaced whole;
- one pass writes the status of every observed PodGroup and Queue that differs, through the
  status subresource, and records the Events the change is worth;
- a status already written is not written again while Kopf has not observed it yet (seconds
  later too: its conditions keep the transition time being written), nor once the observed
  status matches; a changed reason is written again;
- new words for the same reason (a starving gang's countdown) wait until ten seconds have
  passed since the group's last write, then the newest are written, with their Event; a new
  reason is written at once;
- a pass computes again the status of a group whose facts changed (a bound member starts
  running), and only then: with the same facts and the status observed, nothing is written;
- nothing is written before the scheduler's first snapshot; a group deleted meanwhile is no
  error;
- the writes go through the write primitive with the leader's fence: once the Lease may be
  another replica's, nothing is sent and a Kopf handler's write fails (so Kopf retries it).
"""

from __future__ import annotations

import asyncio
import collections.abc
import typing

import pytest

from berth.controllers import observed, statuses
from berth.emulator import testing
from berth.kube.transport import clients, errors, events, fencing
from berth.scheduler.framework import decisions
from berth.scheduler.framework import reasons as why
from berth.scheduler.snapshot import snapshots, wire
from berth.status import observations
from berth.util import clocks
from tests.kube import conftest
from tests.scheduler import builders as b

Object = dict[str, typing.Any]
GROUPS = "scheduling.berth.io/v1alpha1"


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        ({"a": 1}, {"a": 1}, {}),
        ({"a": 1}, {"a": 2, "b": 3}, {"a": 2, "b": 3}),
        ({"m": {"x": "1", "y": "2"}}, {"m": {"x": "1", "y": "3"}}, {"m": {"y": "3"}}),
        ({"m": {"x": "1", "y": "2"}}, {"m": {"x": "1"}}, {"m": {"y": None}}),
        ({"a": 1, "gone": 2}, {"a": 1}, {"gone": None}),
        ({"l": [1, 2]}, {"l": [1]}, {"l": [1]}),
        ({}, {"m": {}}, {"m": {}}),
    ],
    ids=["equal", "set", "nested", "nested-removed", "removed", "list", "new-empty-map"],
)
def test_merge_patch(old: Object, new: Object, patch: Object) -> None:
    assert statuses.merge_patch(old, new) == patch


class Board:
    def __init__(self) -> None:
        self.snap: snapshots.Snapshot | None = None
        self.res: decisions.CycleResult | None = None

    def snapshot(self) -> snapshots.Snapshot | None:
        return self.snap

    def result(self) -> decisions.CycleResult | None:
        return self.res


class Writer:
    def __init__(self, emulator: testing.RunningEmulator, api: clients.AsyncApiClient) -> None:
        self.emulator = emulator
        self.api = api
        self.objects = observed.ObservedObjects()
        self.board = Board()
        self.recorder = events.EventRecorder(api, clock=clocks.SystemClock())
        # Virtual time for the writer: the test says when seconds pass, not the machine's load.
        self.clock = clocks.VirtualClock(clocks.SystemClock().now())
        self.writer = statuses.StatusWriter(
            api,
            objects=self.objects,
            board=self.board,
            clock=self.clock,
            recorder=self.recorder,
        )

    def stored(self, plural: str, name: str, namespace: str = "default") -> Object:
        api = self.emulator.api
        resource = self.emulator.call(api.resource, GROUPS, plural)
        found = self.emulator.call(api.storage.get, resource.key, namespace, name)
        assert found is not None
        return dict(found)

    def observe(self, kind: str, plural: str, name: str, namespace: str = "default") -> None:
        """What Kopf's watching handler does when it sees the object."""
        seen = observations.observe(
            kind, body=self.stored(plural, name, namespace), parse_time=wire.parse_time
        )
        assert seen is not None
        self.objects.put(seen)

    def cycle(self, *, reasons: dict[str, why.Reason] | None = None) -> None:
        """The scheduler's last snapshot and result, from what the API server holds."""
        cache = b.cache_of(b.node("n1", cpu="8"))
        api = self.emulator.api
        for plural, adder in (("queues", "add_queue"), ("podgroups", "add_pod_group")):
            resource = self.emulator.call(api.resource, GROUPS, plural)
            for obj in self.emulator.call(api.storage.list, resource.key):
                getattr(cache, adder)(obj)
        pods = self.emulator.call(api.resource, "v1", "pods")
        for obj in self.emulator.call(api.storage.list, pods.key):
            cache.add_pod(obj)
        self.board.snap = cache.snapshot(clocks.SystemClock().now())
        self.board.res = decisions.CycleResult(session_id="s", group_why=reasons or {})

    def patches(self) -> int:
        return self.emulator.count(
            "PATCH",
            "/apis/scheduling.berth.io/v1alpha1/namespaces/{namespace}/podgroups/{name}/status",
        ) + self.emulator.count("PATCH", "/apis/scheduling.berth.io/v1alpha1/queues/{name}/status")


@pytest.fixture
async def writer(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> collections.abc.AsyncIterator[Writer]:
    running = Writer(berth_crds, connection.api)
    stop = asyncio.Event()
    task = asyncio.create_task(running.recorder.run(stop))
    await asyncio.sleep(0)
    try:
        yield running
    finally:
        stop.set()
        await task


async def test_writes_what_differs_and_explains(writer: Writer) -> None:
    emulator = writer.emulator
    conftest.create(emulator, b.queue("team"), plural="queues", namespace=None)
    conftest.create(emulator, b.pod_group("g", min_member=2, queue="team"), plural="podgroups")
    for i in range(2):
        conftest.create(emulator, b.pod(f"g-{i}", group="g", cpu="100", memory=None), plural="pods")
    writer.observe("Queue", "queues", "team", namespace="")
    writer.observe("PodGroup", "podgroups", "g")
    text = "gang needs minMember 2, only 0 could be placed; 0/1 nodes fit: 1 Insufficient cpu"
    reason = why.new(why.ReasonCode.NOT_ENOUGH_RESOURCES, text)
    writer.cycle(reasons={"default/g": reason})
    assert await writer.writer.write_once() == 2
    group = writer.stored("podgroups", "g")["status"]
    assert group["phase"] == "Inqueue"
    assert group["conditions"][0]["message"] == text
    queue = writer.stored("queues", "team", namespace="")["status"]
    assert queue["pending"] == 1
    await writer.recorder.drain()
    assert writer.recorder.posted == 1  # FailedScheduling on the group; the queue is valid

    # Kopf has not observed the write yet: the same write is not repeated, also seconds later
    # (the conditions keep the transition time being written).
    writer.clock.advance(5)
    writer.cycle(reasons={"default/g": reason})
    assert await writer.writer.write_once() == 0
    # Observed and unchanged: nothing to write.
    writer.observe("Queue", "queues", "team", namespace="")
    writer.observe("PodGroup", "podgroups", "g")
    assert await writer.writer.write_once() == 0
    # A new reason is written.
    writer.cycle(
        reasons={"default/g": why.new(why.ReasonCode.QUEUE_CLOSED, "queue team is closed")}
    )
    assert await writer.writer.write_once() == 1
    assert writer.stored("podgroups", "g")["status"]["conditions"][0]["reason"] == "QueueClosed"
    assert writer.patches() == 3


async def test_new_words_for_the_same_reason_wait_ten_seconds(writer: Writer) -> None:
    conftest.create(writer.emulator, b.pod_group("g", min_member=2), plural="podgroups")
    for i in range(2):
        conftest.create(
            writer.emulator, b.pod(f"g-{i}", group="g", cpu="100", memory=None), plural="pods"
        )

    def starving(waited: int) -> dict[str, why.Reason]:
        text = f"starving for {waited}s: holding 1 node for the gang"
        return {"default/g": why.new(why.ReasonCode.NOT_ENOUGH_RESOURCES, text)}

    def message() -> str:
        return str(writer.stored("podgroups", "g")["status"]["conditions"][0]["message"])

    writer.observe("PodGroup", "podgroups", "g")
    writer.cycle(reasons=starving(300))
    assert await writer.writer.write_once() == 1
    for waited in (303, 306, 309):  # Kopf observes each write; the count moves every cycle
        writer.clock.advance(3)
        writer.observe("PodGroup", "podgroups", "g")
        writer.cycle(reasons=starving(waited))
        assert await writer.writer.write_once() == 0
    assert message() == "starving for 300s: holding 1 node for the gang"
    writer.clock.advance(1.5)  # ten seconds since the last write: the newest words
    writer.cycle(reasons=starving(310))
    assert await writer.writer.write_once() == 1
    assert message() == "starving for 310s: holding 1 node for the gang"
    await writer.recorder.drain()
    assert [s[:2] for s in writer.recorder.series(_group_ref(writer))] == [
        ("FailedScheduling", "starving for 310s: holding 1 node for the gang")
    ]

    # A new reason is news: written at once, a second after the last write.
    writer.clock.advance(1)
    writer.observe("PodGroup", "podgroups", "g")
    writer.cycle(
        reasons={"default/g": why.new(why.ReasonCode.QUEUE_CLOSED, "queue team is closed")}
    )
    assert await writer.writer.write_once() == 1
    assert writer.stored("podgroups", "g")["status"]["conditions"][0]["reason"] == "QueueClosed"


async def test_a_member_that_starts_running_is_counted(writer: Writer) -> None:
    emulator = writer.emulator
    conftest.create(emulator, b.pod_group("g", min_member=2), plural="podgroups")
    for i in range(2):
        bound = b.pod(f"g-{i}", group="g", cpu="100", memory=None, node="n1")
        conftest.create(emulator, bound, plural="pods")
    writer.observe("PodGroup", "podgroups", "g")
    writer.cycle()
    assert await writer.writer.write_once() == 1
    assert writer.stored("podgroups", "g")["status"]["running"] == 0
    writer.observe("PodGroup", "podgroups", "g")
    for _ in range(2):  # the same facts, the status observed: nothing to write
        writer.cycle()
        assert await writer.writer.write_once() == 0

    # Its group's counts of pending and placed pods stay; only the member's phase changes.
    conftest.set_phase(emulator, "g-0", "Running")
    writer.cycle()
    assert await writer.writer.write_once() == 1
    status = writer.stored("podgroups", "g")["status"]
    assert (status["phase"], status["scheduled"], status["running"]) == ("Scheduled", 2, 1)


def _group_ref(writer: Writer) -> events.ObjectRef:
    stored = writer.stored("podgroups", "g")
    return events.ObjectRef("PodGroup", "g", "default", stored["metadata"]["uid"])


async def test_nothing_is_written_before_the_first_snapshot(writer: Writer) -> None:
    conftest.create(writer.emulator, b.pod_group("g"), plural="podgroups")
    writer.observe("PodGroup", "podgroups", "g")
    assert await writer.writer.write_once() == 0
    assert writer.patches() == 0


async def test_group_deleted_meanwhile_is_no_error(writer: Writer) -> None:
    emulator = writer.emulator
    conftest.create(emulator, b.pod_group("g"), plural="podgroups")
    writer.observe("PodGroup", "podgroups", "g")
    writer.cycle()
    resource = emulator.call(emulator.api.resource, GROUPS, "podgroups")
    emulator.call(emulator.api.delete, resource, namespace="default", name="g")
    assert await writer.writer.write_once() == 1  # attempted; the 404 is not a failure
    assert writer.writer.writes == 0


async def test_a_stale_fence_sends_no_status(writer: Writer) -> None:
    emulator = writer.emulator
    conftest.create(emulator, b.pod_group("g"), plural="podgroups")
    now = 100.0
    fence = fencing.Fence(renew_deadline=3.0, now=lambda: now)
    fence.renewed(99.0)
    fenced = statuses.StatusWriter(
        writer.api,
        objects=writer.objects,
        board=writer.board,
        clock=clocks.SystemClock(),
        fence=fence,
    )
    writer.observe("PodGroup", "podgroups", "g")
    writer.cycle()
    now = 103.0  # past the renew deadline: a paused leader resuming
    assert await fenced.write_once() == 1  # attempted, refused before sending
    seen = writer.objects.get("PodGroup", "default/g")
    assert seen is not None
    with pytest.raises(errors.KubeError, match="Fenced"):
        await fenced.write_one(seen)
    assert (fenced.writes, writer.patches(), fence.refused) == (0, 0, 2)
    assert "status" not in writer.stored("podgroups", "g")
