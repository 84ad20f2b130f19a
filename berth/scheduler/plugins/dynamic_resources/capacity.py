"""Consumable capacity (KEP 5075): what a request consumes of a device shared by capacity.

A device with ``allowMultipleAllocations`` is shared by several claims up to its capacities.
A request consumes of each capacity of the device what it asks for (``capacity.requests``),
rounded up to what the capacity's ``requestPolicy`` allows (``validRange``: at least ``min``,
in ``step``\\s above it; ``validValues``: the next listed value), or, when it asks nothing of
that capacity, the policy's ``default``, else the whole capacity. A request fits a device when
it names no capacity the device lacks, what it consumes obeys the policy (``max``, the step,
the listed values) and, with what the device's earlier shares and this allocation's other
shares consume, stays within the capacity. The upstream allocator checks this for every
device, shared or not (a request can ask more of a device than it has).

All amounts are milli-units.
"""

from __future__ import annotations

import collections.abc

from berth.scheduler.snapshot import resourceslices

__all__ = ["consumption", "fits"]

Amounts = collections.abc.Mapping[str, int]


def _consumed(requested: int | None, capacity: resourceslices.CapacityInfo) -> int:
    policy = capacity.policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return capacity.value
    if policy is None:
        return requested
    if policy.minimum is not None:
        if requested < policy.minimum:
            return policy.minimum
        if policy.step:
            steps = -(-(requested - policy.minimum) // policy.step)  # rounded up
            return policy.minimum + steps * policy.step
        return requested
    for value in policy.valid_values:
        if requested <= value:
            return value
    return requested


def _violates(consumed: int, capacity: resourceslices.CapacityInfo) -> bool:
    policy = capacity.policy
    if policy is None or (policy.default is not None and consumed == policy.default):
        return False
    if policy.minimum is not None or policy.maximum is not None or policy.step is not None:
        if policy.maximum is not None and consumed > policy.maximum:
            return True
        if policy.step:
            return (consumed - (policy.minimum or 0)) % policy.step != 0
        return False
    if policy.valid_values:
        return consumed not in policy.valid_values
    return False


def consumption(
    requests: Amounts | None, device: resourceslices.DeviceInfo
) -> dict[str, int] | None:
    """What a request asking ``requests`` consumes of each capacity of ``device``, or ``None``
    when it cannot be served by it (a capacity it lacks, a value its policy refuses)."""
    asked = requests or {}
    if any(name not in device.capacity for name in asked):
        return None
    out: dict[str, int] = {}
    for name, capacity in device.capacity.items():
        consumed = _consumed(asked.get(name), capacity)
        if _violates(consumed, capacity):
            return None
        out[name] = consumed
    return out


def fits(
    consumed: Amounts,
    device: resourceslices.DeviceInfo,
    *,
    already: Amounts | None,
) -> bool:
    """Whether ``consumed`` (from :func:`consumption`) fits in ``device`` beside ``already``
    (what its other shares consume)."""
    held = already or {}
    return all(
        held.get(name, 0) + amount <= device.capacity[name].value
        for name, amount in consumed.items()
    )
