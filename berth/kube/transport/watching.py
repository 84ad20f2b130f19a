"""Raw list and watch calls: pages of JSON objects, and a watch stream of JSON events.

:func:`list_pages` reads a collection in pages (``limit`` + ``continue``) and returns its items
and the list's ``resourceVersion``; :func:`watch` streams the events after a resourceVersion,
with bookmarks, until the server ends the stream (``timeoutSeconds``) or the connection breaks.
Both move plain dicts decoded once from the wire, never generated model objects
(docs/architecture.md). :mod:`berth.kube.informers.list_watch` drives them.

A watch answers problems in-band: an ``ERROR`` event carrying a Status. A 410 ("too old
resource version") becomes :class:`~berth.kube.transport.errors.Gone`, any other Status the matching
:mod:`berth.kube.transport.errors` class, so the caller handles an expired watch the same way
whether the server said so before or after the stream started. Lines that are not JSON objects, and
events without a type or an object, are reported to ``on_malformed`` and skipped: one broken
object must not end the watch of every other one.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import aiohttp
import kubernetes_asyncio.client

from berth.api import objects
from berth.kube.transport import errors, rest

__all__ = ["Event", "Listing", "MalformedCallback", "list_pages", "watch"]

# Seconds to wait for the first byte of a connection; a watch then waits for events up to the
# server-side timeout plus this margin before it treats the connection as dead.
_CONNECT_TIMEOUT = 10.0
_READ_MARGIN = 30.0
_PAGE_SIZE = 500

MalformedCallback = collections.abc.Callable[[str], None]
"""Told a one-line description of something unusable the server sent."""


@dataclasses.dataclass(frozen=True)
class Event:
    """One watch event: ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK``, and its object."""

    type: str
    object: objects.KubeObject

    @property
    def resource_version(self) -> str:
        metadata = self.object.get("metadata")
        version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        return str(version) if version else ""


@dataclasses.dataclass(frozen=True)
class Listing:
    """A whole collection as listed: its items and the version to watch from."""

    items: list[objects.KubeObject]
    resource_version: str


async def list_pages(
    api: kubernetes_asyncio.client.ApiClient,
    *,
    path: str,
    query: collections.abc.Mapping[str, str] | None = None,
    page_size: int = _PAGE_SIZE,
    timeout: float | None = 60.0,
    on_malformed: MalformedCallback | None = None,
) -> Listing:
    """Every item of the collection at ``path``, read ``page_size`` at a time."""
    items: list[objects.KubeObject] = []
    token = ""
    version = ""
    while True:
        params = dict(query or {}) | {"limit": str(page_size)}
        if token:
            params["continue"] = token
        page = await rest.request(api, method="GET", path=path, query=params, timeout=timeout)
        raw_items = page.get("items")
        for item in raw_items if isinstance(raw_items, list) else []:
            if isinstance(item, dict):
                items.append(typing.cast(objects.KubeObject, item))  # its kind reads it
            elif on_malformed is not None:
                on_malformed(f"a list item of {path} is not an object: {_clip(item)}")
        metadata = page.get("metadata")
        if not isinstance(metadata, dict):
            metadata = {}
        version = str(metadata.get("resourceVersion") or version)
        token = str(metadata.get("continue") or "")
        if not token:
            return Listing(items=items, resource_version=version)


async def watch(
    api: kubernetes_asyncio.client.ApiClient,
    *,
    path: str,
    resource_version: str,
    query: collections.abc.Mapping[str, str] | None = None,
    timeout_seconds: int = 300,
    on_malformed: MalformedCallback | None = None,
    on_open: collections.abc.Callable[[], None] | None = None,
) -> collections.abc.AsyncGenerator[Event, None]:
    """The events of the collection at ``path`` after ``resource_version``, with bookmarks.

    Ends when the server closes the stream; raises :mod:`berth.kube.transport.errors` for an error
    answer or ``ERROR`` event (:class:`~berth.kube.transport.errors.Gone` for 410) and
    :class:`~berth.kube.transport.errors.TransportError` when the connection fails. ``on_open`` is
    told when the server accepted the watch (a 2xx answer): a quiet collection may send its first
    event only with the next bookmark, a minute later, and a caller that waited for it to say
    "the API server answers again" would say it a minute late.
    """
    what = f"WATCH {path}"
    params = dict(query or {}) | {
        "watch": "true",
        "allowWatchBookmarks": "true",
        "resourceVersion": resource_version,
        "timeoutSeconds": str(timeout_seconds),
    }
    try:
        response = await api.call_api(
            path,
            "GET",
            query_params=list(params.items()),
            header_params={"Accept": "application/json"},
            auth_settings=rest.AUTH_SETTINGS,
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(
                connect=_CONNECT_TIMEOUT,
                sock_connect=_CONNECT_TIMEOUT,
                sock_read=timeout_seconds + _READ_MARGIN,
            ),
        )
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise errors.TransportError(f"{what}: {type(exc).__name__}: {exc}".rstrip(": ")) from exc
    async with response:
        if not 200 <= response.status <= 299:
            raw = await response.read()
            raise errors.from_status(response.status, body=rest.decode(raw), what=what)
        if on_open is not None:
            on_open()
        buffer = b""
        try:
            async for chunk in response.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    event = _event(line, what=what, on_malformed=on_malformed)
                    if event is not None:
                        yield event
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise errors.TransportError(f"{what}: stream broken: {type(exc).__name__}") from exc
        if buffer.strip():
            event = _event(buffer, what=what, on_malformed=on_malformed)
            if event is not None:
                yield event


def _event(line: bytes, *, what: str, on_malformed: MalformedCallback | None) -> Event | None:
    if not line.strip():
        return None
    decoded = rest.decode(line)
    kind = decoded.get("type") if decoded is not None else None
    obj = decoded.get("object") if decoded is not None else None
    if not isinstance(kind, str) or not isinstance(obj, dict):
        if on_malformed is not None:
            on_malformed(f"{what}: not a watch event: {_clip(line)}")
        return None
    if kind == "ERROR":
        code = obj.get("code")
        status = code if isinstance(code, int) else 500
        raise errors.from_status(status, body=obj, what=what)
    return Event(type=kind, object=typing.cast(objects.KubeObject, obj))  # its kind reads it


def _clip(value: object, *, limit: int = 120) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
