"""``DeviceClassInfo``: one ``resource.k8s.io/v1`` DeviceClass, parsed once.

A class names a kind of device by CEL selectors (``spec.selectors[].cel.expression``) that
every device allocated for a request of the class must satisfy, and driver configuration
(``spec.config``) copied into each allocation made for it. A selector that does not compile
never raises: the class carries ``problem`` naming the field, and a claim using the class
waits with that reason. Built by :mod:`berth.scheduler.snapshot.devicestore`; read by the
DynamicResources plugin and the queue accounting of devices.
"""

from __future__ import annotations

import dataclasses
import typing

from berth.api import device_cel, dra
from berth.scheduler.snapshot import wire

__all__ = ["DeviceClassInfo", "SelectorInfo", "device_class_info", "parse_selectors"]


@dataclasses.dataclass(frozen=True)
class SelectorInfo:
    """One CEL selector: its expression, compiled (``None`` when it does not compile)."""

    expression: str
    field: str  # where it is written, for reasons: "spec.selectors[0].cel.expression"
    compiled: device_cel.Selector | None = dataclasses.field(compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class DeviceClassInfo:
    """One DeviceClass."""

    name: str
    selectors: tuple[SelectorInfo, ...]
    config: tuple[dra.DeviceClassConfiguration, ...] = dataclasses.field(compare=False, repr=False)
    problem: str | None = None  # a selector that does not compile, named


def parse_selectors(
    raw: typing.Any, /, *, field: str
) -> tuple[tuple[SelectorInfo, ...], str | None]:
    """``selectors`` written at ``field`` (compiled) and the first problem, naming its field."""
    if raw is None:
        return (), None
    if not isinstance(raw, list):
        return (), f"{field}: not a list"
    out: list[SelectorInfo] = []
    problem: str | None = None
    for i, item in enumerate(raw):
        where = f"{field}[{i}].cel.expression"
        cel = wire.part(wire.part(item).get("cel"))
        expression = cel.get("expression")
        if not isinstance(expression, str):
            problem = problem or f"{field}[{i}]: a selector needs cel.expression"
            continue
        try:
            compiled: device_cel.Selector | None = device_cel.compile_selector(expression)
        except device_cel.SelectorError as exc:
            compiled = None
            problem = problem or f"{where}: {exc}"
        out.append(SelectorInfo(expression=expression, field=where, compiled=compiled))
    return tuple(out), problem


def device_class_info(raw: typing.Any, /) -> DeviceClassInfo:
    """Parse a DeviceClass (``resource.k8s.io/v1``)."""
    obj = typing.cast(dra.DeviceClass, wire.as_raw(raw))
    spec = wire.part(obj.get("spec"))
    selectors, problem = parse_selectors(spec.get("selectors"), field="spec.selectors")
    config = spec.get("config")
    return DeviceClassInfo(
        name=str(wire.part(obj.get("metadata")).get("name") or ""),
        selectors=selectors,
        config=tuple(c for c in config if isinstance(c, dict)) if isinstance(config, list) else (),
        problem=problem,
    )
