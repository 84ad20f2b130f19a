"""The operator process (``berth.operator.main.run``) against the emulator, in virtual time.

We test these aspects:

- as leader: the HTTP server answers probes and metrics, the leader-only components start in
  order, the plugins' controllers run and their routes are served; a stop request stops the
  components, releases the Lease, closes the server and ends with exit code 0;
- two processes on one Lease: exactly one runs the leader-only components; the follower is
  ready, reports ``berth_leader_status 0`` and has no scheduler cache to show;
- losing the Lease to another holder stops the leader-only components at once and ends with
  exit code 1, leaving the Lease to its new holder;
- a leader-only component that dies, or fails to start, ends the process with exit code 1 and
  releases the Lease so that another replica leads without waiting;
- without leader election the process leads at once and writes no Lease;
- no usable kubeconfig is a configuration error, after which nothing keeps listening.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import pathlib

import aiohttp
import looptime
import pytest

from berth.controllers import plugins
from berth.kube.transport import clients, leases
from berth.kube.transport import errors as kube_errors
from berth.operator import components, main, settings
from berth.scheduler.framework import interfaces
from tests.operator import conftest

pytestmark = pytest.mark.looptime

LEASE = "berth-scheduler"


def make_settings(
    kubeconfig: pathlib.Path | None, identity: str, **overrides: object
) -> settings.Settings:
    values: dict[str, object] = {
        "kubeconfig": kubeconfig,
        "http_host": "127.0.0.1",
        "http_authorization": False,  # the emulator reviews no tokens
        "http_port": 0,
        "namespace": "default",
        "shutdown_timeout": 3,
        "leader_election": {"identity": identity, "lease_name": LEASE},
    }
    values.update(overrides)
    return settings.Settings(**values)


class DemoController:
    name = "expiry"

    def __init__(self, journal: list[str]) -> None:
        self._journal = journal

    async def run(self, stop: asyncio.Event) -> None:
        self._journal.append("controller running")
        await stop.wait()
        self._journal.append("controller stopped")


@dataclasses.dataclass
class Process:
    """One ``main.run`` in a task, its HTTP port and the journal of its components."""

    identity: str
    stop: asyncio.Event
    journal: list[str]
    port: asyncio.Future[int]
    task: asyncio.Task[main.ExitCode] | None = None

    async def get(self, path: str) -> tuple[int, str]:
        port = await self.port
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}{path}") as response,
        ):
            return response.status, await response.text()

    async def until(self, entry: str, *, limit: float = 60) -> None:
        async with asyncio.timeout(limit):
            while entry not in self.journal:
                await asyncio.sleep(0.25)


def launch(
    config: settings.Settings,
    *,
    factory: collections.abc.Callable[[main.Context, list[str]], list[components.Component]]
    | None = None,
) -> Process:
    loop = asyncio.get_running_loop()
    process = Process(
        identity=config.leader_election.identity,
        stop=asyncio.Event(),
        journal=[],
        port=loop.create_future(),
    )

    def leader_components(context: main.Context) -> list[components.Component]:
        context.handle.controllers.register("Demo", controllers=[DemoController(process.journal)])
        context.handle.services.register(
            "Demo", routes=[interfaces.Route(method="GET", path="hello", handler=lambda r: "hi")]
        )
        built = (
            factory(context, process.journal)
            if factory is not None
            else [
                conftest.Recorder("informers", process.journal),
                conftest.Recorder("loop", process.journal),
            ]
        )
        # berth run's Kopf starts the plugins' controllers; without Kopf, the runner leads.
        return [*built, plugins.PluginControllers(context.handle.controllers, stop_timeout=5)]

    process.task = asyncio.create_task(
        main.run(
            config,
            stop=process.stop,
            leader_components=leader_components,
            clock=conftest.LoopClock(),
            on_serving=process.port.set_result,
        )
    )
    return process


async def finish(process: Process) -> main.ExitCode:
    assert process.task is not None
    async with asyncio.timeout(60):
        return await process.task


async def read_lease(connection: clients.AsyncConnection) -> leases.LeaseRecord | None:
    return await leases.LeaseClient(connection.api, namespace="default", name=LEASE).get()


async def test_leader_serves_runs_components_and_stops_cleanly(
    api_server: conftest.ApiServer,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
) -> None:
    process = launch(make_settings(api_server.kubeconfig, "replica-a"))
    await process.until("controller running")
    assert process.journal == ["start informers", "start loop", "controller running"]

    assert await process.get("/healthz") == (200, "ok")
    assert (await process.get("/readyz"))[0] == 200
    status, text = await process.get("/metrics")
    assert status == 200 and "berth_leader_status 1.0" in text
    assert (await process.get("/berth/v1/plugins/Demo/hello")) == (200, '"hi"')
    assert "/berth/v1/plugins/Demo/hello" in (await process.get("/berth/v1/__services__"))[1]

    process.stop.set()
    assert await finish(process) == main.ExitCode.OK
    # Stopped all at once, so in no particular order.
    assert sorted(process.journal[3:]) == ["controller stopped", "stop informers", "stop loop"]
    record = await read_lease(connection)
    assert record is not None and record.spec.holder_identity == ""
    with pytest.raises(aiohttp.ClientConnectionError):
        await process.get("/healthz")


async def test_only_one_of_two_processes_leads(
    api_server: conftest.ApiServer, looptime: looptime.LoopTimeProxy
) -> None:
    first = launch(make_settings(api_server.kubeconfig, "replica-a"))
    await first.until("start informers")
    second = launch(make_settings(api_server.kubeconfig, "replica-b"))
    await asyncio.sleep(30)

    assert second.journal == []
    assert (await second.get("/readyz"))[0] == 200
    _, text = await second.get("/metrics")
    assert "berth_leader_status 0.0" in text
    assert (await second.get("/berth/v1/nodes/node-1"))[0] == 503
    assert (await second.get("/berth/v1/plugins/Demo/hello"))[0] == 404

    for process in (first, second):
        process.stop.set()
        assert await finish(process) == main.ExitCode.OK


async def test_losing_the_lease_stops_leader_work_and_exits_1(
    api_server: conftest.ApiServer,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
) -> None:
    process = launch(make_settings(api_server.kubeconfig, "replica-a"))
    await process.until("controller running")
    client = leases.LeaseClient(connection.api, namespace="default", name=LEASE)
    current = await client.get()
    assert current is not None
    await client.update(current, dataclasses.replace(current.spec, holder_identity="usurper"))

    assert await finish(process) == main.ExitCode.FAILED
    assert {"stop informers", "stop loop", "controller stopped"} <= set(process.journal)
    record = await read_lease(connection)
    assert record is not None and record.spec.holder_identity == "usurper"


async def test_a_dying_component_exits_1_and_releases_the_lease(
    api_server: conftest.ApiServer,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
) -> None:
    async def crashing(stop: asyncio.Event) -> None:
        await asyncio.sleep(5)
        raise RuntimeError("watch broke")

    def factory(context: main.Context, journal: list[str]) -> list[components.Component]:
        return [
            conftest.Recorder("informers", journal),
            components.TaskComponent("kopf", crashing, on_exit=context.fail),
        ]

    process = launch(make_settings(api_server.kubeconfig, "replica-a"), factory=factory)
    assert await finish(process) == main.ExitCode.FAILED
    assert looptime == pytest.approx(5, abs=0.5)
    assert "stop informers" in process.journal
    record = await read_lease(connection)
    assert record is not None and record.spec.holder_identity == ""


async def test_a_component_failing_to_start_exits_1_and_releases_the_lease(
    api_server: conftest.ApiServer,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
) -> None:
    def factory(context: main.Context, journal: list[str]) -> list[components.Component]:
        return [
            conftest.Recorder("informers", journal),
            conftest.Recorder("kopf", journal, fail_start=True),
        ]

    process = launch(make_settings(api_server.kubeconfig, "replica-a"), factory=factory)
    assert await finish(process) == main.ExitCode.FAILED
    assert process.journal == ["start informers", "start kopf", "stop kopf", "stop informers"]
    record = await read_lease(connection)
    assert record is not None and record.spec.holder_identity == ""


async def test_without_leader_election_the_process_leads_at_once(
    api_server: conftest.ApiServer,
    connection: clients.AsyncConnection,
    looptime: looptime.LoopTimeProxy,
) -> None:
    config = make_settings(api_server.kubeconfig, "replica-a", leader_election={"enabled": False})
    process = launch(config)
    await process.until("controller running")
    assert looptime < 1
    assert "berth_leader_status 1.0" in (await process.get("/metrics"))[1]
    process.stop.set()
    assert await finish(process) == main.ExitCode.OK
    assert await read_lease(connection) is None


async def test_missing_kubeconfig_is_a_configuration_error(tmp_path: pathlib.Path) -> None:
    process = launch(make_settings(tmp_path / "nowhere", "replica-a"))
    with pytest.raises(kube_errors.ConfigError, match="does not exist"):
        await finish(process)
    port = process.port.result()
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            await session.get(f"http://127.0.0.1:{port}/healthz")
