"""``ReservationInfo``: one Reservation as the scheduler sees it (fields only, for now).

Owns the parsing of a Reservation (a ``berth.api.reservations.Reservation`` or its wire dict)
into what the Reservation plugin will read: the template the reserve pod is built from, the
owner matchers, lifetime (``ttl`` in seconds, ``0`` never expires, 24 h by default unless
``expires`` is set), and the status the scheduler last wrote. Built by
:class:`berth.scheduler.snapshot.cache.ClusterCache`.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

from berth.api import durations, errors, resources
from berth.scheduler.snapshot import ids, selectors, wire

__all__ = ["DEFAULT_TTL_SECONDS", "ReservationInfo", "ReservationOwner", "reservation_info"]

DEFAULT_TTL_SECONDS = 24 * 3600.0  # the API's default ttl, 24h


@dataclasses.dataclass(frozen=True)
class ReservationOwner:
    """One owner matcher; exactly one of the three ways is set."""

    object_name: str | None = None  # a pod by name
    controller_kind: str | None = None  # pods controlled by kind/name
    controller_name: str | None = None
    match_labels: tuple[tuple[str, str], ...] = ()  # with match_expressions: a label selector
    match_expressions: tuple[selectors.Requirement, ...] = ()
    selects: bool = False  # a labelSelector was given (an empty one matches every pod)


@dataclasses.dataclass(frozen=True)
class ReservationInfo:
    """A Reservation: what to hold, for whom, until when, and where it is held."""

    key: ids.ReservationKey
    namespace: str
    name: str
    uid: str
    template: wire.Raw = dataclasses.field(hash=False, repr=False)  # a pod template, wire form
    owners: tuple[ReservationOwner, ...]
    ttl_seconds: float | None  # None: ``expires`` decides; 0: never expires
    expires: float | None
    allocate_once: bool
    queue: ids.QueueName | None
    unschedulable: bool
    phase: str
    node_name: ids.NodeName | None
    allocatable: resources.ResourceList
    allocated: resources.ResourceList
    current_owners: tuple[ids.PodKey, ...]
    expires_at: float | None
    creation_timestamp: float
    invalid: str | None = None


def _owner(raw: wire.Raw, /) -> ReservationOwner:
    obj, controller = wire.sub(raw, "object"), wire.sub(raw, "controller")
    selector = raw.get("labelSelector")
    if isinstance(selector, collections.abc.Mapping):
        return ReservationOwner(
            match_labels=tuple(
                sorted((str(k), str(v)) for k, v in wire.sub(selector, "matchLabels").items())
            ),
            match_expressions=selectors.parse_requirements(selector.get("matchExpressions")),
            selects=True,
        )
    return ReservationOwner(
        object_name=str(obj["name"]) if obj.get("name") else None,
        controller_kind=str(controller["kind"]) if controller.get("kind") else None,
        controller_name=str(controller["name"]) if controller.get("name") else None,
    )


def _resources(raw: wire.Raw, /) -> resources.ResourceList:
    return resources.ResourceList({str(k): wire.milli(v) for k, v in raw.items()})


def reservation_info(raw: typing.Any, /) -> ReservationInfo:
    """Parse a Reservation (model or wire dict)."""
    obj = wire.as_raw(raw)
    meta, spec, status = wire.sub(obj, "metadata"), wire.sub(obj, "spec"), wire.sub(obj, "status")
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    invalid: str | None = None
    expires = wire.parse_time(spec.get("expires"))
    ttl: float | None = None
    if spec.get("ttl") is not None:
        try:
            ttl = durations.parse_ms(str(spec["ttl"])) / 1000
        except errors.DurationError as exc:
            invalid = f"invalid ttl: {exc}"
    elif expires is None:
        ttl = DEFAULT_TTL_SECONDS
    try:
        allocatable = _resources(wire.sub(status, "allocatable"))
        allocated = _resources(wire.sub(status, "allocated"))
    except errors.QuantityError as exc:
        invalid = invalid or f"invalid status quantities: {exc}"
        allocatable = allocated = resources.ResourceList()
    owners_raw = spec.get("owners")
    node_name = status.get("nodeName")
    queue = spec.get("queue")
    return ReservationInfo(
        key=ids.ReservationKey(ids.key_of(namespace, name=name)),
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or ""),
        template=wire.sub(spec, "template"),
        owners=tuple(
            _owner(o)
            for o in (owners_raw if isinstance(owners_raw, list) else [])
            if isinstance(o, collections.abc.Mapping)
        ),
        ttl_seconds=ttl,
        expires=expires,
        allocate_once=spec.get("allocateOnce", True) is not False,
        queue=ids.QueueName(str(queue)) if queue else None,
        unschedulable=bool(spec.get("unschedulable")),
        phase=str(status.get("phase") or "Pending"),
        node_name=ids.NodeName(str(node_name)) if node_name else None,
        allocatable=allocatable,
        allocated=allocated,
        current_owners=tuple(
            ids.PodKey(ids.key_of(str(o.get("namespace") or namespace), name=str(o.get("name"))))
            for o in (status.get("currentOwners") or [])
            if isinstance(o, collections.abc.Mapping)
        ),
        expires_at=wire.parse_time(status.get("expiresAt")),
        creation_timestamp=wire.parse_time(meta.get("creationTimestamp")) or 0.0,
        invalid=invalid,
    )
