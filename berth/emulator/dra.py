"""``resource.k8s.io/v1``: what the API server checks on DeviceClasses, ResourceSlices,
ResourceClaims and ResourceClaimTemplates (their strategies).

The emulator serves the four DRA kinds (:data:`berth.emulator.resources.BUILTINS`) with the
checks real clients and Berth's scheduler notice, each refusal naming the field as
kube-apiserver does:

- CEL selectors (a class's and a request's) must compile in the DRA environment
  (:mod:`berth.api.device_cel`);
- a claim's (or template's) requests have unique names and exactly one of ``exactly`` and
  ``firstAvailable``, a class name, ``count`` only for ``ExactCount`` (at least 1), and
  constraints name requests that exist; a claim's ``spec`` never changes;
- a claim's ``status.allocation`` is written once (it may be cleared, not changed), holds at
  most 32 devices, and ``status.reservedFor`` (at most 256 consumers) needs an allocation;
- a slice names its driver and pool (with a positive slice count), says where its devices are
  with exactly one of ``nodeName``, ``nodeSelector``, ``allNodes`` and
  ``perDeviceNodeSelection`` (a slice of shared counters alone says none), and names each
  device once.

The resourceclaim controller's part (claims from templates, clean-up) is
:mod:`berth.emulator.claimcontroller`.
"""

from __future__ import annotations

import re
import typing

from berth.api import device_cel, dra, objects
from berth.emulator import errors, resources, strategies

if typing.TYPE_CHECKING:
    from berth.emulator import rest

__all__ = ["CLAIMS", "CLASSES", "SLICES", "TEMPLATES", "dra_strategies"]

Object = objects.KubeObject
CLASSES: resources.StorageKey = (dra.GROUP, "deviceclasses")
SLICES: resources.StorageKey = (dra.GROUP, "resourceslices")
CLAIMS: resources.StorageKey = (dra.GROUP, "resourceclaims")
TEMPLATES: resources.StorageKey = (dra.GROUP, "resourceclaimtemplates")

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_MAX_SELECTORS = 32
_MAX_REQUESTS = 32
_MAX_SUBREQUESTS = 8


def _selectors(raw: list[dra.DeviceSelector] | None, *, field: str) -> list[errors.Cause]:
    # Not validated yet: the record names the fields, each is still checked as it is read.
    causes: list[errors.Cause] = []
    if raw is None:
        return causes
    if not isinstance(raw, list):
        return [errors.Cause(field, "Invalid value: must be a list")]
    if len(raw) > _MAX_SELECTORS:
        causes.append(
            errors.Cause(
                field,
                f"Too many: {len(raw)}: must have at most {_MAX_SELECTORS} items",
                "FieldValueTooMany",
            )
        )
    for i, selector in enumerate(raw):
        where = f"{field}[{i}].cel.expression"
        cel = selector.get("cel") if isinstance(selector, dict) else None
        expression = cel.get("expression") if isinstance(cel, dict) else None
        if not isinstance(expression, str) or not expression:
            causes.append(errors.required(where))
            continue
        try:
            device_cel.compile_selector(expression)
        except device_cel.SelectorError as exc:
            causes.append(errors.Cause(where, f"Invalid value: {expression!r}: {exc}"))
    return causes


def _request_spec(
    raw: dra.ExactDeviceRequest | dra.DeviceSubRequest, *, field: str, sub: bool
) -> list[errors.Cause]:
    # Not validated yet: the record names the fields, each is still checked as it is read.
    causes: list[errors.Cause] = []
    if not raw.get("deviceClassName"):
        causes.append(errors.required(f"{field}.deviceClassName"))
    mode = raw.get("allocationMode") or dra.EXACT_COUNT
    if mode not in (dra.EXACT_COUNT, dra.ALL):
        causes.append(
            errors.Cause(
                f"{field}.allocationMode",
                f'Unsupported value: "{mode}": supported values: "All", "ExactCount"',
                "FieldValueNotSupported",
            )
        )
    count = raw.get("count")
    if mode == dra.ALL and count is not None:
        causes.append(
            errors.Cause(
                f"{field}.count",
                "Invalid value: must not be specified when allocationMode is 'All'",
            )
        )
    if (
        mode == dra.EXACT_COUNT
        and count is not None
        and (not isinstance(count, int) or isinstance(count, bool) or count < 1)
    ):
        causes.append(
            errors.Cause(f"{field}.count", f"Invalid value: {count}: must be greater than zero")
        )
    # A sub-request declares no adminAccess: one written anyway is refused.
    if sub and typing.cast(objects.JSONObject, raw).get("adminAccess") is not None:
        causes.append(
            errors.Cause(
                f"{field}.adminAccess",
                "Forbidden: not supported in a sub-request",
                "FieldValueForbidden",
            )
        )
    causes.extend(_selectors(raw.get("selectors"), field=f"{field}.selectors"))
    return causes


def claim_spec_causes(spec: dra.ResourceClaimSpec | None, *, field: str) -> list[errors.Cause]:
    """What is wrong with a ResourceClaim's spec written at ``field``."""
    # Not validated yet: the record names the fields, each is still checked as it is read.
    devices = spec.get("devices") if isinstance(spec, dict) else None
    if devices is None:
        return []
    causes: list[errors.Cause] = []
    base = f"{field}.devices"
    requests = devices.get("requests") or []
    if len(requests) > _MAX_REQUESTS:
        causes.append(
            errors.Cause(
                f"{base}.requests",
                f"Too many: {len(requests)}: must have at most {_MAX_REQUESTS} items",
                "FieldValueTooMany",
            )
        )
    names: set[str] = set()
    for i, request in enumerate(requests):
        where = f"{base}.requests[{i}]"
        if not isinstance(request, dict):
            causes.append(errors.Cause(where, "Invalid value: must be an object"))
            continue
        name = request.get("name")
        if not isinstance(name, str) or not name:
            causes.append(errors.required(f"{where}.name"))
        elif not _LABEL.match(name):
            causes.append(
                errors.Cause(
                    f"{where}.name",
                    f'Invalid value: "{name}": a lowercase RFC '
                    "1123 label must consist of lower case alphanumeric "
                    "characters or '-'",
                )
            )
        elif name in names:
            causes.append(
                errors.Cause(f"{where}.name", f'Duplicate value: "{name}"', "FieldValueDuplicate")
            )
        else:
            names.add(name)
        exactly, first = request.get("exactly"), request.get("firstAvailable")
        if (exactly is None) == (first is None):
            causes.append(
                errors.Cause(
                    where, "Invalid value: exactly one of `exactly` or `firstAvailable` is required"
                )
            )
            continue
        if isinstance(exactly, dict):
            causes.extend(_request_spec(exactly, field=f"{where}.exactly", sub=False))
            continue
        if not isinstance(first, list) or not first or len(first) > _MAX_SUBREQUESTS:
            causes.append(
                errors.Cause(
                    f"{where}.firstAvailable",
                    f"Invalid value: must have between 1 and {_MAX_SUBREQUESTS} sub-requests",
                )
            )
            continue
        for j, subrequest in enumerate(first):
            at = f"{where}.firstAvailable[{j}]"
            if not isinstance(subrequest, dict) or not subrequest.get("name"):
                causes.append(errors.required(f"{at}.name"))
                continue
            names.add(f"{name}/{subrequest['name']}")
            causes.extend(_request_spec(subrequest, field=at, sub=True))
    for i, constraint in enumerate(devices.get("constraints") or []):
        where = f"{base}.constraints[{i}]"
        if not isinstance(constraint, dict):
            continue
        for name in constraint.get("requests") or []:
            if name not in names and str(name).partition("/")[0] not in names:
                causes.append(
                    errors.Cause(
                        f"{where}.requests",
                        f'Invalid value: "{name}": must be '
                        "the name of a request in the claim or the name of a "
                        "request and a subrequest separated by '/'",
                    )
                )
        if bool(constraint.get("matchAttribute")) == bool(constraint.get("distinctAttribute")):
            causes.append(
                errors.Cause(
                    where,
                    "Invalid value: exactly one of `matchAttribute` or "
                    "`distinctAttribute` is required",
                )
            )
    return causes


class DeviceClassStrategy(strategies.Strategy):
    """DeviceClasses: selectors that compile."""

    def validate(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: Object,
        *,
        old: Object | None,
        context: strategies.WriteContext,
    ) -> list[errors.Cause]:
        causes = super().validate(api, resource, obj, old=old, context=context)
        device_class = typing.cast(dra.DeviceClass, obj)  # this strategy serves DeviceClasses
        spec = device_class.get("spec") or {}
        causes.extend(_selectors(spec.get("selectors"), field="spec.selectors"))
        return causes


class ResourceClaimStrategy(strategies.Strategy):
    """ResourceClaims: a valid spec that never changes; an allocation written once."""

    def validate(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: Object,
        *,
        old: Object | None,
        context: strategies.WriteContext,
    ) -> list[errors.Cause]:
        causes = super().validate(api, resource, obj, old=old, context=context)
        # This strategy serves ResourceClaims.
        claim = typing.cast(dra.ResourceClaim, obj)
        stored = typing.cast(dra.ResourceClaim | None, old)
        causes.extend(claim_spec_causes(claim.get("spec"), field="spec"))
        if stored is not None and (claim.get("spec") or {}) != (stored.get("spec") or {}):
            causes.append(errors.Cause("spec", "Invalid value: field is immutable"))
        status = claim.get("status") or {}
        allocation = status.get("allocation")
        before = stored.get("status", {}).get("allocation") if stored is not None else None
        if allocation and before and allocation != before:
            causes.append(
                errors.Cause(
                    "status.allocation", "Forbidden: may not be changed", "FieldValueForbidden"
                )
            )
        results = ((allocation or {}).get("devices") or {}).get("results") or []
        if len(results) > dra.ALLOCATION_RESULTS_MAX_SIZE:
            causes.append(
                errors.Cause(
                    "status.allocation.devices.results",
                    f"Too many: {len(results)}: must have at most "
                    f"{dra.ALLOCATION_RESULTS_MAX_SIZE} items",
                    "FieldValueTooMany",
                )
            )
        consumers = status.get("reservedFor") or []
        if consumers and not allocation:
            causes.append(
                errors.Cause(
                    "status.reservedFor",
                    "Forbidden: may not be specified when `allocated` is not set",
                    "FieldValueForbidden",
                )
            )
        if len(consumers) > dra.RESERVED_FOR_MAX_SIZE:
            causes.append(
                errors.Cause(
                    "status.reservedFor",
                    f"Too many: {len(consumers)}: must "
                    f"have at most {dra.RESERVED_FOR_MAX_SIZE} items",
                    "FieldValueTooMany",
                )
            )
        uids = [c.get("uid") for c in consumers if isinstance(c, dict)]
        if len(set(uids)) != len(uids):
            causes.append(
                errors.Cause(
                    "status.reservedFor",
                    "Duplicate value: a consumer may be listed once",
                    "FieldValueDuplicate",
                )
            )
        return causes


class ResourceClaimTemplateStrategy(strategies.Strategy):
    """ResourceClaimTemplates: the claims' spec is valid."""

    def validate(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: Object,
        *,
        old: Object | None,
        context: strategies.WriteContext,
    ) -> list[errors.Cause]:
        causes = super().validate(api, resource, obj, old=old, context=context)
        # This strategy serves ResourceClaimTemplates.
        template = typing.cast(dra.ResourceClaimTemplate, obj)
        stored = typing.cast(dra.ResourceClaimTemplate | None, old)
        spec = template.get("spec") or {}
        causes.extend(claim_spec_causes(spec.get("spec"), field="spec.spec"))
        if stored is not None and spec != (stored.get("spec") or {}):
            causes.append(errors.Cause("spec", "Invalid value: field is immutable"))
        return causes


class ResourceSliceStrategy(strategies.Strategy):
    """ResourceSlices: a driver, a pool, where the devices are, unique device names."""

    def validate(
        self,
        api: rest.Api,
        resource: resources.Resource,
        obj: Object,
        *,
        old: Object | None,
        context: strategies.WriteContext,
    ) -> list[errors.Cause]:
        causes = super().validate(api, resource, obj, old=old, context=context)
        # This strategy serves ResourceSlices. Their required fields may still be missing here:
        # an absent spec or pool reads as empty, and each field is checked below.
        slice_ = typing.cast(dra.ResourceSlice, obj)
        spec = slice_.get("spec") or typing.cast(dra.ResourceSliceSpec, {})
        if not spec.get("driver"):
            causes.append(errors.required("spec.driver"))
        pool = spec.get("pool") or typing.cast(dra.ResourcePool, {})
        if not pool.get("name"):
            causes.append(errors.required("spec.pool.name"))
        count = pool.get("resourceSliceCount")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            causes.append(
                errors.Cause(
                    "spec.pool.resourceSliceCount",
                    f"Invalid value: {count}: must be greater than zero",
                )
            )
        chosen = [
            key
            for key in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
            if spec.get(key)
        ]
        if len(chosen) > 1 or (not chosen and not spec.get("sharedCounters")):
            causes.append(
                errors.Cause(
                    "spec",
                    "Invalid value: exactly one of `nodeName`, "
                    "`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is "
                    "required",
                )
            )
        seen: set[str] = set()
        for i, device in enumerate(spec.get("devices") or []):
            name = (device or {}).get("name") if isinstance(device, dict) else None
            if not name:
                causes.append(errors.required(f"spec.devices[{i}].name"))
            elif name in seen:
                causes.append(
                    errors.Cause(
                        f"spec.devices[{i}].name",
                        f'Duplicate value: "{name}"',
                        "FieldValueDuplicate",
                    )
                )
            else:
                seen.add(name)
        return causes


def dra_strategies() -> dict[resources.StorageKey, strategies.Strategy]:
    """The DRA kinds' strategies, by resource (registered by :class:`~berth.emulator.rest.Api`)."""
    return {
        CLASSES: DeviceClassStrategy(),
        SLICES: ResourceSliceStrategy(),
        CLAIMS: ResourceClaimStrategy(),
        TEMPLATES: ResourceClaimTemplateStrategy(),
    }
