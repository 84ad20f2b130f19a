"""The live PodGroups, Queues and Reservations as the embedded Kopf operator last saw them.

The watching handler :func:`register_watcher` adds (one per kind, for
:mod:`berth.controllers.podgroups`, :mod:`berth.controllers.queues` and the like) runs on
Kopf's own event loop in its own thread and records every object it sees here: its identity,
spec and current status. Kopf's status handlers (:mod:`berth.controllers.statuses`, the
Reservations' lifetime pass) compare the status they want with the one observed and patch only
the difference — so a status is written when it changes, an edit by somebody else is put right,
and a status already correct after a restart is not rewritten. Thread-safe.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import threading
import typing

import kopf

from berth.api import keys
from berth.scheduler.snapshot import wire

__all__ = ["ObservedObject", "ObservedObjects", "observe", "register_watcher"]


@dataclasses.dataclass(frozen=True)
class ObservedObject:
    """One object as last observed; ``spec`` and ``status`` are private copies."""

    kind: str  # "PodGroup", "Queue"
    key: str  # "namespace/name", or "name" for cluster-scoped kinds
    namespace: str  # "" for cluster-scoped kinds
    name: str
    uid: str
    generation: int
    created: float  # creationTimestamp, seconds since the epoch (0.0 if unknown)
    spec: collections.abc.Mapping[str, typing.Any]
    status: collections.abc.Mapping[str, typing.Any]
    resource_version: str = ""


class ObservedObjects:
    """Objects by kind and key; written from Kopf's thread, read from the operator's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[str, ObservedObject]] = {}
        self.changed = threading.Event()
        """Set whenever an object is added, changed or removed; cleared by the reader."""

    def put(self, obj: ObservedObject) -> None:
        with self._lock:
            self._objects.setdefault(obj.kind, {})[obj.key] = obj
        self.changed.set()

    def remove(self, kind: str, key: str) -> None:
        with self._lock:
            self._objects.get(kind, {}).pop(key, None)
        self.changed.set()

    def of_kind(self, kind: str) -> list[ObservedObject]:
        """Every object of ``kind``, sorted by key."""
        with self._lock:
            objects = self._objects.get(kind, {})
            return [objects[key] for key in sorted(objects)]

    def get(self, kind: str, key: str) -> ObservedObject | None:
        with self._lock:
            return self._objects.get(kind, {}).get(key)


def observe(
    kind: str,
    *,
    body: collections.abc.Mapping[str, typing.Any],
    parse_time: collections.abc.Callable[[typing.Any], float | None],
) -> ObservedObject | None:
    """An :class:`ObservedObject` from an event's body, or None when it has no name."""
    metadata = body.get("metadata") or {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    namespace = metadata.get("namespace") or ""
    generation = metadata.get("generation")
    spec = body.get("spec")
    status = body.get("status")
    return ObservedObject(
        kind=kind,
        key=f"{namespace}/{name}" if namespace else name,
        namespace=str(namespace),
        name=name,
        uid=str(metadata.get("uid") or ""),
        generation=generation if isinstance(generation, int) else 0,
        created=parse_time(metadata.get("creationTimestamp")) or 0.0,
        spec=copy.deepcopy(dict(spec)) if isinstance(spec, collections.abc.Mapping) else {},
        status=copy.deepcopy(dict(status)) if isinstance(status, collections.abc.Mapping) else {},
        resource_version=str(metadata.get("resourceVersion") or ""),
    )


def register_watcher(
    registry: kopf.OperatorRegistry, *, kind: str, plural: str, objects: ObservedObjects
) -> None:
    """Add the Kopf handler recording every object of Berth's ``plural`` into ``objects``
    (removed again when it is deleted). It needs no finalizer: nothing has to happen when
    such an object goes, so deleting one never waits for Berth."""

    @kopf.on.event(keys.GROUP, keys.VERSION, plural, id=f"{kind.lower()}_seen", registry=registry)
    def seen(
        event: collections.abc.Mapping[str, typing.Any], body: kopf.Body, **_: typing.Any
    ) -> None:
        found = observe(kind, body=body, parse_time=wire.parse_time)
        if found is None:
            return
        if event.get("type") == "DELETED":
            objects.remove(kind, found.key)
        else:
            objects.put(found)
