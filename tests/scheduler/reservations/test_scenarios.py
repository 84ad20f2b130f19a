"""Reservations on the in-memory cluster, through the real loop with the default plugins.

We test these aspects (issue 6, "must show" 1 and the gang case):
- a reservation lands where a pod with the same template would (spread, node selector,
  taints, preferred affinity, a template pinned to a node), and becomes Available there with
  ``Scheduled``/``Ready`` conditions;
- a non-owner cannot use the reserved room even when the node is otherwise full;
- the owner lands on the reserved node even when the rest of the cluster is full, is annotated
  ``reservation-allocated``, and an allocate-once reservation ends ``Succeeded`` with the owner
  in ``currentOwners``; the remainder is free in the same cycle;
- owners match by object name, by controller, by labels; an owner in another namespace never
  matches; a reservation marked ``unschedulable`` takes no owner but keeps its room;
- a pod naming a reservation (label) must use it; naming one it cannot use keeps it pending
  with the reason;
- a multi-use reservation keeps its capacity across owner churn;
- expiry (ttl, expires) and deletion free the capacity within one cycle; owners keep running;
- reserved capacity counts against the queue's limit, an owner of the same queue is not
  counted twice;
- a 4-pod gang whose members own 4 reservations lands on exactly those nodes, at once, and not
  at all when one reservation is missing;
- the plugin's route lists a node's reservations.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import keys
from berth.scheduler.framework import decisions, interfaces
from berth.scheduler.plugins import names
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness
from tests.scheduler.reservations import world as w

Obj = dict[str, typing.Any]
ALLOCATED = keys.RESERVATION_ALLOCATED_ANNOTATION


def filler(name: str, node: str, cpu: str, *, namespace: str = "default") -> Obj:
    """A pod already running on ``node``."""
    return b.pod(name, namespace=namespace, node=node, cpu=cpu, memory=None)


def owner(name: str, *, cpu: str = "1", app: str = "r", **fields: typing.Any) -> Obj:
    """A pending pod labelled ``app: <app>`` (the default owners of reservation ``<app>``)."""
    labels = {"app": app, **fields.pop("labels", {})}
    return b.pod(name, cpu=cpu, memory=None, labels=labels, **fields)


# Placement of the reservation itself -------------------------------------------------------

ZONED = [
    b.node("za", cpu="8", labels={"zone": "a"}),
    b.node("zb", cpu="8", labels={"zone": "b"}, taints=[b.taint("dedicated", "infer")]),
    b.node("zc", cpu="8", labels={"zone": "c"}),
    filler("busy-a", "za", "6"),
    filler("busy-c", "zc", "2"),
]

TEMPLATES = [
    pytest.param(w.template(cpu="2"), "zc", id="spread-to-the-least-allocated"),
    pytest.param(w.template(cpu="2", node_selector={"zone": "a"}), "za", id="node-selector"),
    pytest.param(
        w.template(cpu="2", tolerations=[b.toleration("dedicated", "infer")]),
        "zb",
        id="tolerated-taint-on-the-emptiest-node",
    ),
    pytest.param(
        w.template(cpu="2", affinity=b.affinity(preferred=[(100, [b.expr("zone", "In", "a")])])),
        "za",
        id="preferred-affinity",
    ),
    pytest.param(w.template(cpu="1", node_name="za"), "za", id="template-pinned-to-a-node"),
]


@pytest.mark.parametrize(("tmpl", "expected"), TEMPLATES)
def test_a_reservation_lands_where_a_pod_with_the_same_template_would(
    tmpl: Obj, expected: str
) -> None:
    as_pod = w.World(*ZONED, w.pod_from("twin", tmpl, queue=keys.DEFAULT_QUEUE))
    as_pod.cycle()
    resv = w.reservation("r")
    resv["spec"]["template"] = tmpl
    as_reservation = w.World(*ZONED, resv)
    result = as_reservation.cycle()
    assert as_pod.node_of("twin") == expected
    assert as_reservation.status("r")["nodeName"] == expected
    assert as_reservation.phase("r") == "Available"
    assert result.of_kind(decisions.BindPod) == []  # a reserve pod is never bound
    assert as_reservation.condition("r", "Scheduled")["status"] == "True"
    assert as_reservation.condition("r", "Ready")["status"] == "True"


def test_an_available_reservation_records_what_it_holds() -> None:
    world = w.World(b.node("n1", cpu="8"), w.reservation("r", cpu="3", memory="2Gi"))
    world.cycle()
    assert world.status("r")["allocatable"] == {"cpu": "3", "memory": "2Gi"}
    world.cycle()  # placed once: the next cycle does not place it again
    assert world.last is not None
    assert world.last.of_kind(decisions.SetReservationAvailable) == []


# Owners and non-owners ----------------------------------------------------------------------


def test_a_non_owner_cannot_use_the_reserved_room_even_when_the_node_is_otherwise_full() -> None:
    world = w.World(b.node("n1", cpu="4"), w.reservation("r", cpu="3", memory=None))
    world.cycle()
    world.put(b.pod("stranger", cpu="2", memory=None))
    world.cycle()
    assert world.node_of("stranger") is None
    assert world.reason("stranger") == (
        "0/1 nodes fit: 1 Insufficient cpu (node n1: 3 cpu reserved by default/r)"
    )
    world.put(b.pod("small", cpu="1", memory=None))
    world.cycle()
    assert world.node_of("small") == "n1"  # the unreserved core is anyone's


def test_the_owner_lands_on_the_reserved_node_even_when_the_rest_of_the_cluster_is_full() -> None:
    nodes = [b.node(f"n{i}", cpu="4") for i in range(1, 4)]
    world = w.World(*nodes, w.reservation("r", cpu="4", memory=None))
    world.cycle()
    reserved = world.status("r")["nodeName"]
    others = [n["metadata"]["name"] for n in nodes if n["metadata"]["name"] != reserved]
    world.put(*(filler(f"fill-{n}", n, "4") for n in others))
    world.put(owner("job-0", cpu="4"), b.pod("other", cpu="1", memory=None))
    result = world.cycle()
    assert world.node_of("job-0") == reserved
    assert world.node_of("other") is None
    assert world.annotations("job-0")[ALLOCATED] == '{"name":"r","uid":"uid-resv-default-r"}'
    assert world.phase("r") == "Succeeded"
    assert world.status("r")["currentOwners"] == [
        {"namespace": "default", "name": "job-0", "uid": "uid-default-job-0"}
    ]
    assert world.status("r")["allocated"] == {"cpu": "4"}
    kinds = [
        type(d).__name__
        for d in result.decisions
        if not isinstance(d, decisions.Unschedulable | decisions.MarkPending)
    ]
    assert kinds == ["AnnotatePod", "BindPod", "AllocateReservation"]


def test_allocate_once_frees_the_remainder_at_the_first_owner() -> None:
    world = w.World(b.node("n1", cpu="4"), w.reservation("r", cpu="4", memory=None))
    world.cycle()
    world.put(owner("job-0", cpu="1", created=b.EPOCH + 1))
    world.put(b.pod("stranger", cpu="3", memory=None, created=b.EPOCH + 2))
    world.cycle()
    # The owner took 1 of the 4 reserved cores; the other 3 were free again in the same cycle.
    assert (world.node_of("job-0"), world.node_of("stranger")) == ("n1", "n1")
    assert world.phase("r") == "Succeeded"


def test_a_multi_use_reservation_keeps_its_capacity_across_owner_churn() -> None:
    world = w.World(
        b.node("n1", cpu="4"), w.reservation("r", cpu="2", memory=None, allocate_once=False)
    )
    world.cycle()
    world.put(owner("first", cpu="2"), b.pod("stranger", cpu="2", memory=None))
    world.cycle()
    assert (world.node_of("first"), world.node_of("stranger")) == ("n1", "n1")
    assert world.phase("r") == "Available"
    world.finish("first")
    world.put(b.pod("intruder", cpu="2", memory=None))
    world.cycle()
    assert world.node_of("intruder") is None  # the owner's room is held again, not free
    world.put(owner("second", cpu="2"))
    world.cycle()
    assert world.node_of("second") == "n1"
    assert world.phase("r") == "Available"
    owners = [o["name"] for o in world.status("r")["currentOwners"]]
    assert owners[-1] == "second"


def controlled(pod: Obj, *, kind: str, name: str, controller: bool = True) -> Obj:
    """``pod`` with an owner reference to ``kind``/``name`` (its controller, by default)."""
    ref = {"apiVersion": "batch/v1", "kind": kind, "name": name, "uid": f"uid-{name}"}
    if controller:
        ref["controller"] = True
    return {**pod, "metadata": {**pod["metadata"], "ownerReferences": [ref]}}


@pytest.mark.parametrize(
    ("owner_entry", "pod"),
    [
        pytest.param(
            w.owner_object("exact"), b.pod("exact", cpu="2", memory=None), id="by-object-name"
        ),
        pytest.param(
            w.owner_controller("Job", "train"),
            controlled(b.pod("train-x7", cpu="2", memory=None), kind="Job", name="train"),
            id="by-controller",
        ),
        pytest.param(
            w.owner_labels(expressions=[{"key": "tier", "operator": "In", "values": ["gold"]}]),
            b.pod("gold-1", cpu="2", memory=None, labels={"tier": "gold"}),
            id="by-label-expression",
        ),
    ],
)
def test_owners_match_by_object_controller_or_labels(owner_entry: Obj, pod: Obj) -> None:
    world = w.World(
        b.node("n1", cpu="2"), w.reservation("r", cpu="2", memory=None, owners=[owner_entry])
    )
    world.cycle()
    world.put(pod)
    world.cycle()
    assert world.node_of(pod["metadata"]["name"]) == "n1"
    assert world.phase("r") == "Succeeded"


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(
            b.pod("exact", namespace="other", cpu="2", memory=None), id="same-name-other-namespace"
        ),
        pytest.param(b.pod("exactly", cpu="2", memory=None), id="another-name"),
        pytest.param(
            controlled(b.pod("made", cpu="2", memory=None), kind="Job", name="exact"),
            id="controlled-by-an-object-of-that-name",
        ),
    ],
)
def test_a_pod_that_is_no_owner_never_matches(pod: Obj) -> None:
    world = w.World(
        b.node("n1", cpu="2"),
        w.reservation("r", cpu="2", memory=None, owners=[w.owner_object("exact")]),
    )
    world.cycle()
    world.put(pod)
    world.cycle()
    meta = pod["metadata"]
    assert world.node_of(meta["name"], namespace=meta["namespace"]) is None
    assert world.phase("r") == "Available"


def test_an_owner_in_another_namespace_never_matches_even_by_labels() -> None:
    world = w.World(
        b.node("n1", cpu="2"), w.reservation("r", namespace="team-a", cpu="2", memory=None)
    )
    world.cycle()
    world.put(owner("lookalike", cpu="2", namespace="team-b"))
    world.cycle()
    assert world.node_of("lookalike", namespace="team-b") is None
    assert ALLOCATED not in world.annotations("lookalike", namespace="team-b")
    world.put(owner("real", cpu="2", namespace="team-a"))
    world.cycle()
    assert world.node_of("real", namespace="team-a") == "n1"


def test_an_unschedulable_reservation_takes_no_owner_but_keeps_its_room() -> None:
    world = w.World(
        b.node("n1", cpu="2"), w.reservation("r", cpu="2", memory=None, unschedulable=True)
    )
    world.cycle()
    assert world.phase("r") == "Available"
    world.put(owner("job-0", cpu="2"), b.pod("stranger", cpu="1", memory=None))
    world.cycle()
    assert (world.node_of("job-0"), world.node_of("stranger")) == (None, None)


# Naming a reservation -----------------------------------------------------------------------


def test_a_pod_naming_a_reservation_must_use_it() -> None:
    world = w.World(
        b.node("n1", cpu="8"),
        b.node("n2", cpu="8"),
        w.reservation("r", cpu="1", memory=None, node_name="n2", owners=[w.owner_labels({})]),
    )
    world.cycle()
    # n1 is emptier, but the pod asks for the reservation on n2.
    world.put(filler("busy", "n2", "4"), b.pod("named", cpu="1", memory=None, reservation="r"))
    world.cycle()
    assert world.node_of("named") == "n2"


@pytest.mark.parametrize(
    ("objects", "pod", "reason", "code"),
    [
        pytest.param(
            [],
            b.pod("p", cpu="1", memory=None, reservation="missing"),
            "reservation missing does not exist",
            "ReservationUnavailable",
            id="missing",
        ),
        pytest.param(
            [w.reservation("r", cpu="1", memory=None, owners=[w.owner_object("someone")])],
            b.pod("p", cpu="1", memory=None, reservation="r"),
            "pod is not an owner of reservation r",
            "ReservationUnavailable",
            id="not-an-owner",
        ),
        pytest.param(
            [
                w.reservation(
                    "r", cpu="1", memory=None, unschedulable=True, owners=[w.owner_object("p")]
                )
            ],
            b.pod("p", cpu="1", memory=None, reservation="r"),
            "reservation r is unschedulable: it takes no owners",
            "ReservationUnavailable",
            id="unschedulable",
        ),
        pytest.param(
            [w.reservation("r", cpu="16", memory=None, owners=[w.owner_object("p")])],
            b.pod("p", cpu="1", memory=None, reservation="r"),
            "reservation r is not Available yet (Pending)",
            "ReservationUnavailable",
            id="not-placed",
        ),
        pytest.param(
            [
                w.reservation("r", cpu="1", memory=None, owners=[w.owner_object("p")]),
                filler("half", "n1", "1"),
            ],
            b.pod("p", cpu="2", memory=None, reservation="r"),
            "0/2 nodes fit: 1 Insufficient cpu, 1 pod must use reservation r, held on n1",
            "NotEnoughResources",
            id="too-big-for-its-node",
        ),
    ],
)
def test_a_pod_naming_a_reservation_it_cannot_use_stays_pending(
    objects: list[Obj], pod: Obj, reason: str, code: str
) -> None:
    # n2 is full: a reservation that can be placed lands on n1.
    world = w.World(b.node("n1", cpu="2"), b.node("n2", cpu="8"), filler("busy", "n2", "8"))
    world.put(*objects)
    world.cycle()
    world.put(pod)
    world.cycle()
    assert world.node_of("p") is None
    assert world.reason("p") == reason
    assert world.last is not None
    assert world.last.pod_why["default/p"].code.value == code


# Lifetime --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lifetime",
    [
        pytest.param({"ttl": "10m"}, id="ttl"),
        pytest.param({"expires": b.EPOCH + 600}, id="expires"),
    ],
)
def test_expiry_frees_the_capacity_within_one_cycle(lifetime: dict[str, typing.Any]) -> None:
    world = w.World(b.node("n1", cpu="4"), w.reservation("r", cpu="3", memory=None, **lifetime))
    world.cycle()
    world.put(b.pod("stranger", cpu="3", memory=None))
    world.advance(599)
    world.cycle()
    assert world.node_of("stranger") is None
    world.advance(1)
    result = world.cycle()
    assert world.node_of("stranger") == "n1"
    assert world.phase("r") == "Expired"
    assert world.condition("r", "Ready")["reason"] == "Expired"
    # The same ending, in the same words, as the controller writes when it wakes first.
    ended = [(d.phase, d.reason, d.message) for d in result.of_kind(decisions.EndReservation)]
    assert ended == [("Expired", "Expired", "expired at 2026-01-01T00:10:00Z")]


def test_deletion_frees_the_capacity_within_one_cycle_and_owners_keep_running() -> None:
    world = w.World(
        b.node("n1", cpu="4"), w.reservation("r", cpu="4", memory=None, allocate_once=False)
    )
    world.cycle()
    world.put(owner("job-0", cpu="1"), b.pod("stranger", cpu="3", memory=None))
    world.cycle()
    assert (world.node_of("job-0"), world.node_of("stranger")) == ("n1", None)
    world.delete("Reservation", "r")
    world.cycle()
    assert (world.node_of("job-0"), world.node_of("stranger")) == ("n1", "n1")


def test_an_expired_reservation_keeps_its_owners_running() -> None:
    world = w.World(
        b.node("n1", cpu="4"),
        w.reservation("r", cpu="4", memory=None, ttl="1h", allocate_once=False),
    )
    world.cycle()
    world.put(owner("job-0", cpu="2"))
    world.cycle()
    world.advance(3600)
    world.put(b.pod("stranger", cpu="2", memory=None), b.pod("too-much", cpu="1", memory=None))
    world.cycle()
    assert world.phase("r") == "Expired"
    assert world.node_of("job-0") == "n1"
    assert world.node_of("stranger") == "n1"  # the owner's 2 cores still count: 2 were free
    assert world.node_of("too-much") is None


# Queues -----------------------------------------------------------------------------------


def test_reserved_capacity_counts_against_the_queue_limit() -> None:
    world = w.World(
        b.node("n1", cpu="16"),
        b.queue("team", limit={"cpu": "4"}),
        w.reservation("r", cpu="3", memory=None, queue="team"),
    )
    world.cycle()
    assert world.phase("r") == "Available"
    world.put(b.pod("worker", cpu="2", memory=None, queue="team"))
    world.cycle()
    assert world.node_of("worker") is None
    assert world.reason("worker") == "queue team at limit for cpu (3/4)"
    world.put(w.reservation("too-much", cpu="2", memory=None, queue="team"))
    world.cycle()
    assert world.phase("too-much") == "Pending"
    assert world.condition("too-much", "Scheduled")["message"] == (
        "queue team at limit for cpu (3/4)"
    )


def test_an_owner_of_the_same_queue_is_not_counted_twice() -> None:
    world = w.World(
        b.node("n1", cpu="8"),
        b.node("n2", cpu="8"),
        b.queue("team", limit={"cpu": "4"}),
        w.reservation("r", cpu="3", memory=None, queue="team", node_name="n2"),
        filler("running", "n1", "1"),
    )
    world.put({**b.pod("running-q", node="n1", cpu="1", memory=None, queue="team")})
    world.cycle()
    assert world.phase("r") == "Available"
    # team holds 1 running + 3 reserved = its limit; the owner comes in on the reserved room.
    world.put(owner("job-0", cpu="3", queue="team"))
    world.cycle()
    assert world.node_of("job-0") == "n2"
    assert world.phase("r") == "Succeeded"


def test_a_reservation_in_a_missing_queue_stays_pending_with_the_reason() -> None:
    world = w.World(b.node("n1", cpu="4"), w.reservation("r", cpu="1", queue="nope"))
    world.cycle()
    assert world.phase("r") == "Pending"
    assert world.condition("r", "Scheduled")["message"] == "queue nope does not exist"


# Gangs -------------------------------------------------------------------------------------


def gang_world(reservations: int) -> w.World:
    nodes = [b.node(f"n{i}", cpu="4") for i in range(6)]
    # Each reservation pinned to its own node; every other node is full.
    resvs = [
        w.reservation(
            f"train-{i}",
            cpu="4",
            memory=None,
            node_name=f"n{i + 1}",
            owners=[w.owner_labels({"job": "train"})],
        )
        for i in range(reservations)
    ]
    world = w.World(*nodes, *resvs)
    world.cycle()
    busy = {f"n{i + 1}" for i in range(reservations)}
    world.put(*(filler(f"fill-{n}", n, "4") for n in [f"n{i}" for i in range(6)] if n not in busy))
    return world


def test_a_gang_whose_members_own_four_reservations_lands_on_exactly_those_nodes_at_once() -> None:
    world = gang_world(4)
    assert {world.status(f"train-{i}")["nodeName"] for i in range(4)} == {"n1", "n2", "n3", "n4"}
    world.put(*b.gang("train", 4, cpu="4", memory=None, labels={"job": "train"}))
    result = world.cycle()
    assert sorted(result.bindings().values()) == ["n1", "n2", "n3", "n4"]
    assert {world.phase(f"train-{i}") for i in range(4)} == {"Succeeded"}
    used = sorted(world.annotations(f"train-{i}")[ALLOCATED] for i in range(4))
    assert used == sorted(
        f'{{"name":"train-{i}","uid":"uid-resv-default-train-{i}"}}' for i in range(4)
    )


def test_a_gang_short_of_one_reservation_holds_nothing() -> None:
    world = gang_world(3)
    world.put(*b.gang("train", 4, cpu="4", memory=None, labels={"job": "train"}))
    result = world.cycle()
    assert result.bindings() == {}
    assert {world.phase(f"train-{i}") for i in range(3)} == {"Available"}
    assert result.group_reasons["default/train"].startswith(
        "gang needs minMember 4, only 3 could be placed"
    )


# The route --------------------------------------------------------------------------------


def test_the_route_lists_a_nodes_reservations() -> None:
    world = w.World(
        b.node("n1", cpu="8"),
        b.node("n2", cpu="8"),
        w.reservation("a", cpu="2", memory=None, node_name="n1", ttl="1h", allocate_once=False),
        w.reservation("b", cpu="1", memory=None, node_name="n1", ttl="0"),
    )
    world.cycle()
    world.put(owner("a-0", cpu="1", app="a"))
    world.cycle()
    ((plugin, route),) = [
        (p, r) for p, r in world.scheduler.services.routes() if p == names.RESERVATION
    ]
    assert plugin == "Reservation"
    assert route.path == "nodeReservations/{node}"
    listed = route.handler(interfaces.RouteRequest(path_params={"node": "n1"}))
    assert isinstance(listed, dict)
    entries = listed["reservations"]
    assert isinstance(entries, list)
    summary = [(e["name"], e["remaining"], e["expiresAt"]) for e in entries if isinstance(e, dict)]
    assert summary == [("a", {"cpu": "1"}, "2026-01-01T01:00:00Z"), ("b", {"cpu": "1"}, None)]
    assert route.handler(interfaces.RouteRequest(path_params={"node": "n2"})) == {
        "node": "n2",
        "reservations": [],
    }
    with pytest.raises(KeyError):
        route.handler(interfaces.RouteRequest(path_params={"node": "nowhere"}))


def test_a_starving_reservation_has_room_held_but_nominates_no_pod() -> None:
    world = w.World(
        b.node("n1", cpu="4"),
        filler("running", "n1", "4"),
        w.reservation("big", cpu="4", memory=None, created=b.EPOCH - 3600),
        profile=harness.profile_with(actions=("allocate", "backfill")),
    )
    result = world.cycle()
    assert world.phase("big") == "Pending"
    assert result.of_kind(decisions.NominatePod) == []
    assert world.condition("big", "Scheduled")["message"] == "0/1 nodes fit: 1 Insufficient cpu"
