"""The live operator and ``berth sim`` give PodGroups and Queues the same status for the same facts.

Each row is a cycle's facts: the PodGroup, its members' states, the Queues, and what the cycle
published (the group's why-pending reason, the queues' lines and summaries). The simulator
(:class:`berth.sim.cluster.InMemoryCluster`) holds the objects, takes its snapshot and applies
the result; the live operator's status pass (:meth:`berth.controllers.statuses.StatusWriter.
write_once`, the code path of Kopf's status handlers) gets a snapshot of the same objects and
the same result, and patches the emulator's API server. The status stored there must equal the
simulator's, field for field. The Reservation's table, the one that must not come back to
``Available``, is :mod:`tests.status.test_reservations_sim_and_live`.

We test these aspects (one table, every row on both sides):

- a gang waiting for pods: ``Pending``, ``NotEnoughPods``;
- a gang waiting for room, second in its queue's line: ``Inqueue``, ``NotEnoughResources``,
  its position;
- a gang placed and running: ``Running``, ``Scheduled`` True, counts;
- a gang whose schedule timeout passed, asking to fail: ``Failed`` with ``Timeout``; asking
  to be requeued: ``Inqueue`` with ``Timeout``;
- a gang whose members all succeeded: ``Finished``; one that lost members: ``Failed``;
- a queue with the Proportion plugin's summary (usage, fair share), one without (usage from
  the snapshot), a closed queue, and one whose parent does not exist (``Invalid``).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import pytest

from berth.api import resources
from berth.controllers import observed, statuses
from berth.emulator import testing
from berth.kube.transport import clients
from berth.scheduler.framework import decisions, reasons
from berth.scheduler.snapshot import snapshots, wire
from berth.sim import cluster
from berth.status import observations
from berth.util import clocks
from tests.kube import conftest
from tests.scheduler import builders as b

Object = dict[str, typing.Any]
NOW = b.EPOCH + 3600
GROUPS = "scheduling.berth.io/v1alpha1"
C = reasons.ReasonCode


@dataclasses.dataclass(frozen=True)
class Row:
    """One cycle's facts, and what the PodGroup ``g`` (and the queue ``team``) should show."""

    members: tuple[Object, ...]  # the pods of the group g
    phase: str
    reason: str  # the Scheduled condition's reason
    min_member: int = 2
    why: reasons.Reason | None = None  # what the cycle said about g
    on_timeout: str | None = None  # spec.onScheduleTimeout
    queues: tuple[Object, ...] = (b.queue("team"),)
    summaries: collections.abc.Mapping[str, decisions.QueueStatusSummary] = dataclasses.field(
        default_factory=dict
    )
    waiting: collections.abc.Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    queue_state: str = "Open"


def member(i: int, *, node: str | None = None, phase: str | None = None) -> Object:
    return b.pod(f"g-{i}", group="g", cpu="1", memory="1Gi", node=node, phase=phase)


def others(name: str) -> list[Object]:
    """A gang ahead of g in the queue's line, waiting too."""
    return b.gang(name, 2, queue="team", cpu="1", memory="1Gi")


NO_ROOM = reasons.new(C.NOT_ENOUGH_RESOURCES, "0/1 nodes fit: 1 Insufficient cpu")
TIMED_OUT = reasons.new(C.GANG_TIMED_OUT, "gang not placed within scheduleTimeoutSeconds 60")
SUMMARY = decisions.QueueStatusSummary(
    allocated=resources.ResourceList({"cpu": 2000, "memory": 2 * 1024**3 * 1000}),
    requested=resources.ResourceList({"cpu": 4000}),
    fair_share=resources.ResourceList({"cpu": 6000}),
    pending=1,
    running=1,
)

ROWS = {
    "waiting-for-pods": Row((member(0),), "Pending", "NotEnoughPods", min_member=3),
    "waiting-for-room-second-in-line": Row(
        (member(0), member(1)),
        "Inqueue",
        "NotEnoughResources",
        why=NO_ROOM,
        waiting={"team": ("default/ahead", "default/g")},
    ),
    "running": Row(
        (member(0, node="n1", phase="Running"), member(1, node="n1", phase="Running")),
        "Running",
        "Scheduled",
        summaries={"team": SUMMARY},
    ),
    "timed-out-and-failing": Row(
        (member(0), member(1)), "Failed", "Timeout", why=TIMED_OUT, on_timeout="Fail"
    ),
    "timed-out-and-requeued": Row(
        (member(0), member(1)), "Inqueue", "Timeout", why=TIMED_OUT, on_timeout="Requeue"
    ),
    "finished": Row(
        (member(0, node="n1", phase="Succeeded"), member(1, node="n1", phase="Succeeded")),
        "Finished",
        "Scheduled",
    ),
    "lost-members": Row(
        (member(0, node="n1", phase="Succeeded"), member(1, node="n1", phase="Failed")),
        "Failed",
        "Unschedulable",  # not placed any more, and no cycle said why
    ),
    "closed-queue": Row(
        (member(0), member(1)),
        "Inqueue",
        "QueueClosed",
        why=reasons.new(C.QUEUE_CLOSED, "queue team is Closed"),
        queues=(b.queue("team", state="Closed"),),
        queue_state="Closed",
    ),
    "queue-without-its-parent": Row(
        (member(0), member(1)),
        "Inqueue",
        "QueueInvalid",
        why=reasons.new(C.QUEUE_INVALID, "queue team: parent queue org does not exist"),
        queues=(b.queue("team", parent="org"),),
        queue_state="Invalid",
    ),
}


def group(row: Row) -> Object:
    obj = b.pod_group("g", min_member=row.min_member, queue="team", timeout=60)
    if row.on_timeout is not None:
        obj["spec"]["onScheduleTimeout"] = row.on_timeout
    return obj


def pods(row: Row) -> list[Object]:
    ahead = others("ahead") if row.waiting else []
    return [*ahead, *row.members]


def result(row: Row) -> decisions.CycleResult:
    return decisions.CycleResult(
        session_id="s",
        group_why={"default/g": row.why} if row.why is not None else {},
        waiting=row.waiting,
        queues=row.summaries,
    )


def sim_statuses(row: Row) -> dict[str, Object]:
    sim = cluster.InMemoryCluster(clock=clocks.VirtualClock(NOW), scheduler_names=(b.SCHEDULER,))
    sim.put(b.node("n1", cpu="8"))
    for obj in [*row.queues, group(row), *pods(row)]:
        sim.put(obj)
    sim.snapshot()  # the snapshot the cycle was decided on
    sim.apply(result(row))
    out: dict[str, Object] = {}
    for kind, namespace, name in [("PodGroup", "default", "g"), ("Queue", None, "team")]:
        stored = sim.get(kind, namespace=namespace, name=name)
        assert stored is not None
        out[kind] = dict(stored.get("status") or {})
    return out


class Board:
    def __init__(self, snapshot: snapshots.Snapshot, cycle: decisions.CycleResult) -> None:
        self.snap, self.res = snapshot, cycle

    def snapshot(self) -> snapshots.Snapshot | None:
        return self.snap

    def result(self) -> decisions.CycleResult | None:
        return self.res


def stored(emulator: testing.RunningEmulator, plural: str, name: str, namespace: str) -> Object:
    api = emulator.api
    resource = emulator.call(api.resource, GROUPS, plural)
    found = emulator.call(api.storage.get, resource.key, namespace, name)
    assert found is not None
    return dict(found)


async def live_statuses(
    emulator: testing.RunningEmulator, api: clients.AsyncApiClient, row: Row
) -> dict[str, Object]:
    for obj in row.queues:
        conftest.create(emulator, obj, plural="queues", namespace=None)
    conftest.create(emulator, group(row), plural="podgroups")
    # The snapshot the informers would give: the API's Queues and PodGroups, the row's pods.
    cache = b.cache_of(b.node("n1", cpu="8"), *pods(row))
    where = {"PodGroup": ("podgroups", "g", "default"), "Queue": ("queues", "team", "")}
    found = {kind: stored(emulator, *place) for kind, place in where.items()}
    cache.add_queue(found["Queue"])
    cache.add_pod_group(found["PodGroup"])
    objects = observed.ObservedObjects()
    for kind, body in found.items():
        seen = observations.observe(kind, body=body, parse_time=wire.parse_time)
        assert seen is not None
        objects.put(seen)
    writer = statuses.StatusWriter(
        api,
        objects=objects,
        board=Board(cache.snapshot(NOW), result(row)),
        clock=clocks.VirtualClock(NOW),
    )
    assert await writer.write_once() == 2
    return {
        kind: dict(stored(emulator, *place).get("status") or {}) for kind, place in where.items()
    }


def scheduled(status: Object) -> Object:
    return next(c for c in status["conditions"] if c["type"] == "Scheduled")


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
async def test_sim_and_live_write_the_same_podgroup_and_queue_status(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection, row: Row
) -> None:
    live = await live_statuses(berth_crds, connection.api, row)
    sim = sim_statuses(row)
    assert sim == live
    assert (sim["PodGroup"]["phase"], scheduled(sim["PodGroup"])["reason"]) == (
        row.phase,
        row.reason,
    )
    assert sim["Queue"]["state"] == row.queue_state


def test_the_second_in_line_knows_its_place() -> None:
    status = sim_statuses(ROWS["waiting-for-room-second-in-line"])["PodGroup"]
    assert (status["queuePosition"], status["queuePending"]) == (2, 2)
    assert scheduled(status)["message"] == "0/1 nodes fit: 1 Insufficient cpu"


def test_a_running_gang_counts_its_members_and_its_queue_the_plugins_usage() -> None:
    found = sim_statuses(ROWS["running"])
    assert {k: found["PodGroup"][k] for k in ("scheduled", "running", "succeeded")} == {
        "scheduled": 2,
        "running": 2,
        "succeeded": 0,
    }
    assert found["Queue"]["allocated"] == {"cpu": "2", "memory": "2Gi"}
    assert found["Queue"]["fairShare"] == {"cpu": "6"}
    assert found["Queue"]["runningPods"] == 2


def test_without_a_summary_the_queue_shows_the_snapshots_usage() -> None:
    found = sim_statuses(ROWS["waiting-for-room-second-in-line"])["Queue"]
    assert found["requested"] == {"cpu": "4", "memory": "4Gi", "pods": "4"}
    assert found["pendingPods"] == 4
    assert "fairShare" not in found
