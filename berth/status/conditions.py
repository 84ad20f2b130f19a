"""Status conditions and ``Time`` stamps as Berth writes them into the objects it explains.

The status owners (:mod:`berth.status.podgroups`, :mod:`berth.status.queues`,
:mod:`berth.status.reservations`) and the Reservation controller
(:mod:`berth.controllers.reservations`) share one rule for
conditions: a list holds one condition per type, sorted by type, other writers' types kept;
``lastTransitionTime`` moves only when the condition's ``status`` does, as Kubernetes' own
controllers do. :func:`timestamp` is the ``Time`` format those conditions, Events
(:mod:`berth.kube.transport.events`) and admission's ``admitted-at`` annotation are written in. Pure
functions of JSON dicts.

A condition's *words* (its ``message``) may change while its ``status`` and ``reason`` stay: a
starving gang's "waited 307s ... expected in 7s". Such a change is written at most every
:data:`MESSAGE_REFRESH` (:func:`words_only` tells it apart), on pods
(:mod:`berth.kube.binder.pending_marks`) as on PodGroups and Queues
(:mod:`berth.controllers.statuses`); a new status or reason is written at once.
"""

from __future__ import annotations

import collections.abc

from berth.api import custom_objects, meta, objects
from berth.util import clocks

__all__ = ["MESSAGE_REFRESH", "find", "replaced", "timestamp", "updated", "words_only"]

MESSAGE_REFRESH = 10.0
"""Seconds between two writes of an object's conditions that change only their words:
kube-scheduler's longest backoff between two attempts at an unschedulable pod, each of which
rewrites its condition."""

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


def words_only(old: _Status, new: _Status) -> bool:
    """Whether ``new`` differs from ``old`` only in its conditions' words (``message``, and the
    ``lastTransitionTime`` an owner may move with them): nothing a controller acts on."""
    return _without_words(old) == _without_words(new)


def _without_words(status: _Status) -> dict[str, object]:
    plain: dict[str, object] = dict(status)
    listed = status.get("conditions")
    if isinstance(listed, list):
        plain["conditions"] = [
            {k: v for k, v in c.items() if k not in ("message", "lastTransitionTime")}
            if isinstance(c, collections.abc.Mapping)
            else c
            for c in listed
        ]
    return plain
