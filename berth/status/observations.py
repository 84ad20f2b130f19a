"""An object as a status owner reads it: identity, spec and the status it has now.

The live operator builds one from every body Kopf observes (:mod:`berth.controllers.observed`),
``berth sim`` from the objects it stores (:mod:`berth.sim.cluster`); the owners of
:mod:`berth.status` compute the status it should have from it.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import typing

from berth.api import custom_objects

__all__ = ["ObservedObject", "observe"]


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
    spec: collections.abc.Mapping[str, object]  # Queue's, PodGroup's or Reservation's: see kind
    status: custom_objects.ObjectStatus
    resource_version: str = ""


def observe(
    kind: str,
    *,
    # Kopf's body, or the simulator's object, of any of Berth's kinds: any JSON object, whose
    # fields are checked here, once, as they are parsed into the record below.
    body: collections.abc.Mapping[str, object],
    parse_time: collections.abc.Callable[[typing.Any], float | None],
) -> ObservedObject | None:
    """An :class:`ObservedObject` from an object's body, or None when it has no name."""
    found = body.get("metadata")
    metadata = found if isinstance(found, collections.abc.Mapping) else {}
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
        status=typing.cast(custom_objects.ObjectStatus, copy.deepcopy(dict(status)))
        if isinstance(status, collections.abc.Mapping)
        else {},
        resource_version=str(metadata.get("resourceVersion") or ""),
    )
