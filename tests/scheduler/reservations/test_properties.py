"""Properties of reservations under random workloads (hypothesis), on the in-memory cluster.

We test these aspects (issue 6, "must show" 3), after every cycle of a random history — nodes,
reservations (owners by label or by name, in two namespaces, allocate-once or multi-use, some
with a TTL, some unschedulable), waves of pods (owners, non-owners, pods naming a
reservation), owners finishing, time passing:

- no node is over-committed counting reserved capacity: the pods placed on it plus what every
  live reservation still holds there (its ``allocatable`` and one pod slot, less what its live
  owners use; nothing once an allocate-once reservation has an owner) fit its allocatable;
- no non-owner is ever charged to a reservation: every pod annotated
  ``reservation-allocated`` (and every entry of ``currentOwners``) is an owner of that
  reservation, in its namespace, placed on its node, and the reservation took owners.

The accounting above is recomputed from the cluster's objects, independently of the cache.
"""

from __future__ import annotations

import dataclasses
import json
import typing

import hypothesis
import hypothesis.strategies as st

from berth.api import keys, resources
from berth.scheduler.snapshot import pods as pod_infos
from berth.scheduler.snapshot import wire
from tests.scheduler import builders as b
from tests.scheduler.reservations import world as w

Obj = dict[str, typing.Any]
NAMESPACES = ("ns1", "ns2")
APPS = ("a", "b")


@dataclasses.dataclass(frozen=True)
class ResvSpec:
    name: str
    namespace: str
    cpu: int
    app: str | None  # owners: pods labelled app=<app>; None: the pod named ``<name>-owner``
    allocate_once: bool
    ttl_minutes: int | None
    unschedulable: bool


@dataclasses.dataclass(frozen=True)
class PodSpec:
    name: str
    namespace: str
    cpu: int
    app: str | None
    names_reservation: str | None


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[int], list[ResvSpec], list[list[PodSpec]], list[int]]:
    nodes = draw(st.lists(st.sampled_from([2, 4, 6]), min_size=1, max_size=3))
    count = draw(st.integers(min_value=0, max_value=4))
    resvs = [
        ResvSpec(
            name=f"r{i}",
            namespace=draw(st.sampled_from(NAMESPACES)),
            cpu=draw(st.integers(min_value=1, max_value=4)),
            app=draw(st.sampled_from([*APPS, None])),
            allocate_once=draw(st.booleans()),
            ttl_minutes=draw(st.sampled_from([None, None, 30])),
            unschedulable=draw(st.sampled_from([False, False, False, True])),
        )
        for i in range(count)
    ]
    waves: list[list[PodSpec]] = []
    serial = 0
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        wave: list[PodSpec] = []
        for _ in range(draw(st.integers(min_value=1, max_value=6))):
            named = draw(st.sampled_from([None, None, None, *[r.name for r in resvs]]))
            owner_of = draw(st.sampled_from([None, *[r.name for r in resvs if r.app is None]]))
            wave.append(
                PodSpec(
                    name=f"{owner_of}-owner" if owner_of and serial % 3 == 0 else f"p{serial}",
                    namespace=draw(st.sampled_from(NAMESPACES)),
                    cpu=draw(st.integers(min_value=1, max_value=4)),
                    app=draw(st.sampled_from([*APPS, None])),
                    names_reservation=named,
                )
            )
            serial += 1
        waves.append(wave)
    finishes = draw(st.lists(st.integers(min_value=0, max_value=50), max_size=len(waves)))
    return nodes, resvs, waves, finishes


def reservation_object(spec: ResvSpec) -> Obj:
    owners = (
        [w.owner_labels({"app": spec.app})]
        if spec.app is not None
        else [w.owner_object(f"{spec.name}-owner")]
    )
    return w.reservation(
        spec.name,
        namespace=spec.namespace,
        cpu=str(spec.cpu),
        memory=None,
        owners=owners,
        allocate_once=spec.allocate_once,
        ttl=f"{spec.ttl_minutes}m" if spec.ttl_minutes else "0",
        unschedulable=spec.unschedulable,
    )


def pod_object(spec: PodSpec, *, incarnation: int) -> Obj:
    labels = {"app": spec.app} if spec.app else {}
    return b.pod(
        spec.name,
        uid=f"uid-{spec.namespace}-{spec.name}-{incarnation}",  # a pod made again is another
        namespace=spec.namespace,
        cpu=str(spec.cpu),
        memory=None,
        labels=labels,
        reservation=spec.names_reservation,
    )


def is_owner(resv: ResvSpec, pod: Obj) -> bool:
    """Independent of the code under test: the two owner shapes this module generates."""
    meta = pod["metadata"]
    if meta["namespace"] != resv.namespace:
        return False
    if resv.app is None:
        return bool(meta["name"] == f"{resv.name}-owner")
    return (meta.get("labels") or {}).get("app") == resv.app


def check(world: w.World, specs: dict[str, ResvSpec]) -> None:
    now = world.clock.now()
    live = [
        p
        for p in world.sim.objects("Pod")
        if p["spec"].get("nodeName") and p["status"].get("phase") not in ("Succeeded", "Failed")
    ]
    used: dict[str, resources.ResourceList] = {}
    for pod in live:
        node = pod["spec"]["nodeName"]
        used[node] = used.get(node, resources.ResourceList()) + pod_infos.pod_requests(pod["spec"])
    charged: dict[str, list[Obj]] = {}
    for pod in world.sim.objects("Pod"):
        text = (pod["metadata"].get("annotations") or {}).get(keys.RESERVATION_ALLOCATED_ANNOTATION)
        if text is None:
            continue
        name = json.loads(text)["name"]
        resv_obj = world.sim.get("Reservation", namespace=pod["metadata"]["namespace"], name=name)
        assert resv_obj is not None, f"{pod['metadata']['name']} charged to a missing {name}"
        spec = specs[name]
        assert is_owner(spec, pod), f"non-owner {pod['metadata']['name']} charged to {name}"
        assert not spec.unschedulable, f"{pod['metadata']['name']} charged to unschedulable"
        assert pod["spec"].get("nodeName") == resv_obj["status"]["nodeName"]
        if pod in live:
            charged.setdefault(name, []).append(pod)
    for resv_obj in world.sim.objects("Reservation"):
        spec = specs[resv_obj["metadata"]["name"]]
        status = resv_obj.get("status") or {}
        for entry in status.get("currentOwners") or []:
            pod = world.sim.get("Pod", namespace=entry["namespace"], name=entry["name"])
            if pod is None or pod["metadata"]["uid"] != entry["uid"]:
                continue  # that owner is gone (the simulator runs no controller to tidy up)
            assert is_owner(spec, pod), f"non-owner {entry} in currentOwners"
        if status.get("phase") != "Available":
            continue
        created = wire.parse_time(resv_obj["metadata"]["creationTimestamp"]) or 0.0
        if spec.ttl_minutes and now >= created + spec.ttl_minutes * 60:
            continue  # expired: it holds nothing, whatever the status says yet
        owners = charged.get(spec.name, [])
        if spec.allocate_once and (owners or status.get("currentOwners")):
            continue
        held = resources.ResourceList.parse(status["allocatable"]) + resources.ResourceList.of(
            pods=1000
        )
        owners_use = resources.ResourceList()
        for pod in owners:
            owners_use += pod_infos.pod_requests(pod["spec"])
        node = status["nodeName"]
        used[node] = used.get(node, resources.ResourceList()) + (held - owners_use).clamp_negative()
    for node_obj in world.sim.objects("Node"):
        name = node_obj["metadata"]["name"]
        allocatable = resources.ResourceList.parse(node_obj["status"]["allocatable"])
        over = used.get(name, resources.ResourceList()).exceeding(allocatable)
        assert not over, f"node {name} over-committed in {over}: {used[name]} > {allocatable}"


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(histories())
def test_no_node_is_over_committed_and_no_non_owner_is_charged(
    history: tuple[list[int], list[ResvSpec], list[list[PodSpec]], list[int]],
) -> None:
    nodes, resvs, waves, finishes = history
    world = w.World(
        *(b.node(f"n{i}", cpu=str(cpu), memory="64Gi") for i, cpu in enumerate(nodes)),
        *(reservation_object(spec) for spec in resvs),
    )
    specs = {spec.name: spec for spec in resvs}
    world.cycle()
    check(world, specs)
    for step, wave in enumerate(waves):
        for spec in wave:
            if world.sim.get("Pod", namespace=spec.namespace, name=spec.name) is None:
                world.put(pod_object(spec, incarnation=step))
        world.cycle()
        check(world, specs)
        running = [p for p in world.sim.objects("Pod") if p["spec"].get("nodeName")]
        if step < len(finishes) and running:
            done = running[finishes[step] % len(running)]
            world.finish(done["metadata"]["name"], namespace=done["metadata"]["namespace"])
        world.advance(20 * 60)
        world.cycle()
        check(world, specs)
