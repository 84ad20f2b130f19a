"""Objects by resource, one global resourceVersion, and the event log that watches replay.

This is the emulator's etcd. Each write takes the next resourceVersion (one counter for all
resources, as etcd's revision), stores the object and appends a :class:`Change` to a bounded log;
watchers subscribed to the resource get the change pushed to their queue. A watch that asks to
start from a resourceVersion older than the log still holds is refused with 410 Gone, as the API
server does after compaction.

Stored objects are never mutated after they are put: writers build a new dict (copy-on-write),
so a change in the log and a list result can share the same object safely. Everything here runs
on the server's event loop; :mod:`berth.emulator.rest` adds the API semantics on top.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import dataclasses

from berth.api import objects
from berth.emulator import errors, resources

__all__ = ["Change", "Storage", "Watcher", "ObjectKey"]

ObjectKey = tuple[str, str]  # (namespace or "", name)
Object = objects.KubeObject


@dataclasses.dataclass(frozen=True)
class Change:
    """One write, as a watch event: ``ADDED``, ``MODIFIED`` or ``DELETED``."""

    rv: int
    key: resources.StorageKey
    type: str
    object: Object  # the state after the write (the last state for DELETED)
    old: Object | None  # the state before it (None for ADDED): selector transitions need it


class Watcher:
    """A subscription to one resource (optionally one namespace): a queue of changes.

    ``None`` in the queue means the server is stopping and the watch must end.
    """

    def __init__(
        self, *, key: resources.StorageKey, namespace: str | None, internal: bool = False
    ) -> None:
        self.key = key
        self.namespace = namespace
        self.internal = internal
        """One of the emulator's own components (a controller), not a client's watch."""
        self.queue: asyncio.Queue[Change | None] = asyncio.Queue()

    def wants(self, change: Change) -> bool:
        if change.key != self.key:
            return False
        return self.namespace is None or _namespace(change.object) == self.namespace


def _namespace(obj: Object) -> str:
    return str(obj.get("metadata", {}).get("namespace") or "")


def object_key(obj: Object) -> ObjectKey:
    meta = obj.get("metadata", {})
    return (str(meta.get("namespace") or ""), str(meta["name"]))


class Storage:
    """Objects per resource, the resourceVersion counter, the change log and the watchers."""

    def __init__(self, *, history: int = 10_000) -> None:
        self._objects: dict[resources.StorageKey, dict[ObjectKey, Object]] = {}
        self._log: collections.deque[Change] = collections.deque(maxlen=history)
        self._watchers: dict[resources.StorageKey, set[Watcher]] = {}
        self._rv = 1
        self._first_kept = 1  # resourceVersions <= this may have lost changes to compaction
        self.encoded: collections.OrderedDict[tuple[int, str, str], bytes] = (
            collections.OrderedDict()
        )
        """Watch events already serialized, by (resourceVersion, type, apiVersion): watchers
        of one resource share them (see :mod:`berth.emulator.watches`)."""

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out (a list's ``metadata.resourceVersion``)."""
        return self._rv

    def get(self, key: resources.StorageKey, namespace: str, name: str) -> Object | None:
        return self._objects.get(key, {}).get((namespace, name))

    def list(self, key: resources.StorageKey, namespace: str | None = None) -> list[Object]:
        """Objects of ``key`` (in ``namespace`` if given) in etcd key order: namespace, name."""
        objects = self._objects.get(key, {})
        keys = sorted(k for k in objects if namespace is None or k[0] == namespace)
        return [objects[k] for k in keys]

    def count(self, key: resources.StorageKey) -> int:
        return len(self._objects.get(key, {}))

    def put(self, key: resources.StorageKey, obj: Object, *, old: Object | None) -> Object:
        """Store ``obj`` (a fresh dict owned by storage from now on) with the next rv."""
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._objects.setdefault(key, {})[object_key(obj)] = obj
        self._record(Change(self._rv, key, "MODIFIED" if old is not None else "ADDED", obj, old))
        return obj

    def remove(self, key: resources.StorageKey, obj: Object) -> Object:
        """Delete the stored object; the DELETED event carries a new resourceVersion."""
        stored = self._objects.get(key, {}).pop(object_key(obj), None)
        if stored is None:
            raise KeyError(object_key(obj))
        self._rv += 1
        last: Object = {
            **stored,
            "metadata": {**stored["metadata"], "resourceVersion": str(self._rv)},
        }
        self._record(Change(self._rv, key, "DELETED", last, stored))
        return last

    def drop_resource(self, key: resources.StorageKey) -> builtins.list[Object]:
        """Remove every object of a resource (its CRD is gone), with DELETED events."""
        return [self.remove(key, obj) for obj in self.list(key)]

    def _record(self, change: Change) -> None:
        if len(self._log) == self._log.maxlen:
            self._first_kept = self._log[0].rv
        self._log.append(change)
        for watcher in self._watchers.get(change.key, ()):
            if watcher.wants(change):
                watcher.queue.put_nowait(change)

    def changes_since(
        self, rv: int, *, key: resources.StorageKey, namespace: str | None
    ) -> builtins.list[Change]:
        """The changes after ``rv`` to ``key``; 410 Gone if some were compacted away."""
        self.check_not_compacted(rv)
        return [
            c
            for c in self._log
            if c.rv > rv
            and c.key == key
            and (namespace is None or _namespace(c.object) == namespace)
        ]

    def check_not_compacted(self, rv: int) -> None:
        """410 Gone when changes after ``rv`` may have been compacted away."""
        if rv < self._first_kept:
            raise errors.expired(f"too old resource version: {rv} ({self._first_kept})")

    def subscribe(
        self, *, key: resources.StorageKey, namespace: str | None, internal: bool = False
    ) -> Watcher:
        watcher = Watcher(key=key, namespace=namespace, internal=internal)
        self._watchers.setdefault(key, set()).add(watcher)
        return watcher

    def unsubscribe(self, watcher: Watcher) -> None:
        self._watchers.get(watcher.key, set()).discard(watcher)

    @property
    def watcher_count(self) -> int:
        """Watches the clients hold (the emulator's own controllers' aside)."""
        return sum(1 for ws in self._watchers.values() for w in ws if not w.internal)

    def close(self) -> None:
        """Tell every watcher to end (the server is stopping)."""
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.queue.put_nowait(None)
