"""``ResourceClaimInfo`` and ``ResourceClaimTemplateInfo``: claims for devices, parsed once.

A ResourceClaim (``resource.k8s.io/v1``) asks for devices in ``spec.devices``:

- ``requests``: each either ``exactly`` one kind (a DeviceClass, CEL selectors, ``count``
  devices or ``allocationMode: All`` of the matching ones, ``adminAccess``, tolerations of
  device taints, and for devices shared by capacity the ``capacity.requests`` it consumes), or
  ``firstAvailable``: a prioritized list of such sub-requests, the first that can be met wins;
- ``constraints``: ``matchAttribute`` (every device of the named requests has the same value
  of the attribute) and ``distinctAttribute`` (all different);
- ``config``: driver configuration copied into the allocation.

``status.allocation`` is what a scheduler allocated (devices, and a node selector saying where
they can be used); ``status.reservedFor`` lists the pods using it. A template
(ResourceClaimTemplate) holds the spec the resourceclaim controller gives each pod's own claim.

Malformed input never raises: the claim carries ``problem`` naming the field (with a
selector that does not compile), and the pods using it wait with that reason. Quantities are
milli-units.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

from berth.api import dra, errors, objects
from berth.scheduler.snapshot import deviceclasses, ids, selectors, taints, wire

__all__ = [
    "AllocatedDevice",
    "AllocationInfo",
    "ClaimSpec",
    "ConstraintInfo",
    "ConsumerRef",
    "DeviceRequestInfo",
    "RequestSpec",
    "ResourceClaimInfo",
    "ResourceClaimTemplateInfo",
    "allocation_info",
    "claim_spec",
    "resource_claim_info",
    "resource_claim_template_info",
]


@dataclasses.dataclass(frozen=True)
class RequestSpec:
    """An ``exactly`` request, or one sub-request of ``firstAvailable``."""

    name: str  # "gpu", or "gpu/big" for a sub-request
    class_name: str
    selectors: tuple[deviceclasses.SelectorInfo, ...] = ()
    all: bool = False  # allocationMode: All
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[taints.Toleration, ...] = ()
    # capacity.requests, milli. Left out of the hash (a dict has none), not of equality: specs
    # key the allocator's per-node answers.
    capacity: collections.abc.Mapping[str, int] | None = dataclasses.field(default=None, hash=False)


@dataclasses.dataclass(frozen=True)
class DeviceRequestInfo:
    """``spec.devices.requests[i]``: ``exactly`` one spec, or alternatives in order."""

    name: str
    alternatives: tuple[RequestSpec, ...]  # exactly: one; firstAvailable: in priority order
    prioritized: bool = False  # written as firstAvailable


@dataclasses.dataclass(frozen=True)
class ConstraintInfo:
    """``spec.devices.constraints[i]``: exactly one attribute is set."""

    requests: frozenset[str]  # empty: every request
    match_attribute: str | None = None
    distinct_attribute: str | None = None

    def applies(self, request: str, /) -> bool:
        """Whether the constraint covers ``request`` (``"gpu"`` or ``"gpu/big"``)."""
        if not self.requests:
            return True
        return request in self.requests or request.partition("/")[0] in self.requests


@dataclasses.dataclass(frozen=True)
class ClaimSpec:
    """What a claim (or a template's claims) asks for."""

    requests: tuple[DeviceRequestInfo, ...] = ()
    constraints: tuple[ConstraintInfo, ...] = ()
    config: tuple[dra.DeviceClaimConfiguration, ...] = dataclasses.field(
        default=(), compare=False, repr=False
    )
    problem: str | None = None

    def request(self, name: str, /) -> RequestSpec | None:
        """The spec an allocation result's ``request`` names (``gpu`` or ``gpu/big``)."""
        base, slash, _ = name.partition("/")
        for request in self.requests:
            if request.name != base:
                continue
            for spec in request.alternatives:
                if spec.name == name or (not slash and not request.prioritized):
                    return spec
            return None
        return None


@dataclasses.dataclass(frozen=True)
class AllocatedDevice:
    """One device of ``status.allocation.devices.results``."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    share_id: str | None = None
    consumed: collections.abc.Mapping[str, int] | None = None  # consumedCapacity, milli

    @property
    def id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclasses.dataclass(frozen=True)
class AllocationInfo:
    """``status.allocation``."""

    devices: tuple[AllocatedDevice, ...]
    node_selector: tuple[selectors.SelectorTerm, ...] | None  # None: every node


@dataclasses.dataclass(frozen=True)
class ConsumerRef:
    """One ``status.reservedFor`` entry."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclasses.dataclass(frozen=True)
class ResourceClaimInfo:
    """One ResourceClaim."""

    key: str  # namespace/name
    namespace: str
    name: str
    uid: str
    spec: ClaimSpec
    allocation: AllocationInfo | None = None
    reserved_for: tuple[ConsumerRef, ...] = ()
    controller: tuple[str, str, str] | None = None  # (kind, name, uid) of its controlling owner
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    resource_version: str = dataclasses.field(default="", compare=False)
    problem: str | None = None  # a malformed field (spec or status), named

    @property
    def allocated(self) -> bool:
        return self.allocation is not None

    def reserved_for_pod(self, uid: str, /) -> bool:
        return any(ref.uid == uid for ref in self.reserved_for)


@dataclasses.dataclass(frozen=True)
class ResourceClaimTemplateInfo:
    """One ResourceClaimTemplate: the spec of the claims made from it."""

    key: str
    namespace: str
    name: str
    spec: ClaimSpec


# Parsing ------------------------------------------------------------------------------------


class _Problems:
    def __init__(self) -> None:
        self.first: str | None = None

    def add(self, text: str) -> None:
        self.first = self.first or text


def _capacity(raw: typing.Any, *, field: str, problems: _Problems) -> dict[str, int] | None:
    requests = wire.part(wire.part(raw).get("requests"))
    if not requests:
        return None
    out: dict[str, int] = {}
    for name, text in sorted(requests.items()):
        try:
            value = wire.milli(text)
        except errors.QuantityError as exc:
            problems.add(f"{field}.requests[{name}]: {exc}")
            continue
        if value < 0:
            problems.add(f"{field}.requests[{name}]: negative quantity {text!r}")
            continue
        out[str(name)] = value
    return out


def _spec(raw: typing.Any, *, name: str, field: str, problems: _Problems) -> RequestSpec:
    class_name = raw.get("deviceClassName") if isinstance(raw, dict) else None
    if not isinstance(class_name, str) or not class_name:
        problems.add(f"{field}.deviceClassName: missing")
        class_name = ""
    found, problem = deviceclasses.parse_selectors(raw.get("selectors"), field=f"{field}.selectors")
    if problem is not None:
        problems.add(problem)
    mode = raw.get("allocationMode") or dra.EXACT_COUNT
    if mode not in (dra.EXACT_COUNT, dra.ALL):
        problems.add(f"{field}.allocationMode: {mode!r} is not ExactCount or All")
    count = raw.get("count", 1)
    if mode == dra.EXACT_COUNT and (
        not isinstance(count, int) or isinstance(count, bool) or count < 1
    ):
        problems.add(f"{field}.count: {count!r} is not a positive integer")
        count = 1
    return RequestSpec(
        name=name,
        class_name=class_name,
        selectors=found,
        all=mode == dra.ALL,
        count=count if mode == dra.EXACT_COUNT else 0,
        admin_access=raw.get("adminAccess") is True,
        tolerations=taints.parse_tolerations(raw.get("tolerations")),
        capacity=_capacity(raw.get("capacity"), field=f"{field}.capacity", problems=problems),
    )


def _request(raw: typing.Any, *, index: int, problems: _Problems) -> DeviceRequestInfo | None:
    field = f"spec.devices.requests[{index}]"
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        problems.add(f"{field}.name: a request needs a name")
        return None
    name = str(raw["name"])
    exactly, first = raw.get("exactly"), raw.get("firstAvailable")
    if isinstance(exactly, dict) and first is None:
        spec = _spec(exactly, name=name, field=f"{field}.exactly", problems=problems)
        return DeviceRequestInfo(name=name, alternatives=(spec,))
    if isinstance(first, list) and first and exactly is None:
        alternatives: list[RequestSpec] = []
        for j, sub in enumerate(first):
            where = f"{field}.firstAvailable[{j}]"
            if not isinstance(sub, dict) or not sub.get("name"):
                problems.add(f"{where}.name: a sub-request needs a name")
                continue
            if sub.get("adminAccess") is not None:
                problems.add(f"{where}.adminAccess: not allowed in a sub-request")
            alternatives.append(
                _spec(sub, name=f"{name}/{sub['name']}", field=where, problems=problems)
            )
        return DeviceRequestInfo(name=name, alternatives=tuple(alternatives), prioritized=True)
    problems.add(f"{field}: exactly one of exactly and firstAvailable must be set")
    return None


def _constraint(raw: typing.Any, *, index: int, problems: _Problems) -> ConstraintInfo | None:
    field = f"spec.devices.constraints[{index}]"
    if not isinstance(raw, dict):
        problems.add(f"{field}: not an object")
        return None
    requests = raw.get("requests") or []
    names = frozenset(str(r) for r in requests) if isinstance(requests, list) else frozenset()
    match, distinct = raw.get("matchAttribute"), raw.get("distinctAttribute")
    if bool(match) == bool(distinct):
        problems.add(f"{field}: exactly one of matchAttribute and distinctAttribute must be set")
        return None
    for attribute, key in ((match, "matchAttribute"), (distinct, "distinctAttribute")):
        if attribute and (not isinstance(attribute, str) or "/" not in attribute):
            problems.add(f"{field}.{key}: {attribute!r} is not a fully qualified attribute name")
            return None
    return ConstraintInfo(
        requests=names,
        match_attribute=str(match) if match else None,
        distinct_attribute=str(distinct) if distinct else None,
    )


def claim_spec(raw: dra.ResourceClaimSpec, /) -> ClaimSpec:
    """Parse a claim's ``spec`` (or a template's ``spec.spec``)."""
    devices = wire.part(raw.get("devices"))
    problems = _Problems()
    raw_requests = devices.get("requests")
    requests = tuple(
        found
        for i, item in enumerate(raw_requests if isinstance(raw_requests, list) else ())
        if (found := _request(item, index=i, problems=problems)) is not None
    )
    names = [r.name for r in requests]
    if len(set(names)) != len(names):
        problems.add("spec.devices.requests: request names must be unique")
    known = set(names) | {spec.name for r in requests for spec in r.alternatives}
    raw_constraints = devices.get("constraints")
    constraints = tuple(
        constraint
        for i, item in enumerate(raw_constraints if isinstance(raw_constraints, list) else ())
        if (constraint := _constraint(item, index=i, problems=problems)) is not None
    )
    for i, constraint in enumerate(constraints):
        for name in sorted(constraint.requests - known):
            problems.add(f"spec.devices.constraints[{i}].requests: no request named {name}")
    config = devices.get("config")
    return ClaimSpec(
        requests=requests,
        constraints=constraints,
        config=tuple(c for c in config if isinstance(c, dict)) if isinstance(config, list) else (),
        problem=problems.first,
    )


def _allocation(raw: dra.AllocationResult, *, problems: _Problems) -> AllocationInfo | None:
    if not raw:
        return None
    results = wire.part(raw.get("devices")).get("results")
    devices: list[AllocatedDevice] = []
    for i, item in enumerate(results if isinstance(results, list) else ()):
        where = f"status.allocation.devices.results[{i}]"
        if not isinstance(item, dict):
            problems.add(f"{where}: not an object")
            continue
        consumed_raw = item.get("consumedCapacity")
        consumed: dict[str, int] | None = None
        if isinstance(consumed_raw, dict):
            consumed = {}
            for name, text in consumed_raw.items():
                try:
                    consumed[str(name)] = wire.milli(text)
                except errors.QuantityError as exc:
                    problems.add(f"{where}.consumedCapacity[{name}]: {exc}")
        share = item.get("shareID")
        devices.append(
            AllocatedDevice(
                request=str(item.get("request") or ""),
                driver=str(item.get("driver") or ""),
                pool=str(item.get("pool") or ""),
                device=str(item.get("device") or ""),
                admin_access=item.get("adminAccess") is True,
                share_id=str(share) if share else None,
                consumed=consumed,
            )
        )
    selector = wire.part(raw.get("nodeSelector"))
    terms: tuple[selectors.SelectorTerm, ...] | None = None
    if selector:
        terms, _ = selectors.parse_node_affinity(
            {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": dict(selector)}}
        )
    return AllocationInfo(devices=tuple(devices), node_selector=terms)


def allocation_info(raw: dra.AllocationResult | None, /) -> AllocationInfo | None:
    """Parse a ``status.allocation`` (``None`` when empty); malformed parts are dropped."""
    return _allocation(wire.part(raw), problems=_Problems())


def _controller(meta: objects.ObjectMeta) -> tuple[str, str, str] | None:
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return (str(ref.get("kind") or ""), str(ref.get("name") or ""), str(ref.get("uid")))
    return None


def resource_claim_info(raw: typing.Any, /) -> ResourceClaimInfo:
    """Parse a ResourceClaim (``resource.k8s.io/v1``)."""
    obj = typing.cast(dra.ResourceClaim, wire.as_raw(raw))
    meta, status = wire.part(obj.get("metadata")), wire.part(obj.get("status"))
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    spec = claim_spec(wire.part(obj.get("spec")))
    problems = _Problems()
    allocation = _allocation(wire.part(status.get("allocation")), problems=problems)
    reserved = status.get("reservedFor")
    finalizers = meta.get("finalizers")
    return ResourceClaimInfo(
        key=ids.key_of(namespace, name=name),
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or ""),
        spec=spec,
        allocation=allocation,
        reserved_for=tuple(
            ConsumerRef(
                resource=str(ref.get("resource") or ""),
                name=str(ref.get("name") or ""),
                uid=str(ref.get("uid") or ""),
                api_group=str(ref.get("apiGroup") or ""),
            )
            for ref in (reserved if isinstance(reserved, list) else ())
            if isinstance(ref, dict)
        ),
        controller=_controller(meta),
        deleting=bool(meta.get("deletionTimestamp")),
        finalizers=tuple(str(f) for f in finalizers) if isinstance(finalizers, list) else (),
        resource_version=str(meta.get("resourceVersion") or ""),
        problem=spec.problem or problems.first,
    )


def resource_claim_template_info(raw: typing.Any, /) -> ResourceClaimTemplateInfo:
    """Parse a ResourceClaimTemplate (``resource.k8s.io/v1``)."""
    obj = typing.cast(dra.ResourceClaimTemplate, wire.as_raw(raw))
    meta = wire.part(obj.get("metadata"))
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    return ResourceClaimTemplateInfo(
        key=ids.key_of(namespace, name=name),
        namespace=namespace,
        name=name,
        spec=claim_spec(wire.part(wire.part(obj.get("spec")).get("spec"))),
    )
