"""Typed ids of the objects a snapshot holds.

Keys are plain strings at run time; the ``NewType`` wrappers let mypy keep a pod key from being
passed where a group key is expected. Namespaced objects are keyed ``namespace/name``.
"""

from __future__ import annotations

import typing

__all__ = ["NodeName", "PodGroupKey", "PodKey", "QueueName", "ReservationKey", "key_of"]

PodKey = typing.NewType("PodKey", str)
PodGroupKey = typing.NewType("PodGroupKey", str)
ReservationKey = typing.NewType("ReservationKey", str)
QueueName = typing.NewType("QueueName", str)
NodeName = typing.NewType("NodeName", str)


def key_of(namespace: str, *, name: str) -> str:
    """The ``namespace/name`` key of a namespaced object."""
    return f"{namespace}/{name}"
