"""Concise builders of ``resource.k8s.io/v1`` objects (DRA) for scheduler and simulator tests.

As :mod:`tests.scheduler.builders`, each returns a fresh dict as the API server returns it::

    device_class("gpu", driver=GPU_DRIVER)
    node_slice("n1", devices=[device(f"gpu-{i}", model="a100") for i in range(2)])
    template("two-gpus", request("gpu", cls="gpu", count=2))
    pod_with_claims("train-0", templates={"gpu": "two-gpus"}, group="train")
"""

from __future__ import annotations

import collections.abc
import typing

from tests.scheduler import builders as b

Obj = dict[str, typing.Any]

API = "resource.k8s.io/v1"
GPU_DRIVER = "gpu.example.com"
NIC_DRIVER = "nic.example.com"


def device_class(
    name: str,
    *,
    driver: str | None = GPU_DRIVER,
    selectors: collections.abc.Iterable[str] = (),
    config: collections.abc.Iterable[Obj] = (),
) -> Obj:
    """A DeviceClass selecting ``driver``'s devices (and ``selectors``, CEL)."""
    expressions = [f'device.driver == "{driver}"'] if driver else []
    expressions += list(selectors)
    spec: Obj = {"selectors": [{"cel": {"expression": e}} for e in expressions]}
    if config:
        spec["config"] = list(config)
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def device(
    name: str,
    *,
    attributes: collections.abc.Mapping[str, typing.Any] | None = None,
    capacity: collections.abc.Mapping[str, str] | None = None,
    policies: collections.abc.Mapping[str, Obj] | None = None,
    shared: bool = False,
    consumes: collections.abc.Mapping[str, collections.abc.Mapping[str, str]] | None = None,
    taints: collections.abc.Iterable[Obj] = (),
    **extra: typing.Any,
) -> Obj:
    """A device; ``attributes`` by type of value (str, bool, int; ``("version", "1.2.3")``),
    ``capacity`` as quantities (``policies`` their requestPolicy), ``shared`` for
    ``allowMultipleAllocations``, ``consumes`` counter set -> counter -> quantity."""
    out: Obj = {"name": name}
    attrs: Obj = {}
    for key, value in (attributes or {}).items():
        if isinstance(value, tuple):
            attrs[key] = {value[0]: value[1]}
        elif isinstance(value, bool):
            attrs[key] = {"bool": value}
        elif isinstance(value, int):
            attrs[key] = {"int": value}
        else:
            attrs[key] = {"string": value}
    if attrs:
        out["attributes"] = attrs
    if capacity:
        out["capacity"] = {
            k: {
                "value": v,
                **({"requestPolicy": policies[k]} if policies and k in policies else {}),
            }
            for k, v in capacity.items()
        }
    if shared:
        out["allowMultipleAllocations"] = True
    if consumes:
        out["consumesCounters"] = [
            {"counterSet": s, "counters": {c: {"value": v} for c, v in counters.items()}}
            for s, counters in consumes.items()
        ]
    taint_list = list(taints)
    if taint_list:
        out["taints"] = taint_list
    out.update(extra)
    return out


def gpus(count: int, *, prefix: str = "gpu", **attributes: typing.Any) -> list[Obj]:
    """``count`` devices ``gpu-0``... with an ``index`` attribute and ``attributes``."""
    return [device(f"{prefix}-{i}", attributes={"index": i, **attributes}) for i in range(count)]


def resource_slice(
    name: str,
    *,
    devices: collections.abc.Iterable[Obj] = (),
    driver: str = GPU_DRIVER,
    pool: str | None = None,
    generation: int = 1,
    count: int = 1,
    node: str | None = None,
    node_selector: Obj | None = None,
    all_nodes: bool = False,
    per_device: bool = False,
    counters: collections.abc.Mapping[str, collections.abc.Mapping[str, str]] | None = None,
) -> Obj:
    """A ResourceSlice of pool ``pool`` (default: the node's name, else the slice's)."""
    spec: Obj = {
        "driver": driver,
        "pool": {
            "name": pool or node or name,
            "generation": generation,
            "resourceSliceCount": count,
        },
    }
    if node is not None:
        spec["nodeName"] = node
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if all_nodes:
        spec["allNodes"] = True
    if per_device:
        spec["perDeviceNodeSelection"] = True
    device_list = list(devices)
    if device_list or not counters:
        spec["devices"] = device_list
    if counters:
        spec["sharedCounters"] = [
            {"name": s, "counters": {c: {"value": v} for c, v in values.items()}}
            for s, values in counters.items()
        ]
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def node_slice(
    node: str, *, devices: collections.abc.Iterable[Obj] | None = None, **kw: typing.Any
) -> Obj:
    """The slice of ``node``'s own GPUs (two by default)."""
    return resource_slice(
        f"{node}-{kw.get('driver', GPU_DRIVER)}",
        devices=gpus(2) if devices is None else devices,
        node=node,
        **kw,
    )


def request(
    name: str = "gpu",
    *,
    cls: str = "gpu",
    count: int | None = None,
    all: bool = False,
    selectors: collections.abc.Iterable[str] = (),
    admin: bool = False,
    tolerations: collections.abc.Iterable[Obj] = (),
    capacity: collections.abc.Mapping[str, str] | None = None,
    first_available: collections.abc.Iterable[Obj] | None = None,
) -> Obj:
    """A request: ``exactly`` (``count`` devices of ``cls``, or ``all``), or ``firstAvailable``
    sub-requests (from :func:`sub_request`)."""
    if first_available is not None:
        return {"name": name, "firstAvailable": list(first_available)}
    exactly: Obj = {"deviceClassName": cls}
    if all:
        exactly["allocationMode"] = "All"
    elif count is not None:
        exactly["count"] = count
    selector_list = [{"cel": {"expression": e}} for e in selectors]
    if selector_list:
        exactly["selectors"] = selector_list
    if admin:
        exactly["adminAccess"] = True
    toleration_list = list(tolerations)
    if toleration_list:
        exactly["tolerations"] = toleration_list
    if capacity:
        exactly["capacity"] = {"requests": dict(capacity)}
    return {"name": name, "exactly": exactly}


def sub_request(name: str, *, cls: str = "gpu", count: int = 1, **extra: typing.Any) -> Obj:
    """One ``firstAvailable`` alternative."""
    out: Obj = {"name": name, "deviceClassName": cls, "count": count}
    out.update(extra)
    return out


def claim_spec(*requests: Obj, constraints: collections.abc.Iterable[Obj] = ()) -> Obj:
    devices: Obj = {"requests": list(requests) or [request()]}
    constraint_list = list(constraints)
    if constraint_list:
        devices["constraints"] = constraint_list
    return {"devices": devices}


def claim(
    name: str,
    *requests: Obj,
    namespace: str = "default",
    constraints: collections.abc.Iterable[Obj] = (),
    status: Obj | None = None,
    owner: Obj | None = None,
    deleting: bool = False,
) -> Obj:
    """A ResourceClaim (one GPU of class ``gpu`` unless ``requests`` say otherwise)."""
    meta: Obj = {"name": name, "namespace": namespace, "uid": f"uid-claim-{namespace}-{name}"}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    if deleting:
        meta["deletionTimestamp"] = b.timestamp(b.EPOCH)
    out: Obj = {
        "apiVersion": API,
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": claim_spec(*requests, constraints=constraints),
    }
    if status is not None:
        out["status"] = status
    return out


def template(
    name: str,
    *requests: Obj,
    namespace: str = "default",
    constraints: collections.abc.Iterable[Obj] = (),
) -> Obj:
    """A ResourceClaimTemplate (one GPU of class ``gpu`` unless ``requests`` say otherwise)."""
    return {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": claim_spec(*requests, constraints=constraints)},
    }


def pod_with_claims(
    name: str,
    *,
    templates: collections.abc.Mapping[str, str] | None = None,
    claims: collections.abc.Mapping[str, str] | None = None,
    **kw: typing.Any,
) -> Obj:
    """A pod (``builders.pod``) whose ``spec.resourceClaims`` name ``templates`` and
    ``claims`` (entry name -> template or claim name)."""
    entries = [
        {"name": entry, "resourceClaimTemplateName": t} for entry, t in (templates or {}).items()
    ] + [{"name": entry, "resourceClaimName": c} for entry, c in (claims or {}).items()]
    spec = dict(kw.pop("spec", None) or {})
    spec["resourceClaims"] = entries
    return b.pod(name, spec=spec, **kw)


def allocated(
    *devices: tuple[str, str, str],
    request: str = "gpu",
    node: str | None = None,
    reserved_for: collections.abc.Iterable[tuple[str, str]] = (),
) -> Obj:
    """A claim ``status``: ``devices`` as (driver, pool, device) allocated for ``request``,
    usable on ``node`` only (or anywhere), reserved for (pod name, uid) pairs."""
    allocation: Obj = {
        "devices": {
            "results": [
                {"request": request, "driver": d, "pool": p, "device": n} for d, p, n in devices
            ]
        }
    }
    if node is not None:
        allocation["nodeSelector"] = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
    status: Obj = {"allocation": allocation}
    consumers = [{"resource": "pods", "name": n, "uid": u} for n, u in reserved_for]
    if consumers:
        status["reservedFor"] = consumers
    return status
