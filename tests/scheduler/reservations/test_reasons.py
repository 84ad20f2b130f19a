"""Why a pod waits when Reservations hold the room it needs, on the in-memory cluster.

We test these aspects: a pod that would fit on a node but for what a Reservation holds there
for others reads which node, how much of what, and which reservation (not a bare
``Insufficient cpu`` next to an idle node); nodes short for other causes keep the plain
reason; an owner of the reservation is placed into it.
"""

from __future__ import annotations

from tests.scheduler import builders as b
from tests.scheduler.reservations import world as w


def test_a_pod_kept_off_a_node_by_a_reservation_names_it() -> None:
    world = w.World(
        b.node("n-0", cpu="16", memory="64Gi"),
        b.node("n-1", cpu="4", memory="64Gi"),
        w.reservation("keep", namespace="r", cpu="12", memory=None, node_name="n-0"),
    )
    world.cycle()
    assert world.phase("keep", namespace="r") == "Available"
    world.put(b.pod("big", cpu="8", memory=None))
    result = world.cycle()
    assert result.pod_reasons["default/big"] == (
        "0/2 nodes fit: 1 Insufficient cpu, "
        "1 Insufficient cpu (node n-0: 12 cpu reserved by r/keep)"
    )


def test_the_owner_goes_into_the_room_others_are_told_about() -> None:
    world = w.World(
        b.node("n-0", cpu="16", memory="64Gi"),
        w.reservation("keep", cpu="12", memory=None, allocate_once=False),
    )
    world.cycle()
    world.put(
        b.pod("other", cpu="8", memory=None),
        b.pod("mine", cpu="8", memory=None, labels={"app": "keep"}),
    )
    world.cycle()
    assert world.node_of("mine") == "n-0"
    result = world.cycle()  # the reservation now holds what its owner left of it
    assert result.pod_reasons["default/other"] == (
        "0/1 nodes fit: 1 Insufficient cpu (node n-0: 4 cpu reserved by default/keep)"
    )
