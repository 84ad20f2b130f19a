"""Leader election against the API server emulator, in virtual time (looptime).

We test these aspects:

- acquire: the first candidate creates the Lease and leads at once; the written spec carries
  identity, duration, times and transitions;
- renew: the leader renews every retry period and keeps leading indefinitely;
- a follower waits while the leader renews, knows who leads, and stays ready;
- expiry takeover: when the holder stops renewing, a follower takes over after the lease
  duration (measured on its own clock from the last change it saw), not before;
- graceful stop: the leader stops its leader-only work first, then releases the Lease, and a
  follower takes over at its next retry instead of after a lease duration;
- loss: another holder seen at a renewal, or no renewal within the renew deadline, stops the
  leader-only work at once and raises ``LeadershipLost``; the latter also makes the replica
  not ready, with the reason;
- optimistic concurrency: a 409 on a write makes the candidate re-read and decide afresh —
  two candidates racing to create the Lease end with exactly one leader, and a leader whose
  renewal raced with a harmless edit renews on the re-read version;
- bad input: an unreachable API server, RBAC denials and expired credentials are logged with a
  reason an admin can act on, make the replica not ready, never crash the campaign, and clear
  when the API server answers again.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import dataclasses
import logging
import pathlib
import random

import looptime
import pytest
import yaml

from berth.emulator import faults, server
from berth.kube.transport import clients, leases
from berth.operator import errors, leadership, probing, settings
from tests.operator import conftest

pytestmark = pytest.mark.looptime

LEASE = "berth-scheduler"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{LEASE}"


def election(identity: str, **overrides: float) -> settings.LeaderElectionSettings:
    return settings.LeaderElectionSettings(identity=identity, lease_name=LEASE, **overrides)


@dataclasses.dataclass
class Candidate:
    """One elector running in a task, with a journal of its callbacks in loop time."""

    elector: leadership.LeaderElector
    readiness: probing.Readiness
    stop: asyncio.Event
    journal: list[tuple[str, float]]
    led: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def events(self) -> list[str]:
        return [event for event, _ in self.journal]

    def when(self, event: str) -> float:
        return next(t for e, t in self.journal if e == event)


def candidate(
    connection: clients.AsyncConnection,
    identity: str,
    *,
    client: leases.LeaseClient | None = None,
    **overrides: float,
) -> Candidate:
    readiness = probing.Readiness()
    elector = leadership.LeaderElector(
        election(identity, **overrides),
        leases_client=client or lease_client(connection),
        clock=conftest.LoopClock(),
        readiness=readiness,
        jitter=0.0,  # followers retry exactly every retry period: times below are exact
        rng=random.Random(0),
    )
    return Candidate(elector, readiness, asyncio.Event(), [])


def lease_client(connection: clients.AsyncConnection) -> leases.LeaseClient:
    return leases.LeaseClient(connection.api, namespace="default", name=LEASE)


_started: list[Candidate] = []


@pytest.fixture(autouse=True)
async def stop_leftover_candidates() -> collections.abc.AsyncIterator[None]:
    """A failed assertion leaves electors running: cancel them before the server goes away."""
    yield
    while _started:
        task = _started.pop().task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, errors.LeadershipLost):
                await task


def start(c: Candidate) -> Candidate:
    loop = asyncio.get_running_loop()
    _started.append(c)

    async def started() -> None:
        c.journal.append(("started", loop.time()))
        c.led.set()

    async def stopped() -> None:
        c.journal.append(("stopped", loop.time()))

    c.task = asyncio.create_task(
        c.elector.run(stop=c.stop, on_started_leading=started, on_stopped_leading=stopped)
    )
    return c


async def until_leading(c: Candidate, *, limit: float = 120) -> float:
    """Wait (in virtual time, bounded) until ``c`` leads; the loop time it started."""
    async with asyncio.timeout(limit):
        await c.led.wait()
    return c.when("started")


async def read_lease(connection: clients.AsyncConnection) -> leases.LeaseRecord:
    record = await lease_client(connection).get()
    assert record is not None
    return record


async def test_first_candidate_creates_the_lease_and_leads_at_once(
    connection: clients.AsyncConnection, looptime: looptime.LoopTimeProxy
) -> None:
    a = start(candidate(connection, "replica-a"))
    assert await until_leading(a) == 0
    assert a.elector.leading and a.elector.leader == "replica-a"
    record = await read_lease(connection)
    assert record.spec == leases.LeaseSpec(
        holder_identity="replica-a",
        lease_duration_seconds=15,
        acquire_time=conftest.EPOCH,
        renew_time=conftest.EPOCH,
        lease_transitions=0,
    )
    assert a.readiness.ready
    a.stop.set()
    await a.task  # type: ignore[misc]


async def test_leader_renews_every_retry_period(
    connection: clients.AsyncConnection, looptime: looptime.LoopTimeProxy
) -> None:
    a = start(candidate(connection, "replica-a"))
    await until_leading(a)
    await asyncio.sleep(61)
    record = await read_lease(connection)
    assert record.spec.holder_identity == "replica-a"
    assert record.spec.acquire_time == conftest.EPOCH
    assert record.spec.renew_time == conftest.EPOCH + 60  # renewed at 2, 4, ..., 60
    assert a.events() == ["started"]
    a.stop.set()
    await a.task  # type: ignore[misc]


async def test_follower_waits_while_the_leader_renews(
    connection: clients.AsyncConnection, looptime: looptime.LoopTimeProxy
) -> None:
    a = start(candidate(connection, "replica-a"))
    await until_leading(a)
    b = start(candidate(connection, "replica-b"))
    await asyncio.sleep(120)
    assert b.events() == []
    assert not b.elector.leading
    assert b.elector.leader == "replica-a"
    assert b.readiness.ready  # followers are ready
    for c in (a, b):
        c.stop.set()
        await c.task  # type: ignore[misc]
    assert b.events() == []  # never led, so never stopped leading


async def test_follower_takes_over_an_expired_lease_after_the_lease_duration(
    connection: clients.AsyncConnection, looptime: looptime.LoopTimeProxy
) -> None:
    # A holder that crashed: it wrote the Lease once and never renews.
    ghost = leases.LeaseSpec(
        holder_identity="crashed", lease_duration_seconds=15, lease_transitions=3
    )
    await lease_client(connection).create(ghost)
    b = start(candidate(connection, "replica-b"))
    # B first sees the Lease at 0 and retries every 2 s; 14 < 15 <= 16.
    assert await until_leading(b) == 16
    record = await read_lease(connection)
    assert (record.spec.holder_identity, record.spec.lease_transitions) == ("replica-b", 4)
    b.stop.set()
    await b.task  # type: ignore[misc]


async def test_graceful_stop_releases_the_lease_and_the_follower_takes_over_at_once(
    connection: clients.AsyncConnection, looptime: looptime.LoopTimeProxy
) -> None:
    a = start(candidate(connection, "replica-a"))
    await until_leading(a)
    b = start(candidate(connection, "replica-b"))
    await asyncio.sleep(9)  # B has retried at 0, 2, 4, 6, 8

    a.stop.set()
    await a.task  # type: ignore[misc]
    assert a.events() == ["started", "stopped"]
    released = await read_lease(connection)
    assert released.spec.holder_identity == ""

    assert await until_leading(b) == 10  # B's next retry, not 15 s later
    record = await read_lease(connection)
    assert (record.spec.holder_identity, record.spec.lease_transitions) == ("replica-b", 1)
    b.stop.set()
    await b.task  # type: ignore[misc]


async def test_leader_seeing_another_holder_stops_at_once_and_raises(
    connection: clients.AsyncConnection, looptime: looptime.LoopTimeProxy
) -> None:
    a = start(candidate(connection, "replica-a"))
    await until_leading(a)
    await asyncio.sleep(5)  # renewed at 2 and 4

    client = lease_client(connection)
    current = await read_lease(connection)
    await client.update(current, dataclasses.replace(current.spec, holder_identity="usurper"))

    with pytest.raises(errors.LeadershipLost, match="now held by usurper"):
        await a.task  # type: ignore[misc]
    assert a.events() == ["started", "stopped"]
    assert a.when("stopped") == 6  # the very next renewal
    assert not a.elector.leading
    record = await read_lease(connection)
    assert record.spec.holder_identity == "usurper"  # a lost Lease is never released


async def test_leader_that_cannot_renew_gives_up_at_the_renew_deadline(
    api_server: conftest.ApiServer,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
) -> None:
    a = start(candidate(connection, "replica-a"))
    await until_leading(a)
    await asyncio.sleep(5)  # the last good renewal is at 4
    api_server.emulator.faults.add(faults.Fault(method="*", path=LEASE_PATH, times=100, status=500))

    with pytest.raises(
        errors.LeadershipLost, match="no renewal succeeded within the renew deadline"
    ):
        await a.task  # type: ignore[misc]
    assert a.when("stopped") == 14  # 4 + 10: before any follower may take over at 4 + 15
    assert not a.readiness.ready
    assert "500 InternalError" in a.readiness.report()[0].reason


async def test_leader_gives_up_when_the_api_server_stops_answering(
    api_server: conftest.ApiServer,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
) -> None:
    a = start(candidate(connection, "replica-a"))
    await until_leading(a)
    await asyncio.sleep(5)
    # Requests hang for a minute: the attempt is cut at the deadline, not after the minute.
    api_server.emulator.faults.add(faults.Fault(method="*", path=LEASE_PATH, times=100, delay=60))

    with pytest.raises(errors.LeadershipLost, match="took longer than"):
        await a.task  # type: ignore[misc]
    assert a.when("stopped") == 14


async def test_two_candidates_racing_to_create_the_lease_elect_one(
    connection: clients.AsyncConnection, looptime: looptime.LoopTimeProxy
) -> None:
    a, b = candidate(connection, "replica-a"), candidate(connection, "replica-b")
    start(a), start(b)
    await asyncio.sleep(30)
    leaders = sorted(c.elector.identity for c in (a, b) if c.elector.leading)
    assert len(leaders) == 1
    record = await read_lease(connection)
    assert record.spec.holder_identity == leaders[0]
    for c in (a, b):
        c.stop.set()
        await c.task  # type: ignore[misc]


class RacingLeaseClient(leases.LeaseClient):
    """Lets somebody else edit the Lease just before this client's next write."""

    def __init__(self, inner: leases.LeaseClient, other: leases.LeaseClient) -> None:
        super().__init__(inner._api, namespace=inner.namespace, name=inner.name)
        self._other = other
        self.race_next = False
        self.updates = 0

    async def update(
        self, current: leases.LeaseRecord, spec: leases.LeaseSpec, *, timeout: float | None = None
    ) -> leases.LeaseRecord:
        self.updates += 1
        if self.race_next:
            self.race_next = False
            fresh = await self._other.get()
            assert fresh is not None
            labelled = dataclasses.replace(
                fresh,
                body=fresh.body
                | {"metadata": fresh.body["metadata"] | {"labels": {"edited": "yes"}}},
            )
            await self._other.update(labelled, fresh.spec)
        return await super().update(current, spec, timeout=timeout)


async def test_renewal_that_hits_a_409_re_reads_and_renews(
    connection: clients.AsyncConnection, looptime: looptime.LoopTimeProxy
) -> None:
    racing = RacingLeaseClient(lease_client(connection), lease_client(connection))
    a = start(candidate(connection, "replica-a", client=racing))
    await until_leading(a)
    racing.race_next = True
    updates_before = racing.updates
    await asyncio.sleep(2.5)  # one renewal, at 2

    assert racing.updates == updates_before + 2  # the 409'd write and the one after re-reading
    record = await read_lease(connection)
    assert record.spec.holder_identity == "replica-a"
    assert record.spec.renew_time == conftest.EPOCH + 2
    assert record.body["metadata"]["labels"] == {"edited": "yes"}  # the other edit is kept
    assert a.events() == ["started"]
    a.stop.set()
    await a.task  # type: ignore[misc]


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (403, "RBAC forbids the Lease calls: grant get, create and update"),
        (401, "the API server rejected the credentials (expired or wrong?)"),
        (503, "503 ServiceUnavailable"),
    ],
    ids=["rbac-denied", "expired-credentials", "unavailable"],
)
async def test_refused_lease_calls_make_the_follower_unready_until_they_succeed(
    api_server: conftest.ApiServer,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
    caplog: pytest.LogCaptureFixture,
    status: int,
    reason: str,
) -> None:
    api_server.emulator.faults.add(
        faults.Fault(method="*", path=LEASE_PATH, times=5, status=status)
    )
    caplog.set_level(logging.DEBUG, logger="berth.operator.leadership")
    a = start(candidate(connection, "replica-a"))
    await asyncio.sleep(1)
    assert not a.readiness.ready
    assert reason in a.readiness.report()[0].reason
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and reason in r.message]
    assert len(warnings) == 1  # repeated failures are logged once, not every retry

    assert await until_leading(a) == 10  # the sixth attempt, after 5 refusals 2 s apart
    assert a.readiness.ready
    a.stop.set()
    await a.task  # type: ignore[misc]


async def test_unreachable_api_server_keeps_the_campaign_going(
    tmp_path: pathlib.Path, looptime: looptime.LoopTimeProxy
) -> None:
    # A port nobody listens on: bind one, then close it.
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(server.kubeconfig(f"http://127.0.0.1:{port}")))

    async with clients.connect_async(kubeconfig=str(path)) as unreachable:
        a = start(candidate(unreachable, "replica-a"))
        await asyncio.sleep(30)
        assert not a.elector.leading and a.events() == []
        assert "cannot reach the API server" in a.readiness.report()[0].reason
        assert a.task is not None and not a.task.done()
        a.stop.set()
        await a.task
