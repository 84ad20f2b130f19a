"""Raw list and watch (``berth.kube.transport.watching``) and an informer fed malformed data.

We test these aspects:

- a list is read in pages and returns every item and the list's resourceVersion;
- a watch yields ADDED/MODIFIED/DELETED/BOOKMARK events from a resourceVersion, and ends when
  the server closes the stream;
- an ``ERROR`` event with 410 becomes ``Gone``; a 410 answer before the stream does too;
- malformed data from an API server (a line that is not JSON, an event without an object, a
  list item that is not an object, an object the cache cannot read) is reported and skipped,
  and the objects around it still arrive — the informer keeps following.
"""

from __future__ import annotations

import asyncio
import collections.abc
import json
import pathlib
import typing

import aiohttp.web
import pytest
import yaml

from berth.emulator import faults, server, testing
from berth.kube.informers import cluster_informers, list_watch
from berth.kube.transport import clients, errors, watching
from tests.kube import conftest

Object = dict[str, typing.Any]


async def test_list_pages_reads_every_page(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    for i in range(7):
        conftest.create(emulator, conftest.pod(f"p{i}"), plural="pods")
    listing = await watching.list_pages(connection.api, path="/api/v1/pods", page_size=3)
    assert [p["metadata"]["name"] for p in listing.items] == [f"p{i}" for i in range(7)]
    assert listing.resource_version
    assert emulator.count("GET", "/api/v1/pods") == 3


async def test_watch_yields_events_after_a_version_with_bookmarks(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    listing = await watching.list_pages(connection.api, path="/api/v1/pods")
    conftest.create(emulator, conftest.pod("a"), plural="pods")
    pods = emulator.call(emulator.api.resource, "v1", "pods")
    emulator.call(emulator.api.delete, pods, namespace="default", name="a")
    seen: list[tuple[str, str]] = []
    stream = watching.watch(
        connection.api,
        path="/api/v1/pods",
        resource_version=listing.resource_version,
        timeout_seconds=1,
    )
    async for event in stream:
        seen.append((event.type, event.object.get("metadata", {}).get("name", "")))
    assert [s for s in seen if s[0] != "BOOKMARK"] == [("ADDED", "a"), ("DELETED", "a")]


async def test_too_old_version_is_gone(tmp_path: pathlib.Path) -> None:
    small = testing.start_emulator(tmp_path, history=2)
    try:
        for i in range(5):
            conftest.create(small, conftest.pod(f"p{i}"), plural="pods")
        async with clients.connect_async(kubeconfig=str(small.kubeconfig)) as connection:
            with pytest.raises(errors.Gone):
                stream = watching.watch(connection.api, path="/api/v1/pods", resource_version="2")
                async for _ in stream:
                    pass
    finally:
        small.threaded.stop()


async def test_gone_answer_before_the_stream_is_gone(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    emulator.faults.add(faults.Fault("GET", "/api/v1/pods", status=410))
    with pytest.raises(errors.Gone):
        async for _ in watching.watch(connection.api, path="/api/v1/pods", resource_version="1"):
            pass


# A fake API server that sends malformed data --------------------------------------------------
GOOD = {"metadata": {"name": "good", "namespace": "default", "resourceVersion": "5"}}
LATER = {"metadata": {"name": "later", "namespace": "default", "resourceVersion": "7"}}
BROKEN = {"metadata": {"name": "broken", "namespace": "default", "resourceVersion": "6"}}


def _fake_app(*, watch_lines: list[bytes], list_items: list[typing.Any]) -> aiohttp.web.Application:
    async def pods(request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        if request.query.get("watch"):
            response = aiohttp.web.StreamResponse()
            await response.prepare(request)
            for line in watch_lines:
                await response.write(line + b"\n")
            await asyncio.sleep(5)  # then hang for a while, as a quiet watch does
            return response
        body = {"kind": "PodList", "metadata": {"resourceVersion": "4"}, "items": list_items}
        return aiohttp.web.json_response(body)

    app = aiohttp.web.Application()
    app.router.add_get("/api/v1/pods", pods)
    return app


@pytest.fixture
async def fake_server(
    tmp_path: pathlib.Path, unused_tcp_port: int
) -> collections.abc.AsyncIterator[tuple[clients.AsyncConnection, list[aiohttp.web.Application]]]:
    apps: list[aiohttp.web.Application] = []
    runner: list[aiohttp.web.AppRunner] = []

    async def serve(app: aiohttp.web.Application) -> None:
        apps.append(app)
        started = aiohttp.web.AppRunner(app, shutdown_timeout=0.1)
        await started.setup()
        await aiohttp.web.TCPSite(started, "127.0.0.1", unused_tcp_port).start()
        runner.append(started)

    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(server.kubeconfig(f"http://127.0.0.1:{unused_tcp_port}")))
    async with clients.connect_async(kubeconfig=str(path)) as connection:
        yield connection, serve  # type: ignore[misc]
    for started in runner:
        await started.cleanup()


async def test_malformed_watch_data_is_skipped_and_reported(
    fake_server: typing.Any,
) -> None:
    connection, serve = fake_server
    lines = [
        b"this is not json",
        json.dumps({"type": "MODIFIED"}).encode(),  # no object
        json.dumps({"type": "ADDED", "object": GOOD}).encode(),
        b"[1, 2, 3]",
        json.dumps({"type": "ADDED", "object": LATER}).encode(),
    ]
    await serve(_fake_app(watch_lines=lines, list_items=[]))
    reports: list[str] = []
    seen: list[str] = []

    async def consume() -> None:
        stream = watching.watch(
            connection.api, path="/api/v1/pods", resource_version="4", on_malformed=reports.append
        )
        async for event in stream:
            seen.append(event.object["metadata"]["name"])
            if len(seen) == 2:
                return

    await asyncio.wait_for(consume(), 10)
    assert seen == ["good", "later"]
    assert len(reports) == 3
    assert "this is not json" in reports[0]


async def test_informer_skips_what_it_cannot_read_and_keeps_following(
    fake_server: typing.Any,
) -> None:
    connection, serve = fake_server
    lines = [
        b"{broken",
        json.dumps({"type": "ADDED", "object": BROKEN}).encode(),
        json.dumps({"type": "ADDED", "object": LATER}).encode(),
    ]
    await serve(_fake_app(watch_lines=lines, list_items=[GOOD, 42, {"metadata": "oops"}]))
    changes: list[str] = []

    def on_change(kind: str, obj: Object) -> None:
        name = obj["metadata"]["name"]
        if name == "broken":
            raise ValueError("cannot parse this pod")
        changes.append(name)

    health: list[str | None] = []
    informer = list_watch.Informer(
        connection.api,
        resource=cluster_informers.pod_resource(),
        on_change=on_change,
        on_remove=lambda key: None,
        on_health=lambda _, problem: health.append(problem),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    try:
        await conftest.until(lambda: changes == ["good", "later"])
        assert informer.synced.is_set()
        assert not task.done()
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
    assert all(problem is None for problem in health)
