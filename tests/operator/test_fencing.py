"""Fencing: a write acting for the leader leaves only while the last Lease renewal is fresh.

The API server emulator runs in the test's loop (under looptime, virtual seconds); the fence's
monotonic clock is either the loop's or an injected one that the test moves by hand (a paused
process: time passes, nothing runs).

We test these aspects:

- a fresh renewal lets writes through; once the renew deadline has passed since the renewal was
  *sent*, a write is refused before it reaches the server (counted at the emulator), with the
  reason; reads and the Lease calls are never fenced;
- a write that waited for a pooled connection while the replica went stale is checked when it
  gets the connection, not when it was queued;
- the elector keeps the fence fresh while it renews, revokes it before its leader-only work is
  told to stop, and a resumed process (its monotonic clock jumped) is fenced before its
  elector has run again.
"""

from __future__ import annotations

import asyncio
import random

import aiohttp
import looptime
import pytest

from berth.emulator import faults
from berth.kube.transport import clients, errors, fencing, leases, rest
from berth.operator import leadership, settings
from tests.operator import conftest

pytestmark = pytest.mark.looptime

LEASE = "berth-scheduler"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{LEASE}"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


class HandClock:
    """A monotonic clock the test moves: a pause is ``advance`` with nothing run."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def configmap(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


async def write(api: clients.AsyncApiClient, name: str) -> rest.Body:
    return await rest.request(api, method="POST", path=CONFIGMAPS, body=configmap(name))


async def test_writes_pass_while_the_renewal_is_fresh_and_are_refused_unsent_after_the_deadline(
    api_server: conftest.ApiServer, connection: clients.AsyncConnection
) -> None:
    clock = HandClock()
    fence = fencing.Fence(renew_deadline=3.0, now=clock)
    fencing.install(connection.api, fence)
    fence.renewed(clock())
    clock.advance(2.9)
    await write(connection.api, "fresh")

    clock.advance(0.1)  # exactly the renew deadline since the renewal was sent
    with pytest.raises(errors.NotLeader, match=r"past the renew deadline \(3s\)"):
        await write(connection.api, "stale")
    emulator = api_server.emulator
    assert emulator.count("POST", "/api/v1/namespaces/{namespace}/configmaps") == 1
    assert fence.refused == 1
    # Reads are not fenced; the Lease calls are exempt (a candidate must write the Lease).
    listed = await rest.request(connection.api, method="GET", path=CONFIGMAPS)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["fresh"]
    with fencing.unfenced():
        created = await leases.LeaseClient(connection.api, namespace="default", name=LEASE).create(
            leases.LeaseSpec(holder_identity="me", lease_duration_seconds=15)
        )
    assert created.spec.holder_identity == "me"


async def test_a_fence_never_renewed_or_revoked_refuses_every_write(
    connection: clients.AsyncConnection,
) -> None:
    clock = HandClock()
    fence = fencing.Fence(renew_deadline=3.0, now=clock)
    fencing.install(connection.api, fence)
    with pytest.raises(errors.NotLeader, match="does not hold the Lease"):
        await write(connection.api, "never")
    fence.renewed(clock())
    await write(connection.api, "leading")
    fence.revoke()
    with pytest.raises(errors.NotLeader, match="does not hold the Lease"):
        await write(connection.api, "after")


async def test_a_write_queued_for_a_connection_is_checked_when_it_gets_one(
    api_server: conftest.ApiServer, tmp_path: object
) -> None:
    clock = HandClock()
    fence = fencing.Fence(renew_deadline=3.0, now=clock)
    async with clients.connect_async(kubeconfig=str(api_server.kubeconfig)) as connected:
        api = connected.api
        api.rest_client.pool_manager.connector._limit = 1  # one connection: the write queues
        fencing.install(api, fence)
        fence.renewed(clock())
        api_server.emulator.faults.add(faults.Fault("GET", CONFIGMAPS, times=1, delay=1.0))
        slow_read = asyncio.create_task(rest.request(api, method="GET", path=CONFIGMAPS))
        await asyncio.sleep(0.1)  # the read holds the only connection
        queued = asyncio.create_task(write(api, "queued"))
        await asyncio.sleep(0.1)  # checked and fresh at its start; now waiting in the pool
        assert not queued.done()
        clock.advance(5.0)  # the process "paused" while the write waited
        await slow_read
        with pytest.raises(errors.NotLeader):
            await queued
    assert api_server.emulator.count("POST", "/api/v1/namespaces/{namespace}/configmaps") == 0


async def test_a_pause_between_taking_the_connection_and_writing_is_caught(
    api_server: conftest.ApiServer, connection: clients.AsyncConnection
) -> None:
    # aiohttp writes a request's headers and body from a task of its own, a loop iteration
    # after the connection was taken: a pause can land in between. Here the clock jumps
    # right after the connection check passed.
    clock = HandClock()
    fence = fencing.Fence(renew_deadline=3.0, now=clock)
    fencing.install(connection.api, fence)
    fence.renewed(clock())

    async def pause(*_: object) -> None:
        clock.advance(5.0)

    late = aiohttp.TraceConfig()
    late.on_connection_reuseconn.append(pause)
    late.on_connection_create_end.append(pause)
    late.freeze()
    connection.api.rest_client.pool_manager.trace_configs.append(late)
    with pytest.raises(errors.NotLeader, match="past the renew deadline"):
        await write(connection.api, "paused-mid-send")
    assert api_server.emulator.count("POST", "/api/v1/namespaces/{namespace}/configmaps") == 0


def elector(
    connection: clients.AsyncConnection, fence: fencing.Fence, identity: str = "replica-a"
) -> leadership.LeaderElector:
    return leadership.LeaderElector(
        settings.LeaderElectionSettings(identity=identity, lease_name=LEASE),
        leases_client=leases.LeaseClient(connection.api, namespace="default", name=LEASE),
        clock=conftest.LoopClock(),
        jitter=0.0,
        rng=random.Random(0),
        fence=fence,
    )


async def test_the_elector_keeps_the_fence_fresh_and_revokes_it_before_stepping_down(
    api_server: conftest.ApiServer,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
) -> None:
    loop = asyncio.get_running_loop()
    fence = fencing.Fence(renew_deadline=10.0, now=loop.time)  # the defaults: 15/10/2
    fencing.install(connection.api, fence)
    candidate = elector(connection, fence)
    stop = asyncio.Event()
    held_when: dict[str, bool] = {}
    led = asyncio.Event()

    async def started() -> None:
        held_when["started"] = fence.held
        led.set()

    async def stopped() -> None:
        held_when["stopped"] = fence.held

    task = asyncio.create_task(
        candidate.run(stop=stop, on_started_leading=started, on_stopped_leading=stopped)
    )
    await led.wait()
    await asyncio.sleep(60)  # renewed every retry period: the fence stays fresh
    await write(connection.api, "while-leading")
    stop.set()
    await task
    assert held_when == {"started": True, "stopped": False}
    with pytest.raises(errors.NotLeader):
        await write(connection.api, "after-stepping-down")


async def test_a_resumed_leader_is_fenced_before_its_elector_runs(
    api_server: conftest.ApiServer,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
) -> None:
    # A SIGSTOP in virtual time: the monotonic clock jumps while nothing in the loop runs; the
    # elector's pending sleep has not fired yet when the writers get to run.
    loop = asyncio.get_running_loop()
    paused = [0.0]
    fence = fencing.Fence(renew_deadline=10.0, now=lambda: loop.time() + paused[0])
    fencing.install(connection.api, fence)
    candidate = elector(connection, fence)
    stop = asyncio.Event()
    led = asyncio.Event()

    async def started() -> None:
        led.set()

    async def stopped() -> None:
        pass

    task = asyncio.create_task(
        candidate.run(stop=stop, on_started_leading=started, on_stopped_leading=stopped)
    )
    try:
        await led.wait()
        await asyncio.sleep(5)  # renewed at 0, 2, 4
        await write(connection.api, "before-the-pause")
        paused[0] = 20.0  # stopped for 20 s; a follower has taken over meanwhile
        assert candidate.leading  # the elector has not run since
        with pytest.raises(errors.NotLeader, match="past the renew deadline"):
            await write(connection.api, "after-the-pause")
        assert api_server.emulator.count("POST", "/api/v1/namespaces/{namespace}/configmaps") == 1
    finally:
        stop.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
