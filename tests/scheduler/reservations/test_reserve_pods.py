"""The reserve-pod pieces of the snapshot: parsing rules and the cache's bookkeeping.

We test these aspects:
- owner matching (object, controller, label selectors with every operator, namespaces,
  reserve pods never owners) and which owner lists can never match a pod;
- lifetime: ``expires``, ``ttl`` from creation, ``ttl: 0`` and the 24 h default;
- the ``reservation-allocated`` annotation: written as JSON, read back (also a bare name);
- the reserve pod built from a template: key, queue (``spec.queue`` else ``default``), Berth's
  group/queue/reservation keys stripped from the template, scheduling gates dropped, a pinned
  ``nodeName`` turned into a required node affinity, an invalid template flagged;
- the cache: a Pending reservation is a pending pod of its queue; an Available one counts on
  its node what its owners do not use (an owner's annotation shrinks it, the owner finishing
  grows it back); allocate-once holds nothing after its first owner; the annotation on a pod
  the owners do not select ends nothing; expiry at snapshot time,
  deletion and a terminal phase free the node at once; ``assume_reservation`` counts it
  Available before the API says so.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import keys, resources
from berth.scheduler.snapshot import cache as cache_module
from berth.scheduler.snapshot import pods, reservations, selectors
from tests.scheduler import builders as b
from tests.scheduler.reservations import world as w

Obj = dict[str, typing.Any]
CPU = resources.CPU


def info(**fields: typing.Any) -> reservations.ReservationInfo:
    return reservations.reservation_info(w.reservation(str(fields.pop("name", "r")), **fields))


def pod_info(**fields: typing.Any) -> pods.PodInfo:
    return pods.pod_info(b.pod(str(fields.pop("name", "p")), **fields))


def available(obj: Obj, node: str, **status: typing.Any) -> Obj:
    """``obj`` as the API shows it once Available on ``node``."""
    allocatable = {
        "cpu": obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    }
    return {
        **obj,
        "status": {"phase": "Available", "nodeName": node, "allocatable": allocatable, **status},
    }


# Owners ----------------------------------------------------------------------------------

EXPR = b.expr


@pytest.mark.parametrize(
    ("owner", "pod", "matches"),
    [
        pytest.param(w.owner_object("p"), pod_info(), True, id="object-name"),
        pytest.param(w.owner_object("q"), pod_info(), False, id="object-other-name"),
        pytest.param(
            w.owner_labels({"app": "a"}), pod_info(labels={"app": "a"}), True, id="match-labels"
        ),
        pytest.param(
            w.owner_labels({"app": "a"}),
            pod_info(labels={"app": "b"}),
            False,
            id="match-labels-other-value",
        ),
        pytest.param(w.owner_labels({}), pod_info(), True, id="empty-selector-matches-all"),
        pytest.param(
            w.owner_labels(expressions=[EXPR("app", "In", "a", "b")]),
            pod_info(labels={"app": "b"}),
            True,
            id="in",
        ),
        pytest.param(
            w.owner_labels(expressions=[EXPR("app", "NotIn", "a")]),
            pod_info(),
            True,
            id="notin-without-the-label",
        ),
        pytest.param(
            w.owner_labels(expressions=[EXPR("app", "NotIn", "a")]),
            pod_info(labels={"app": "a"}),
            False,
            id="notin-with-the-value",
        ),
        pytest.param(
            w.owner_labels(expressions=[EXPR("app", "Exists")]),
            pod_info(),
            False,
            id="exists-without-the-label",
        ),
        pytest.param(
            w.owner_labels(expressions=[EXPR("app", "DoesNotExist")]),
            pod_info(),
            True,
            id="does-not-exist",
        ),
        pytest.param(
            w.owner_labels(expressions=[EXPR("n", "Gt", "1")]),
            pod_info(labels={"n": "5"}),
            False,
            id="gt-is-no-label-operator",
        ),
        pytest.param(w.owner_controller("Job", "j"), pod_info(), False, id="controller-none"),
    ],
)
def test_owner_matching(owner: Obj, pod: pods.PodInfo, matches: bool) -> None:
    assert reservations.is_owner(info(owners=[owner]), pod) is matches


def test_owners_match_only_in_the_reservations_namespace() -> None:
    resv = info(owners=[w.owner_labels({})], namespace="a")
    assert reservations.is_owner(resv, pod_info(namespace="a"))
    assert not reservations.is_owner(resv, pod_info(namespace="b"))


def test_a_reserve_pod_is_nobodys_owner() -> None:
    resv = info(owners=[w.owner_labels({})])
    reserve = reservations.reserve_pod(resv, scheduler_names=[b.SCHEDULER])
    assert not reservations.is_owner(resv, reserve)


@pytest.mark.parametrize(
    ("owners", "problem"),
    [
        pytest.param([w.owner_object("p")], None, id="object"),
        pytest.param(
            [w.owner_labels({"a": "1"}, expressions=[EXPR("a", "In", "1", "2")])],
            None,
            id="consistent-selector",
        ),
        pytest.param(
            [w.owner_labels(expressions=[EXPR("a", "In", "1"), EXPR("a", "In", "2")])],
            "no owner can ever match a pod: spec.owners[0].labelSelector: can never match: no "
            "value of label 'a' satisfies all its requirements",
            id="disjoint-in-sets",
        ),
        pytest.param(
            [w.owner_labels(expressions=[EXPR("a", "In")])],
            "no owner can ever match a pod: spec.owners[0].labelSelector.matchExpressions[0]: "
            "values must be non-empty when operator is In or NotIn (label 'a')",
            id="in-without-values",
        ),
        pytest.param(
            [{"controller": {"kind": "Job"}}],
            "no owner can ever match a pod: spec.owners[0].controller: controller needs both kind "
            "and name",
            id="controller-without-name",
        ),
        pytest.param(
            [{}],
            "no owner can ever match a pod: spec.owners[0]: an owner sets exactly one of object, "
            "controller or labelSelector (this one sets none)",
            id="empty-entry",
        ),
        pytest.param(
            [],
            "spec.owners: owners must name at least one owner, so no pod could ever use the "
            "reservation",
            id="no-owners",
        ),
    ],
)
def test_owners_that_can_never_match(owners: list[Obj], problem: str | None) -> None:
    assert reservations.owners_problem(info(owners=owners)) == problem


# Lifetime --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "deadline"),
    [
        pytest.param({}, b.EPOCH + 24 * 3600, id="default-24h"),
        pytest.param({"ttl": "90m", "created": b.EPOCH + 10}, b.EPOCH + 10 + 5400, id="ttl"),
        pytest.param({"ttl": "0"}, None, id="ttl-zero-never"),
        pytest.param({"expires": b.EPOCH + 7}, b.EPOCH + 7, id="expires"),
    ],
)
def test_deadline(fields: dict[str, typing.Any], deadline: float | None) -> None:
    assert reservations.deadline(info(**fields)) == deadline


# Charging annotation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "found"),
    [
        pytest.param('{"name":"r","uid":"u1"}', ("ns/r", "u1"), id="json"),
        pytest.param("r", ("ns/r", None), id="bare-name"),
        pytest.param('{"uid":"u1"}', None, id="json-without-name"),
        pytest.param("", None, id="empty"),
    ],
)
def test_the_allocated_annotation_is_read_back(value: str, found: object) -> None:
    pod = pod_info(namespace="ns", annotations={keys.RESERVATION_ALLOCATED_ANNOTATION: value})
    assert reservations.allocated_to(pod) == found


def test_the_allocated_annotation_round_trips() -> None:
    resv = info(namespace="ns")
    text = reservations.allocated_annotation(resv)
    pod = pod_info(namespace="ns", annotations={keys.RESERVATION_ALLOCATED_ANNOTATION: text})
    assert reservations.allocated_to(pod) == (resv.key, resv.uid)


# The reserve pod ----------------------------------------------------------------------------


def test_the_reserve_pod_is_a_pending_pod_of_the_reservations_queue() -> None:
    obj = w.reservation(
        "r",
        namespace="ns",
        cpu="2",
        queue="team",
        labels={keys.POD_GROUP_LABEL: "g", keys.QUEUE_LABEL: "x", "tier": "t"},
    )
    obj["spec"]["template"]["spec"]["schedulingGates"] = [{"name": "hold"}]
    reserve = reservations.reserve_pod(
        reservations.reservation_info(obj), scheduler_names=[b.SCHEDULER]
    )
    assert reserve.key == "ns/reservation:r"
    assert reserve.reserve and reserve.reservation == "ns/r"
    assert (reserve.queue, reserve.pod_group) == ("team", "ns/pod:reservation:r")
    assert dict(reserve.labels) == {"tier": "t", keys.QUEUE_LABEL: "team"}
    assert reserve.scheduling_gates == ()
    assert reserve.node_name is None and reserve.invalid is None
    assert reserve.requests == resources.ResourceList.parse(
        {"cpu": "2", "memory": "1Gi", "pods": "1"}
    )


def test_the_reserve_pod_of_a_reservation_without_a_queue_is_in_the_default_queue() -> None:
    reserve = reservations.reserve_pod(info(), scheduler_names=[b.SCHEDULER])
    assert reserve.queue == keys.DEFAULT_QUEUE


def test_a_pinned_template_becomes_a_required_node_affinity() -> None:
    reserve = reservations.reserve_pod(
        info(node_name="n7", affinity=b.affinity(required=[[b.expr("zone", "In", "a")]])),
        scheduler_names=[b.SCHEDULER],
    )
    assert reserve.node_name is None  # not placed: it must still be scheduled there
    assert reserve.required_affinity == (
        selectors.SelectorTerm(
            expressions=(selectors.Requirement("zone", "In", ("a",)),),
            fields=(selectors.Requirement("metadata.name", "In", ("n7",)),),
        ),
    )


def test_an_available_reserve_pod_sits_on_its_node_holding_allocatable_and_a_pod_slot() -> None:
    resv = reservations.reservation_info(available(w.reservation("r", cpu="3"), "n1"))
    reserve = reservations.reserve_pod(resv, scheduler_names=[b.SCHEDULER])
    assert reserve.node_name == "n1"
    assert reserve.requests == resources.ResourceList.of(cpu=3000, pods=1000)


# The cache ---------------------------------------------------------------------------------

OWNER = {"app": "r"}  # what the reservations here select as owners (world.reservation's default)


def requested(
    cache: cache_module.ClusterCache, node: str, *, now: float = b.EPOCH
) -> dict[str, int]:
    snap = cache.snapshot(now)
    table = snap.nodes
    row = table.requested[table.index[node]]
    return {name: int(row[col]) for col, name in enumerate(table.resources) if row[col]}


def test_a_pending_reservation_is_a_pending_pod_in_the_snapshot() -> None:
    cache = b.cache_of(b.node("n1"), w.reservation("r", queue="team"), b.queue("team"))
    snap = cache.snapshot(b.EPOCH)
    (pending,) = snap.pending
    assert pending.key == "default/reservation:r" and pending.queue == "team"
    assert "default/pod:reservation:r" in snap.pod_groups


def test_an_available_reservation_counts_what_its_owners_do_not_use() -> None:
    resv = available(w.reservation("r", cpu="3", allocate_once=False), "n1")
    cache = b.cache_of(b.node("n1"), resv)
    assert requested(cache, "n1") == {CPU: 3000, "pods": 1000}
    annotation = {keys.RESERVATION_ALLOCATED_ANNOTATION: '{"name":"r","uid":"uid-resv-default-r"}'}
    owner = b.pod("o", node="n1", cpu="1", memory=None, labels=OWNER, annotations=annotation)
    cache.add_pod(owner)
    # 1 core used by the owner (its own request) + 2 still held; the owner took the pod slot.
    assert requested(cache, "n1") == {CPU: 3000, "pods": 1000}
    cache.add_pod({**owner, "status": {"phase": "Succeeded"}})
    assert requested(cache, "n1") == {CPU: 3000, "pods": 1000}  # held again in full
    cache.remove_pod("default/o")
    assert requested(cache, "n1") == {CPU: 3000, "pods": 1000}


def test_an_owner_bigger_than_the_reservation_uses_it_all_and_the_node_for_the_rest() -> None:
    resv = available(w.reservation("r", cpu="2", allocate_once=False), "n1")
    cache = b.cache_of(b.node("n1"), resv)
    annotation = {keys.RESERVATION_ALLOCATED_ANNOTATION: "r"}
    cache.add_pod(b.pod("o", node="n1", cpu="5", memory=None, labels=OWNER, annotations=annotation))
    assert requested(cache, "n1") == {CPU: 5000, "pods": 1000}


def test_an_owner_of_an_earlier_reservation_of_the_same_name_is_not_charged() -> None:
    resv = available(w.reservation("r", cpu="2", allocate_once=False), "n1")
    cache = b.cache_of(b.node("n1"), resv)
    stale = {keys.RESERVATION_ALLOCATED_ANNOTATION: '{"name":"r","uid":"old"}'}
    cache.add_pod(b.pod("o", node="n1", cpu="1", memory=None, labels=OWNER, annotations=stale))
    assert requested(cache, "n1") == {CPU: 3000, "pods": 2000}


def test_an_allocate_once_reservation_holds_nothing_after_its_first_owner() -> None:
    cache = b.cache_of(b.node("n1"), available(w.reservation("r", cpu="3"), "n1"))
    annotation = {keys.RESERVATION_ALLOCATED_ANNOTATION: "r"}
    cache.add_pod(b.pod("o", node="n1", cpu="1", memory=None, labels=OWNER, annotations=annotation))
    assert requested(cache, "n1") == {CPU: 1000, "pods": 1000}


def test_a_forged_allocation_on_a_pod_its_owners_do_not_select_ends_nothing() -> None:
    """A tenant writes ``reservation-allocated`` on a pod of its own in the reservation's
    namespace and node: the reservation still holds what it held, for its real owners."""
    cache = b.cache_of(b.node("n1"), available(w.reservation("r", cpu="3"), "n1"))
    forged = {keys.RESERVATION_ALLOCATED_ANNOTATION: '{"name":"r","uid":"uid-resv-default-r"}'}
    labels = {"app": "squatter"}
    cache.add_pod(b.pod("x", node="n1", cpu="1", memory=None, labels=labels, annotations=forged))
    # The reservation's 3 cores and its pod slot still held, plus the forger's own core.
    assert requested(cache, "n1") == {CPU: 4000, "pods": 2000}
    snap = cache.snapshot(b.EPOCH)
    assert reservations.reserve_pod_key("default/r") in snap.pods


@pytest.mark.parametrize(
    "change",
    [
        pytest.param("expire", id="expired-by-snapshot-time"),
        pytest.param("delete", id="deleted"),
        pytest.param("succeed", id="terminal-phase"),
    ],
)
def test_an_ended_reservation_frees_its_node_at_once(change: str) -> None:
    resv = available(w.reservation("r", cpu="3", ttl="1h"), "n1")
    cache = b.cache_of(b.node("n1"), resv)
    assert requested(cache, "n1") == {CPU: 3000, "pods": 1000}
    now = b.EPOCH
    if change == "expire":
        now += 3600
    elif change == "delete":
        cache.remove_reservation("default/r")
    else:
        cache.add_reservation({**resv, "status": {**resv["status"], "phase": "Succeeded"}})
    assert requested(cache, "n1", now=now) == {}
    assert "default/reservation:r" not in cache.snapshot(now).pods


def test_an_assumed_reservation_counts_before_the_api_says_so() -> None:
    cache = b.cache_of(b.node("n1"), w.reservation("r", cpu="3"))
    assert [p.key for p in cache.snapshot(b.EPOCH).pending] == ["default/reservation:r"]
    cache.assume_reservation(
        "default/r", node="n1", allocatable=resources.ResourceList.of(cpu=3000)
    )
    assert cache.snapshot(b.EPOCH).pending == ()
    assert requested(cache, "n1") == {CPU: 3000, "pods": 1000}
    with pytest.raises(KeyError):
        cache.assume_reservation("default/nope", node="n1", allocatable=resources.ResourceList())


def test_an_assumed_reservation_survives_an_update_written_before_its_status() -> None:
    # Kopf's handling marks (or any label) can reach the informer before the status write:
    # still Pending, that update must not make the reservation pending again, or the next
    # cycle places it on a second node.
    resv = w.reservation("r", cpu="3")
    cache = b.cache_of(b.node("n1"), b.node("n2"), resv)
    cache.assume_reservation(
        "default/r", node="n1", allocatable=resources.ResourceList.of(cpu=3000)
    )
    marked = {**resv, "metadata": {**resv["metadata"], "annotations": {"handled": "yes"}}}
    cache.add_reservation(marked)
    assert cache.snapshot(b.EPOCH).pending == ()
    assert requested(cache, "n1") == {CPU: 3000, "pods": 1000}
    # A status that moved on replaces the assumption, and so does another object of that name.
    cache.add_reservation({**marked, "status": {"phase": "Succeeded"}})
    assert requested(cache, "n1") == {}
    replaced = {**resv, "metadata": {**resv["metadata"], "uid": "another"}}
    cache.assume_reservation(
        "default/r", node="n1", allocatable=resources.ResourceList.of(cpu=3000)
    )
    cache.add_reservation(replaced)
    assert [p.key for p in cache.snapshot(b.EPOCH).pending] == ["default/reservation:r"]
