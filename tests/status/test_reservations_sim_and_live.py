"""The live operator and ``berth sim`` give a Reservation the same status for the same facts.

A cycle's Reservation facts (available, allocated, ended, unschedulable) are applied in order
once by the live writer (:class:`berth.kube.reservations.reservation_statuses.ReservationStatuses`,
through the emulator's API) and once by the simulator (:class:`berth.sim.cluster.InMemoryCluster`);
both statuses are the one :func:`berth.status.reservations.reservation_status` computes.

We test these aspects (one table, every row on both sides):

- placed: ``Available`` on its node, ``Scheduled`` and ``Ready`` True;
- placed, then used by an allocate-once owner: ``Succeeded``;
- used by its owner before its availability lands (one cycle, two writes): it stays
  ``Succeeded`` — an ended reservation never comes back to ``Available``;
- placed, then expired: ``Expired``, and a later availability does not revive it;
- never placed: ``Pending``, ``Scheduled`` False with the scheduler's message;
- a shared reservation with two owners: both listed, their requests summed.
"""

from __future__ import annotations

import dataclasses
import typing

import pytest

from berth.api import resources
from berth.emulator import testing
from berth.kube.reservations import reservation_statuses
from berth.kube.transport import clients, writes
from berth.scheduler.framework import decisions, reasons
from berth.sim import cluster
from berth.status import reservations as reservation_owner
from berth.util import clocks
from tests.kube import conftest
from tests.scheduler import builders as b

Object = dict[str, typing.Any]
NOW = b.EPOCH + 3600

AVAILABLE = decisions.SetReservationAvailable(
    namespace="default",
    name="held",
    node="n1",
    allocatable=resources.ResourceList({"cpu": 2000, "memory": 2 * 1024**3 * 1000}),
)


def owner(name: str, uid: str, *, cpu: int, once: bool) -> decisions.AllocateReservation:
    return decisions.AllocateReservation(
        namespace="default",
        name="held",
        owner=name,
        owner_uid=uid,
        requests=resources.ResourceList({"cpu": cpu}),
        succeeded=once,
    )


EXPIRED = decisions.EndReservation(
    namespace="default",
    name="held",
    phase="Expired",
    reason="Expired",
    message="its time ran out",
)
NO_ROOM = decisions.Unschedulable(
    subject=decisions.Subject.RESERVATION,
    key="default/held",
    reason=reasons.new(
        reasons.ReasonCode.NOT_ENOUGH_RESOURCES, "0/1 nodes fit: 1 Insufficient cpu"
    ),
)


@dataclasses.dataclass(frozen=True)
class Case:
    facts: tuple[reservation_owner.ReservationFact, ...]
    phase: str | None
    ready: str | None  # the Ready condition's reason, None without one
    owners: tuple[str, ...] = ()


CASES = {
    "placed": Case((AVAILABLE,), "Available", "Available"),
    "placed-then-used-once": Case(
        (AVAILABLE, owner("trainer", "u1", cpu=1500, once=True)),
        "Succeeded",
        "Succeeded",
        ("trainer",),
    ),
    "used-before-its-availability-lands": Case(
        (owner("trainer", "u1", cpu=1500, once=True), AVAILABLE),
        "Succeeded",
        "Succeeded",
        ("trainer",),
    ),
    "expired-then-available-again": Case((AVAILABLE, EXPIRED, AVAILABLE), "Expired", "Expired"),
    "never-placed": Case((NO_ROOM,), "Pending", None),
    "shared-by-two-owners": Case(
        (
            AVAILABLE,
            owner("a", "u1", cpu=500, once=False),
            owner("b", "u2", cpu=700, once=False),
        ),
        "Available",
        "Available",
        ("a", "b"),
    ),
}


async def live_status(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection, case: Case
) -> Object:
    conftest.create(emulator, b.reservation("held", cpu="2"), plural="reservations")
    writer = reservation_statuses.ReservationStatuses(
        writes.Writer(connection.api), clock=clocks.VirtualClock(NOW)
    )
    for fact in case.facts:
        if isinstance(fact, decisions.SetReservationAvailable):
            assert await writer.available(fact)
        elif isinstance(fact, decisions.AllocateReservation):
            assert await writer.allocated(fact)
        elif isinstance(fact, decisions.EndReservation):
            assert await writer.ended(fact)
        else:
            assert await writer.unschedulable(fact)
    api = emulator.api
    resource = emulator.call(api.resource, "scheduling.berth.io/v1alpha1", "reservations")
    stored = emulator.call(api.storage.get, resource.key, "default", "held")
    assert stored is not None
    return dict(stored.get("status") or {})


def sim_status(case: Case) -> Object:
    sim = cluster.InMemoryCluster(clock=clocks.VirtualClock(NOW))
    sim.put(b.reservation("held", cpu="2"))
    for fact in case.facts:
        sim.apply(decisions.CycleResult(session_id="s", decisions=(fact,)))
    stored = sim.get("Reservation", namespace="default", name="held")
    assert stored is not None
    return dict(stored.get("status") or {})


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_sim_and_live_write_the_same_reservation_status(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection, case: Case
) -> None:
    live = await live_status(berth_crds, connection, case)
    sim = sim_status(case)
    assert sim == live
    assert live.get("phase") == case.phase
    ready = next((c for c in live.get("conditions", []) if c["type"] == "Ready"), None)
    assert (ready or {}).get("reason") == case.ready
    assert tuple(o["name"] for o in live.get("currentOwners", [])) == case.owners


def test_the_shared_reservation_carries_both_owners_requests() -> None:
    status = sim_status(CASES["shared-by-two-owners"])
    assert status["allocated"] == {"cpu": "1200m"}


def test_an_unplaced_reservation_says_why_in_scheduled() -> None:
    status = sim_status(CASES["never-placed"])
    (scheduled,) = status["conditions"]
    assert (scheduled["type"], scheduled["status"], scheduled["message"]) == (
        "Scheduled",
        "False",
        "0/1 nodes fit: 1 Insufficient cpu",
    )
    assert scheduled["reason"] == reasons.ReasonCode.NOT_ENOUGH_RESOURCES.value
