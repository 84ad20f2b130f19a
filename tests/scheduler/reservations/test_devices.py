"""Reservations that hold DRA devices for their owners (Koordinator's reserved devices).

A Reservation whose template names ``resourceClaims`` is placed like a pod with those claims:
the DynamicResources plugin allocates its devices, the Reservation records them in
``status.devices``, and every other pod sees them taken. We test these aspects:

- placement: the devices are chosen by the pods' allocator (the node with enough free
  devices), listed on the Reservation (driver, pool, device, the template entry and request);
  a named claim's spec is held the same way;
- holding: a non-owner pod waits for devices while an owner gets its own claim allocated on
  the very devices held (what the API server accepts: real devices of the node's slices), and
  the reservation, used once, lets them go; a cluster built from the Reservation's status
  alone (another leader) sees the same devices taken;
- queues: what the reservation holds counts against its queue as ``deviceclass/<name>``, and
  an owner of that queue taking it over is not counted twice;
- bad input: a missing DeviceClass or template, a selector that does not compile,
  ``allocateOnce: false``: the Reservation stays Pending saying so with the field, and a plain
  pod and a healthy reservation beside it are placed as before.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.framework import reasons
from tests.scheduler import builders as b
from tests.scheduler import dra_builders as d
from tests.scheduler.reservations import world as w

Obj = dict[str, typing.Any]

GPU = d.device_class("gpu")


def gpu_reservation(
    name: str, *, templates: dict[str, str] | None = None, **fields: typing.Any
) -> Obj:
    """A Reservation of 1 cpu whose template claims ``templates`` (entry -> template name)."""
    resv = w.reservation(name, cpu="1", memory=None, **fields)
    entries = [
        {"name": entry, "resourceClaimTemplateName": t}
        for entry, t in (templates or {"gpu": "two"}).items()
    ]
    resv["spec"]["template"]["spec"]["resourceClaims"] = entries
    return resv


def owner(name: str, *, of: str, template: str = "two", **kw: typing.Any) -> Obj:
    return d.pod_with_claims(name, templates={"gpu": template}, labels={"app": of}, **kw)


def claim_devices(world: w.World, pod: str) -> list[str]:
    found = [
        c
        for c in world.sim.objects("ResourceClaim")
        if any(r.get("name") == pod for r in c["metadata"].get("ownerReferences") or [])
    ]
    assert len(found) == 1, found
    results = found[0]["status"]["allocation"]["devices"]["results"]
    return [f"{r['pool']}/{r['device']}" for r in results]


def held(world: w.World, name: str) -> list[str]:
    return [f"{x['pool']}/{x['device']}" for x in world.status(name).get("devices") or []]


def two_gpu_world(*objects: Obj) -> w.World:
    """n1 with one GPU, n2 with two; a template claiming two GPUs."""
    return w.World(
        b.node("n1", cpu="8"),
        b.node("n2", cpu="8"),
        GPU,
        d.node_slice("n1", devices=d.gpus(1)),
        d.node_slice("n2", devices=d.gpus(2)),
        d.template("two", d.request(count=2)),
        *objects,
    )


# Placement ---------------------------------------------------------------------------------


def test_a_reservation_is_placed_where_its_devices_fit_and_lists_them() -> None:
    world = two_gpu_world(gpu_reservation("train"))
    world.cycle()
    assert world.phase("train") == "Available"
    status = world.status("train")
    assert status["nodeName"] == "n2"
    assert status["devices"] == [
        {"claim": "gpu", "request": "gpu", "driver": d.GPU_DRIVER, "pool": "n2", "device": "gpu-0"},
        {"claim": "gpu", "request": "gpu", "driver": d.GPU_DRIVER, "pool": "n2", "device": "gpu-1"},
    ]
    # Nothing Berth wrote is a ResourceClaim: the held claims live in its cache only.
    assert world.sim.objects("ResourceClaim") == []


def test_a_reservation_may_hold_what_a_named_claim_asks_for() -> None:
    resv = w.reservation("train", cpu="1", memory=None)
    resv["spec"]["template"]["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimName": "shape"}
    ]
    world = two_gpu_world(d.claim("shape", d.request(count=2)), resv)
    world.cycle()
    assert world.status("train")["nodeName"] == "n2"
    assert held(world, "train") == ["n2/gpu-0", "n2/gpu-1"]
    claim = world.sim.get("ResourceClaim", namespace="default", name="shape")
    assert claim is not None and "status" not in claim  # the named claim is left alone


def test_a_reservation_too_big_for_every_node_waits_saying_which_claim() -> None:
    world = two_gpu_world(d.template("three", d.request(count=3)))
    world.put(gpu_reservation("big", templates={"gpu": "three"}))
    world.cycle()
    assert world.phase("big") == "Pending"
    condition = world.condition("big", "Scheduled")
    assert condition["status"] == "False"
    # n2 has two GPUs of three: fewer devices than asked, not devices taken.
    assert condition["message"] == (
        "0/2 nodes fit: 2 node(s) had no devices matching spec.template.spec.resourceClaims "
        "entry gpu (request gpu: 3 of deviceclass gpu)"
    )


# Holding -----------------------------------------------------------------------------------


def test_held_devices_are_taken_for_others_and_go_to_the_owner() -> None:
    world = two_gpu_world(gpu_reservation("train"))
    world.cycle()
    assert held(world, "train") == ["n2/gpu-0", "n2/gpu-1"]
    world.put(d.pod_with_claims("stranger", templates={"gpu": "two"}))
    world.cycle()
    world.cycle()
    assert world.node_of("stranger") is None
    assert "too few free devices" in (world.reason("stranger") or "")

    world.put(owner("trainer", of="train"))
    world.cycle()
    world.cycle()
    assert world.node_of("trainer") == "n2"
    # The owner's own claim names the devices the reservation held (real slice devices).
    assert claim_devices(world, "trainer") == ["n2/gpu-0", "n2/gpu-1"]
    assert world.phase("train") == "Succeeded"
    assert world.node_of("stranger") is None  # the owner has them now


def test_an_owner_takes_the_held_devices_rather_than_free_ones() -> None:
    taken = d.claim(
        "taken",
        status=d.allocated((d.GPU_DRIVER, "n1", "gpu-0"), node="n1", reserved_for=[("x", "u")]),
    )
    world = w.World(
        b.node("n1", cpu="8"),
        GPU,
        d.node_slice("n1", devices=d.gpus(2)),
        d.template("one", d.request(count=1)),
        taken,
        gpu_reservation("train", templates={"gpu": "one"}),
    )
    world.cycle()
    assert held(world, "train") == ["n1/gpu-1"]
    # gpu-0 comes free; the owner still gets gpu-1, the one held for it.
    world.delete("ResourceClaim", "taken")
    world.put(owner("trainer", of="train", template="one"))
    world.cycle()
    world.cycle()
    assert claim_devices(world, "trainer") == ["n1/gpu-1"]


def test_when_the_reservation_ends_its_devices_are_free() -> None:
    world = two_gpu_world(gpu_reservation("train", ttl="1m"))
    world.cycle()
    world.put(d.pod_with_claims("stranger", templates={"gpu": "two"}))
    world.cycle()
    world.cycle()
    assert world.node_of("stranger") is None
    world.advance(120)
    for _ in range(3):
        world.cycle()
    assert world.phase("train") == "Expired"
    assert world.node_of("stranger") == "n2"
    assert claim_devices(world, "stranger") == ["n2/gpu-0", "n2/gpu-1"]


def test_another_leader_sees_the_held_devices_from_the_status_alone() -> None:
    first = two_gpu_world(gpu_reservation("train"))
    first.cycle()
    placed = first.sim.get("Reservation", namespace="default", name="train")
    assert placed is not None
    # A fresh scheduler and cache over the same objects (the status is all there is).
    second = two_gpu_world(placed, d.pod_with_claims("stranger", templates={"gpu": "two"}))
    second.cycle()
    second.cycle()
    assert second.node_of("stranger") is None
    assert "too few free devices" in (second.reason("stranger") or "")


# Queues ------------------------------------------------------------------------------------


def test_held_devices_count_against_the_queue_once() -> None:
    queue = b.queue("team", limit={"deviceclass/gpu": "2"})
    world = two_gpu_world(
        queue,
        b.node("n3", cpu="8"),
        d.node_slice("n3", devices=d.gpus(2)),
        gpu_reservation("train", queue="team"),
    )
    world.cycle()
    assert world.phase("train") == "Available"
    # The queue holds 2 devices: a non-owner of the queue waits at its limit.
    world.put(d.pod_with_claims("stranger", templates={"gpu": "two"}, queue="team"))
    world.cycle()
    world.cycle()
    assert world.node_of("stranger") is None
    assert "deviceclass/gpu" in (world.reason("stranger") or "")
    # The owner takes over what the reservation holds: not counted a second time.
    world.put(owner("trainer", of="train", queue="team", memory=None))
    world.cycle()
    world.cycle()
    assert world.node_of("trainer") == world.status("train")["nodeName"]


# Bad input ---------------------------------------------------------------------------------


def _broken_template(request: Obj) -> Obj:
    return d.template("broken", request)


BAD = [
    pytest.param(
        (_broken_template(d.request(cls="missing")),),
        "spec.template.spec.resourceClaims[0]: request gpu: deviceclass missing does not exist",
        id="missing-deviceclass",
    ),
    pytest.param(
        (_broken_template(d.request(selectors=["device.attributes[["])),),
        "spec.template.spec.resourceClaims[0] (resourceclaimtemplate default/broken): "
        "spec.devices.requests[0].exactly.selectors[0].cel.expression",
        id="selector-that-does-not-compile",
    ),
    pytest.param(
        (),
        "spec.template.spec.resourceClaims[0].resourceClaimTemplateName: resourceclaimtemplate "
        "default/broken not found",
        id="missing-template",
    ),
]


@pytest.mark.parametrize(("objects", "message"), BAD)
def test_a_broken_claim_keeps_the_reservation_pending_naming_the_field(
    objects: tuple[Obj, ...], message: str
) -> None:
    world = two_gpu_world(
        *objects,
        gpu_reservation("bad", templates={"gpu": "broken"}),
        w.reservation("ok", cpu="2", memory=None),
        b.pod("bystander", cpu="2", memory=None),
    )
    for _ in range(2):
        world.cycle()
        assert world.phase("bad") == "Pending"
        condition = world.condition("bad", "Scheduled")
        assert condition["status"] == "False"
        assert condition["reason"] == reasons.ReasonCode.RESOURCE_CLAIM_PROBLEM.value
        assert condition["message"].startswith(message), condition["message"]
    assert world.phase("ok") == "Available"
    assert world.node_of("bystander") is not None


def test_allocate_once_false_with_devices_is_refused_naming_the_field() -> None:
    world = two_gpu_world(gpu_reservation("bad", allocate_once=False))
    world.cycle()
    assert world.phase("bad") == "Pending"
    condition = world.condition("bad", "Scheduled")
    assert condition["reason"] == reasons.ReasonCode.INVALID.value
    assert condition["message"].startswith("spec.allocateOnce: a reservation holding DRA devices")
