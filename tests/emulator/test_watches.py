"""Watch streams over HTTP.

We test these aspects:
- without a resourceVersion, existing objects come first as ADDED;
- ``sendInitialEvents`` ends the initial objects with a BOOKMARK marked initial-events-end;
- ``allowWatchBookmarks`` brings periodic BOOKMARKs carrying the latest resourceVersion;
- ``timeoutSeconds`` ends the stream; stopping the server ends open watches;
- an object that stops matching a label selector is sent as DELETED, one that starts as ADDED;
- Table watches (``kubectl get -w``) carry rows, with column definitions only in the first
  event; the legacy ``/watch/`` path prefix works; a single object can be watched by name.
"""

from __future__ import annotations

import asyncio
import json
import typing
from collections.abc import AsyncIterator

import aiohttp
import pytest

from berth.emulator import server

CMS = "/api/v1/namespaces/default/configmaps"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}


@pytest.fixture
async def http() -> AsyncIterator[tuple[aiohttp.ClientSession, server.Emulator]]:
    emulator = server.Emulator(bookmark_interval=0.05)
    async with emulator, aiohttp.ClientSession(emulator.url) as session:
        yield session, emulator


async def _create(
    session: aiohttp.ClientSession, name: str, labels: dict[str, str] | None = None
) -> str:
    body = {"metadata": {"name": name, "labels": labels or {}}}
    async with session.post(CMS, json=body) as response:
        return str((await response.json())["metadata"]["resourceVersion"])


async def _events(
    session: aiohttp.ClientSession,
    path: str,
    params: dict[str, str],
    *,
    count: int,
    headers: dict[str, str] | None = None,
) -> list[dict[str, typing.Any]]:
    events: list[dict[str, typing.Any]] = []
    async with asyncio.timeout(10), session.get(path, params=params, headers=headers) as response:
        assert response.status == 200
        async for line in response.content:
            events.append(json.loads(line))
            if len(events) == count:
                break
    return events


async def test_existing_objects_come_first(
    http: tuple[aiohttp.ClientSession, server.Emulator],
) -> None:
    session, _ = http
    await _create(session, "a")
    events = await _events(session, CMS, {"watch": "true"}, count=1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a")]


async def test_send_initial_events_ends_with_a_bookmark(
    http: tuple[aiohttp.ClientSession, server.Emulator],
) -> None:
    session, _ = http
    await _create(session, "a")
    await _create(session, "b")
    params = {
        "watch": "1",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "fieldSelector": "metadata.name=b",
    }
    events = await _events(session, CMS, params, count=2)
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[0]["object"]["metadata"]["name"] == "b"
    annotations = events[1]["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}


async def test_periodic_bookmarks(http: tuple[aiohttp.ClientSession, server.Emulator]) -> None:
    session, _ = http
    rv = await _create(session, "a")
    params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
    events = await _events(session, CMS, params, count=2)
    assert [e["type"] for e in events] == ["BOOKMARK", "BOOKMARK"]
    assert events[0]["object"]["metadata"]["resourceVersion"] == rv


async def test_timeout_and_server_stop_end_watches(
    http: tuple[aiohttp.ClientSession, server.Emulator],
) -> None:
    session, emulator = http
    rv = await _create(session, "a")
    async with asyncio.timeout(5):
        async with session.get(
            CMS, params={"watch": "1", "resourceVersion": rv, "timeoutSeconds": "1"}
        ) as response:
            assert await response.read() == b""
        async with session.get(CMS, params={"watch": "1", "resourceVersion": rv}) as response:
            reading = asyncio.create_task(response.read())
            await asyncio.sleep(0.05)
            assert emulator.storage.watcher_count == 1
            emulator.storage.close()
            assert await reading == b""


async def test_selector_transitions(http: tuple[aiohttp.ClientSession, server.Emulator]) -> None:
    session, _ = http
    rv = await _create(session, "a", {"team": "x"})
    params = {"watch": "1", "resourceVersion": rv, "labelSelector": "team=x"}
    watching = asyncio.create_task(_events(session, CMS, params, count=2))
    await asyncio.sleep(0.05)
    patch = {"Content-Type": "application/merge-patch+json"}
    for team in ("y", "x"):
        body = json.dumps({"metadata": {"labels": {"team": team}}})
        async with session.patch(f"{CMS}/a", data=body, headers=patch) as response:
            assert response.status == 200
    assert [e["type"] for e in await watching] == ["DELETED", "ADDED"]


async def test_table_watch_and_legacy_paths(
    http: tuple[aiohttp.ClientSession, server.Emulator],
) -> None:
    session, _ = http
    await _create(session, "a")
    await _create(session, "b")
    events = await _events(session, CMS, {"watch": "1"}, count=2, headers=TABLE)
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert [c["name"] for c in events[0]["object"]["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert events[1]["object"]["columnDefinitions"] is None
    assert events[1]["object"]["rows"][0]["cells"][0] == "b"
    legacy = await _events(session, "/api/v1/watch/namespaces/default/configmaps/b", {}, count=1)
    assert legacy[0]["object"]["metadata"]["name"] == "b"
