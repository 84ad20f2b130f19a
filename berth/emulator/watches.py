"""Watch streams: newline-delimited JSON events, from a resourceVersion or from now.

What clients rely on, and this module does:

- ``resourceVersion`` unset or ``"0"``: synthetic ``ADDED`` events for what exists, then changes;
  a given resourceVersion replays the log after it; one compacted away gets a single ``ERROR``
  event carrying a 410 ``Expired`` Status (as etcd-backed watches answer), then the stream ends;
- ``sendInitialEvents=true`` (WatchList, which kubectl 1.37 uses to wait for deletions): the
  current objects as ``ADDED``, then a ``BOOKMARK`` annotated ``k8s.io/initial-events-end``;
- ``allowWatchBookmarks``: periodic ``BOOKMARK`` events with the latest resourceVersion;
- ``timeoutSeconds`` ends the stream; label and field selectors filter events, and an object
  that stops (starts) matching is sent as ``DELETED`` (``ADDED``), as the API server does;
- objects can be rendered as Tables (``kubectl get -w``) or PartialObjectMetadata.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json

from aiohttp import web

from berth.api import objects
from berth.emulator import errors, renderings, resources, rest, selectors, storage

__all__ = ["DEFAULT_TIMEOUT", "WatchRequest", "serve"]

Object = objects.KubeObject
DEFAULT_TIMEOUT = 1800.0  # the API server's --min-request-timeout


@dataclasses.dataclass(frozen=True)
class WatchRequest:
    resource: resources.Resource
    namespace: str | None
    labels: selectors.LabelSelector
    fields: selectors.FieldSelector
    resource_version: str
    send_initial_events: bool
    allow_bookmarks: bool
    timeout: float
    rendering: renderings.Rendering


def _matches(request: WatchRequest, obj: Object | None) -> bool:
    if obj is None:
        return False
    return request.labels.matches(obj["metadata"].get("labels")) and request.fields.matches(obj)


def _event_type(request: WatchRequest, change: storage.Change) -> str | None:
    now, before = _matches(request, change.object), _matches(request, change.old)
    if change.type == "ADDED":
        return "ADDED" if now else None
    if change.type == "DELETED":
        return "DELETED" if before or now else None
    if now and before:
        return "MODIFIED"
    if now:
        return "ADDED"
    return "DELETED" if before else None


class _Writer:
    def __init__(
        self, response: web.StreamResponse, request: WatchRequest, *, api: rest.Api
    ) -> None:
        self.response = response
        self.request = request
        self.api = api
        self.headers_sent = False

    def render(self, obj: Object) -> renderings.Rendered:
        """``obj`` as the watch asked; Table column definitions go in the first event only."""
        resource = self.request.resource
        rendered = renderings.one(
            self.request.rendering,
            resource=resource,
            obj=self.api.present(resource, obj),
            now=self.api.clock.now(),
            headers=not self.headers_sent,
        )
        self.headers_sent = True
        return rendered

    async def send(self, kind: str, obj: renderings.Rendered | objects.Status) -> None:
        # A WatchEvent, whose object may also be a Table or (an ERROR's) a Status.
        event = {"type": kind, "object": obj}
        line = json.dumps(event, separators=(",", ":")) + "\n"
        await self.response.write(line.encode())

    async def bookmark(self, *, initial_end: bool = False) -> None:
        resource = self.request.resource
        metadata: objects.ObjectMeta = {"resourceVersion": str(self.api.storage.resource_version)}
        if initial_end:
            metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
        await self.send(
            "BOOKMARK",
            {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": metadata},
        )


async def serve(
    http_request: web.Request,
    request: WatchRequest,
    *,
    api: rest.Api,
    bookmark_interval: float,
) -> web.StreamResponse:
    """Stream events for ``request`` until it times out, the client leaves or the server stops."""
    key = request.resource.key
    watcher = api.storage.subscribe(key=key, namespace=request.namespace)
    try:
        initial: list[Object] = []
        replay: list[storage.Change] = []
        expired: errors.StatusError | None = None
        rv = request.resource_version
        if request.send_initial_events or rv in ("", "0"):
            listed = api.list(
                request.resource,
                namespace=request.namespace,
                labels=request.labels,
                fields=request.fields,
            )
            initial = listed.items
            start = int(listed.resource_version)
        else:
            try:
                start = int(rv)
            except ValueError:
                raise errors.bad_request(f"invalid resource version: {rv!r}") from None
            try:
                replay = api.storage.changes_since(start, key=key, namespace=request.namespace)
            except errors.StatusError as exc:
                expired = exc
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        # The client may leave at any point, even before the headers are out (a process
        # stopped while it starts): that is how watches end, never an error.
        with contextlib.suppress(ConnectionResetError):
            await response.prepare(http_request)
            writer = _Writer(response, request, api=api)
            await _stream(
                writer,
                watcher,
                request,
                initial=initial,
                replay=replay,
                start=start,
                expired=expired,
                bookmark_interval=bookmark_interval,
            )
        return response
    finally:
        api.storage.unsubscribe(watcher)


async def _stream(
    writer: _Writer,
    watcher: storage.Watcher,
    request: WatchRequest,
    *,
    initial: list[Object],
    replay: list[storage.Change],
    start: int,
    expired: errors.StatusError | None,
    bookmark_interval: float,
) -> None:
    if expired is not None:
        await writer.send("ERROR", expired.status())
        return
    for obj in initial:
        await writer.send("ADDED", writer.render(obj))
    if request.send_initial_events:
        await writer.bookmark(initial_end=True)
    last_sent = start
    for change in replay:
        await _send_change(writer, request, change)
        last_sent = change.rv
    await _follow(writer, watcher, request, after=last_sent, bookmark_interval=bookmark_interval)


_ENCODED_LIMIT = 4096  # encoded events kept: covers any realistic lag between watchers


async def _send_change(writer: _Writer, request: WatchRequest, change: storage.Change) -> None:
    kind = _event_type(request, change)
    if kind is None:
        return
    if request.rendering.mode != "object":
        await writer.send(kind, writer.render(change.object))
        return
    key = (change.rv, kind, request.resource.api_version)
    # With N watchers each change is serialized once, not N times.
    encoded = writer.api.storage.encoded
    line = encoded.get(key)
    if line is None:
        event = {"type": kind, "object": writer.render(change.object)}
        line = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        encoded[key] = line
        if len(encoded) > _ENCODED_LIMIT:
            encoded.popitem(last=False)
    await writer.response.write(line)


async def _follow(
    writer: _Writer,
    watcher: storage.Watcher,
    request: WatchRequest,
    *,
    after: int,
    bookmark_interval: float,
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.timeout
    next_bookmark = loop.time() + bookmark_interval
    while True:
        now = loop.time()
        if now >= deadline:
            return
        wait = deadline - now
        if request.allow_bookmarks:
            wait = min(wait, max(0.0, next_bookmark - now))
        try:
            async with asyncio.timeout(wait):  # the watch's deadline or its next bookmark
                change = await watcher.queue.get()
        except TimeoutError:
            if request.allow_bookmarks and loop.time() >= next_bookmark:
                await writer.bookmark()
                next_bookmark = loop.time() + bookmark_interval
            continue
        if change is None:
            return
        if change.rv <= after:
            continue  # already sent while replaying the log
        await _send_change(writer, request, change)
