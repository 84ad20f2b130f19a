"""The live PodGroups, Queues and Reservations as the embedded Kopf operator last saw them.

The watching handler :func:`register_watcher` adds (one per kind, for
:mod:`berth.controllers.podgroups`, :mod:`berth.controllers.queues` and the like) runs on
the operator's one event loop, as all of Kopf does, and records every object it sees here, as a
:class:`~berth.status.observations.ObservedObject`: its identity, spec and current status.
Kopf's status handlers (:mod:`berth.controllers.statuses`, the Reservations' lifetime pass)
compare the status they want with the one observed and patch only the difference — so a
status is written when it changes, an edit by somebody else is put right, and a status
already correct after a restart is not rewritten. Everything runs on one loop: no lock.
"""

from __future__ import annotations

import collections.abc
import typing

import kopf

from berth.api import keys
from berth.scheduler.snapshot import wire
from berth.status import observations

__all__ = ["ObservedObjects", "register_watcher"]


class ObservedObjects:
    """Objects by kind and key."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[str, observations.ObservedObject]] = {}

    def put(self, obj: observations.ObservedObject) -> None:
        self._objects.setdefault(obj.kind, {})[obj.key] = obj

    def remove(self, kind: str, key: str) -> None:
        self._objects.get(kind, {}).pop(key, None)

    def of_kind(self, kind: str) -> list[observations.ObservedObject]:
        """Every object of ``kind``, sorted by key."""
        objects = self._objects.get(kind, {})
        return [objects[key] for key in sorted(objects)]

    def get(self, kind: str, key: str) -> observations.ObservedObject | None:
        return self._objects.get(kind, {}).get(key)


def register_watcher(
    registry: kopf.OperatorRegistry, *, kind: str, plural: str, objects: ObservedObjects
) -> None:
    """Add the Kopf handler recording every object of Berth's ``plural`` into ``objects``
    (removed again when it is deleted). It needs no finalizer: nothing has to happen when
    such an object goes, so deleting one never waits for Berth."""

    # A coroutine: Kopf runs plain functions in a thread pool of its own.
    @kopf.on.event(keys.GROUP, keys.VERSION, plural, id=f"{kind.lower()}_seen", registry=registry)
    async def seen(
        event: collections.abc.Mapping[str, typing.Any], body: kopf.Body, **_: typing.Any
    ) -> None:
        found = observations.observe(kind, body=body, parse_time=wire.parse_time)
        if found is None:
            return
        if event.get("type") == "DELETED":
            objects.remove(kind, found.key)
        else:
            objects.put(found)
