"""The structured-parameters allocator: devices for a pod's claims on one node, or why not.

What ``k8s.io/dynamic-resource-allocation/structured`` does for kube-scheduler, written for
Berth (pure, synchronous, no state between calls):

- claims are allocated one after the other, each request in order, each device of a request
  in turn: a first-fit, exhaustive search with backtracking, over the devices of the pools the
  node reaches in (driver, pool, slice, device) name order, trying sets of devices (not their
  orderings) so that a request of ``count`` devices looks at each combination once;
- a device may be taken when it is not allocated whole to another claim (admin access may
  take one that is, but not twice in one claim), the class's and the request's selectors
  select it, it has no ``NoSchedule``/``NoExecute`` taint the request does not tolerate, it
  has the capacity the request consumes (:mod:`.capacity`; a device shared by capacity keeps
  serving claims up to its capacity), its pool's shared counters have room for what it draws
  (partitionable devices; a shared device already in use has drawn them), and the claim's
  constraints (``matchAttribute``, ``distinctAttribute``) still hold with it;
- ``allocationMode: All`` takes every selectable device of the node's pools with the capacity
  (all must be free; none at all fails); ``firstAvailable`` tries its sub-requests in order;
  at most 32 devices per claim;
- the allocation's node selector: the node itself when a device is local to it, else what the
  devices' slices select, else none (usable everywhere).

The answer is data (:data:`Outcome`): the allocations, or why this node cannot serve the claims
(:class:`Unallocatable`), or a problem that fails the pod wherever it goes (:class:`Failure`:
a selector failing at run time, ``All`` over a pool being updated), naming the object and field.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing
import uuid

from berth.api import device_cel, dra, quantities
from berth.scheduler.plugins.dynamic_resources import capacity, inuse
from berth.scheduler.snapshot import (
    deviceclasses,
    devices,
    resourceclaims,
    resourceslices,
    selectors,
    taints,
)

__all__ = [
    "Allocated",
    "ClaimAllocation",
    "Failure",
    "Outcome",
    "Unallocatable",
    "allocate",
]

DeviceId = resourceslices.DeviceId
_SHARE_NAMESPACE = uuid.UUID("6f1c2a0e-3d55-4c8e-9d61-7e0b7f5a2b10")
_BLOCKING_EFFECTS = frozenset({resourceslices.NO_SCHEDULE, resourceslices.NO_EXECUTE})


@dataclasses.dataclass(frozen=True)
class ClaimAllocation:
    """The devices chosen for one claim on a node, and the allocation to write."""

    claim: resourceclaims.ResourceClaimInfo
    choices: tuple[inuse.Choice, ...]
    result: dra.AllocationResult  # what goes into status.allocation
    info: resourceclaims.AllocationInfo  # the same, as the snapshot reads it


@dataclasses.dataclass(frozen=True)
class Allocated:
    """Every claim asked for is allocated, in the order asked."""

    allocations: tuple[ClaimAllocation, ...]


@dataclasses.dataclass(frozen=True)
class Unallocatable:
    """This node cannot serve the claims. ``contended``: a device the claims could use is
    taken now (freeing it might help); ``broken``: pools the node reaches that are broken or
    being updated, with why."""

    contended: bool = False
    broken: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Failure:
    """The claims cannot be allocated anywhere as written (pod-level): ``reason`` names the
    object and field, ``claim`` the claim concerned."""

    reason: str
    claim: str


Outcome = Allocated | Unallocatable | Failure


def _attribute_key(value: device_cel.Attribute) -> tuple[str, str | int | bool]:
    """An attribute compared by type and value (``True`` is not ``1``; versions as written)."""
    if isinstance(value, device_cel.Version):
        return ("version", str(value))
    return (type(value).__name__, value)


class _Constraint:
    """One claim constraint being checked as devices are added (and removed on backtrack)."""

    def __init__(self, info: resourceclaims.ConstraintInfo) -> None:
        self.info = info
        self.attribute = info.match_attribute or info.distinct_attribute or ""
        self.values: list[tuple[str, str | int | bool]] = []

    def add(self, request: str, device: resourceslices.DeviceInfo) -> bool:
        if not self.info.applies(request):
            return True
        value = device.attribute(self.attribute)
        if value is None:
            return False
        key = _attribute_key(value)
        if self.values:
            if self.info.match_attribute is not None and key != self.values[0]:
                return False
            if self.info.distinct_attribute is not None and key in self.values:
                return False
        self.values.append(key)
        return True

    def remove(self, request: str, device: resourceslices.DeviceInfo) -> None:
        if not self.info.applies(request):
            return
        value = device.attribute(self.attribute)
        if value is not None:
            self.values.remove(_attribute_key(value))


class _Abort(Exception):
    """Stops the search: the claims fail wherever they go (carries the :class:`Failure`)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


class _Search:
    """One allocation attempt on one node (see the module docstring)."""

    def __init__(
        self,
        claims: collections.abc.Sequence[resourceclaims.ResourceClaimInfo],
        *,
        pools: collections.abc.Sequence[devices.Pool],
        catalog: devices.Catalog,
        in_use: inuse.InUse,
    ) -> None:
        self.claims = claims
        self.pools = pools
        self.catalog = catalog
        self.in_use = in_use
        self.order = [(pool, device) for pool in pools for device in pool.devices]
        self.marked: dict[DeviceId, set[int]] = {}  # taken whole, by claim index
        self.shares: dict[DeviceId, dict[str, int]] = {}  # consumed by this attempt's shares
        self.share_count: dict[DeviceId, int] = {}
        self.counters: dict[tuple[resourceslices.PoolId, str], dict[str, int]] = {}
        self.results: list[list[inuse.Choice]] = [[] for _ in claims]
        self.constraints = [[_Constraint(c) for c in claim.spec.constraints] for claim in claims]
        self.contended = False

    # Selection --------------------------------------------------------------------------------
    def _selected(
        self,
        claim: resourceclaims.ResourceClaimInfo,
        spec: resourceclaims.RequestSpec,
        device: resourceslices.DeviceInfo,
    ) -> bool:
        if device.binding_conditions:
            return False  # binding conditions are not supported (the device waits on a driver)
        cls = self.catalog.classes.get(spec.class_name)
        if cls is None:
            raise _Abort(
                Failure(
                    f"resourceclaim {claim.key}: request {spec.name}: deviceclass "
                    f"{spec.class_name} does not exist",
                    claim.key,
                )
            )
        selects = self.catalog.selects
        for selectors_, of_class in ((cls.selectors, True), (spec.selectors, False)):
            for selector in selectors_:
                outcome = selects(selector, device)
                if outcome is True:
                    continue
                if outcome is False:
                    return False
                owner = f"deviceclass {cls.name}" if of_class else f"resourceclaim {claim.key}"
                raise _Abort(
                    Failure(
                        f"{owner}: {selector.field}: {outcome} (on device "
                        f"{device.driver}/{device.pool}/{device.name})",
                        claim.key,
                    )
                )
        return True

    def _consumes(
        self, spec: resourceclaims.RequestSpec, device: resourceslices.DeviceInfo
    ) -> dict[str, int] | None:
        """What ``spec`` consumes of ``device``, ``None`` when the device cannot serve it now."""
        consumed = capacity.consumption(spec.capacity, device)
        if consumed is None:
            return None
        already = dict(self.in_use.consumed(device.id) or {})
        for name, amount in self.shares.get(device.id, {}).items():
            already[name] = already.get(name, 0) + amount
        if not capacity.fits(consumed, device, already=already):
            self.contended = self.contended or bool(already)
            return None
        return consumed

    def _taken(self, index: int, spec: resourceclaims.RequestSpec, device_id: DeviceId) -> bool:
        marks = self.marked.get(device_id)
        if spec.admin_access:
            return marks is not None and index in marks
        return self.in_use.exclusive(device_id) or bool(marks)

    def _tolerated(self, spec: resourceclaims.RequestSpec, taint: taints.Taint) -> bool:
        return taint.effect not in _BLOCKING_EFFECTS or any(
            taints.tolerates(t, taint=taint) for t in spec.tolerations
        )

    def _counters_fit(self, pool: devices.Pool, device: resourceslices.DeviceInfo) -> bool:
        draws = {d.counter_set: d.counters for d in device.consumes}
        for set_name, declared in pool.counter_sets.items():
            key = (pool.id, set_name)
            used = self.in_use.counters(key)
            mine = self.counters.get(key, {})
            extra = draws.get(set_name, {})
            for counter, value in declared.items():
                if used.get(counter, 0) + mine.get(counter, 0) + extra.get(counter, 0) > value:
                    return False
        return True

    # Taking a device ---------------------------------------------------------------------------
    def _take(
        self,
        index: int,
        spec: resourceclaims.RequestSpec,
        pool: devices.Pool,
        device: resourceslices.DeviceInfo,
    ) -> collections.abc.Callable[[], None] | None:
        """Take ``device`` for claim ``index``'s ``spec``; the undo, or ``None`` when it
        cannot be taken (in use, tainted, no capacity or counters, a constraint)."""
        multi = device.allow_multiple
        if self._taken(index, spec, device.id):
            self.contended = True
            return None
        if not all(self._tolerated(spec, t) for t in device.taints):
            return None
        consumed = self._consumes(spec, device)
        if consumed is None:
            return None
        draws_counters = bool(device.consumes) and not (
            multi and (self.in_use.shared(device.id) or device.id in self.share_count)
        )
        if draws_counters and not self._counters_fit(pool, device):
            self.contended = True
            return None
        added: list[_Constraint] = []
        for constraint in self.constraints[index]:
            if not constraint.add(spec.name, device):
                for done in reversed(added):
                    done.remove(spec.name, device)
                return None
            added.append(constraint)
        if draws_counters:
            for draw in device.consumes:
                into = self.counters.setdefault((pool.id, draw.counter_set), {})
                for counter, value in draw.counters.items():
                    into[counter] = into.get(counter, 0) + value
        if not multi:
            self.marked.setdefault(device.id, set()).add(index)
        share = 0
        if multi:
            into = self.shares.setdefault(device.id, {})
            for name, value in consumed.items():
                into[name] = into.get(name, 0) + value
            share = self.share_count.get(device.id, 0)
            self.share_count[device.id] = share + 1
        self.results[index].append(
            inuse.Choice(
                request=spec.name,
                device=device,
                admin_access=spec.admin_access,
                consumed=consumed if multi else None,
                share=share,
            )
        )

        def undo() -> None:
            self.results[index].pop()
            if multi:
                left = self.shares[device.id]
                for name, value in consumed.items():
                    left[name] -= value
                self.share_count[device.id] -= 1
                if not self.share_count[device.id]:
                    del self.share_count[device.id]
                    del self.shares[device.id]
            else:
                self.marked[device.id].discard(index)
                if not self.marked[device.id]:
                    del self.marked[device.id]
            if draws_counters:
                for draw in device.consumes:
                    into = self.counters[(pool.id, draw.counter_set)]
                    for counter, value in draw.counters.items():
                        into[counter] -= value
            for done in reversed(added):
                done.remove(spec.name, device)

        return undo

    # The search --------------------------------------------------------------------------------
    def claim(self, index: int) -> bool:
        if index == len(self.claims):
            return True
        return self.request(index, 0)

    def request(self, index: int, position: int) -> bool:
        claim = self.claims[index]
        if position == len(claim.spec.requests):
            return self.claim(index + 1)
        for spec in claim.spec.requests[position].alternatives:
            if self._spec(index, position, spec):
                return True
        return False

    def _spec(self, index: int, position: int, spec: resourceclaims.RequestSpec) -> bool:
        claim = self.claims[index]
        if spec.all:
            every = self._all(claim, spec)
            if not every or len(self.results[index]) + len(every) > dra.ALLOCATION_RESULTS_MAX_SIZE:
                return False
            return self._take_all(index, position, spec, every, 0)
        if len(self.results[index]) + spec.count > dra.ALLOCATION_RESULTS_MAX_SIZE:
            return False
        return self._take_some(index, position, spec, spec.count, 0)

    def _take_some(
        self, index: int, position: int, spec: resourceclaims.RequestSpec, left: int, start: int
    ) -> bool:
        if left == 0:
            return self.request(index, position + 1)
        claim = self.claims[index]
        for at in range(start, len(self.order) - left + 1):
            pool, device = self.order[at]
            if not self._selected(claim, spec, device):
                continue
            undo = self._take(index, spec, pool, device)
            if undo is None:
                continue
            if self._take_some(index, position, spec, left - 1, at + 1):
                return True
            undo()
        return False

    def _take_all(
        self,
        index: int,
        position: int,
        spec: resourceclaims.RequestSpec,
        every: list[tuple[devices.Pool, resourceslices.DeviceInfo]],
        at: int,
    ) -> bool:
        if at == len(every):
            return self.request(index, position + 1)
        pool, device = every[at]
        undo = self._take(index, spec, pool, device)
        if undo is None:
            return False  # All means all: one that cannot be taken fails the request
        if self._take_all(index, position, spec, every, at + 1):
            return True
        undo()
        return False

    def _all(
        self, claim: resourceclaims.ResourceClaimInfo, spec: resourceclaims.RequestSpec
    ) -> list[tuple[devices.Pool, resourceslices.DeviceInfo]]:
        every: list[tuple[devices.Pool, resourceslices.DeviceInfo]] = []
        for pool in self.pools:
            if not pool.usable:
                state = "is being updated" if pool.incomplete else f"is broken: {pool.problem}"
                raise _Abort(
                    Failure(
                        f"resourceclaim {claim.key}: request {spec.name} asks for all devices, "
                        f"but resource pool {pool.name} {state}",
                        claim.key,
                    )
                )
            for device in pool.devices:
                if not self._selected(claim, spec, device):
                    continue
                if capacity.consumption(spec.capacity, device) is None:
                    continue
                every.append((pool, device))
        return every


# Results ---------------------------------------------------------------------------------------


def _requirements(reqs: tuple[selectors.Requirement, ...]) -> list[dra.NodeSelectorRequirement]:
    return [
        dra.NodeSelectorRequirement(key=r.key, operator=r.operator, values=list(r.values))
        if r.values
        else dra.NodeSelectorRequirement(key=r.key, operator=r.operator)
        for r in reqs
    ]


def _node_selector(
    choices: collections.abc.Sequence[inuse.Choice], *, node: str, catalog: devices.Catalog
) -> dra.NodeSelector | None:
    """Where the allocation can be used (upstream's ``createNodeSelector``)."""
    expressions: list[selectors.Requirement] = []
    fields: list[selectors.Requirement] = []
    here = dra.NodeSelector(
        nodeSelectorTerms=[
            dra.NodeSelectorTerm(
                matchFields=[
                    dra.NodeSelectorRequirement(
                        key=dra.NODE_NAME_FIELD, operator=selectors.IN, values=[node]
                    )
                ]
            )
        ]
    )
    for choice in choices:
        device = choice.device
        found = catalog.slices.get(device.slice)
        if found is None:
            return here
        if found.per_device:
            name, terms = device.node_name, device.node_selector
        else:
            name, terms = found.node_name, found.node_selector
        if name is not None or device.binds_to_node:
            return here
        if terms is None:
            continue
        if len(terms) != 1:
            return here  # several terms cannot be merged into one: the node itself is safe
        for req in terms[0].expressions:
            if req not in expressions:
                expressions.append(req)
        for req in terms[0].fields:
            if req not in fields:
                fields.append(req)
    if not expressions and not fields:
        return None
    term = dra.NodeSelectorTerm()
    if expressions:
        term["matchExpressions"] = _requirements(tuple(expressions))
    if fields:
        term["matchFields"] = _requirements(tuple(fields))
    return dra.NodeSelector(nodeSelectorTerms=[term])


def _tolerations(spec: resourceclaims.RequestSpec | None) -> list[dra.DeviceToleration]:
    out: list[dra.DeviceToleration] = []
    for t in spec.tolerations if spec is not None else ():
        item = dra.DeviceToleration(operator=t.operator)
        if t.key:
            item["key"] = t.key
        if t.value:
            item["value"] = t.value
        if t.effect:
            item["effect"] = t.effect
        if t.toleration_seconds is not None:
            item["tolerationSeconds"] = t.toleration_seconds
        out.append(item)
    return out


def _config(
    claim: resourceclaims.ResourceClaimInfo,
    chosen: collections.abc.Sequence[resourceclaims.RequestSpec],
    *,
    classes: collections.abc.Mapping[str, deviceclasses.DeviceClassInfo],
) -> list[dra.DeviceAllocationConfiguration]:
    """The configuration of the allocation: each class's once (``FromClass``, naming the
    requests of the class), then the claim's own for the requests it names (``FromClaim``)."""
    out: list[dra.DeviceAllocationConfiguration] = []
    by_class: dict[str, list[dra.DeviceAllocationConfiguration]] = {}
    for spec in chosen:
        cls = classes.get(spec.class_name)
        if cls is None:
            continue
        if spec.class_name in by_class:
            for entry in by_class[spec.class_name]:
                entry["requests"].append(spec.name)
            continue
        entries = [_from_class(c, request=spec.name) for c in cls.config]
        by_class[spec.class_name] = entries
        out.extend(entries)
    names = {spec.name for spec in chosen} | {spec.name.partition("/")[0] for spec in chosen}
    for config in claim.spec.config:
        wanted = config.get("requests") or []
        if not wanted or any(str(name) in names for name in wanted):
            out.append({**config, "source": "FromClaim"})
    return out


def _from_class(
    config: dra.DeviceClassConfiguration, *, request: str
) -> dra.DeviceAllocationConfiguration:
    # Every field of the class's passes through (the driver's), but requests: ours name them.
    kept = {key: value for key, value in config.items() if key != "requests"}
    entry = typing.cast(dra.DeviceAllocationConfiguration, kept)
    entry["source"] = "FromClass"
    entry["requests"] = [request]
    return entry


def _allocation(
    claim: resourceclaims.ResourceClaimInfo,
    choices: collections.abc.Sequence[inuse.Choice],
    *,
    node: str,
    catalog: devices.Catalog,
) -> ClaimAllocation:
    results: list[dra.AllocatedDeviceResult] = []
    chosen: list[resourceclaims.RequestSpec] = []
    for choice in choices:
        device = choice.device
        spec = claim.spec.request(choice.request)
        if spec is not None and spec not in chosen:
            chosen.append(spec)
        result = dra.AllocatedDeviceResult(
            request=choice.request, driver=device.driver, pool=device.pool, device=device.name
        )
        if choice.admin_access:
            result["adminAccess"] = True
        tolerations = _tolerations(spec)
        if tolerations:
            result["tolerations"] = tolerations
        if choice.consumed is not None:
            share = f"{claim.uid or claim.key}/{choice.request}/{device.id}/{choice.share}"
            result["shareID"] = str(uuid.uuid5(_SHARE_NAMESPACE, share))
            result["consumedCapacity"] = {
                name: _quantity(value) for name, value in choice.consumed.items()
            }
        results.append(result)
    wire = dra.AllocationResult(devices=dra.DeviceAllocation(results=results))
    config = _config(claim, chosen, classes=catalog.classes)
    if config:
        wire["devices"]["config"] = config
    node_selector = _node_selector(choices, node=node, catalog=catalog)
    if node_selector is not None:
        wire["nodeSelector"] = node_selector
    info = resourceclaims.allocation_info(wire)
    assert info is not None  # it has devices
    return ClaimAllocation(claim=claim, choices=tuple(choices), result=wire, info=info)


def _quantity(milli: int) -> str:
    # Binary SI falls back to decimal for values that are no multiple of 1Ki.
    return quantities.format_milli(milli, quantities.Format.BINARY_SI)


def allocate(
    claims: collections.abc.Sequence[resourceclaims.ResourceClaimInfo],
    *,
    node: str,
    pools: collections.abc.Sequence[devices.Pool],
    catalog: devices.Catalog,
    in_use: inuse.InUse,
) -> Outcome:
    """Allocate every one of ``claims`` on ``node`` (whose reachable pools are ``pools``,
    from :meth:`~berth.scheduler.snapshot.devices.Catalog.pools_for`), given what is
    ``in_use``; see the module docstring."""
    search = _Search(claims, pools=pools, catalog=catalog, in_use=in_use)
    try:
        found = search.claim(0)
    except _Abort as stop:
        return stop.failure
    if not found:
        broken = tuple(
            f"resource pool {p.name} is broken: {p.problem}"
            if p.problem is not None
            else f"resource pool {p.name} is being updated"
            for p in pools
            if not p.usable
        )
        return Unallocatable(contended=search.contended, broken=broken)
    return Allocated(
        tuple(
            _allocation(claim, search.results[i], node=node, catalog=catalog)
            for i, claim in enumerate(claims)
        )
    )
