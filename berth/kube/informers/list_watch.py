"""An informer: list a resource, then watch it, handing every change to callbacks.

One :class:`Informer` per resource lists it (in pages), then watches from the list's
resourceVersion with bookmarks, and hands every change to a callback as the raw JSON dict,
decoded once. A 410 Gone (the version is too old) relists at once; every other failure (API
server unreachable, 401 expired credentials, 403 RBAC, a 404 because the CRDs are missing) is
logged once with what to do about it, marks the informer unhealthy, and is retried with capped
exponential backoff: a transient fault never crashes the process. A relist also removes the
objects that disappeared while the watch was down. Malformed objects are logged (once each) and
skipped.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import logging
import random

import kubernetes_asyncio.client

from berth.api import objects
from berth.kube.transport import errors, watching
from berth.util import wakeups

__all__ = ["ChangeCallback", "Informer", "RemoveCallback", "Resource", "object_key"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Resource:
    """A collection to list and watch: a name for log lines and its cluster-wide path."""

    name: str  # "pods", "queues"
    path: str  # "/api/v1/pods"
    namespaced: bool
    hint: str = ""  # appended to a 404's log line (what is probably missing)


ChangeCallback = collections.abc.Callable[[str, objects.KubeObject], None]
"""Told ``("ADDED" | "MODIFIED", object)`` for a change; see :class:`Informer`."""
RemoveCallback = collections.abc.Callable[[str], None]
"""Told the key (``namespace/name`` or ``name``) of an object that is gone."""


def object_key(obj: objects.KubeObject, *, namespaced: bool) -> str | None:
    """``namespace/name`` (or ``name``), or None when the object has no usable name."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return None
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    if not namespaced:
        return name
    namespace = metadata.get("namespace")
    return f"{namespace if isinstance(namespace, str) and namespace else 'default'}/{name}"


class Informer:
    """Lists and watches one :class:`Resource`; see the module docstring.

    ``on_change`` and ``on_remove`` run on the event loop and must not block; an exception from
    them is logged as a malformed object and the watch goes on. ``on_listed`` is told once, when
    the first list has been handed to them (as :attr:`synced` is set).
    """

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        resource: Resource,
        on_change: ChangeCallback,
        on_remove: RemoveCallback,
        on_health: collections.abc.Callable[[Informer, str | None], None] | None = None,
        on_listed: collections.abc.Callable[[Informer], None] | None = None,
        watch_timeout: int = 300,
        backoff: tuple[float, float] = (0.5, 30.0),
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self._on_change = on_change
        self._on_remove = on_remove
        self._on_health = on_health
        self._on_listed = on_listed
        self._watch_timeout = watch_timeout
        self._backoff = backoff
        self._rng = rng if rng is not None else random.Random()
        self.synced = asyncio.Event()
        """Set once the first list has been handed to the callbacks."""
        self.problem: str | None = None
        """Why the informer cannot follow the API server now; None while it can."""
        self._keys: set[str] = set()
        self._version = ""
        self._malformed_logged: set[str] = set()

    async def run(self, stop: asyncio.Event) -> None:
        """List and watch until ``stop`` is set."""
        await wakeups.run_until(self._loop(stop), stop=stop, name=f"informer: {self.resource.name}")

    async def _loop(self, stop: asyncio.Event) -> None:
        delay = self._backoff[0]
        while not stop.is_set():
            try:
                if not self._version:
                    await self._relist()
                await self._follow()
                delay = self._backoff[0]
            except errors.Gone:
                logger.info("%s: watch expired (410 Gone); listing again", self.resource.name)
                self._version = ""
            except errors.KubeError as exc:
                self._report(self._explain(exc))
                pause = delay * (1 + self._rng.random() / 2)
                delay = min(delay * 2, self._backoff[1])
                if await wakeups.sleep_or_stop(pause, stop=stop):
                    break

    async def _relist(self) -> None:
        listing = await watching.list_pages(
            self.api, path=self.resource.path, on_malformed=self._malformed
        )
        seen: set[str] = set()
        for item in listing.items:
            key = self._apply("ADDED", item)
            if key is not None:
                seen.add(key)
        for key in sorted(self._keys - seen):
            self._remove(key)
        self._version = listing.resource_version
        self._report(None)
        if not self.synced.is_set():
            logger.info("%s: listed %d", self.resource.name, len(seen))
            self.synced.set()
            if self._on_listed is not None:
                self._on_listed(self)

    async def _follow(self) -> None:
        events = watching.watch(
            self.api,
            path=self.resource.path,
            resource_version=self._version,
            timeout_seconds=self._watch_timeout,
            on_malformed=self._malformed,
            on_open=lambda: self._report(None),  # answered: healthy, events or not
        )
        try:
            async for event in events:
                self._report(None)
                if event.resource_version:
                    self._version = event.resource_version
                if event.type == "DELETED":
                    key = object_key(event.object, namespaced=self.resource.namespaced)
                    if key is not None:
                        self._remove(key)
                elif event.type in ("ADDED", "MODIFIED"):
                    self._apply(event.type, event.object)
        finally:
            await events.aclose()

    def _apply(self, kind: str, obj: objects.KubeObject) -> str | None:
        key = object_key(obj, namespaced=self.resource.namespaced)
        if key is None:
            self._malformed(f"{self.resource.name}: an object without a name: {str(obj)[:120]}")
            return None
        try:
            self._on_change(kind, obj)
        except Exception as exc:
            self._malformed(f"{self.resource.name} {key}: cannot be read ({exc!r}); ignored")
            return None
        self._keys.add(key)
        return key

    def _remove(self, key: str) -> None:
        self._keys.discard(key)
        try:
            self._on_remove(key)
        except Exception:
            logger.exception("%s %s: removing it from the cache failed", self.resource.name, key)

    def _malformed(self, message: str) -> None:
        # Once per message: a broken object is re-sent on every relist and resync.
        if message not in self._malformed_logged:
            self._malformed_logged.add(message)
            logger.warning("malformed object from the API server: %s", message)

    def _report(self, problem: str | None) -> None:
        if problem == self.problem:
            return
        if problem is None:
            logger.info("%s: following the API server again", self.resource.name)
        else:
            logger.warning("%s: %s", self.resource.name, problem)
        self.problem = problem
        if self._on_health is not None:
            self._on_health(self, problem)

    def _explain(self, exc: Exception) -> str:
        verb = f"list/watch {self.resource.path}"
        if isinstance(exc, errors.Unauthorized):
            return f"the API server rejected the credentials (expired or wrong?): {exc}"
        if isinstance(exc, errors.Forbidden):
            return f"RBAC forbids {verb}: grant list and watch on {self.resource.name}: {exc}"
        if isinstance(exc, errors.NotFound):
            hint = f"; {self.resource.hint}" if self.resource.hint else ""
            return f"the API server does not serve {self.resource.path}{hint}"
        if isinstance(exc, errors.TransportError):
            return f"cannot reach the API server: {exc}"
        return f"{verb} failed: {exc}"
