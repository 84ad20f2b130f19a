"""The live PodGroups, Queues and Reservations as the leader's Kopf last saw them.

Kopf's indexing handlers (:mod:`berth.controllers.indexing`) record every object of Berth's
kinds here, as a :class:`~berth.status.observations.ObservedObject`: its identity, spec and
current status. Kopf's status handlers (:mod:`berth.controllers.statuses`, the Reservations'
lifetime pass) compare the status they want with the one observed and patch only the
difference — so a status is written when it changes, an edit by somebody else is put right, and
a status already correct after a restart is not rewritten. Everything runs on the operator's one
event loop: no lock.
"""

from __future__ import annotations

from berth.status import observations

__all__ = ["ObservedObjects"]


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
