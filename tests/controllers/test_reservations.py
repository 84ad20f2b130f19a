"""The Reservation controller: what it plans, and what it writes through real clients.

We test these aspects:
- planning (pure, a table): ``expiresAt`` from ``ttl``/``expires`` (none for ``ttl: 0``); the
  ``Valid`` condition and a Warning Event for a template without requests or owners that can
  never match; expiry: ``Expired`` when Available, ``Failed`` when still Pending, with the
  ``Ready`` condition; owners: a finished, deleted or replaced owner leaves ``currentOwners``
  and ``allocated``, an annotated owner running on the node joins; an allocate-once
  reservation with an owner is ``Succeeded``; an ended reservation is deleted only after the
  retention, and the next wake-up is the earliest of those moments;
- against the API server emulator with Kopf observing and the controller writing, in virtual
  time (looptime): ``expiresAt`` is filled at once, the reservation expires exactly at its
  deadline (a scheduled wake-up, not a poll), an Event says so, and it is deleted exactly one
  retention later; a reservation whose time is already over fails at once; owners that
  finish leave ``currentOwners``;
- the whole path with the real operator (``berth.operator`` with informers, scheduler, binder,
  Kopf and this controller) on an emulator with simulated nodes: ``kubectl apply`` a
  Reservation, ``kubectl get resv`` shows it Available on a node; the owner pod runs on that
  node, annotated; the reservation is then ``Succeeded``, and ``kubectl get events`` tells
  both steps.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import json
import logging
import pathlib
import subprocess
import typing

import kopf
import looptime
import pytest
import yaml

from berth.api import crds, keys
from berth.cli import up
from berth.controllers import indexing, observed, reservations
from berth.emulator import kubelets, server, testing
from berth.kube.informers import cache_sync
from berth.kube.transport import clients, rest
from berth.operator import main, scheduling
from berth.operator import settings as operator_settings
from berth.scheduler.snapshot import cache as cache_module
from berth.scheduler.snapshot import snapshots, wire
from berth.status import observations
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler.reservations import world as w

Obj = dict[str, typing.Any]
RETENTION = 3600.0
ALLOCATED = keys.RESERVATION_ALLOCATED_ANNOTATION
PATH = f"/apis/{keys.API_VERSION}/namespaces/default/reservations"


def observed_of(obj: Obj) -> observations.ObservedObject:
    seen = observations.observe(reservations.KIND, body=obj, parse_time=wire.parse_time)
    assert seen is not None
    return seen


def with_status(obj: Obj, **status: typing.Any) -> Obj:
    return {**obj, "status": status}


def snapshot_of(*objects: Obj) -> snapshots.Snapshot:
    return b.cache_of(b.node("n1", cpu="8"), *objects).snapshot(b.EPOCH)


def charged(name: str, *, node: str = "n1", phase: str = "Running", app: str = "r") -> Obj:
    """A pod Berth placed into reservation ``r`` (running on ``node``); ``app``: its label,
    which ``r``'s owners select when it is ``r``."""
    annotation = {ALLOCATED: '{"name":"r","uid":"uid-resv-default-r"}'}
    return b.pod(
        name,
        node=node,
        cpu="1",
        memory=None,
        labels={"app": app},
        annotations=annotation,
        phase=phase,
    )


def owner_entry(name: str, *, uid: str | None = None) -> dict[str, str]:
    return {"namespace": "default", "name": name, "uid": uid or f"uid-default-{name}"}


AVAILABLE = {"phase": "Available", "nodeName": "n1", "allocatable": {"cpu": "4"}}
EXPIRES_AT = "2026-01-02T00:00:00Z"  # the default 24 h after b.EPOCH


# Planning ------------------------------------------------------------------------------------


def status_after(
    obj: Obj, *, snapshot: snapshots.Snapshot | None = None, now: float = b.EPOCH
) -> reservations.Plan:
    return reservations.plan(observed_of(obj), snapshot=snapshot, now=now, retention=RETENTION)


@pytest.mark.parametrize(
    ("fields", "expires_at"),
    [
        pytest.param({}, EXPIRES_AT, id="default-24h"),
        pytest.param({"ttl": "90m"}, "2026-01-01T01:30:00Z", id="ttl"),
        pytest.param({"expires": b.EPOCH + 60}, "2026-01-01T00:01:00Z", id="expires"),
        pytest.param({"ttl": "0"}, None, id="never"),
    ],
)
def test_expires_at_is_filled(fields: dict[str, typing.Any], expires_at: str | None) -> None:
    planned = status_after(w.reservation("r", **fields))
    assert planned.status is not None
    assert planned.status.get("expiresAt") == expires_at
    assert planned.wake_at == (wire.parse_time(expires_at) if expires_at else None)
    valid = [c for c in planned.status["conditions"] if c["type"] == "Valid"]
    assert [(c["status"], c["reason"]) for c in valid] == [("True", "Valid")]
    assert planned.events == ()


def test_the_owners_are_worded_as_selectors_for_the_owner_column() -> None:
    obj = w.reservation(
        "r", owners=[w.owner_labels({"app": "train"}), {"object": {"name": "solo"}}]
    )
    planned = status_after(obj)
    assert planned.status is not None
    assert planned.status["ownerSelector"] == "app=train; pod/solo"
    again = status_after(with_status(obj, **planned.status))
    assert again.status is None  # written once


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param(
            w.reservation("r", cpu=None, memory=None),
            "spec.template: a reservation holds what its template requests, and this one "
            "requests no resources: set resources.requests on its containers",
            id="template-without-requests",
        ),
        pytest.param(
            w.reservation(
                "r",
                owners=[
                    w.owner_labels(expressions=[b.expr("a", "In", "x"), b.expr("a", "In", "y")])
                ],
            ),
            "no owner can ever match a pod: spec.owners[0].labelSelector: can never match: "
            "no value of "
            "label 'a' satisfies all its requirements",
            id="owners-never-match",
        ),
    ],
)
def test_an_invalid_reservation_is_marked_and_reported_once(obj: Obj, message: str) -> None:
    planned = status_after(obj)
    assert planned.status is not None
    (valid,) = [c for c in planned.status["conditions"] if c["type"] == "Valid"]
    assert (valid["status"], valid["reason"], valid["message"]) == ("False", "Invalid", message)
    assert planned.events == (("Warning", "Invalid", message),)
    again = status_after(with_status(obj, **planned.status))
    assert again.status is None and again.events == ()


def test_a_ttl_past_the_longest_duration_makes_only_that_reservation_invalid() -> None:
    planned = status_after(w.reservation("r", ttl="99999999999h"))
    assert planned.status is not None
    (valid,) = [c for c in planned.status["conditions"] if c["type"] == "Valid"]
    assert valid["status"] == "False"
    assert valid["message"].startswith("spec.ttl: duration is out of range (at most 2562047h)")
    assert "99999999999h" in valid["message"]
    assert "expiresAt" not in planned.status


async def test_one_reservation_that_breaks_planning_does_not_stop_the_others(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A bug one object triggers (as "year out of range" once did for every pass) is that
    # object's: the pass goes on, and the error is logged once per window, not per pass.
    objects = observed.ObservedObjects()
    for name in ("bad", "good"):
        objects.put(observed_of(w.reservation(name, created=b.EPOCH)))
    real_plan = reservations.plan

    def plan(obj: observations.ObservedObject, **kwargs: typing.Any) -> reservations.Plan:
        if obj.name == "bad":
            raise ValueError("year 11409971 is out of range")
        return real_plan(obj, **kwargs)

    monkeypatch.setattr(reservations, "plan", plan)
    controller = reservations.ReservationController(
        object(),  # type: ignore[arg-type]
        objects=objects,
        board=CacheBoard(),
        clock=clocks.VirtualClock(b.EPOCH),
        retention=RETENTION,
    )
    written: list[str] = []

    async def write(obj: observations.ObservedObject, **_: typing.Any) -> bool:
        written.append(obj.name)
        return False

    monkeypatch.setattr(controller, "_write", write)
    with caplog.at_level(logging.ERROR, logger="berth.controllers.reservations"):
        for _ in range(5):
            await controller.run_once()
    assert written == ["good"] * 5
    assert len([r for r in caplog.records if "default/bad" in r.getMessage()]) == 1


@pytest.mark.parametrize(
    ("status", "phase", "message", "event_type"),
    [
        pytest.param(
            AVAILABLE,
            "Expired",
            "expired at 2026-01-01T00:10:00Z",
            "Normal",
            id="available-expires",
        ),
        pytest.param(
            {},
            "Failed",
            "expired at 2026-01-01T00:10:00Z before it could be placed on a node",
            "Warning",
            id="pending-fails",
        ),
    ],
)
def test_a_reservation_expires_at_its_deadline(
    status: Obj, phase: str, message: str, event_type: str
) -> None:
    obj = with_status(w.reservation("r", ttl="10m"), **status)
    before = status_after(obj, now=b.EPOCH + 599)
    assert before.status is not None  # expiresAt and Valid are filled, the phase is kept
    assert before.status.get("phase") == status.get("phase")
    assert before.wake_at == b.EPOCH + 600
    planned = status_after(obj, now=b.EPOCH + 600)
    assert planned.status is not None and planned.status["phase"] == phase
    (ready,) = [c for c in planned.status["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "Expired", message)
    assert planned.events == ((event_type, "Expired", message),)
    assert planned.wake_at == b.EPOCH + 600 + RETENTION


@pytest.mark.parametrize(
    ("owners", "pods", "listed", "allocated"),
    [
        pytest.param([owner_entry("a")], [charged("a")], ["a"], {"cpu": "1"}, id="owner-running"),
        pytest.param(
            [owner_entry("a")], [charged("a", phase="Succeeded")], [], {}, id="owner-finished"
        ),
        pytest.param([owner_entry("a")], [], [], {}, id="owner-deleted"),
        pytest.param(
            [owner_entry("a", uid="old")],
            [charged("a")],
            ["a"],
            {"cpu": "1"},
            id="owner-replaced-but-annotated-again",
        ),
        pytest.param(
            [owner_entry("a", uid="old")],
            [b.pod("a", node="n1", cpu="1")],
            [],
            {},
            id="owner-replaced",
        ),
        pytest.param(
            [], [charged("b"), charged("c")], ["b", "c"], {"cpu": "2"}, id="annotated-owners-join"
        ),
        pytest.param(
            [], [charged("elsewhere", node="n2")], [], {}, id="annotated-but-on-another-node"
        ),
        pytest.param([], [charged("forger", app="other")], [], {}, id="annotated-but-not-an-owner"),
    ],
)
def test_owners_follow_the_pods(
    owners: list[dict[str, str]], pods: list[Obj], listed: list[str], allocated: dict[str, str]
) -> None:
    obj = with_status(w.reservation("r", allocate_once=False), **AVAILABLE, currentOwners=owners)
    planned = status_after(obj, snapshot=snapshot_of(b.node("n2"), *pods))
    status = planned.status if planned.status is not None else dict(obj["status"])
    assert [o["name"] for o in status.get("currentOwners") or []] == listed
    assert (status.get("allocated") or {}) == allocated
    assert status["phase"] == "Available"


def test_an_allocate_once_reservation_with_an_owner_succeeds() -> None:
    obj = with_status(w.reservation("r"), **AVAILABLE)
    planned = status_after(obj, snapshot=snapshot_of(charged("a")))
    assert planned.status is not None
    assert planned.status["phase"] == "Succeeded"
    assert planned.events == (("Normal", "Succeeded", "used by its owner a"),)
    assert planned.wake_at == b.EPOCH + RETENTION


def test_a_forged_allocation_on_a_pod_its_owners_do_not_select_ends_nothing() -> None:
    obj = with_status(w.reservation("r"), **AVAILABLE)
    planned = status_after(obj, snapshot=snapshot_of(charged("forger", app="other")))
    status = planned.status if planned.status is not None else dict(obj["status"])
    assert status["phase"] == "Available"
    assert not status.get("currentOwners")
    assert not planned.events


def test_an_ended_reservation_is_deleted_after_the_retention() -> None:
    ended = {
        "phase": "Expired",
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "Expired",
                "message": "m",
                "lastTransitionTime": b.timestamp(b.EPOCH + 10),
            }
        ],
    }
    obj = with_status(w.reservation("r"), **ended)
    # An ended reservation still gets its expiresAt (the sink may end it before the controller
    # has seen it once); after that first write nothing changes until the retention is over.
    filled = status_after(obj, now=b.EPOCH + 10 + RETENTION - 1).status
    assert filled is not None and filled["expiresAt"]
    obj = with_status(w.reservation("r"), **filled)
    kept = status_after(obj, now=b.EPOCH + 10 + RETENTION - 1)
    assert (kept.delete, kept.status, kept.wake_at) == (False, None, b.EPOCH + 10 + RETENTION)
    assert status_after(obj, now=b.EPOCH + 10 + RETENTION).delete


# Against the emulator, with Kopf, in virtual time ----------------------------------------------


class LoopClock:
    """Wall-clock time that moves with the event loop (virtual under looptime)."""

    def now(self) -> float:
        return b.EPOCH + asyncio.get_running_loop().time()


class CacheBoard:
    """The scheduler's "last snapshot", from a cache the test feeds."""

    def __init__(self) -> None:
        self.cache = cache_module.ClusterCache()

    def snapshot(self) -> snapshots.Snapshot:
        return self.cache.snapshot(LoopClock().now())


@pytest.fixture
async def api_server(tmp_path: pathlib.Path) -> collections.abc.AsyncIterator[server.Emulator]:
    """An emulator in the test's own loop (under looptime a threaded one would look dead)."""
    async with server.Emulator(clock=LoopClock()) as emulator:
        definitions = emulator.api.resource("apiextensions.k8s.io/v1", "customresourcedefinitions")
        for crd in crds.render_all().values():
            emulator.api.create(definitions, crd)
        emulator.write_kubeconfig(tmp_path / "kubeconfig")
        yield emulator


@pytest.fixture
async def connection(
    api_server: server.Emulator, tmp_path: pathlib.Path
) -> collections.abc.AsyncIterator[clients.AsyncConnection]:
    async with clients.connect_async(kubeconfig=str(tmp_path / "kubeconfig")) as connected:
        yield connected


@contextlib.asynccontextmanager
async def controlled(
    api_server: server.Emulator, connection: clients.AsyncConnection, board: CacheBoard
) -> collections.abc.AsyncIterator[reservations.ReservationController]:
    """Kopf observing Reservations and the controller writing, until the block ends."""
    registry = kopf.OperatorRegistry()
    objects = observed.ObservedObjects()
    # Kopf's handlers of Berth's kinds record every Reservation (into a cache of their own: the
    # test feeds the board's).
    feed = indexing.CacheFeed(
        connection.api,
        cache=cache_module.ClusterCache(),
        objects=objects,
        trigger=asyncio.Event(),
        sync=cache_sync.CacheSync(),
    )
    indexing.register(registry, feed=feed)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: typing.Any) -> None:
        settings.peering.standalone = True
        settings.posting.enabled = False
        settings.watching.server_timeout = 600

    @kopf.on.login(registry=registry)
    def login(**_: typing.Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=api_server.url, default_namespace="default")

    controller = reservations.ReservationController(
        connection.api, objects=objects, board=board, clock=LoopClock(), retention=RETENTION
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    operator = asyncio.create_task(
        kopf.operator(registry=registry, namespaces=["default"], stop_flag=stop, ready_flag=ready)
    )
    await asyncio.wait_for(ready.wait(), 60)
    writer = asyncio.create_task(controller.run(stop))
    try:
        yield controller
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.gather(operator, writer), 60)


async def get(connection: clients.AsyncConnection, name: str) -> Obj | None:
    try:
        return await rest.request(connection.api, method="GET", path=f"{PATH}/{name}")
    except Exception:
        return None


async def until(
    connection: clients.AsyncConnection,
    name: str,
    check: collections.abc.Callable[[Obj | None], bool],
    *,
    limit: float = 7200,
) -> Obj | None:
    """Poll the object (bounded, in virtual seconds) until ``check`` holds; the object."""
    async with asyncio.timeout(limit):
        while True:
            found = await get(connection, name)
            if check(found):
                return found
            await asyncio.sleep(1)


def phase_of(obj: Obj | None) -> str | None:
    return None if obj is None else (obj.get("status") or {}).get("phase")


async def create(connection: clients.AsyncConnection, obj: Obj) -> Obj:
    body = {k: v for k, v in obj.items() if k != "status"}
    body["metadata"] = {"name": obj["metadata"]["name"], "namespace": "default"}
    created = await rest.request(connection.api, method="POST", path=PATH, body=body)
    status = obj.get("status")
    if status:
        created = await rest.request(
            connection.api,
            method="PATCH",
            path=f"{PATH}/{obj['metadata']['name']}/status",
            body={"status": status},
            content_type="application/merge-patch+json",
        )
    return created


@pytest.mark.looptime
async def test_a_reservation_expires_exactly_on_time_and_is_collected_one_retention_later(
    api_server: server.Emulator,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
) -> None:
    board = CacheBoard()
    async with controlled(api_server, connection, board):
        start = float(looptime)
        await create(connection, with_status(w.reservation("r", ttl="10m"), **AVAILABLE))
        filled = await until(
            connection, "r", lambda o: bool(o and (o.get("status") or {}).get("expiresAt"))
        )
        assert filled is not None
        created = wire.parse_time(filled["metadata"]["creationTimestamp"])
        assert created is not None
        assert filled["status"]["expiresAt"] == b.timestamp(int(created) + 600)
        assert float(looptime) - start < 5
        await asyncio.sleep(start + 590 - float(looptime))
        assert phase_of(await get(connection, "r")) == "Available"
        expired = await until(connection, "r", lambda o: phase_of(o) == "Expired")
        assert expired is not None
        ready = [c for c in expired["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["reason"] == "Expired"
        assert float(looptime) == pytest.approx(start + 600, abs=2)
        await asyncio.sleep(start + 600 + RETENTION - 10 - float(looptime))
        assert await get(connection, "r") is not None
        await until(connection, "r", lambda o: o is None)
        assert float(looptime) == pytest.approx(start + 600 + RETENTION, abs=3)


@pytest.mark.looptime
async def test_a_reservation_whose_time_is_over_fails_at_once(
    api_server: server.Emulator,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
) -> None:
    async with controlled(api_server, connection, CacheBoard()):
        start = float(looptime)
        await create(connection, w.reservation("late", expires=b.EPOCH - 60))
        failed = await until(connection, "late", lambda o: phase_of(o) == "Failed")
        assert failed is not None
        assert float(looptime) - start < 5
        assert failed["status"]["expiresAt"] == "2025-12-31T23:59:00Z"


@pytest.mark.looptime
async def test_owners_that_finish_leave_current_owners(
    api_server: server.Emulator,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
) -> None:
    board = CacheBoard()
    board.cache.add_node(b.node("n1", cpu="8"))
    async with controlled(api_server, connection, board) as controller:
        resv = w.reservation("r", allocate_once=False, ttl="0")
        await create(connection, with_status(resv, **AVAILABLE, currentOwners=[owner_entry("a")]))
        created = await get(connection, "r")
        assert created is not None
        annotation = json.dumps({"name": "r", "uid": created["metadata"]["uid"]})
        owner = b.pod("a", node="n1", cpu="1", memory=None, annotations={ALLOCATED: annotation})
        board.cache.add_pod(owner)
        controller.kick()
        listed = await until(
            connection,
            "r",
            lambda o: ((o or {}).get("status") or {}).get("allocated") == {"cpu": "1"},
        )
        assert listed is not None
        assert [o["name"] for o in listed["status"]["currentOwners"]] == ["a"]
        board.cache.add_pod({**owner, "status": {"phase": "Succeeded"}})
        controller.kick()
        emptied = await until(
            connection, "r", lambda o: ((o or {}).get("status") or {}).get("currentOwners") == []
        )
        assert emptied is not None
        assert emptied["status"].get("allocated") in ({}, None)
        assert phase_of(emptied) == "Available"


# The whole path: the real operator on simulated nodes -----------------------------------------

RESERVATION_YAML = """\
apiVersion: scheduling.berth.io/v1alpha1
kind: Reservation
metadata: {name: big, namespace: default}
spec:
  template:
    spec:
      containers:
        - name: main
          resources: {requests: {cpu: "3", memory: 4Gi}}
  owners:
    - object: {name: trainer}
  ttl: 1h
"""

OWNER_YAML = """\
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  schedulerName: berth-scheduler
  containers:
    - name: main
      image: busybox
      resources: {requests: {cpu: "3", memory: 4Gi}}
"""


def kubectl(
    cluster: up.LocalCluster, home: pathlib.Path, *args: str, input: str | None = None
) -> str:
    env = {"KUBECONFIG": str(cluster.kubeconfig), "HOME": str(home), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [testing.kubectl_binary(), *args],
        input=input,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def eventually(
    probe: collections.abc.Callable[[], str],
    *,
    expect: collections.abc.Callable[[str], bool],
    limit: float = 60,
) -> str:
    async with asyncio.timeout(limit):
        while True:
            seen = await asyncio.to_thread(probe)
            if expect(seen):
                return seen
            await asyncio.sleep(0.2)


async def test_the_whole_path_with_the_real_operator(tmp_path: pathlib.Path) -> None:
    cluster = up.start_cluster(
        pools=[kubelets.parse_pool("3x cpu=4,memory=16Gi", index=0)],
        speed=1.0,
        kubeconfig=tmp_path / "kubeconfig",
    )
    stop = asyncio.Event()
    config = operator_settings.Settings(
        kubeconfig=cluster.kubeconfig,
        namespace="default",
        http_host="127.0.0.1",
        http_port=0,
        leader_election={"identity": "e2e", "lease_duration": 15},
        period=0.2,
        shutdown_timeout=5,
    )
    operator = asyncio.create_task(
        main.run(config, stop=stop, leader_components=scheduling.leader_components)
    )
    try:
        kubectl(cluster, tmp_path, "apply", "-f", "-", input=RESERVATION_YAML)
        table = await eventually(
            lambda: kubectl(cluster, tmp_path, "get", "resv", "big"),
            expect=lambda out: "Available" in out,
        )
        node = kubectl(cluster, tmp_path, "get", "resv", "big", "-o", "jsonpath={.status.nodeName}")
        assert node.startswith("pool0-") and node in table
        kubectl(cluster, tmp_path, "apply", "-f", "-", input=OWNER_YAML)
        await eventually(
            lambda: kubectl(
                cluster, tmp_path, "get", "pod", "trainer", "-o", "jsonpath={.status.phase}"
            ),
            expect=lambda out: out == "Running",
        )
        pod = yaml.safe_load(kubectl(cluster, tmp_path, "get", "pod", "trainer", "-o", "yaml"))
        assert pod["spec"]["nodeName"] == node
        assert json.loads(pod["metadata"]["annotations"][ALLOCATED])["name"] == "big"
        await eventually(
            lambda: kubectl(cluster, tmp_path, "get", "resv", "big"),
            expect=lambda out: "Succeeded" in out,
        )
        resv = yaml.safe_load(kubectl(cluster, tmp_path, "get", "resv", "big", "-o", "yaml"))
        assert resv["status"]["currentOwners"][0]["name"] == "trainer"
        assert resv["status"]["expiresAt"]

        def reasons() -> str:
            listed = json.loads(kubectl(cluster, tmp_path, "get", "events", "-o", "json"))
            return " ".join(
                e["reason"] for e in listed["items"] if e["involvedObject"]["kind"] == "Reservation"
            )

        said = await eventually(reasons, expect=lambda out: "Allocated" in out)
        assert "Scheduled" in said
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(operator, 30)
        cluster.stop()
        logging.getLogger(__name__).debug("operator stopped")
