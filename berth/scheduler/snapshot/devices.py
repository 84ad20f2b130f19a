"""``Devices``: the DRA objects of one snapshot, and what follows from them.

What kube-scheduler's DynamicResources plugin reads through its listers, frozen for a cycle:

- :class:`Catalog` — DeviceClasses and ResourceSlices, and what follows from them alone: the
  pools (:class:`Pool`: only the newest generation of a pool counts; a pool whose newest
  generation lacks slices is *incomplete*, one with duplicate device names, a counter a device
  draws from that no slice declares, or a malformed slice is *broken*, with the reason), the
  pools a node reaches (:meth:`Catalog.pools_for`: its node-local slices, and the slices whose
  ``nodeSelector``, ``allNodes`` or per-device selection take it in), devices by id, whether a
  CEL selector selects a device (memoised per device, across catalogs: a catalog is rebuilt
  when a class or slice changes, the answers for the devices of unchanged slices are kept),
  and how many devices each class has in all (the capacity queue fair share divides,
  :meth:`Catalog.class_capacity`);
- the ResourceClaims and ResourceClaimTemplates, the keys of the pods that use claims, and the
  devices the claims' allocations hold (:class:`AllocatedState`: devices allocated whole,
  capacity consumed of devices shared by capacity, counters drawn from shared counter sets);
- per queue, how many devices of each class its running pods' claims hold and its pending
  pods' claims ask for (:meth:`Devices.queue_usage`), as ``deviceclass/<name>`` in
  milli-devices: a claim once per queue however many of its pods use it, a device shared by
  capacity as the largest fraction of any capacity the claim consumes of it.

Built by :mod:`berth.scheduler.snapshot.devicestore`; read by the DynamicResources plugin
and the queue accounting. Nothing here raises on bad input: reasons are data
(``Pool.problem``, ``ResourceClaimInfo.problem``, ``DeviceClassInfo.problem``).
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import functools
import math
import types
import typing

from berth.api import device_cel, dra, resources
from berth.scheduler.snapshot import (
    deviceclasses,
    resourceclaims,
    resourceslices,
    selectors,
)

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import pods

__all__ = [
    "EMPTY",
    "AllocatedState",
    "Catalog",
    "Devices",
    "Pool",
    "PoolUsage",
    "SelectorOutcome",
    "Selections",
    "claim_devices",
    "estimate",
    "share_fraction",
]

DeviceId = resourceslices.DeviceId
PoolId = resourceslices.PoolId

_ONE_DEVICE = 1000  # milli-devices


@dataclasses.dataclass(frozen=True, eq=False)
class Pool:
    """One pool as a node sees it: the devices of its newest generation that the node reaches,
    in slice-name order, and its counter sets."""

    id: PoolId
    devices: tuple[resourceslices.DeviceInfo, ...]
    counter_sets: collections.abc.Mapping[str, collections.abc.Mapping[str, int]]
    generation: int = 0
    incomplete: bool = False  # slices of its newest generation are missing
    problem: str | None = None  # broken: why

    @property
    def usable(self) -> bool:
        return not self.incomplete and self.problem is None

    @property
    def name(self) -> str:
        return f"{self.id[0]}/{self.id[1]}"


@dataclasses.dataclass(frozen=True, eq=False)
class _PoolSlices:
    """A pool's newest generation, as slices (node-independent)."""

    id: PoolId
    generation: int
    slices: tuple[resourceslices.SliceInfo, ...]  # by name
    counter_sets: collections.abc.Mapping[str, collections.abc.Mapping[str, int]]
    incomplete: bool
    problem: str | None


SelectorOutcome = bool | device_cel.SelectorError
"""Whether a selector selects a device, or why evaluating it failed."""
Selections = dict[resourceslices.DeviceInfo, dict[str, SelectorOutcome]]
"""Per device (by identity), per selector expression: the memoised answers."""


def _validate_pool(
    pool: PoolId, slices: list[resourceslices.SliceInfo]
) -> tuple[dict[str, collections.abc.Mapping[str, int]], str | None]:
    """The pool's counter sets and why it is broken, if it is."""
    name = f"{pool[0]}/{pool[1]}"
    counter_sets: dict[str, collections.abc.Mapping[str, int]] = {}
    for item in slices:
        if item.problem is not None:
            return {}, f"resourceslice {item.name} of pool {name}: {item.problem}"
        for set_name, counters in item.counter_sets.items():
            if set_name in counter_sets:
                return {}, f"pool {name}: duplicate counter set {set_name}"
            counter_sets[set_name] = counters
    seen: set[str] = set()
    for item in slices:
        for device in item.devices:
            if device.name in seen:
                return {}, f"pool {name}: duplicate device name {device.name}"
            seen.add(device.name)
            for draw in device.consumes:
                declared = counter_sets.get(draw.counter_set)
                if declared is None:
                    return {}, (
                        f"pool {name}: device {device.name} draws from counter set "
                        f"{draw.counter_set}, which no slice of the pool declares"
                    )
                for counter in draw.counters:
                    if counter not in declared:
                        return {}, (
                            f"pool {name}: device {device.name} draws counter {counter}, "
                            f"which counter set {draw.counter_set} does not declare"
                        )
    return counter_sets, None


def _reaches(
    terms: tuple[selectors.SelectorTerm, ...] | None,
    *,
    node_name: str,
    labels: collections.abc.Mapping[str, str],
) -> bool:
    if terms is None:
        return False
    return any(selectors.matches(t, labels=labels, node_name=node_name) for t in terms)


def _device_reaches(
    device: resourceslices.DeviceInfo, *, node_name: str, labels: collections.abc.Mapping[str, str]
) -> bool:
    if device.node_name is not None:
        return device.node_name == node_name
    if device.all_nodes:
        return True
    return _reaches(device.node_selector, node_name=node_name, labels=labels)


class Catalog:
    """Classes and slices, and what follows from them alone; see the module docstring."""

    def __init__(
        self,
        *,
        classes: collections.abc.Mapping[str, deviceclasses.DeviceClassInfo],
        slices: collections.abc.Mapping[str, resourceslices.SliceInfo],
        selections: Selections | None = None,
    ) -> None:
        """``selections``: the selector answers to reuse and add to (the store keeps them
        from catalog to catalog for the devices of the slices that did not change)."""
        self.classes = classes
        self.slices = slices
        self._memo: Selections = selections if selections is not None else {}
        by_pool: dict[PoolId, list[resourceslices.SliceInfo]] = collections.defaultdict(list)
        for item in slices.values():
            by_pool[item.pool_id].append(item)
        pools: dict[PoolId, _PoolSlices] = {}
        for pool_id in sorted(by_pool):
            newest = max(s.generation for s in by_pool[pool_id])
            current = sorted(
                (s for s in by_pool[pool_id] if s.generation == newest), key=lambda s: s.name
            )
            counter_sets, problem = _validate_pool(pool_id, current)
            pools[pool_id] = _PoolSlices(
                id=pool_id,
                generation=newest,
                slices=tuple(current),
                counter_sets=counter_sets,
                incomplete=len(current) < max(s.slice_count for s in current),
                problem=problem,
            )
        self.pools: collections.abc.Mapping[PoolId, _PoolSlices] = types.MappingProxyType(pools)
        local: dict[str, list[resourceslices.SliceInfo]] = collections.defaultdict(list)
        shared: list[resourceslices.SliceInfo] = []
        self.devices: dict[DeviceId, resourceslices.DeviceInfo] = {}
        for pool in pools.values():
            for item in pool.slices:
                if item.node_name is not None and not item.counter_sets:
                    local[item.node_name].append(item)
                else:
                    shared.append(item)
                for device in item.devices:
                    self.devices.setdefault(device.id, device)
        self._local = dict(local)
        self._shared = tuple(shared)
        # Without shared slices a node reaches its own slices' pools whatever its labels:
        # worked out once per node for as long as this catalog lives (not once per cycle).
        self._reached: dict[str, tuple[Pool, ...]] | None = None if shared else {}

    @property
    def empty(self) -> bool:
        """No slice publishes anything."""
        return not self.slices

    def nodes_with_local_slices(self) -> collections.abc.Set[str]:
        """The nodes some node-local slice is for."""
        return self._local.keys()

    @property
    def has_shared_slices(self) -> bool:
        """Some slice reaches nodes by selector, ``allNodes`` or per device."""
        return any(s.devices for s in self._shared)

    def pools_for(
        self, node_name: str, /, *, labels: collections.abc.Mapping[str, str]
    ) -> tuple[Pool, ...]:
        """The pools the node reaches, by (driver, pool) name: for each, the devices of its
        newest generation available there (a broken or incomplete pool has none)."""
        if self._reached is None:
            return self._pools_for(node_name, labels=labels)
        found = self._reached.get(node_name)
        if found is None:
            found = self._reached[node_name] = self._pools_for(node_name, labels=labels)
        return found

    def _pools_for(
        self, node_name: str, /, *, labels: collections.abc.Mapping[str, str]
    ) -> tuple[Pool, ...]:
        found: dict[PoolId, list[resourceslices.DeviceInfo]] = {}
        for item in self._local.get(node_name, ()):
            found.setdefault(item.pool_id, []).extend(item.devices)
        for item in self._shared:
            if item.counter_sets and not item.devices:
                continue  # counters only: they count where the pool's devices are
            if item.per_device:
                reached = [
                    d
                    for d in item.devices
                    if _device_reaches(d, node_name=node_name, labels=labels)
                ]
                if reached:
                    found.setdefault(item.pool_id, []).extend(reached)
                continue
            if item.all_nodes or _reaches(item.node_selector, node_name=node_name, labels=labels):
                found.setdefault(item.pool_id, []).extend(item.devices)
        out: list[Pool] = []
        for pool_id in sorted(found):
            pool = self.pools[pool_id]
            usable = not pool.incomplete and pool.problem is None
            # Devices in slice-name order (first fit follows the driver's naming).
            order = {s.name: i for i, s in enumerate(pool.slices)}
            devices = sorted(found[pool_id], key=lambda d: order.get(d.slice, 0))
            out.append(
                Pool(
                    id=pool_id,
                    devices=tuple(devices) if usable else (),
                    counter_sets=pool.counter_sets,
                    generation=pool.generation,
                    incomplete=pool.incomplete,
                    problem=pool.problem,
                )
            )
        return tuple(out)

    def selects(
        self, selector: deviceclasses.SelectorInfo, device: resourceslices.DeviceInfo, /
    ) -> SelectorOutcome:
        """Whether ``selector`` selects ``device``, or its evaluation error (memoised)."""
        answers = self._memo.get(device)
        if answers is None:
            answers = self._memo[device] = {}
        found = answers.get(selector.expression)
        if found is None:
            compiled = selector.compiled
            if compiled is None:
                found = device_cel.SelectorError("the expression does not compile")
            else:
                try:
                    found = compiled.matches(device.view)
                except device_cel.SelectorError as exc:
                    found = exc
            answers[selector.expression] = found
        return found

    @functools.cached_property
    def _class_capacity(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name in sorted(self.classes):
            cls = self.classes[name]
            if cls.problem is not None:
                continue
            count = 0
            for pool in self.pools.values():
                if pool.incomplete or pool.problem is not None:
                    continue
                for item in pool.slices:
                    for device in item.devices:
                        if all(self.selects(s, device) is True for s in cls.selectors):
                            count += 1
            if count:
                out[dra.device_class_resource(name)] = count * _ONE_DEVICE
        return out

    def class_capacity(self) -> collections.abc.Mapping[str, int]:
        """``deviceclass/<name>`` -> how many devices (milli) of usable pools its selectors
        select: what a queue's fair share of the class divides. A device two classes select
        counts in both; a partitionable device counts as each partition the slices publish."""
        return self._class_capacity


EMPTY_CATALOG = Catalog(classes={}, slices={})


@dataclasses.dataclass(frozen=True)
class AllocatedState:
    """What the claims' allocations hold (kube-scheduler's ``AllocatedState``).

    ``exclusive``: devices allocated whole (admin access aside); ``consumed``: per device shared
    by capacity, the capacity its shares consume in all; ``counters``: per (pool, counter set),
    what allocated devices draw of each counter (a device counts once however many share it).
    """

    exclusive: frozenset[DeviceId] = frozenset()
    consumed: collections.abc.Mapping[DeviceId, collections.abc.Mapping[str, int]] = (
        dataclasses.field(default_factory=dict)
    )
    counters: collections.abc.Mapping[tuple[PoolId, str], collections.abc.Mapping[str, int]] = (
        dataclasses.field(default_factory=dict)
    )

    def pool_usage(self, pool: PoolId, /) -> PoolUsage:
        """What the allocations hold of one pool, as a value equal across snapshots while
        they hold the same of it: an answer worked out from a pool's usage stays true for as
        long as its usage is equal (the allocator's answers outlive a cycle by it)."""
        return self._usage.get(pool, _UNUSED)

    @functools.cached_property
    def _usage(self) -> dict[PoolId, PoolUsage]:
        exclusive: dict[PoolId, list[str]] = collections.defaultdict(list)
        consumed: dict[PoolId, list[tuple[str, tuple[tuple[str, int], ...]]]] = (
            collections.defaultdict(list)
        )
        counters: dict[PoolId, list[tuple[str, tuple[tuple[str, int], ...]]]] = (
            collections.defaultdict(list)
        )
        for driver, pool, name in self.exclusive:
            exclusive[(driver, pool)].append(name)
        for (driver, pool, name), amounts in self.consumed.items():
            consumed[(driver, pool)].append((name, tuple(sorted(amounts.items()))))
        for (pool_id, counter_set), amounts in self.counters.items():
            counters[pool_id].append((counter_set, tuple(sorted(amounts.items()))))
        return {
            pool_id: (
                tuple(sorted(exclusive.get(pool_id, ()))),
                tuple(sorted(consumed.get(pool_id, ()))),
                tuple(sorted(counters.get(pool_id, ()))),
            )
            for pool_id in exclusive.keys() | consumed.keys() | counters.keys()
        }


PoolUsage = tuple[
    tuple[str, ...],
    tuple[tuple[str, tuple[tuple[str, int], ...]], ...],
    tuple[tuple[str, tuple[tuple[str, int], ...]], ...],
]
"""A pool's usage (:meth:`AllocatedState.pool_usage`): devices allocated whole, capacity
consumed per shared device, counters drawn per counter set; by name, sorted."""
_UNUSED: PoolUsage = ((), (), ())


def _allocated_state(
    claims: collections.abc.Iterable[resourceclaims.ResourceClaimInfo], *, catalog: Catalog
) -> AllocatedState:
    exclusive: set[DeviceId] = set()
    consumed: dict[DeviceId, dict[str, int]] = {}
    for claim in claims:
        if claim.allocation is None:
            continue
        for result in claim.allocation.devices:
            if result.admin_access:
                continue
            if result.share_id is not None:
                shares = consumed.setdefault(result.id, {})
                for name, amount in (result.consumed or {}).items():
                    shares[name] = shares.get(name, 0) + amount
            else:
                exclusive.add(result.id)
    counters: dict[tuple[PoolId, str], dict[str, int]] = {}
    for device_id in sorted(exclusive | consumed.keys()):
        device = catalog.devices.get(device_id)
        if device is None:
            continue
        for draw in device.consumes:
            into = counters.setdefault(((device.driver, device.pool), draw.counter_set), {})
            for name, amount in draw.counters.items():
                into[name] = into.get(name, 0) + amount
    return AllocatedState(exclusive=frozenset(exclusive), consumed=consumed, counters=counters)


def share_fraction(
    consumed: collections.abc.Mapping[str, int] | None, device: resourceslices.DeviceInfo | None
) -> int:
    """Milli-devices a share consuming ``consumed`` of ``device`` counts as: the largest
    fraction of any capacity it consumes (a whole device when nothing is known)."""
    if not consumed or device is None:
        return _ONE_DEVICE
    best = 0
    for name, amount in consumed.items():
        cap = device.capacity.get(name)
        if cap is None or cap.value <= 0:
            continue
        best = max(best, math.ceil(amount * _ONE_DEVICE / cap.value))
    return min(best, _ONE_DEVICE) if best else _ONE_DEVICE


def claim_devices(claim: resourceclaims.ResourceClaimInfo, *, catalog: Catalog) -> dict[str, int]:
    """``deviceclass/<name>`` -> milli-devices the claim's allocation holds (admin access
    counts nothing: it takes no device from anyone)."""
    out: dict[str, int] = {}
    if claim.allocation is None:
        return out
    for result in claim.allocation.devices:
        if result.admin_access:
            continue
        spec = claim.spec.request(result.request)
        if spec is None or not spec.class_name:
            continue
        amount = (
            share_fraction(result.consumed, catalog.devices.get(result.id))
            if result.share_id is not None
            else _ONE_DEVICE
        )
        name = dra.device_class_resource(spec.class_name)
        out[name] = out.get(name, 0) + amount
    return out


def estimate(spec: resourceclaims.ClaimSpec, *, catalog: Catalog) -> dict[str, int]:
    """What an unallocated claim will likely take: per request its preferred alternative's
    count (``All``: one), a request consuming capacity as the least fraction any device of its
    class would give it."""
    out: dict[str, int] = {}
    for request in spec.requests:
        if not request.alternatives:
            continue
        first = request.alternatives[0]
        if not first.class_name or first.admin_access:
            continue
        each = _ONE_DEVICE
        if first.capacity:
            fractions = [
                share_fraction(first.capacity, device)
                for device in catalog.devices.values()
                if device.allow_multiple and all(name in device.capacity for name in first.capacity)
            ]
            if fractions:
                each = min(fractions)
        name = dra.device_class_resource(first.class_name)
        out[name] = out.get(name, 0) + each * max(first.count, 1)
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class Devices:
    """The DRA objects of one snapshot; see the module docstring."""

    catalog: Catalog = EMPTY_CATALOG
    claims: collections.abc.Mapping[str, resourceclaims.ResourceClaimInfo] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )
    templates: collections.abc.Mapping[str, resourceclaims.ResourceClaimTemplateInfo] = (
        dataclasses.field(default_factory=lambda: types.MappingProxyType({}))
    )
    claimants: tuple[str, ...] = ()  # keys of the pods with spec.resourceClaims, sorted
    watched: bool = False
    """The source feeds the cache DRA objects (else none is known, whatever the cluster has)."""

    @property
    def classes(self) -> collections.abc.Mapping[str, deviceclasses.DeviceClassInfo]:
        return self.catalog.classes

    @functools.cached_property
    def allocated(self) -> AllocatedState:
        """What the claims' allocations hold."""
        return _allocated_state(self.claims.values(), catalog=self.catalog)

    def pod_devices(self, pod: pods.PodInfo, /) -> dict[str, int]:
        """What ``pod``'s own claims hold (placed) or will take (pending), per
        ``deviceclass/<name>``: for a placed pod, the allocated claims made for it from a
        template (what evicting it frees); for a pending pod, its claims not yet allocated,
        estimated from their requests (:func:`estimate`)."""
        out: dict[str, int] = {}
        for key in pod.resource_claim_keys:
            claim = self.claims.get(key)
            if claim is None:
                continue
            if pod.node_name is not None:
                if claim.controller is None or claim.controller[2] != pod.uid:
                    continue
                found = claim_devices(claim, catalog=self.catalog)
            elif claim.allocation is None:
                found = estimate(claim.spec, catalog=self.catalog)
            else:
                continue
            for name, amount in found.items():
                out[name] = out.get(name, 0) + amount
        return out

    def queue_usage(
        self, pods_by_key: collections.abc.Mapping[str, pods.PodInfo], /
    ) -> collections.abc.Mapping[str, tuple[resources.ResourceList, resources.ResourceList]]:
        """Per queue, (held by its running pods' claims, asked by its pending pods' claims),
        each claim once per queue; see the module docstring."""
        held: dict[str, dict[str, int]] = {}
        asked: dict[str, dict[str, int]] = {}
        seen: set[tuple[str, str]] = set()
        for key in self.claimants:
            pod = pods_by_key.get(key)
            if pod is None or pod.queue is None or pod.terminal:
                continue
            for claim_key in pod.resource_claim_keys:
                claim = self.claims.get(claim_key)
                if claim is None or (pod.queue, claim_key) in seen:
                    continue
                if claim.allocation is not None and pod.node_name is not None:
                    found, into = claim_devices(claim, catalog=self.catalog), held
                elif claim.allocation is None and pod.node_name is None:
                    found, into = estimate(claim.spec, catalog=self.catalog), asked
                else:
                    continue
                seen.add((pod.queue, claim_key))
                sums = into.setdefault(pod.queue, {})
                for name, amount in found.items():
                    sums[name] = sums.get(name, 0) + amount
        return {
            queue: (
                resources.ResourceList(held.get(queue, {})),
                resources.ResourceList(asked.get(queue, {})),
            )
            for queue in sorted(held.keys() | asked.keys())
        }


EMPTY = Devices()
