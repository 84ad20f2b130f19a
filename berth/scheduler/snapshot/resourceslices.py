"""``SliceInfo`` and ``DeviceInfo``: one ``resource.k8s.io/v1`` ResourceSlice, parsed once.

A DRA driver publishes its devices in slices, grouped into pools (``spec.pool``: name,
generation, how many slices make the pool). A slice is for one node (``nodeName``), for the
nodes its ``nodeSelector`` matches, for every node (``allNodes``: network-attached devices), or
says per device (``perDeviceNodeSelection``). A slice may instead carry the pool's shared
counters (``sharedCounters``: what partitionable devices draw from). Each device has typed
attributes, capacities (consumable by several claims when ``allowMultipleAllocations``, within
an optional ``requestPolicy``), counters it consumes, taints, and node selection of its own.

Quantities are milli-units. A malformed field never raises: the slice carries ``problem``
naming it, and its pool counts as broken (:mod:`berth.scheduler.snapshot.devices`). Devices
compare by identity (``eq=False``): the selector memo of a snapshot keys on them, and a
changed slice is a new object.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import typing

from berth.api import device_cel, dra, errors
from berth.scheduler.snapshot import selectors, wire
from berth.scheduler.snapshot import taints as taints_

__all__ = [
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "CapacityInfo",
    "CounterDraw",
    "DeviceId",
    "DeviceInfo",
    "PoolId",
    "RequestPolicy",
    "SliceInfo",
    "resource_slice_info",
]

NO_SCHEDULE = taints_.NO_SCHEDULE
NO_EXECUTE = taints_.NO_EXECUTE

PoolId = tuple[str, str]
"""(driver, pool name)."""
DeviceId = tuple[str, str, str]
"""(driver, pool, device): a device's name in allocation results."""


@dataclasses.dataclass(frozen=True)
class RequestPolicy:
    """How a consumable capacity may be requested (``requestPolicy``), milli-units."""

    default: int | None = None
    valid_values: tuple[int, ...] = ()  # ascending
    minimum: int | None = None  # validRange
    maximum: int | None = None
    step: int | None = None


@dataclasses.dataclass(frozen=True)
class CapacityInfo:
    """One capacity of a device: its value and, for consumable capacity, its policy."""

    value: int
    policy: RequestPolicy | None = None


@dataclasses.dataclass(frozen=True)
class CounterDraw:
    """What a device consumes of one counter set when allocated (partitionable devices)."""

    counter_set: str
    counters: collections.abc.Mapping[str, int]


@dataclasses.dataclass(frozen=True, eq=False)
class DeviceInfo:
    """One device of a slice (compared by identity; see the module docstring)."""

    name: str
    driver: str
    pool: str
    slice: str  # the slice's name
    attributes: collections.abc.Mapping[str, device_cel.Attribute]
    capacity: collections.abc.Mapping[str, CapacityInfo]
    consumes: tuple[CounterDraw, ...] = ()
    taints: tuple[taints_.Taint, ...] = ()  # NoSchedule, NoExecute keep requests away
    # Per-device node selection (when the slice's perDeviceNodeSelection is set).
    node_name: str | None = None
    node_selector: tuple[selectors.SelectorTerm, ...] | None = None
    all_nodes: bool = False
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    allow_multiple: bool = False  # consumable capacity: shared by several claims

    @property
    def id(self) -> DeviceId:
        return (self.driver, self.pool, self.name)

    @functools.cached_property
    def view(self) -> device_cel.DeviceView:
        """The device as CEL selectors see it (built once)."""
        return device_cel.device_view(
            driver=self.driver,
            attributes=self.attributes,
            capacity={name: cap.value for name, cap in self.capacity.items()},
            allow_multiple_allocations=self.allow_multiple,
        )

    def attribute(self, name: str, /) -> device_cel.Attribute | None:
        """The attribute ``name`` (fully qualified ``domain/id``; the driver's own domain may
        be written without it in the slice), ``None`` when the device lacks it."""
        if name in self.attributes:
            return self.attributes[name]
        domain, slash, ident = name.partition("/")
        if slash and domain == self.driver:
            return self.attributes.get(ident)
        return None


@dataclasses.dataclass(frozen=True, eq=False)
class SliceInfo:
    """One ResourceSlice."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int  # resourceSliceCount: slices in the pool's generation
    node_name: str | None  # the node of a node-local slice
    node_selector: tuple[selectors.SelectorTerm, ...] | None
    all_nodes: bool
    per_device: bool  # perDeviceNodeSelection
    devices: tuple[DeviceInfo, ...]
    counter_sets: collections.abc.Mapping[str, collections.abc.Mapping[str, int]]
    problem: str | None = None  # a malformed field, named

    @property
    def pool_id(self) -> PoolId:
        return (self.driver, self.pool)

    @property
    def shared(self) -> bool:
        """Not tied to one node by name (or carries shared counters): every node may see it."""
        return self.node_name is None or bool(self.counter_sets)


class _Problems:
    def __init__(self) -> None:
        self.first: str | None = None

    def add(self, text: str) -> None:
        self.first = self.first or text


def _milli(raw: typing.Any, *, field: str, problems: _Problems) -> int:
    try:
        return wire.milli(raw)
    except errors.QuantityError as exc:
        problems.add(f"{field}: {exc}")
        return 0


def _attribute(raw: typing.Any, *, field: str, problems: _Problems) -> device_cel.Attribute | None:
    if not isinstance(raw, dict):
        problems.add(f"{field}: not an object")
        return None
    for kind in ("int", "bool", "string", "version"):
        if kind not in raw:
            continue
        value = raw[kind]
        if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind == "bool" and isinstance(value, bool):
            return value
        if kind == "string" and isinstance(value, str):
            return value
        if kind == "version" and isinstance(value, str):
            try:
                return device_cel.parse_version(value)
            except ValueError as exc:
                problems.add(f"{field}.version: {exc}")
                return None
        problems.add(f"{field}.{kind}: {value!r} is not a {kind}")
        return None
    problems.add(f"{field}: no value (int, bool, string or version)")
    return None


def _policy(raw: typing.Any, *, field: str, problems: _Problems) -> RequestPolicy | None:
    if not isinstance(raw, dict):
        return None
    default = raw.get("default")
    values = raw.get("validValues")
    span = wire.part(raw.get("validRange"))
    return RequestPolicy(
        default=_milli(default, field=f"{field}.default", problems=problems)
        if default is not None
        else None,
        valid_values=tuple(
            sorted(
                _milli(v, field=f"{field}.validValues[{i}]", problems=problems)
                for i, v in enumerate(values)
            )
        )
        if isinstance(values, list)
        else (),
        minimum=_milli(span["min"], field=f"{field}.validRange.min", problems=problems)
        if span.get("min") is not None
        else None,
        maximum=_milli(span["max"], field=f"{field}.validRange.max", problems=problems)
        if span.get("max") is not None
        else None,
        step=_milli(span["step"], field=f"{field}.validRange.step", problems=problems)
        if span.get("step") is not None
        else None,
    )


def _counters(
    raw: typing.Any, *, field: str, problems: _Problems
) -> collections.abc.Mapping[str, int]:
    if not isinstance(raw, dict):
        problems.add(f"{field}: not a map")
        return {}
    return {
        str(name): _milli(
            counter.get("value") if isinstance(counter, dict) else None,
            field=f"{field}[{name}].value",
            problems=problems,
        )
        for name, counter in sorted(raw.items())
    }


def _node_selection(
    raw: dra.ResourceSliceSpec | dra.Device,
) -> tuple[str | None, tuple[selectors.SelectorTerm, ...] | None, bool]:
    name = raw.get("nodeName")
    selector = wire.part(raw.get("nodeSelector"))
    terms: tuple[selectors.SelectorTerm, ...] | None = None
    if selector:
        required, _ = selectors.parse_node_affinity(
            {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": dict(selector)}}
        )
        terms = required
    return (str(name) if name else None), terms, raw.get("allNodes") is True


def _device(
    raw: dra.Device, *, index: int, driver: str, pool: str, slice_name: str, problems: _Problems
) -> DeviceInfo | None:
    field = f"spec.devices[{index}]"
    if not isinstance(raw, dict) or not raw.get("name"):
        problems.add(f"{field}.name: a device needs a name")
        return None
    attributes: dict[str, device_cel.Attribute] = {}
    for name, value in sorted(wire.part(raw.get("attributes")).items()):
        parsed = _attribute(value, field=f"{field}.attributes[{name}]", problems=problems)
        if parsed is not None:
            attributes[str(name)] = parsed
    capacity: dict[str, CapacityInfo] = {}
    for name, entry in sorted(wire.part(raw.get("capacity")).items()):
        where = f"{field}.capacity[{name}]"
        if not isinstance(entry, dict):
            problems.add(f"{where}: not an object")
            continue
        capacity[str(name)] = CapacityInfo(
            value=_milli(entry.get("value"), field=f"{where}.value", problems=problems),
            policy=_policy(
                entry.get("requestPolicy"), field=f"{where}.requestPolicy", problems=problems
            ),
        )
    consumes: list[CounterDraw] = []
    raw_consumes = raw.get("consumesCounters")
    for i, draw in enumerate(raw_consumes if isinstance(raw_consumes, list) else ()):
        where = f"{field}.consumesCounters[{i}]"
        if not isinstance(draw, dict) or not draw.get("counterSet"):
            problems.add(f"{where}.counterSet: missing")
            continue
        consumes.append(
            CounterDraw(
                counter_set=str(draw["counterSet"]),
                counters=_counters(
                    draw.get("counters"), field=f"{where}.counters", problems=problems
                ),
            )
        )
    raw_taints = raw.get("taints")
    taints = taints_.parse_taints(raw_taints)
    node_name, node_selector, all_nodes = _node_selection(raw)
    conditions = raw.get("bindingConditions")
    return DeviceInfo(
        name=str(raw["name"]),
        driver=driver,
        pool=pool,
        slice=slice_name,
        attributes=attributes,
        capacity=capacity,
        consumes=tuple(consumes),
        taints=taints,
        node_name=node_name,
        node_selector=node_selector,
        all_nodes=all_nodes,
        binds_to_node=raw.get("bindsToNode") is True,
        binding_conditions=tuple(str(c) for c in conditions)
        if isinstance(conditions, list)
        else (),
        allow_multiple=raw.get("allowMultipleAllocations") is True,
    )


def resource_slice_info(raw: typing.Any, /) -> SliceInfo:
    """Parse a ResourceSlice (``resource.k8s.io/v1``)."""
    obj = typing.cast(dra.ResourceSlice, wire.as_raw(raw))
    spec = wire.part(obj.get("spec"))
    name = str(wire.part(obj.get("metadata")).get("name") or "")
    problems = _Problems()
    driver = str(spec.get("driver") or "")
    if not driver:
        problems.add("spec.driver: missing")
    pool = wire.part(spec.get("pool"))
    pool_name = str(pool.get("name") or "")
    if not pool_name:
        problems.add("spec.pool.name: missing")
    generation = pool.get("generation", 0)
    count = pool.get("resourceSliceCount", 1)
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        problems.add(f"spec.pool.generation: {generation!r} is not a non-negative integer")
        generation = 0
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        problems.add(f"spec.pool.resourceSliceCount: {count!r} is not a positive integer")
        count = 1
    node_name, node_selector, all_nodes = _node_selection(spec)
    raw_devices = spec.get("devices")
    devices = tuple(
        device
        for i, item in enumerate(raw_devices if isinstance(raw_devices, list) else ())
        if (
            device := _device(
                item, index=i, driver=driver, pool=pool_name, slice_name=name, problems=problems
            )
        )
        is not None
    )
    counter_sets: dict[str, collections.abc.Mapping[str, int]] = {}
    raw_sets = spec.get("sharedCounters")
    for i, item in enumerate(raw_sets if isinstance(raw_sets, list) else ()):
        where = f"spec.sharedCounters[{i}]"
        if not isinstance(item, dict) or not item.get("name"):
            problems.add(f"{where}.name: missing")
            continue
        set_name = str(item["name"])
        if set_name in counter_sets:
            problems.add(f"{where}.name: duplicate counter set {set_name}")
            continue
        counter_sets[set_name] = _counters(
            item.get("counters"), field=f"{where}.counters", problems=problems
        )
    return SliceInfo(
        name=name,
        driver=driver,
        pool=pool_name,
        generation=generation,
        slice_count=count,
        node_name=node_name,
        node_selector=node_selector,
        all_nodes=all_nodes,
        per_device=spec.get("perDeviceNodeSelection") is True,
        devices=devices,
        counter_sets=counter_sets,
        problem=problems.first,
    )
