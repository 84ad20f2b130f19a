"""Node taints and pod tolerations, parsed once, and whether one tolerates the other.

Follows Kubernetes' ``Toleration.ToleratesTaint``: an empty toleration effect matches every
effect; an empty key with ``Exists`` matches every taint; ``Equal`` (the default operator)
compares values, ``Exists`` ignores them.
"""

from __future__ import annotations

import dataclasses
import typing

__all__ = [
    "EXISTS",
    "EQUAL",
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "Taint",
    "Toleration",
    "parse_taints",
    "parse_tolerations",
    "tolerates",
]

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
EQUAL = "Equal"
EXISTS = "Exists"


@dataclasses.dataclass(frozen=True)
class Taint:
    """A node taint (``spec.taints[]``)."""

    key: str
    value: str = ""
    effect: str = NO_SCHEDULE

    def __str__(self) -> str:
        # Kubernetes' wording in "untolerated taint {key: value}".
        return f"{{{self.key}: {self.value}}}"


@dataclasses.dataclass(frozen=True)
class Toleration:
    """A pod toleration (``spec.tolerations[]``)."""

    key: str = ""
    operator: str = EQUAL
    value: str = ""
    effect: str = ""  # empty: tolerates every effect
    toleration_seconds: int | None = None


def tolerates(toleration: Toleration, /, *, taint: Taint) -> bool:
    """Whether ``toleration`` tolerates ``taint``."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == EXISTS:
        return True
    if toleration.operator in (EQUAL, ""):
        return toleration.value == taint.value
    return False


def parse_taints(raw: typing.Any) -> tuple[Taint, ...]:
    """``spec.taints`` of a node, in the node's order (the first untolerated one is reported)."""
    if not isinstance(raw, list):
        return ()
    return tuple(
        Taint(
            key=str(item.get("key", "")),
            value=str(item.get("value") or ""),
            effect=str(item.get("effect") or NO_SCHEDULE),
        )
        for item in raw
        if isinstance(item, dict)
    )


def parse_tolerations(raw: typing.Any) -> tuple[Toleration, ...]:
    """``spec.tolerations`` of a pod, in the pod's order."""
    if not isinstance(raw, list):
        return ()
    out: list[Toleration] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        seconds = item.get("tolerationSeconds")
        out.append(
            Toleration(
                key=str(item.get("key") or ""),
                operator=str(item.get("operator") or EQUAL),
                value=str(item.get("value") or ""),
                effect=str(item.get("effect") or ""),
                toleration_seconds=seconds if isinstance(seconds, int) else None,
            )
        )
    return tuple(out)
