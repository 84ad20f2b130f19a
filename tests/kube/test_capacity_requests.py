"""Capacity requests to autoscalers (``kube.autoscaling.capacity_requests``) against the emulator.

The autoscalers' APIs are served by minimal CRDs (what Karpenter's and Cluster Autoscaler's
CRDs install, schema left open); where a test needs an autoscaler's answer, it writes the
status conditions Cluster Autoscaler or Karpenter would. We test these aspects:

- neither API served: the group's note says no autoscaler can be asked, nothing is created;
- a gated gang asks with a CapacityBuffer (only that served): a PodTemplate of its pods'
  shape and a buffer of that many replicas, owned by the PodGroup; the autoscaler's words go
  into the group's note; once the gang is placed both are deleted;
- a queue's ProvisioningRequest class: one request with a podSet per shape and the class, the
  pods annotated to consume it; refused (``Failed``), the note and a Warning Event say so, and
  after ``retry_after`` it is made again as the next attempt, the old one deleted;
- admitting a gated gang withdraws its CapacityBuffer at once (deleted, not made again by the
  next pass) but keeps its ProvisioningRequest, which its pods consume;
- nobody answering within ``answer_timeout`` is told on the group;
- a Reservation's buffer: its template (a pause image where it names none), emptied once the
  reservation holds its node, deleted when it goes;
- a new leader adopts the requests it finds for what it wants and deletes the others;
- group reasons carry the notes (the code stands);
- a gated gang the autoscaler can only partly fit (one of its buffers ``Infeasible``, or —
  Karpenter v1.15 — ``False`` for ``answer_timeout`` beside one that reads ``True``): both
  buffers are deleted, the group says ``AutoscalerCannotFit`` and until when, nothing is asked
  within the hold; after it the gang asks again (the next attempt), is held again for twice as
  long when the autoscaler says it again, and asks on once every shape fits; a gang whose
  only shape fits nowhere (nothing is bought) keeps its buffer and its code.
"""

from __future__ import annotations

import collections.abc
import typing

import pytest

from berth.api import autoscaling, keys
from berth.emulator import faults, testing
from berth.kube.autoscaling import capacity_requests
from berth.kube.transport import clients, events, writes
from berth.scheduler.framework import decisions, pending, reasons
from berth.scheduler.snapshot import cache as cluster_cache
from berth.status import capacity_requests as plans
from berth.status import conditions, scale_up
from berth.util import clocks
from tests import open_crds
from tests.kube import conftest

Object = dict[str, typing.Any]
PR_PATH = "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests"
CB_PATH = "/apis/autoscaling.x-k8s.io/v1beta1/namespaces/default/capacitybuffers"


def serve(emulator: testing.RunningEmulator, *kinds: str) -> None:
    api = emulator.api
    crds = emulator.call(api.resource, "apiextensions.k8s.io/v1", "customresourcedefinitions")
    for kind in kinds:
        if kind == "ProvisioningRequest":
            crd = open_crds.crd(
                group=autoscaling.GROUP, kind=kind, plural="provisioningrequests", version="v1"
            )
        else:
            crd = open_crds.crd(
                group=autoscaling.GROUP, kind=kind, plural="capacitybuffers", version="v1beta1"
            )
        emulator.call(api.create, crds, crd)


class World:
    def __init__(self, emulator: testing.RunningEmulator, api: clients.AsyncApiClient) -> None:
        self.emulator = emulator
        self.clock = clocks.VirtualClock(1_800_000_000.0)
        self.cache = cluster_cache.ClusterCache()
        self.recorder = events.EventRecorder(api, clock=self.clock)
        self.writer = writes.Writer(api)
        self.requests = capacity_requests.CapacityRequests(
            api,
            writer=self.writer,
            clock=self.clock,
            recorder=self.recorder,
            answer_timeout=120.0,
            retry_after=60.0,
        )

    def add(self, obj: Object, *, plural: str, api_version: str = "v1") -> Object:
        created = conftest.create(self.emulator, obj, plural=plural)
        feed = {
            "pods": self.cache.add_pod,
            "podgroups": self.cache.add_pod_group,
            "queues": self.cache.add_queue,
            "reservations": self.cache.add_reservation,
        }[plural]
        feed(created)
        return created

    def gang(self, name: str, size: int, *, queue: str = "default", gpus: int = 4) -> None:
        self.add(
            {
                "apiVersion": keys.API_VERSION,
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": {"minMember": size, "queue": queue},
            },
            plural="podgroups",
        )
        for i in range(size):
            pod = conftest.pod(f"{name}-{i}", labels={keys.POD_GROUP_LABEL: name, "index": str(i)})
            pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = str(gpus)
            self.add(pod, plural="pods")

    def cycle(
        self,
        *made: decisions.Decision,
        gated: collections.abc.Collection[str] = (),
    ) -> None:
        snapshot = self.cache.snapshot(self.clock.now())
        result = decisions.CycleResult(session_id="s", decisions=made)
        self.requests.offer(snapshot, result, gated=gated)

    def stored(self, path: str) -> list[Object]:
        api = self.emulator.api
        group, _, rest = path.removeprefix("/apis/").removeprefix("/api/").partition("/")
        if path.startswith("/api/v1"):
            version, plural = "v1", path.rsplit("/", 1)[1]
        else:
            version, plural = f"{group}/{rest.split('/')[0]}", path.rsplit("/", 1)[1]
        resource = self.emulator.call(api.resource, version, plural)
        return list(self.emulator.call(api.storage.list, resource.key, "default"))

    def set_status(self, path: str, name: str, status: Object) -> None:
        api = self.emulator.api
        version = "/".join(path.removeprefix("/apis/").split("/")[:2])
        resource = self.emulator.call(api.resource, version, path.rsplit("/", 1)[1])
        self.emulator.call(
            api.patch,
            resource,
            {"status": status},
            namespace="default",
            name=name,
            patch_type="application/merge-patch+json",
            subresource="status",
        )

    def events(self, reason: str) -> list[str]:
        api = self.emulator.api
        resource = self.emulator.call(api.resource, "v1", "events")
        return [
            e["message"]
            for e in self.emulator.call(api.storage.list, resource.key, "default")
            if e["reason"] == reason
        ]


def capacity_mark(group: str, members: collections.abc.Iterable[str]) -> pending.MarkPending:
    why = reasons.new(reasons.ReasonCode.NOT_ENOUGH_RESOURCES, "0/2 nodes fit: 2 Insufficient gpu")
    return pending.MarkPending(
        group=group,
        pods=tuple(pending.PodPending(key=k, reason=why, capacity=True) for k in members),
    )


@pytest.fixture
async def world(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> collections.abc.AsyncIterator[World]:
    made = World(berth_crds, connection.api)
    stop = __import__("asyncio").Event()
    task = __import__("asyncio").create_task(made.recorder.run(stop))
    try:
        yield made
    finally:
        await made.recorder.drain()
        stop.set()
        await task


MEMBERS = [f"default/g-{i}" for i in range(3)]


async def test_with_no_autoscaler_api_the_group_is_told_and_nothing_made(world: World) -> None:
    world.gang("g", 3)
    world.cycle(capacity_mark("default/g", MEMBERS), gated=MEMBERS)
    await world.requests.reconcile()
    assert world.writer.sent == 0
    note = world.requests.note("default/g")
    assert note is not None and note.startswith("no autoscaler API to ask for its capacity")


async def test_a_gated_gang_asks_with_a_buffer_until_it_is_placed(world: World) -> None:
    serve(world.emulator, "CapacityBuffer")
    world.gang("g", 3)
    world.cycle(capacity_mark("default/g", MEMBERS), gated=MEMBERS)
    await world.requests.reconcile()
    (buffer,) = world.stored(CB_PATH)
    (template,) = world.stored("/api/v1/namespaces/default/podtemplates")
    assert buffer["metadata"]["name"] == "berth-pg-g-1"
    assert buffer["spec"] == {
        "provisioningStrategy": autoscaling.BUFFER_ACTIVE_CAPACITY,
        "podTemplateRef": {"name": template["metadata"]["name"]},
        "replicas": 3,
    }
    (owner,) = buffer["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("PodGroup", "g")
    requests = template["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert requests["nvidia.com/gpu"] == "4"
    assert "schedulingGates" not in template["template"]["spec"]
    assert world.requests.note("default/g") == (
        "asked the autoscaler for 3 pods' capacity with CapacityBuffer default/berth-pg-g-1"
    )
    # Karpenter answers: new nodes are needed, and being launched.
    world.set_status(
        CB_PATH,
        "berth-pg-g-1",
        {
            "conditions": [
                {
                    "type": "Provisioning",
                    "status": "False",
                    "reason": "RequiresNewCapacity",
                    "message": "3/3 virtual pods required new capacity, 0 failed",
                    "lastTransitionTime": "2027-01-01T00:00:00Z",
                }
            ]
        },
    )
    await world.requests.reconcile()
    note = world.requests.note("default/g")
    assert note is not None and note.endswith(
        "Provisioning=False (RequiresNewCapacity: 3/3 virtual pods required new capacity, 0 failed)"
    )
    # The gang is placed: its request goes.
    for key in MEMBERS:
        world.cache.assume_pod(key, node="n1")
    world.cycle()
    await world.requests.reconcile()
    assert world.stored(CB_PATH) == []
    assert world.stored("/api/v1/namespaces/default/podtemplates") == []
    assert world.requests.note("default/g") is None


@pytest.mark.parametrize(
    ("served", "path", "kept"),
    [("CapacityBuffer", CB_PATH, False), ("ProvisioningRequest", PR_PATH, True)],
)
async def test_admitting_a_gang_withdraws_its_buffer_but_keeps_its_provisioning_request(
    world: World, served: str, path: str, kept: bool
) -> None:
    serve(world.emulator, served)
    world.gang("g", 3)
    world.cycle(capacity_mark("default/g", MEMBERS), gated=MEMBERS)
    await world.requests.reconcile()
    assert len(world.stored(path)) == 1
    await world.requests.withdraw(MEMBERS[:1])
    await world.requests.reconcile()  # a pass before the next cycle makes nothing again
    assert len(world.stored(path)) == (1 if kept else 0)
    assert (world.requests.note("default/g") is not None) is kept


def _atomic_queue(name: str) -> Object:
    return {
        "apiVersion": keys.API_VERSION,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "autoscaling": {
                "provisioningRequest": {
                    "provisioningClassName": autoscaling.BEST_EFFORT_ATOMIC_SCALE_UP,
                    "parameters": {"ValidUntilSeconds": "600"},
                }
            }
        },
    }


async def test_a_provisioning_request_refused_is_said_and_asked_again(world: World) -> None:
    serve(world.emulator, "ProvisioningRequest", "CapacityBuffer")
    conftest.create(world.emulator, _atomic_queue("atomic"), plural="queues", namespace=None)
    world.cache.add_queue(_atomic_queue("atomic"))
    world.gang("g", 3, queue="atomic")
    world.cycle(capacity_mark("default/g", MEMBERS))  # scheduler mode: not gated
    await world.requests.reconcile()
    (request,) = world.stored(PR_PATH)
    assert request["metadata"]["name"] == "berth-pg-g-1"
    assert request["spec"]["provisioningClassName"] == autoscaling.BEST_EFFORT_ATOMIC_SCALE_UP
    assert request["spec"]["parameters"] == {"ValidUntilSeconds": "600"}
    (pod_set,) = request["spec"]["podSets"]
    assert pod_set["count"] == 3
    for pod in [p for p in world.stored("/api/v1/namespaces/default/pods")]:
        annotations = pod["metadata"]["annotations"]
        assert annotations[autoscaling.CONSUME_ANNOTATION] == "berth-pg-g-1"
        assert annotations[autoscaling.CLASS_ANNOTATION] == autoscaling.BEST_EFFORT_ATOMIC_SCALE_UP
    # Cluster Autoscaler cannot get the nodes.
    world.set_status(
        PR_PATH,
        "berth-pg-g-1",
        {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "FailedToCreateNodes",
                    "message": "no node group can hold 4 nvidia.com/gpu",
                    "lastTransitionTime": "2027-01-01T00:00:00Z",
                }
            ]
        },
    )
    await world.requests.reconcile()
    assert world.requests.note("default/g") == (
        "the autoscaler refused 3 pods' capacity with ProvisioningRequest default/berth-pg-g-1: "
        "Failed=True (FailedToCreateNodes: no node group can hold 4 nvidia.com/gpu); asking "
        "again at 2027-01-15T08:01:00Z"
    )
    refused_verdict = world.requests.verdicts["default/g"]
    assert refused_verdict.code is scale_up.ScaleUpReason.CAPACITY_REQUEST_REFUSED
    assert refused_verdict.status == "False"
    await world.recorder.drain()
    (refused,) = world.events("CapacityRequestRefused")
    assert "no node group can hold 4 nvidia.com/gpu" in refused
    # No loop: within the backoff the refused request stays, and nothing new is made.
    world.clock.advance(30)
    await world.requests.reconcile()
    assert [r["metadata"]["name"] for r in world.stored(PR_PATH)] == ["berth-pg-g-1"]
    world.clock.advance(31)
    await world.requests.reconcile()
    assert [r["metadata"]["name"] for r in world.stored(PR_PATH)] == ["berth-pg-g-2"]
    assert world.requests.created == 2
    # Refused again: the backoff doubles (120 s), and the group says when it asks again.
    world.set_status(
        PR_PATH,
        "berth-pg-g-2",
        {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "FailedToCreateNodes",
                    "message": "no node group can hold 4 nvidia.com/gpu",
                    "lastTransitionTime": "2027-01-01T00:01:01Z",
                }
            ]
        },
    )
    await world.requests.reconcile()
    note = world.requests.note("default/g")
    assert note is not None and note.endswith("asking again at 2027-01-15T08:03:01Z")
    world.clock.advance(119)
    await world.requests.reconcile()
    assert [r["metadata"]["name"] for r in world.stored(PR_PATH)] == ["berth-pg-g-2"]
    world.clock.advance(2)
    await world.requests.reconcile()
    assert [r["metadata"]["name"] for r in world.stored(PR_PATH)] == ["berth-pg-g-3"]
    assert world.requests.created == 3


async def test_nobody_answering_is_told_on_the_group(world: World) -> None:
    serve(world.emulator, "CapacityBuffer")
    world.gang("g", 3)
    world.cycle(capacity_mark("default/g", MEMBERS), gated=MEMBERS)
    await world.requests.reconcile()
    world.clock.advance(121)
    await world.requests.reconcile()
    note = world.requests.note("default/g")
    assert note is not None and note.startswith(
        "no autoscaler has answered 3 pods' capacity with CapacityBuffer default/berth-pg-g-1 "
        "in 120s"
    )
    await world.recorder.drain()
    assert len(world.events("CapacityRequestUnanswered")) == 1


def _reservation(name: str) -> Object:
    return {
        "apiVersion": keys.API_VERSION,
        "kind": "Reservation",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "r", "resources": {"requests": {"nvidia.com/gpu": "8"}}}
                    ]
                }
            },
            "owners": [{"object": {"name": "trainer"}}],
            "capacityBuffer": True,
        },
    }


async def test_a_reservation_buffer_lives_with_the_reservation(world: World) -> None:
    serve(world.emulator, "CapacityBuffer")
    reservation = world.add(_reservation("r"), plural="reservations")
    short = reasons.new(reasons.ReasonCode.NOT_ENOUGH_RESOURCES, "0/2 nodes fit")
    world.cycle(
        decisions.Unschedulable(
            subject=decisions.Subject.RESERVATION, key="default/r", reason=short
        )
    )
    await world.requests.reconcile()
    (buffer,) = world.stored(CB_PATH)
    assert buffer["metadata"]["name"] == "berth-resv-r-1" and buffer["spec"]["replicas"] == 1
    (template,) = world.stored("/api/v1/namespaces/default/podtemplates")
    (container,) = template["template"]["spec"]["containers"]
    assert container["image"] == "registry.k8s.io/pause:3.10"
    # Placed: the buffer asks for nothing more.
    placed = {**reservation, "status": {"phase": "Available", "nodeName": "n9"}}
    world.cache.add_reservation(placed)
    world.cycle()
    await world.requests.reconcile()
    (buffer,) = world.stored(CB_PATH)
    assert buffer["spec"]["replicas"] == 0
    world.cache.remove_reservation("default/r")
    world.cycle()
    await world.requests.reconcile()
    assert (
        world.stored(CB_PATH) == []
        and world.stored("/api/v1/namespaces/default/podtemplates") == []
    )


async def test_a_new_leader_adopts_what_it_wants_and_removes_the_rest(
    world: World, connection: clients.AsyncConnection
) -> None:
    serve(world.emulator, "CapacityBuffer")
    world.gang("g", 3)
    world.gang("h", 2)
    h_members = ["default/h-0", "default/h-1"]
    world.cycle(
        capacity_mark("default/g", MEMBERS),
        capacity_mark("default/h", h_members),
        gated=[*MEMBERS, *h_members],
    )
    await world.requests.reconcile()
    assert sorted(b["metadata"]["name"] for b in world.stored(CB_PATH)) == [
        "berth-pg-g-1",
        "berth-pg-h-1",
    ]
    # The next leader: h now waits for its queue, g still for nodes.
    successor = capacity_requests.CapacityRequests(
        connection.api, writer=writes.Writer(connection.api), clock=world.clock
    )
    snapshot = world.cache.snapshot(world.clock.now())
    successor.offer(
        snapshot,
        decisions.CycleResult(session_id="s", decisions=(capacity_mark("default/g", MEMBERS),)),
        gated=MEMBERS,
    )
    await successor.reconcile()
    assert successor.created == 0
    assert [b["metadata"]["name"] for b in world.stored(CB_PATH)] == ["berth-pg-g-1"]
    assert successor.note("default/g") == (
        "asked the autoscaler for 3 pods' capacity with CapacityBuffer default/berth-pg-g-1"
    )


async def test_group_reasons_carry_the_notes(world: World) -> None:
    world.gang("g", 3)
    world.cycle(capacity_mark("default/g", MEMBERS), gated=MEMBERS)
    await world.requests.reconcile()
    why = reasons.new(reasons.ReasonCode.NOT_ENOUGH_RESOURCES, "0/2 nodes fit")
    result = decisions.CycleResult(session_id="s", decisions=(), group_why={"default/g": why})
    noted = world.requests.noted(result)
    assert noted.group_why["default/g"].code is reasons.ReasonCode.NOT_ENOUGH_RESOURCES
    assert noted.group_why["default/g"].message.startswith("0/2 nodes fit; no autoscaler API")
    assert world.requests.noted(result) is noted


# Scheduler mode: the pods' Unschedulable condition is the ask; what the autoscaler did is read
# from its Events on them.


def serve_karpenter(emulator: testing.RunningEmulator) -> None:
    """Karpenter's NodePools, served as its CRDs serve them (cluster-scoped, karpenter.sh/v1)."""
    crd = open_crds.crd(
        group="karpenter.sh", kind="NodePool", plural="nodepools", version="v1", scope="Cluster"
    )
    api = emulator.api
    crds = emulator.call(api.resource, "apiextensions.k8s.io/v1", "customresourcedefinitions")
    emulator.call(api.create, crds, crd)


def autoscaler_event(
    world: World, pod: str, *, reason: str, message: str, source: str = "karpenter"
) -> None:
    """An Event on ``pod`` as Karpenter's (or Cluster Autoscaler's) recorder writes it."""
    (found,) = [
        p for p in world.stored("/api/v1/namespaces/default/pods") if p["metadata"]["name"] == pod
    ]
    stamp = conditions.timestamp(world.clock.now())
    conftest.create(
        world.emulator,
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{pod}.{reason.lower()}.{int(world.clock.now())}"},
            "involvedObject": {
                "kind": "Pod",
                "namespace": "default",
                "name": pod,
                "uid": found["metadata"]["uid"],
                "apiVersion": "v1",
            },
            "reason": reason,
            "message": message,
            "type": "Warning" if reason == "FailedScheduling" else "Normal",
            "source": {"component": source},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        },
        plural="events",
    )


def group_events(world: World, reason: str) -> list[Object]:
    return [
        e
        for e in world.stored("/api/v1/namespaces/default/events")
        if e["reason"] == reason and e["involvedObject"]["kind"] == "PodGroup"
    ]


KARPENTER_FAILED = (
    'Failed to schedule pod, incompatible with nodepool "autoscaled", daemonset overhead='
    '{"pods":"0"}, no instance type has enough resources'
)


async def test_karpenter_unable_to_fit_a_member_is_said_on_the_group(world: World) -> None:
    serve_karpenter(world.emulator)
    world.gang("g", 3)
    world.cycle(capacity_mark("default/g", MEMBERS))  # scheduler mode, no class: no request
    await world.requests.reconcile()
    assert world.requests.verdicts == {}  # nothing said yet, and nothing asked
    assert world.writer.sent == 0
    autoscaler_event(world, "g-1", reason="FailedScheduling", message=KARPENTER_FAILED)
    await world.requests.reconcile()
    verdict = world.requests.verdicts["default/g"]
    assert verdict.code is scale_up.ScaleUpReason.AUTOSCALER_CANNOT_FIT
    # Its pods are kept off the autoscalers' list for five minutes (the binder is told).
    until = conditions.timestamp(world.clock.now() + scale_up.HOLD_FIRST)
    assert verdict.message == (
        "Karpenter cannot place 1 of its 3 waiting pods on any node it could add, and the gang "
        f"is placed whole or not at all (pod default/g-1: {KARPENTER_FAILED}); its pods wait as "
        f"AutoscalerCannotFit, off the autoscalers' list, until {until}"
    )
    assert set(world.requests.holds.held) == {"default/g"}
    # The group's reason carries it (the code stands), and one Warning Event on the PodGroup.
    why = reasons.new(reasons.ReasonCode.NOT_ENOUGH_RESOURCES, "0/2 nodes fit")
    result = decisions.CycleResult(session_id="s", group_why={"default/g": why})
    told = world.requests.noted(result).group_why["default/g"]
    assert told.code is reasons.ReasonCode.NOT_ENOUGH_RESOURCES
    assert told.message == f"0/2 nodes fit; {verdict.message}"
    # A list of the Events that fails keeps the verdict (no flapping with the network).
    world.emulator.faults.add(
        faults.Fault("GET", "/api/v1/namespaces/default/events", status=500, times=2)
    )
    await world.requests.reconcile()
    assert world.requests.verdicts["default/g"] == verdict
    await world.requests.reconcile()
    await world.recorder.drain()
    (said,) = group_events(world, "AutoscalerCannotFit")
    assert (said["type"], said["involvedObject"]["name"]) == ("Warning", "g")
    assert said["message"] == verdict.message
    assert world.writer.sent == 0  # nothing made, nothing evicted
    # Placed (the NodePool grew): the verdict goes with the wait, at the planner's next look
    # at every signal (at most a second later).
    for key in MEMBERS:
        world.cache.assume_pod(key, node="n1")
    world.clock.advance(plans.SIGNALS_SETTLE_EVERY)
    world.cycle()
    await world.requests.reconcile()
    assert world.requests.verdicts == {}
    assert world.requests.holds.held == {}  # and its hold with it


async def test_no_autoscaler_acting_is_said_after_the_timeout_then_its_plan(world: World) -> None:
    serve_karpenter(world.emulator)
    world.gang("g", 3)
    world.cycle(capacity_mark("default/g", MEMBERS))
    await world.requests.reconcile()
    world.clock.advance(119)
    world.cycle(capacity_mark("default/g", MEMBERS))  # still waiting: the clock runs on
    await world.requests.reconcile()
    assert world.requests.verdicts == {}
    world.clock.advance(1)
    await world.requests.reconcile()
    absent = world.requests.verdicts["default/g"]
    assert absent.code is scale_up.ScaleUpReason.NO_AUTOSCALER_ACTED
    assert absent.message.startswith("no autoscaler has acted on its 3 Unschedulable pods in 120s")
    world.clock.advance(60)
    await world.requests.reconcile()  # said once, not again on every pass
    await world.recorder.drain()
    assert len(group_events(world, "NoAutoscalerActed")) == 1
    assert world.writer.sent == 0
    # Karpenter comes back and plans nodes for the gang.
    autoscaler_event(
        world, "g-0", reason="Nominated", message="Pod should schedule on: nodeclaim/autoscaled-x"
    )
    await world.requests.reconcile()
    planned = world.requests.verdicts["default/g"]
    assert planned.code is scale_up.ScaleUpReason.SCALING_UP
    assert planned.message.endswith(
        "(pod default/g-0: Pod should schedule on: nodeclaim/autoscaled-x)"
    )
    await world.recorder.drain()
    (said,) = group_events(world, "ScalingUp")
    assert said["type"] == "Normal"


async def test_without_an_autoscaler_api_nobody_is_expected_to_act(world: World) -> None:
    world.gang("g", 3)
    world.cycle(capacity_mark("default/g", MEMBERS))
    await world.requests.reconcile()
    world.clock.advance(600)
    await world.requests.reconcile()
    assert world.requests.verdicts == {}
    # A gang waiting for its queue is no autoscaler's business at all.
    serve_karpenter(world.emulator)
    world.clock.advance(301)  # discovery is asked again
    over = reasons.new(reasons.ReasonCode.QUEUE_AT_LIMIT, "queue default at limit")
    world.cycle(
        pending.MarkPending(
            group="default/g",
            pods=tuple(pending.PodPending(key=k, reason=over, capacity=False) for k in MEMBERS),
        )
    )
    world.clock.advance(600)
    await world.requests.reconcile()
    assert world.requests.karpenter
    assert world.requests.verdicts == {}


# Admission mode: a gated gang asks with a CapacityBuffer per pod shape, which Karpenter fills
# shape by shape; what it says on the buffers tells a gang it can only partly fit.


def mixed_gang(world: World) -> list[str]:
    """A gang of two 4-GPU members and one of 16 GPUs (two pod shapes, two buffers)."""
    world.add(
        {
            "apiVersion": keys.API_VERSION,
            "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"minMember": 3, "queue": "default"},
        },
        plural="podgroups",
    )
    for i, gpus in enumerate((4, 4, 16)):
        pod = conftest.pod(f"g-{i}", labels={keys.POD_GROUP_LABEL: "g"})
        pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = str(gpus)
        world.add(pod, plural="pods")
    return MEMBERS


def provisioning(status: str, reason: str, message: str) -> Object:
    """A buffer's status as Karpenter writes it after a provisioning round."""
    return {
        "conditions": [
            {
                "type": "ReadyForProvisioning",
                "status": "True",
                "reason": "Resolved",
                "lastTransitionTime": "2027-01-01T00:00:00Z",
            },
            {
                "type": "Provisioning",
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": "2027-01-01T00:00:00Z",
            },
        ]
    }


def buffer_names(world: World) -> list[str]:
    return sorted(b["metadata"]["name"] for b in world.stored(CB_PATH))


async def test_a_gated_gang_the_autoscaler_can_only_partly_fit_stops_asking_for_a_backoff(
    world: World,
) -> None:
    serve(world.emulator, "CapacityBuffer")
    members = mixed_gang(world)
    world.cycle(capacity_mark("default/g", members), gated=members)
    await world.requests.reconcile()
    assert buffer_names(world) == ["berth-pg-g-1-0", "berth-pg-g-1-1"]
    assert [b["spec"]["replicas"] for b in world.stored(CB_PATH)] == [2, 1]
    # Karpenter v1.15: the 4-GPU shape fits the nodes it launched; the 16-GPU one fits none,
    # which it says with the reason it also gives pods that need a node.
    fits = provisioning("True", "FitsExistingCapacity", "All 2 virtual pods fit on existing")
    short = provisioning("False", "RequiresNewCapacity", "0/1 virtual pods required new, 1 failed")
    world.set_status(CB_PATH, "berth-pg-g-1-0", fits)
    world.set_status(CB_PATH, "berth-pg-g-1-1", short)
    await world.requests.reconcile()
    world.clock.advance(119)
    await world.requests.reconcile()
    assert len(buffer_names(world)) == 2  # a shape may still be launching: not yet
    assert "default/g" not in world.requests.holds.held
    world.clock.advance(1)
    await world.requests.reconcile()
    # The whole gang stops asking: both buffers and their templates go.
    assert buffer_names(world) == []
    assert world.stored("/api/v1/namespaces/default/podtemplates") == []
    verdict = world.requests.verdicts["default/g"]
    assert (verdict.code, verdict.status) == (scale_up.ScaleUpReason.AUTOSCALER_CANNOT_FIT, "False")
    until = world.clock.now() + scale_up.HOLD_FIRST
    assert verdict.message == (
        "the autoscaler has room for 2 of its 3 waiting pods but, in 120s, none for 1 more, and "
        "the gang is placed whole or not at all (CapacityBuffer default/berth-pg-g-1-1: "
        "Provisioning=False (RequiresNewCapacity: 0/1 virtual pods required new, 1 failed)); "
        f"it asks the autoscaler for nothing (its requests withdrawn), until "
        f"{conditions.timestamp(until)}"
    )
    assert world.requests.holds.until("default/g") == until
    await world.recorder.drain()
    (said,) = group_events(world, "AutoscalerCannotFit")
    assert (said["type"], said["message"]) == ("Warning", verdict.message)
    # Within the hold the gang still waits for nodes, and nothing is asked again.
    world.clock.advance(scale_up.HOLD_FIRST - 1)
    world.cycle(capacity_mark("default/g", members), gated=members)
    await world.requests.reconcile()
    assert buffer_names(world) == [] and world.requests.created == 1
    # The hold ends: asked again (the next attempt), so that a changed NodePool is seen; the
    # old verdict stands until the new buffers say otherwise.
    world.clock.advance(1)
    await world.requests.reconcile()
    assert buffer_names(world) == ["berth-pg-g-2-0", "berth-pg-g-2-1"]
    assert world.requests.verdicts["default/g"].code is scale_up.ScaleUpReason.AUTOSCALER_CANNOT_FIT
    assert world.requests.holds.until("default/g") is None
    # A Karpenter that says Infeasible holds it again at once, for twice as long.
    world.set_status(CB_PATH, "berth-pg-g-2-0", fits)
    world.set_status(
        CB_PATH,
        "berth-pg-g-2-1",
        provisioning("False", "Infeasible", "no instance type has enough resources"),
    )
    await world.requests.reconcile()
    assert buffer_names(world) == []
    assert world.requests.holds.until("default/g") == world.clock.now() + 2 * scale_up.HOLD_FIRST
    assert world.requests.verdicts["default/g"].message.startswith(
        "the autoscaler cannot place 1 of its 3 waiting pods on any node it could add"
    )
    # The NodePool grew: after the hold, every shape fits, and the gang's verdict says so.
    world.clock.advance(2 * scale_up.HOLD_FIRST)
    await world.requests.reconcile()
    assert buffer_names(world) == ["berth-pg-g-3-0", "berth-pg-g-3-1"]
    for name in buffer_names(world):
        world.set_status(CB_PATH, name, fits)
    await world.requests.reconcile()
    provided = world.requests.verdicts["default/g"]
    assert provided.code is scale_up.ScaleUpReason.CAPACITY_PROVISIONED
    assert world.requests.holds.held == {}


async def test_a_gated_gang_whose_every_shape_fits_nowhere_keeps_its_buffers_code(
    world: World,
) -> None:
    serve(world.emulator, "CapacityBuffer")
    world.gang("g", 3, gpus=16)  # one shape, which no instance type holds: nothing is bought
    world.cycle(capacity_mark("default/g", MEMBERS), gated=MEMBERS)
    await world.requests.reconcile()
    world.set_status(
        CB_PATH,
        "berth-pg-g-1",
        provisioning("False", "RequiresNewCapacity", "0/3 virtual pods required new, 3 failed"),
    )
    world.clock.advance(600)
    await world.requests.reconcile()
    assert buffer_names(world) == ["berth-pg-g-1"]
    verdict = world.requests.verdicts["default/g"]
    assert verdict.code is scale_up.ScaleUpReason.CAPACITY_REQUEST_PENDING
    assert world.requests.holds.held == {}


def node_claim(emulator: testing.RunningEmulator, name: str, *, registered: bool) -> None:
    """One of Karpenter's NodeClaims (made if missing): launched, and registered or still on
    its way."""
    api = emulator.api
    crds = emulator.call(api.resource, "apiextensions.k8s.io/v1", "customresourcedefinitions")
    served = emulator.call(api.storage.list, crds.key, None)
    if not any(c["metadata"]["name"] == "nodeclaims.karpenter.sh" for c in served):
        crd = open_crds.crd(
            group="karpenter.sh",
            kind="NodeClaim",
            plural="nodeclaims",
            version="v1",
            scope="Cluster",
        )
        emulator.call(api.create, crds, crd)
    resource = emulator.call(api.resource, "karpenter.sh/v1", "nodeclaims")
    conditions = [{"type": "Launched", "status": "True", "reason": "Launched"}]
    conditions.append({"type": "Registered", "status": "True" if registered else "Unknown"})
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name}}
    if not any(
        c["metadata"]["name"] == name for c in emulator.call(api.storage.list, resource.key, None)
    ):
        emulator.call(api.create, resource, claim)
    emulator.call(
        api.patch,
        resource,
        {"status": {"conditions": conditions}},
        namespace=None,
        name=name,
        patch_type="application/merge-patch+json",
        subresource="status",
    )


async def test_a_shape_whose_node_is_still_launching_is_not_taken_for_one_that_fits_nowhere(
    world: World,
) -> None:
    # A cloud slower than answerTimeout to launch a node: the short shape's buffer stays
    # False while Karpenter's NodeClaim is not registered, and that is not a shape it cannot
    # fit; the time counts from the last launch Berth saw.
    serve(world.emulator, "CapacityBuffer")
    serve_karpenter(world.emulator)
    node_claim(world.emulator, "default-abcde", registered=False)
    members = mixed_gang(world)
    world.cycle(capacity_mark("default/g", members), gated=members)
    await world.requests.reconcile()
    fits = provisioning("True", "FitsExistingCapacity", "All 2 virtual pods fit on existing")
    short = provisioning("False", "RequiresNewCapacity", "0/1 virtual pods required new")
    world.set_status(CB_PATH, "berth-pg-g-1-0", fits)
    world.set_status(CB_PATH, "berth-pg-g-1-1", short)
    await world.requests.reconcile()
    world.clock.advance(300)
    await world.requests.reconcile()
    assert len(buffer_names(world)) == 2
    assert world.requests.holds.held == {}
    # The node registered (the short shape fits nothing after all): 120 s from the last
    # launch seen, the gang is held.
    node_claim(world.emulator, "default-abcde", registered=True)
    world.clock.advance(119)
    await world.requests.reconcile()
    assert len(buffer_names(world)) == 2
    world.clock.advance(1)
    await world.requests.reconcile()
    assert buffer_names(world) == []
    verdict = world.requests.verdicts["default/g"]
    assert verdict.code is scale_up.ScaleUpReason.AUTOSCALER_CANNOT_FIT
