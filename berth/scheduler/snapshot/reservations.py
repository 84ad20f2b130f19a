"""``ReservationInfo``: one Reservation as the scheduler sees it, and its reserve pod.

Owns the parsing of a Reservation (a ``berth.api.reservations.Reservation`` or its wire dict)
into what the Reservation plugin reads: the template the reserve pod is built from, the owner
matchers, lifetime (``ttl`` in seconds, ``0`` never expires, 24 h by default unless
``expires`` is set), and the status the scheduler last wrote. Also the pure rules the plugin,
the cache and the controller share (docs/architecture.md, "Who owns what"):

- the **reserve pod**: an in-memory pod built from ``spec.template`` (never created in the
  API), keyed ``namespace/reservation:<name>`` (``:`` never occurs in a pod name), in the
  reservation's queue (``spec.queue``, else ``default``), annotated
  ``scheduling.berth.io/reserve-pod: "true"``. Pending, it waits to be placed like any pod;
  Available, it sits on ``status.nodeName`` holding ``status.allocatable`` (plus one pod
  slot) minus what its owners use;
- **owners**: a pod matches by name, by its controller (kind and name) or by labels, and only
  in the reservation's namespace; :func:`owners_problem` says when no owner can ever match;
- **lifetime**: :func:`deadline` (``expires``, else creation time plus ``ttl``, or ``startAt``
  plus ``ttl`` for a reservation that starts later), :func:`expiry` (how it ends once that
  passed: the one decision, for the plugin and the controller), :func:`not_started`
  (``startAt`` ahead);
- **charging**: the ``scheduling.berth.io/reservation-allocated`` annotation Berth writes on
  an owner it placed into a reservation (``{"name": ..., "uid": ...}``), read back by the cache;
- **devices**: each ``spec.template.spec.resourceClaims`` entry becomes a *held claim*
  (:class:`HeldClaim`, :func:`held_claims`) that lives only in Berth's cache, keyed
  ``namespace/reservation:<name>:<entry>`` (never a claim name of the API), with the spec of
  the ResourceClaimTemplate or of the claim the entry names; the reserve pod uses it by name.
  Pending, the DynamicResources plugin allocates it like a pod's claim; Available, its
  allocation is ``status.devices`` (what the Reservation was placed with), so every other pod
  sees those devices taken and another leader rebuilds the same books after a failover.

Built by :class:`berth.scheduler.snapshot.cache.ClusterCache`.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import json
import typing

from berth.api import (
    core,
    custom_objects,
    dra,
    durations,
    errors,
    keys,
    meta,
    quantities,
    resources,
    spec_defaults,
)
from berth.api import reservations as api_reservations
from berth.scheduler.snapshot import ids, podclaims, pods, resourceclaims, selectors, wire

__all__ = [
    "ALLOCATED_ANNOTATION",
    "AVAILABLE",
    "DEFAULT_TTL_SECONDS",
    "EXPIRED",
    "EXPIRED_REASON",
    "FAILED",
    "HELD_CLAIM_KIND",
    "Expiry",
    "HeldClaim",
    "PENDING",
    "SUCCEEDED",
    "TERMINAL_PHASES",
    "ReservationInfo",
    "ReservationOwner",
    "allocated_annotation",
    "allocated_to",
    "deadline",
    "devices_of",
    "expiry",
    "held",
    "held_claim_key",
    "held_claims",
    "held_devices",
    "is_owner",
    "owner_matches",
    "owner_problem",
    "owners_problem",
    "not_started",
    "reservation_info",
    "reserve_pod",
    "reserve_pod_key",
    "starts",
    "template_problem",
]

DEFAULT_TTL_SECONDS = 24 * 3600.0  # the API's default ttl, 24h
ALLOCATED_ANNOTATION = keys.RESERVATION_ALLOCATED_ANNOTATION

PENDING = "Pending"
AVAILABLE = "Available"
SUCCEEDED = "Succeeded"
EXPIRED = "Expired"
FAILED = "Failed"
TERMINAL_PHASES = frozenset({SUCCEEDED, EXPIRED, FAILED})
"""Phases of a reservation that holds nothing any more and never will again."""

_RESERVE_PREFIX = "reservation:"
HELD_CLAIM_KIND = "Reservation"
"""The controller kind a held claim names (its controller is the Reservation)."""
_LABEL_OPERATORS = (selectors.IN, selectors.NOT_IN, selectors.EXISTS, selectors.DOES_NOT_EXIST)
# Keys a template may carry that would make the reserve pod join a gang, a queue or a
# reservation of its own: the reservation decides those.
_BERTH_LABELS = frozenset(
    {
        keys.POD_GROUP_LABEL,
        keys.INTEROP_POD_GROUP_LABEL,
        keys.QUEUE_LABEL,
        keys.RESERVATION_LABEL,
    }
)


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
    template: core.PodTemplateSpec = dataclasses.field(hash=False, repr=False)
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
    capacity_buffer: bool = False  # asks the autoscaler for its room while it cannot fit
    start_at: float | None = None  # ``spec.startAt``: holds nothing before it
    # status.devices: (template entry, device) of what an Available reservation holds
    devices: tuple[tuple[str, resourceclaims.AllocatedDevice], ...] = ()

    @property
    def terminal(self) -> bool:
        """Succeeded, Expired or Failed: it holds nothing and never will again."""
        return self.phase in TERMINAL_PHASES

    @property
    def available(self) -> bool:
        """Placed on a node and holding capacity there (until it ends)."""
        return self.phase == AVAILABLE and self.node_name is not None


def _owner(raw: custom_objects.ReservationOwner, /) -> ReservationOwner:
    obj, controller = wire.part(raw.get("object")), wire.part(raw.get("controller"))
    selector = raw.get("labelSelector")
    if isinstance(selector, collections.abc.Mapping):
        return ReservationOwner(
            match_labels=tuple(
                sorted((str(k), str(v)) for k, v in wire.part(selector.get("matchLabels")).items())
            ),
            match_expressions=selectors.parse_requirements(selector.get("matchExpressions")),
            selects=True,
        )
    return ReservationOwner(
        object_name=str(obj["name"]) if obj.get("name") else None,
        controller_kind=str(controller["kind"]) if controller.get("kind") else None,
        controller_name=str(controller["name"]) if controller.get("name") else None,
    )


def _devices(
    raw: typing.Any, /
) -> tuple[tuple[tuple[str, resourceclaims.AllocatedDevice], ...], str | None]:
    """``status.devices`` as (template entry, device), and the first malformed entry."""
    out: list[tuple[str, resourceclaims.AllocatedDevice]] = []
    for i, item in enumerate(raw if isinstance(raw, list) else ()):
        if not isinstance(item, collections.abc.Mapping):
            return (), f"status.devices[{i}]: not an object"
        consumed: dict[str, int] | None = None
        consumed_raw = item.get("consumedCapacity")
        if isinstance(consumed_raw, collections.abc.Mapping):
            try:
                consumed = {str(k): wire.milli(v) for k, v in consumed_raw.items()}
            except errors.QuantityError as exc:
                return (), f"status.devices[{i}].consumedCapacity: {exc}"
        share = item.get("shareID")
        out.append(
            (
                str(item.get("claim") or ""),
                resourceclaims.AllocatedDevice(
                    request=str(item.get("request") or ""),
                    driver=str(item.get("driver") or ""),
                    pool=str(item.get("pool") or ""),
                    device=str(item.get("device") or ""),
                    share_id=str(share) if share else None,
                    consumed=consumed,
                ),
            )
        )
    return tuple(out), None


def _resources(raw: collections.abc.Mapping[str, str], /) -> resources.ResourceList:
    return resources.ResourceList({str(k): wire.milli(v) for k, v in raw.items()})


def reservation_info(raw: typing.Any, /) -> ReservationInfo:
    """Parse a Reservation (model or wire dict)."""
    obj = typing.cast(custom_objects.Reservation, wire.as_raw(raw))
    meta = wire.part(obj.get("metadata"))
    spec, status = wire.part(obj.get("spec")), wire.part(obj.get("status"))
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    invalid: str | None = None
    expires = wire.parse_time(spec.get("expires"))
    start_at = wire.parse_time(spec.get("startAt"))
    created = wire.parse_time(meta.get("creationTimestamp")) or 0.0
    if spec.get("startAt") is not None and start_at is None:
        invalid = f"spec.startAt: {spec['startAt']!r} is not an RFC 3339 time"
    elif start_at is not None and created and start_at < int(created):
        invalid = (
            f"spec.startAt: {api_reservations.STARTS_IN_THE_PAST} "
            f"({_stamp(start_at)} < {_stamp(created)})"
        )
    elif start_at is not None and expires is not None and start_at >= expires:
        invalid = f"spec.startAt: {api_reservations.STARTS_AFTER_EXPIRY}"
    ttl: float | None = None
    if spec.get("ttl") is not None:
        try:
            ttl = durations.parse_ms(str(spec["ttl"])) / 1000
        except errors.DurationError as exc:
            invalid = f"spec.ttl: {exc}"
    elif expires is None:
        ttl = DEFAULT_TTL_SECONDS
    try:
        allocatable = _resources(wire.part(status.get("allocatable")))
        allocated = _resources(wire.part(status.get("allocated")))
    except errors.QuantityError as exc:
        invalid = invalid or f"invalid status quantities: {exc}"
        allocatable = allocated = resources.ResourceList()
    held_devices, bad_devices = _devices(status.get("devices"))
    invalid = invalid or bad_devices
    owners_raw = spec.get("owners")
    node_name = status.get("nodeName")
    queue = spec.get("queue")
    return ReservationInfo(
        key=ids.ReservationKey(ids.key_of(namespace, name=name)),
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or ""),
        template=wire.part(spec.get("template")),
        owners=tuple(
            _owner(o)
            for o in (owners_raw if isinstance(owners_raw, list) else [])
            if isinstance(o, collections.abc.Mapping)
        ),
        ttl_seconds=ttl,
        expires=expires,
        allocate_once=spec.get("allocateOnce", spec_defaults.RESERVATION_ALLOCATE_ONCE)
        is not False,
        queue=ids.QueueName(str(queue)) if queue else None,
        unschedulable=bool(spec.get("unschedulable", spec_defaults.RESERVATION_UNSCHEDULABLE)),
        capacity_buffer=spec.get("capacityBuffer", spec_defaults.RESERVATION_CAPACITY_BUFFER)
        is True,
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
        creation_timestamp=created,
        invalid=invalid,
        start_at=start_at,
        devices=held_devices,
    )


def _stamp(at: float, /) -> str:
    return datetime.datetime.fromtimestamp(at, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Lifetime -----------------------------------------------------------------------------------


def deadline(info: ReservationInfo, /) -> float | None:
    """When the reservation expires (seconds since the epoch); ``None`` when it never does.

    ``expires`` if set, else the start plus ``ttl`` (``0`` never expires): the start is
    ``startAt`` when given (a booked reservation lives its ttl from then), else the creation.
    """
    if info.expires is not None:
        return info.expires
    if info.ttl_seconds is None or info.ttl_seconds <= 0:
        return None
    return starts(info) + info.ttl_seconds


@dataclasses.dataclass(frozen=True)
class Expiry:
    """How a reservation whose time ran out ends: the phase it takes and what it says (its
    ``Ready`` condition's message and its Event's). The reason is always ``Expired``."""

    phase: str  # EXPIRED (it held its room) or FAILED (it never got a node)
    message: str


EXPIRED_REASON = "Expired"
"""The reason of a reservation's ending by :func:`expiry` (its condition and Event)."""


def expiry(info: ReservationInfo, /, *, now: float) -> Expiry | None:
    """How ``info`` ends at ``now`` because its :func:`deadline` passed; ``None`` when it has
    not, or when it ended already. The one decision: the Reservation plugin ends it in the
    session, the controller writes the same ending when it wakes at the deadline first."""
    ends = deadline(info)
    if info.terminal or ends is None or now < ends:
        return None
    when = meta.format_timestamp(datetime.datetime.fromtimestamp(int(ends), tz=datetime.UTC))
    if info.phase == AVAILABLE:
        return Expiry(phase=EXPIRED, message=f"expired at {when}")
    return Expiry(phase=FAILED, message=f"expired at {when} before it could be placed on a node")


def starts(info: ReservationInfo, /) -> float:
    """When the reservation may begin to hold its room: ``startAt``, else (or when that was
    already past) its creation."""
    if info.start_at is None:
        return info.creation_timestamp
    return max(info.start_at, info.creation_timestamp)


def not_started(info: ReservationInfo, /, *, now: float) -> bool:
    """Whether ``startAt`` is still ahead: the reservation holds nothing yet."""
    return info.start_at is not None and now < info.start_at


# Owners -------------------------------------------------------------------------------------


def owner_matches(owner: ReservationOwner, pod: pods.PodInfo, /) -> bool:
    """Whether ``pod`` matches one owner entry (the namespace is checked by :func:`is_owner`)."""
    if owner.object_name is not None:
        return pod.name == owner.object_name
    if owner.controller_kind is not None or owner.controller_name is not None:
        return any(
            ref.controller
            and ref.kind == owner.controller_kind
            and ref.name == owner.controller_name
            for ref in pod.owner_references
        )
    if owner.selects:
        labels = pod.labels
        return all(labels.get(k) == v for k, v in owner.match_labels) and all(
            req.operator in _LABEL_OPERATORS
            and selectors.requirement_matches(req, value=labels.get(req.key))
            for req in owner.match_expressions
        )
    return False


def is_owner(info: ReservationInfo, pod: pods.PodInfo, /) -> bool:
    """Whether ``pod`` may use the reservation: in its namespace, and matched by an owner.

    A reserve pod is never anyone's owner.
    """
    if pod.namespace != info.namespace or pod.reserve:
        return False
    return any(owner_matches(owner, pod) for owner in info.owners)


def _selector_problem(owner: ReservationOwner) -> str | None:
    """Why a label selector can match no pod at all, or ``None``."""
    must: dict[str, set[str] | None] = {}  # key -> allowed values (None: any value, present)
    absent: set[str] = set()
    excluded: dict[str, set[str]] = {}
    for key, value in owner.match_labels:
        must[key] = {value}
    for i, req in enumerate(owner.match_expressions):
        if req.operator not in _LABEL_OPERATORS:
            return f"operator {req.operator!r} on label {req.key!r} is not one of " + ", ".join(
                _LABEL_OPERATORS
            )
        if not req.valid:
            # As the API server says it (the CRD's rule): the requirement, and why.
            wants = (
                api_reservations.VALUES_REQUIRED
                if req.operator in (selectors.IN, selectors.NOT_IN)
                else api_reservations.VALUES_FORBIDDEN
            )
            return f".matchExpressions[{i}]: {wants} (label {req.key!r})"
        if req.operator == selectors.IN:
            allowed = must.get(req.key)
            must[req.key] = set(req.values) if allowed is None else allowed & set(req.values)
        elif req.operator == selectors.EXISTS:
            must.setdefault(req.key, None)
        elif req.operator == selectors.DOES_NOT_EXIST:
            absent.add(req.key)
        else:
            excluded.setdefault(req.key, set()).update(req.values)
    for key in sorted(must):
        allowed = must[key]
        if key in absent:
            return f"label {key!r} is required both to exist and not to exist"
        if allowed is not None and not allowed - excluded.get(key, set()):
            return f"no value of label {key!r} satisfies all its requirements"
    return None


def owner_problem(owner: ReservationOwner, /) -> str | None:
    """Why an owner entry can never match any pod, or ``None`` when some pod could match: the
    part of the entry at fault (``.controller``, empty for the entry) and why, to follow the
    entry's field path."""
    if owner.object_name is not None:
        return None
    if owner.controller_kind is not None or owner.controller_name is not None:
        if owner.controller_kind is None or owner.controller_name is None:
            return ".controller: controller needs both kind and name"
        return None
    if owner.selects:
        problem = _selector_problem(owner)
        if problem is None:
            return None
        if problem.startswith("."):
            return f".labelSelector{problem}"
        return f".labelSelector: can never match: {problem}"
    return f": {api_reservations.EXACTLY_ONE_OWNER} (this one sets none)"


def owners_problem(info: ReservationInfo, /) -> str | None:
    """Why no pod can ever use the reservation (every owner entry is broken), or ``None``."""
    if not info.owners:
        return f"spec.owners: {api_reservations.NO_OWNER}, so no pod could ever use the reservation"
    problems = [owner_problem(owner) for owner in info.owners]
    if any(problem is None for problem in problems):
        return None
    return "no owner can ever match a pod: " + "; ".join(
        f"spec.owners[{i}]{problem}" for i, problem in enumerate(problems)
    )


# Charging -----------------------------------------------------------------------------------


def allocated_annotation(info: ReservationInfo, /) -> str:
    """The annotation value marking an owner placed into ``info``: ``{"name":..,"uid":..}``."""
    return json.dumps({"name": info.name, "uid": info.uid}, separators=(",", ":"), sort_keys=True)


def allocated_to(pod: pods.PodInfo, /) -> tuple[ids.ReservationKey, str | None] | None:
    """The reservation (key, uid if recorded) Berth placed ``pod`` into, from its annotation.

    A value that is not JSON is taken as the reservation's name (hand-written annotations).
    """
    text = pod.annotations.get(ALLOCATED_ANNOTATION)
    if not text:
        return None
    name: typing.Any = text
    uid: typing.Any = None
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict):
        name, uid = decoded.get("name"), decoded.get("uid")
    if not isinstance(name, str) or not name:
        return None
    key = ids.ReservationKey(ids.key_of(pod.namespace, name=name))
    return key, uid if isinstance(uid, str) and uid else None


# The reserve pod ----------------------------------------------------------------------------


def reserve_pod_key(key: str, /) -> ids.PodKey:
    """The key of the reserve pod standing for the reservation ``key`` (``ns/name``)."""
    namespace, _, name = key.partition("/")
    return ids.PodKey(ids.key_of(namespace, name=_RESERVE_PREFIX + name))


def _template_lists(
    spec: core.PodSpec, /
) -> collections.abc.Iterator[tuple[str, collections.abc.Mapping[str, str]]]:
    """Every resource list of a template's pod spec, with its field path."""
    for group, listed in (
        ("containers", spec.get("containers")),
        ("initContainers", spec.get("initContainers")),
    ):
        for i, container in enumerate(listed if isinstance(listed, list) else ()):
            needs: core.ResourceRequirements = (
                wire.part(container.get("resources")) if isinstance(container, dict) else {}
            )
            at = f"spec.template.spec.{group}[{i}].resources"
            yield f"{at}.requests", wire.part(needs.get("requests"))
            yield f"{at}.limits", wire.part(needs.get("limits"))
    pod_level = wire.part(spec.get("resources"))
    yield "spec.template.spec.resources.requests", wire.part(pod_level.get("requests"))
    yield "spec.template.spec.resources.limits", wire.part(pod_level.get("limits"))
    yield "spec.template.spec.overhead", wire.part(spec.get("overhead"))


def template_problem(info: ReservationInfo, /) -> str | None:
    """Why ``spec.template`` cannot be held as written, or ``None`` (what the CRD's rules
    refuse is said with the same field and message as the API server's refusal)."""
    spec = wire.part(info.template.get("spec"))
    entries, problems = podclaims.parse(spec, {})
    if problems:
        return problems[0].replace("spec.", "spec.template.spec.", 1)
    if entries and not info.allocate_once:
        # Held devices pass to the first owner placed into the reservation; with more owners
        # to come, which of them would own which device is not something a claim can say.
        return (
            "spec.allocateOnce: a reservation holding DRA devices (spec.template.spec."
            "resourceClaims) hands them to its first owner, so allocateOnce must be true"
        )
    for field, listed in _template_lists(spec):
        found = wire.range_problem(listed, field=field)
        if found is not None:
            return found
    try:
        requests = pods.pod_requests(spec)
    except errors.QuantityError as exc:
        return f"spec.template has an invalid resource request: {exc}"
    if not any(v > 0 for name, v in requests.items() if name != resources.PODS):
        return f"spec.template: {api_reservations.REQUESTS_NOTHING}"
    return None


# Devices ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class HeldClaim:
    """One ``spec.template.spec.resourceClaims`` entry as the reserve pod holds it: a claim
    that lives only in Berth's cache (see the module docstring)."""

    key: str  # namespace/reservation:<reservation>:<entry>
    entry: str  # the entry's name
    field: str  # spec.template.spec.resourceClaims[i], for reasons
    reservation: str  # the Reservation's name
    reservation_uid: str
    template: str | None  # namespace/name of the ResourceClaimTemplate it copies
    claim: str | None  # namespace/name of the ResourceClaim whose spec it copies
    devices: tuple[resourceclaims.AllocatedDevice, ...] | None  # None: not allocated


def held_claim_key(info: ReservationInfo, entry: str, /) -> str:
    """The key of the held claim for the template entry ``entry`` of ``info``."""
    return ids.key_of(info.namespace, name=f"{_RESERVE_PREFIX}{info.name}:{entry}")


def held_claims(info: ReservationInfo, /) -> tuple[HeldClaim, ...]:
    """The claims the reserve pod of ``info`` holds, allocated once it is Available (what
    ``status.devices`` lists for each entry)."""
    if info.terminal:
        return ()
    entries, _ = podclaims.parse(wire.part(info.template.get("spec")), {})
    out = []
    for entry in entries:
        devices: tuple[resourceclaims.AllocatedDevice, ...] | None = None
        if info.available:
            devices = tuple(device for name, device in info.devices if name == entry.name)
        out.append(
            HeldClaim(
                key=held_claim_key(info, entry.name),
                entry=entry.name,
                field=entry.field.replace("spec.", "spec.template.spec.", 1),
                reservation=info.name,
                reservation_uid=info.uid,
                template=ids.key_of(info.namespace, name=entry.template)
                if entry.template
                else None,
                claim=entry.key(info.namespace) if not entry.template else None,
                devices=devices,
            )
        )
    return tuple(out)


def devices_of(
    listed: collections.abc.Iterable[api_reservations.ReservedDevice], /
) -> tuple[tuple[str, resourceclaims.AllocatedDevice], ...]:
    """``status.devices`` entries as the snapshot holds them: (template entry, device)."""
    found, _ = _devices([device.to_api() for device in listed])
    return found


def held_devices(
    allocations: collections.abc.Iterable[tuple[str, resourceclaims.AllocationInfo]],
    info: ReservationInfo,
    /,
) -> tuple[api_reservations.ReservedDevice, ...]:
    """``status.devices`` for the held claims' ``allocations`` (by claim key)."""
    entries = {held.key: held.entry for held in held_claims(info)}
    out = []
    for key, allocation in allocations:
        entry = entries.get(key)
        if entry is None:
            continue
        for device in allocation.devices:
            out.append(
                api_reservations.ReservedDevice(
                    claim=entry,
                    request=device.request,
                    driver=device.driver,
                    pool=device.pool,
                    device=device.device,
                    share_id=device.share_id,
                    consumed_capacity={
                        name: quantities.Quantity(amount, quantities.Format.BINARY_SI)
                        for name, amount in device.consumed.items()
                    }
                    if device.consumed
                    else None,
                )
            )
    return tuple(out)


def held(info: ReservationInfo, /) -> resources.ResourceList:
    """What an Available reservation holds on its node: ``status.allocatable`` (else the
    template's requests) and one pod slot, which its first owner takes over."""
    allocatable = info.allocatable
    if not allocatable:
        try:
            allocatable = pods.pod_requests(wire.part(info.template.get("spec")))
        except errors.QuantityError:
            allocatable = resources.ResourceList()
    return resources.ResourceList({**allocatable, resources.PODS: 1000})


def _pin(affinity: core.Affinity | None, node: str) -> core.Affinity:
    """``affinity`` with every required node term also demanding ``metadata.name = node``."""
    out: core.Affinity = {**affinity} if isinstance(affinity, collections.abc.Mapping) else {}
    node_affinity: core.NodeAffinity = {**wire.part(out.get("nodeAffinity"))}
    required: dra.NodeSelector = {
        **wire.part(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    }
    terms_raw = required.get("nodeSelectorTerms")
    terms = [t for t in terms_raw if isinstance(t, dict)] if isinstance(terms_raw, list) else []
    field: core.NodeSelectorRequirement = {
        "key": selectors.METADATA_NAME,
        "operator": selectors.IN,
        "values": [node],
    }
    required["nodeSelectorTerms"] = [
        {**term, "matchFields": [*(term.get("matchFields") or []), field]} for term in terms or [{}]
    ]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    out["nodeAffinity"] = node_affinity
    return out


def reserve_pod(
    info: ReservationInfo,
    /,
    *,
    scheduler_names: collections.abc.Collection[str],
    priority_classes: collections.abc.Mapping[str, int] | None = None,
    default_priority: int = 0,
) -> pods.PodInfo:
    """The in-memory pod standing for ``info`` (see the module docstring).

    Pending: the template's requests, waiting for a node. Available: placed on
    ``status.nodeName`` holding :func:`held` (the cache takes away what owners use). The
    template's ``schedulerName`` is kept when it is one of ``scheduler_names``, else the
    first of them is used; a template ``nodeName`` becomes a required node affinity (the pod
    must still be placed, not assumed there). A template that cannot be held makes the pod
    ``invalid`` with the reason.
    """
    template = info.template
    tmeta, tspec = wire.part(template.get("metadata")), wire.part(template.get("spec"))
    labels = {
        str(k): str(v) for k, v in wire.part(tmeta.get("labels")).items() if k not in _BERTH_LABELS
    }
    labels[keys.QUEUE_LABEL] = info.queue or keys.DEFAULT_QUEUE
    annotations = {
        str(k): str(v)
        for k, v in wire.part(tmeta.get("annotations")).items()
        if k != keys.INTEROP_POD_GROUP_ANNOTATION
    }
    annotations[pods.RESERVE_POD_ANNOTATION] = "true"
    spec: core.PodSpec = {**tspec}
    spec.pop("nodeName", None)
    spec.pop("schedulingGates", None)
    if spec.get("resourceClaims"):
        # The reserve pod uses its held claims by name (no resourceclaim controller makes any).
        spec["resourceClaims"] = [
            {"name": held_claim.entry, "resourceClaimName": held_claim.key.partition("/")[2]}
            for held_claim in held_claims(info)
        ]
    names = list(scheduler_names)
    if spec.get("schedulerName") not in names:
        spec["schedulerName"] = names[0] if names else keys.DEFAULT_SCHEDULER_NAME
    pinned = tspec.get("nodeName")
    if pinned:
        spec["affinity"] = _pin(tspec.get("affinity"), str(pinned))
    placed = info.available
    if placed and info.node_name is not None:  # Available: always on a node
        spec["nodeName"] = info.node_name
    created = datetime.datetime.fromtimestamp(info.creation_timestamp, tz=datetime.UTC)
    manifest = {
        "metadata": {
            "namespace": info.namespace,
            "name": _RESERVE_PREFIX + info.name,
            "uid": info.uid,
            "labels": labels,
            "annotations": annotations,
            "creationTimestamp": created,
        },
        "spec": spec,
        "status": {"phase": "Running" if placed else "Pending"},
    }
    pod = pods.pod_info(
        manifest, priority_classes=priority_classes, default_priority=default_priority
    )
    problem = info.invalid or template_problem(info)
    return dataclasses.replace(
        pod,
        reserve=True,
        reservation=info.key,
        requests=held(info) if placed else pod.requests,
        invalid=problem or pod.invalid,
    )
