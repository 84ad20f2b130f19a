"""A Reservation applied together with its owners, on the in-memory cluster.

We test these aspects:
- the reservation is placed first in the cycle and an owner created with it goes into it in
  the same cycle (charged to it, annotated, ``allocateOnce`` -> ``Succeeded``), whether the
  owner is a plain pod, a pod of a queue (the reservation's or another, served first), a gang
  member, or names the reservation by label;
- the owner does so even when the reserved room is the only room in the cluster (placed
  normally first, it would have taken that room and left the reservation pending);
- a non-owner created in the same cycle still cannot use the reserved room;
- a multi-use reservation placed in the cycle takes several owners of that cycle.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import keys
from tests.scheduler import builders as b
from tests.scheduler.reservations import world as w

Obj = dict[str, typing.Any]
ALLOCATED = keys.RESERVATION_ALLOCATED_ANNOTATION
CHARGED = '{"name":"r","uid":"uid-resv-default-r"}'


def owner(name: str, *, cpu: str = "4", **fields: typing.Any) -> Obj:
    """A pending pod labelled ``app: r`` (an owner of reservation ``r``)."""
    labels = {"app": "r", **fields.pop("labels", {})}
    return b.pod(name, cpu=cpu, memory=None, labels=labels, **fields)


OWNERS = [
    pytest.param([], [owner("job-0")], id="plain-pod"),
    pytest.param([], [owner("job-0", queue=keys.DEFAULT_QUEUE)], id="pod-of-the-same-queue"),
    pytest.param(
        # The owner's queue has the higher priority, so it is served before the reservation's;
        # both are guaranteed what they ask, on a cluster whose second node is full.
        [
            b.node("n2", cpu="4"),
            b.pod("busy", node="n2", cpu="4", memory=None),
            b.queue("urgent", priority=10, guaranteed={"cpu": "4"}),
            b.queue("batch", guaranteed={"cpu": "4"}),
        ],
        [owner("job-0", queue="urgent")],
        id="pod-of-a-queue-served-first",
    ),
    pytest.param(
        [],
        [b.pod_group("job", min_member=1), owner("job-0", group="job")],
        id="gang-member",
    ),
    pytest.param([], [owner("job-0", reservation="r")], id="names-the-reservation"),
]


@pytest.mark.parametrize(("extra", "pods"), OWNERS)
def test_an_owner_created_with_its_reservation_goes_into_it_in_the_same_cycle(
    extra: list[Obj], pods: list[Obj]
) -> None:
    # All the free room is reserved: the owner fits only inside the reservation.
    queue = "batch" if any(obj["kind"] == "Queue" for obj in extra) else None
    world = w.World(
        b.node("n1", cpu="4"),
        *extra,
        w.reservation("r", cpu="4", memory=None, queue=queue),
        *pods,
    )
    world.cycle()
    assert world.status("r")["nodeName"] == "n1"
    assert world.node_of("job-0") == "n1"
    assert world.annotations("job-0")[ALLOCATED] == CHARGED
    assert world.phase("r") == "Succeeded"
    assert [o["name"] for o in world.status("r")["currentOwners"]] == ["job-0"]
    assert world.status("r")["allocated"] == {"cpu": "4"}


def test_the_owner_is_charged_to_the_reservation_not_placed_beside_it() -> None:
    # Two empty nodes: placed normally, the owner would take n1 and push the reservation to n2.
    world = w.World(
        b.node("n1", cpu="4"),
        b.node("n2", cpu="4"),
        w.reservation("r", cpu="2", memory=None),
        owner("job-0", cpu="2"),
    )
    world.cycle()
    reserved = world.status("r")["nodeName"]
    assert world.node_of("job-0") == reserved
    assert world.annotations("job-0")[ALLOCATED] == CHARGED
    assert world.phase("r") == "Succeeded"
    world.put(b.pod("stranger", cpu="4", memory=None))
    world.cycle()
    assert world.node_of("stranger") not in (None, reserved)  # the other node stayed empty


def test_a_non_owner_created_with_the_reservation_cannot_use_its_room() -> None:
    world = w.World(
        b.node("n1", cpu="4"),
        w.reservation("r", cpu="4", memory=None),
        b.pod("stranger", cpu="1", memory=None),
    )
    world.cycle()
    assert world.phase("r") == "Available"
    assert world.node_of("stranger") is None
    assert world.reason("stranger") == "0/1 nodes fit: 1 Insufficient cpu"


def test_a_multi_use_reservation_placed_in_the_cycle_takes_several_owners_of_it() -> None:
    world = w.World(
        b.node("n1", cpu="4"),
        w.reservation("r", cpu="4", memory=None, allocate_once=False),
        owner("a", cpu="2", created=b.EPOCH + 1),
        owner("b", cpu="2", created=b.EPOCH + 2),
        owner("c", cpu="2", created=b.EPOCH + 3),
    )
    world.cycle()
    assert [world.node_of(p) for p in ("a", "b", "c")] == ["n1", "n1", None]
    assert world.phase("r") == "Available"
    assert [o["name"] for o in world.status("r")["currentOwners"]] == ["a", "b"]
    assert world.status("r")["allocated"] == {"cpu": "4"}
