"""Berth's Kopf status handlers (``berth.controllers.statuses``) running in an embedded Kopf.

We test these aspects:

- a Queue whose status cannot be computed: its handler's failure shows as the
  ``StatusHandled`` condition and a Warning Event (both ``HandlerFailed``, with the error);
  Kopf keeps the handler's retry count in its progress annotation and retries it after its
  backoff, and once the status can be computed it is written, the condition is gone and the
  object carries Kopf's last-handled mark;
- with the Lease no longer held (a stale fence), the handler's status write never reaches the
  API server: the fence refuses it and the status stays unwritten.
"""

from __future__ import annotations

import asyncio
import collections.abc
import json
import typing

import pytest

from berth.controllers import indexing, statuses
from berth.controllers import registry as kopf_registry
from berth.emulator import testing
from berth.kube.informers import cache_sync
from berth.kube.transport import clients, credentials, fencing
from berth.operator import embedding
from berth.scheduler.snapshot import cache
from berth.status import observations, queues
from tests.controllers import test_statuses
from tests.kube import conftest
from tests.scheduler import builders as b

Object = dict[str, typing.Any]
PREFIX = "kopf.scheduling.berth.io/"


class Running:
    def __init__(self, writer: test_statuses.Writer, component: embedding.KopfOperator) -> None:
        self.writer = writer
        self.component = component

    def queue(self, name: str) -> Object:
        return self.writer.stored("queues", name, namespace="")

    def events_about(self, name: str) -> list[Object]:
        api = self.writer.emulator.api
        resource = self.writer.emulator.call(api.resource, "v1", "events")
        found = self.writer.emulator.call(api.storage.list, resource.key)
        return [e for e in found if e["involvedObject"].get("name") == name]


async def start(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> collections.abc.AsyncIterator[Running]:
    writer = test_statuses.Writer(emulator, connection.api)
    writer.cycle()  # the scheduler has published a cycle: statuses can be computed
    feed = indexing.CacheFeed(
        connection.api,
        cache=cache.ClusterCache(),
        objects=writer.objects,
        trigger=asyncio.Event(),
        sync=cache_sync.CacheSync(),
    )

    async def login() -> credentials.Credentials:
        return await credentials.credentials_of(connection.api)

    component = embedding.KopfOperator(
        registry=lambda: kopf_registry.build(feed=feed, login=login, writer=writer.writer),
        settings=kopf_registry.operator_settings,
        prerequisite=feed.served,
        stop_timeout=10,
    )
    stop = asyncio.Event()
    recording = asyncio.create_task(writer.recorder.run(stop))
    await component.start()
    try:
        yield Running(writer, component)
    finally:
        await component.stop()
        stop.set()
        await recording


@pytest.fixture
async def running(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> collections.abc.AsyncIterator[Running]:
    async for found in start(berth_crds, connection):
        yield found


async def test_a_failing_handler_says_so_and_is_retried_with_kopfs_backoff(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = queues.desired_status

    def broken(queue: observations.ObservedObject, **kwargs: typing.Any) -> dict[str, typing.Any]:
        if queue.name == "bad":
            raise RuntimeError("cannot compute this queue's status")
        return real(queue, **kwargs)

    monkeypatch.setattr(queues, "desired_status", broken)
    conftest.create(running.writer.emulator, b.queue("bad"), plural="queues", namespace=None)

    def condition() -> Object | None:
        listed = (running.queue("bad").get("status") or {}).get("conditions") or []
        return next((c for c in listed if c["type"] == statuses.CONDITION_HANDLED), None)

    await conftest.until(lambda: condition() is not None, timeout=15)
    failed = condition()
    assert failed is not None
    assert (failed["status"], failed["reason"]) == ("False", "HandlerFailed")
    assert "cannot compute this queue's status" in failed["message"]
    await running.writer.recorder.drain()
    (event,) = [e for e in running.events_about("bad") if e["reason"] == "HandlerFailed"]
    assert event["type"] == "Warning"
    assert "cannot compute this queue's status" in event["message"]

    def progress() -> Object:
        annotations = running.queue("bad")["metadata"].get("annotations") or {}
        return dict(json.loads(annotations.get(PREFIX + "queue-status", "{}")))

    await conftest.until(lambda: bool(progress()), timeout=15)
    retrying = progress()
    assert retrying["retries"] >= 1 and retrying["delayed"]  # Kopf retries after its backoff
    monkeypatch.setattr(queues, "desired_status", real)  # the cause is fixed: Kopf retries

    def handled() -> bool:
        found = running.queue("bad")
        marks = found["metadata"].get("annotations") or {}
        return PREFIX + "last-handled-configuration" in marks and condition() is None

    await conftest.until(handled, timeout=statuses.RETRY_BACKOFF + 15)
    listed = running.queue("bad")["status"]["conditions"]
    assert {c["type"] for c in listed} == {queues.CONDITION_VALID}
    assert PREFIX + "queue-status" not in running.queue("bad")["metadata"]["annotations"]


async def test_no_status_write_lands_once_the_lease_may_be_anothers(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    fence = fencing.Fence(renew_deadline=10.0)
    fencing.install(connection.api, fence)
    fence.renewed(-1e9)  # renewed long ago: past the renew deadline, stale
    async for found in start(berth_crds, connection):
        conftest.create(berth_crds, b.queue("team"), plural="queues", namespace=None)
        await conftest.until(lambda: fence.refused >= 1, timeout=15)
        assert not found.queue("team").get("status")
        assert found.writer.writer.writes == 0
        assert (
            found.writer.emulator.count(
                "PATCH", "/apis/scheduling.berth.io/v1alpha1/queues/{name}/status"
            )
            == 0
        )
