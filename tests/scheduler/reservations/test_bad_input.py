"""Reservations that cannot be held as written, on the in-memory cluster.

We test these aspects (issue 6, "bad input"): a template without requests, a template with a
malformed quantity, a template claiming DRA devices (not held yet, issue 27), owners that can
never match a pod (contradicting label requirements, a label operator that does not exist), a
reservation larger than any node, a queue that does not exist — each stays Pending with a
``Scheduled`` condition saying exactly why, its reason the obstacle's code; a TTL or
``expires`` already in the past ends the reservation ``Failed`` with a ``Ready`` condition
saying when it expired. In every case a healthy reservation and a plain pod next to it are
placed as if nothing were wrong, and no plugin raises.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.framework import reasons
from tests.scheduler import builders as b
from tests.scheduler.reservations import world as w

Obj = dict[str, typing.Any]

NOT_APP_X = {"key": "app", "operator": "NotIn", "values": ["x"]}


def _with_claims(reservation: Obj) -> Obj:
    claims = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    reservation["spec"]["template"]["spec"]["resourceClaims"] = claims
    return reservation


PENDING = [
    pytest.param(
        w.reservation("bad", cpu=None, memory=None),
        "spec.template: a reservation holds what its template requests, and this one requests no "
        "resources: set resources.requests on its containers",
        reasons.ReasonCode.INVALID,
        id="template-without-requests",
    ),
    pytest.param(
        w.reservation("bad", cpu="lots"),
        "spec.template has an invalid resource request: containers[0] (main) cpu: 'lots' is "
        "not a quantity: write a number with an optional suffix, e.g. 500m, 4, 8Gi, 1e3",
        reasons.ReasonCode.INVALID,
        id="template-with-a-malformed-quantity",
    ),
    pytest.param(
        w.reservation("bad", owners=[w.owner_labels({"app": "x"}, expressions=[NOT_APP_X])]),
        "no owner can ever match a pod: spec.owners[0].labelSelector: can never match: no value of "
        "label 'app' satisfies all its requirements",
        reasons.ReasonCode.INVALID,
        id="selector-matching-nothing",
    ),
    pytest.param(
        w.reservation(
            "bad",
            owners=[
                w.owner_labels(
                    expressions=[
                        {"key": "gpu", "operator": "Exists"},
                        {"key": "gpu", "operator": "DoesNotExist"},
                    ]
                ),
                w.owner_labels(expressions=[{"key": "gpu", "operator": "Gt", "values": ["1"]}]),
            ],
        ),
        "no owner can ever match a pod: spec.owners[0].labelSelector: can never match: label "
        "'gpu' is required both to exist and not to exist; spec.owners[1].labelSelector: can "
        "never match: "
        "operator 'Gt' on label 'gpu' is not one of In, NotIn, Exists, DoesNotExist",
        reasons.ReasonCode.INVALID,
        id="every-owner-broken",
    ),
    pytest.param(
        _with_claims(w.reservation("bad", allocate_once=False)),
        "spec.allocateOnce: a reservation holding DRA devices (spec.template.spec.resourceClaims) "
        "hands them to its first owner, so allocateOnce must be true",
        reasons.ReasonCode.INVALID,
        id="template-with-resource-claims-used-more-than-once",
    ),
    pytest.param(
        w.reservation("bad", cpu="64"),
        "0/2 nodes fit: 2 Insufficient cpu",
        reasons.ReasonCode.NOT_ENOUGH_RESOURCES,
        id="larger-than-any-node",
    ),
    pytest.param(
        w.reservation("bad", queue="nowhere"),
        "queue nowhere does not exist",
        reasons.ReasonCode.QUEUE_NOT_FOUND,
        id="missing-queue",
    ),
]


def healthy_world(*objects: Obj) -> w.World:
    """Two nodes, a healthy reservation and a plain pod, plus ``objects``."""
    return w.World(
        b.node("n1", cpu="8"),
        b.node("n2", cpu="8"),
        w.reservation("ok", cpu="2", memory=None),
        b.pod("bystander", cpu="2", memory=None),
        *objects,
    )


def assert_undisturbed(world: w.World) -> None:
    assert world.phase("ok") == "Available"
    assert world.node_of("bystander") is not None


@pytest.mark.parametrize(("bad", "message", "code"), PENDING)
def test_a_reservation_that_cannot_be_held_stays_pending_saying_why(
    bad: Obj, message: str, code: reasons.ReasonCode
) -> None:
    world = healthy_world(bad)
    for _ in range(2):  # and it stays so
        world.cycle()
        assert world.phase("bad") == "Pending"
        condition = world.condition("bad", "Scheduled")
        assert (condition["status"], condition["reason"]) == ("False", code.value)
        assert condition["message"] == message
    assert_undisturbed(world)


def test_one_broken_owner_among_good_ones_is_no_reason_to_wait() -> None:
    contradiction = w.owner_labels({"app": "x"}, expressions=[NOT_APP_X])
    world = healthy_world(w.reservation("mixed", owners=[contradiction, w.owner_object("someone")]))
    world.cycle()
    assert world.phase("mixed") == "Available"


@pytest.mark.parametrize(
    ("lifetime", "expired_at"),
    [
        pytest.param({"expires": b.EPOCH - 60}, "2025-12-31T23:59:00Z", id="expires-in-the-past"),
        pytest.param(
            {"ttl": "1m", "created": b.EPOCH - 120}, "2025-12-31T23:59:00Z", id="ttl-already-over"
        ),
    ],
)
def test_a_reservation_whose_time_is_already_over_fails(
    lifetime: dict[str, typing.Any], expired_at: str
) -> None:
    world = healthy_world(w.reservation("late", **lifetime))
    world.cycle()
    assert world.phase("late") == "Failed"
    ready = world.condition("late", "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Expired")
    assert ready["message"] == f"expired at {expired_at} before it could be placed on a node"
    assert "nodeName" not in world.status("late")
    assert_undisturbed(world)


def test_a_reservation_on_a_node_that_is_gone_fails() -> None:
    world = healthy_world(w.reservation("pinned", node_name="n2"))
    world.cycle()
    assert world.status("pinned")["nodeName"] == "n2"
    world.delete("Node", "n2", namespace="")
    world.cycle()
    assert world.phase("pinned") == "Failed"
    assert world.condition("pinned", "Ready")["message"] == "node n2 no longer exists"
