"""Bad input to the leading operator, with its real components (informers, binder, Kopf...).

We test these aspects:

- RBAC denying the pod list and the API server rejecting the credentials for nodes: clear log
  lines naming what to grant or check, ``/readyz`` 503 with those reasons while it lasts, no
  exit and no crash loop; once the API server answers again the caches sync and pods are
  scheduled;
- a Lease stolen by another identity: the operator stops everything at once and exits 1; a
  pod created afterwards is never bound by it.
"""

from __future__ import annotations

import asyncio
import logging
import typing

import aiohttp
import pytest

from berth.emulator import faults, testing
from berth.operator import main, scheduling, settings
from tests.kube import conftest

pytestmark = pytest.mark.slow


def config(emulator: testing.RunningEmulator, identity: str) -> settings.Settings:
    return settings.Settings(
        kubeconfig=emulator.kubeconfig,
        namespace="default",
        http_host="127.0.0.1",
        http_authorization=False,  # the emulator reviews no tokens
        http_port=0,
        leader_election={
            "identity": identity,
            "lease_duration": 4,
            "renew_deadline": 3,
            "retry_period": 0.5,
        },
    )


async def readyz(port: int) -> tuple[int, dict[str, object]]:
    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/readyz") as r:
        return r.status, await r.json()


async def _until_async(
    check: typing.Callable[[], typing.Awaitable[bool]], *, what: str, timeout: float = 60.0
) -> None:
    """Poll ``check`` (another component's state, no event to await) until true, bounded."""
    try:
        async with asyncio.timeout(timeout):
            while not await check():
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"not within {timeout:g} s: {what}")


def node_of(emulator: testing.RunningEmulator, name: str) -> str | None:
    api = emulator.api
    resource = emulator.call(api.resource, "v1", "pods")
    found = emulator.call(api.storage.get, resource.key, "default", name)
    return None if found is None else found["spec"].get("nodeName")


async def test_refused_lists_make_it_unready_with_reasons_until_they_work(
    emulator: testing.RunningEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    conftest.install_crds(emulator)
    emulator.start_kubelets(["2x cpu=4,memory=8Gi"], speedup=10)
    # Refused until the test has seen the operator say so (not a number of tries: under load
    # the informers may retry them all before the first look at /readyz).
    emulator.faults.add(faults.Fault("GET", "/api/v1/pods", status=403, times=10**9))
    emulator.faults.add(faults.Fault("GET", "/api/v1/nodes", status=401, times=10**9))
    stop = asyncio.Event()
    ports: list[int] = []
    caplog.set_level(logging.WARNING, logger="berth.kube.informers.list_watch")
    operator = asyncio.create_task(
        main.run(
            config(emulator, "picky"),
            stop=stop,
            leader_components=scheduling.leader_components,
            on_serving=ports.append,
        )
    )
    try:
        seen: list[str] = []

        async def unready_for_both() -> bool:
            status, body = await readyz(ports[0])
            reasons = [str(c["reason"]) for c in body["conditions"]]  # type: ignore[attr-defined]
            seen.extend(reasons)
            said = " ".join(seen)
            return status == 503 and "RBAC" in said and "rejected the credentials" in said

        await conftest.until(lambda: bool(ports), timeout=30)
        await _until_async(unready_for_both, what="/readyz 503 naming RBAC and the credentials")
        text = " ".join(seen)
        assert "RBAC forbids list/watch /api/v1/pods: grant list and watch on pods" in text
        assert not operator.done()
        emulator.faults.clear()  # the API server answers again
        answered: list[tuple[int, dict[str, object]]] = []

        async def ready() -> bool:
            answered.append(await readyz(ports[0]))
            return answered[-1][0] == 200

        await _until_async(ready, what="/readyz 200")
        conftest.create(emulator, conftest.pod("late"), plural="pods")
        await conftest.until(lambda: node_of(emulator, "late") is not None, timeout=60)
        logged = [r.getMessage() for r in caplog.records]
        assert any("RBAC forbids" in line for line in logged)
    finally:
        stop.set()
        code = await asyncio.wait_for(operator, 30)
    assert code is main.ExitCode.OK


async def test_stolen_lease_stops_everything_and_exits_1(emulator: testing.RunningEmulator) -> None:
    conftest.install_crds(emulator)
    emulator.start_kubelets(["1x cpu=4,memory=8Gi"], speedup=10)
    stop = asyncio.Event()
    operator = asyncio.create_task(
        main.run(
            config(emulator, "victim"), stop=stop, leader_components=scheduling.leader_components
        )
    )
    api = emulator.api
    leases = emulator.call(api.resource, "coordination.k8s.io/v1", "leases")

    def holder() -> str | None:
        lease = emulator.call(api.storage.get, leases.key, "default", "berth-scheduler")
        return None if lease is None else lease["spec"].get("holderIdentity")

    try:
        await conftest.until(lambda: holder() == "victim", timeout=60)
        conftest.create(emulator, conftest.pod("before"), plural="pods")
        await conftest.until(lambda: node_of(emulator, "before") is not None, timeout=60)
        emulator.call(
            api.patch,
            leases,
            {"spec": {"holderIdentity": "thief"}},
            namespace="default",
            name="berth-scheduler",
            patch_type="application/merge-patch+json",
        )
        code = await asyncio.wait_for(operator, 15)
        assert code is main.ExitCode.FAILED
        conftest.create(emulator, conftest.pod("after"), plural="pods")
        # It has exited (awaited above): nothing of it is left to bind the pod, now or later.
        assert node_of(emulator, "after") is None
        assert holder() == "thief"
    finally:
        stop.set()
        if not operator.done():
            await asyncio.wait_for(operator, 30)
