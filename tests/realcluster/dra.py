"""DRA objects for the real-cluster tests: a fake driver's classes and slices on KWOK nodes.

No kubelet plugin runs on KWOK's nodes; a test publishes the ResourceSlices a driver would
(:mod:`berth.api.fake_devices`), each test under a driver name of its own so that the session's
tests never share devices, and removes them again (:func:`devices`).
"""

from __future__ import annotations

import collections.abc
import contextlib
import typing
import uuid

from berth.api import dra, fake_devices
from tests.realcluster import cluster

Obj = dict[str, typing.Any]


def driver_name(prefix: str) -> str:
    """A driver name no other test uses (``<prefix>-<random>.example.com``)."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}.example.com"


def node_slice(driver: str, node: str, *, count: int) -> Obj:
    return dict(fake_devices.node_slice(driver=driver, node=node, count=count))


def template(name: str, *, cls: str, count: int = 1) -> Obj:
    return {
        "apiVersion": dra.API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "gpu", "exactly": {"deviceClassName": cls, "count": count}}
                    ]
                }
            }
        },
    }


def claims_from(template_name: str) -> Obj:
    """``spec.resourceClaims`` naming ``template_name`` (entry ``gpu``)."""
    return {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}]}


@contextlib.contextmanager
def devices(
    real: cluster.RealCluster, driver: str, nodes: collections.abc.Mapping[str, int]
) -> collections.abc.Iterator[None]:
    """The driver's DeviceClass and a slice of ``count`` devices on each node of ``nodes``
    for the block; all of the driver's classes and slices are deleted after it."""
    real.create(dict(fake_devices.device_class(driver)))
    real.create(*(node_slice(driver, node, count=count) for node, count in nodes.items()))
    try:
        yield
    finally:
        real.kubectl(
            "delete", "resourceslices", "--field-selector", f"spec.driver={driver}", "--wait=false"
        )
        real.kubectl("delete", "deviceclass", driver, "--wait=false")


def claims(real: cluster.RealCluster, namespace: str) -> list[Obj]:
    listed: list[Obj] = real.json("get", "resourceclaims", "-n", namespace)["items"]
    return listed


def owner(claim: Obj) -> str | None:
    for ref in claim["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref["name"])
    return None


def allocated_pools(claim: Obj) -> set[str]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return {r["pool"] for r in (allocation.get("devices") or {}).get("results") or ()}


def consumers(claim: Obj) -> list[str]:
    return [c["uid"] for c in (claim.get("status") or {}).get("reservedFor") or ()]
