"""Status conditions and ``Time`` stamps as Berth writes them into the objects it explains.

The status owners (:mod:`berth.status.podgroups`, :mod:`berth.status.queues`,
:mod:`berth.status.reservations`) and the Reservation controller
(:mod:`berth.controllers.reservations`) share one rule for
conditions: a list holds one condition per type, sorted by type, other writers' types kept;
``lastTransitionTime`` moves only when the condition's ``status`` does, as Kubernetes' own
controllers do. :func:`timestamp` is the ``Time`` format those conditions, Events
(:mod:`berth.kube.transport.events`) and admission's ``admitted-at`` annotation are written in. Pure
functions of JSON dicts.
"""

from __future__ import annotations

import collections.abc

from berth.api import custom_objects, meta, objects
from berth.util import clocks

__all__ = ["find", "replaced", "timestamp", "updated"]

_Status = custom_objects.ObjectStatus


def timestamp(when: float) -> str:
    """``when`` (seconds since the epoch) as a Kubernetes ``Time``: RFC 3339, whole seconds, UTC."""
    return meta.format_timestamp(clocks.to_datetime(int(when)))


def find(status: _Status, kind: str) -> objects.Condition | None:
    """The condition of type ``kind`` in ``status``, if there is one."""
    for condition in status.get("conditions") or ():
        if isinstance(condition, collections.abc.Mapping) and condition.get("type") == kind:
            return condition
    return None


def replaced(status: _Status, condition: objects.Condition) -> list[objects.Condition]:
    """``status``'s conditions with ``condition`` in place of the one of its type (the other
    types kept, as copies), sorted by type."""
    kept: list[objects.Condition] = [
        {**c}
        for c in status.get("conditions") or ()
        if isinstance(c, collections.abc.Mapping) and c.get("type") != condition["type"]
    ]
    return sorted([*kept, condition], key=lambda c: str(c.get("type")))


def updated(
    status: _Status, *, kind: str, value: str, reason: str, message: str, now: float
) -> list[objects.Condition]:
    """``status``'s conditions with the one of type ``kind`` set; its ``lastTransitionTime``
    is kept while ``value`` (the condition's ``status``) stays the same, else ``now``."""
    old = find(status, kind)
    since = (
        old.get("lastTransitionTime") if old is not None and old.get("status") == value else None
    )
    condition: objects.Condition = {
        "type": kind,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or timestamp(now),
    }
    return replaced(status, condition)
