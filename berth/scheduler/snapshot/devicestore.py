"""``DeviceStore``: the cache's store of DRA objects, one map per kind, and its snapshot view.

Owns the DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates the cache
has seen, parsed once per change, and which pods use claims (by key). It hands each snapshot a
frozen :class:`~berth.scheduler.snapshot.devices.Devices`, rebuilt only when something
changed; its :class:`~berth.scheduler.snapshot.devices.Catalog` (classes and slices) is rebuilt only
when a class or a slice changed, and the selector answers outlive it for the devices of every
slice that did not change: a claim allocated, a pod bound or a node's slice republished costs
no CEL evaluation of the other devices.

Methods take the objects as the API returns them and report whether anything changed that
could let waiting work fit (the cache counts such a change as a change of the world). Pure and
synchronous; :class:`berth.scheduler.snapshot.cache.ClusterCache` routes to it.
"""

from __future__ import annotations

import types
import typing

from berth.scheduler.snapshot import (
    deviceclasses,
    devices,
    ids,
    resourceclaims,
    resourceslices,
    wire,
)

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import pods

__all__ = ["DeviceStore"]


def _name_of(obj: typing.Any) -> str:
    if isinstance(obj, str):
        return obj
    return str(wire.sub(wire.as_raw(obj), "metadata").get("name") or "")


def _key_of(obj: typing.Any) -> str:
    if isinstance(obj, str):
        return obj
    meta = wire.sub(wire.as_raw(obj), "metadata")
    return ids.key_of(str(meta.get("namespace") or "default"), name=str(meta.get("name") or ""))


class DeviceStore:
    """DRA objects by kind; :meth:`view` gives a snapshot its frozen form."""

    def __init__(self, *, watched: bool = False) -> None:
        """``watched``: the cache's source feeds it DRA objects (see ``Devices.watched``)."""
        self._watched = watched
        self._classes: dict[str, deviceclasses.DeviceClassInfo] = {}
        self._slices: dict[str, resourceslices.SliceInfo] = {}
        self._claims: dict[str, resourceclaims.ResourceClaimInfo] = {}
        self._templates: dict[str, resourceclaims.ResourceClaimTemplateInfo] = {}
        self._claimants: set[str] = set()
        self._selections: devices.Selections = {}  # kept across catalogs (see the module)
        self._catalog: devices.Catalog | None = devices.EMPTY_CATALOG
        self._view: devices.Devices | None = None

    # DeviceClasses ------------------------------------------------------------------------
    def add_device_class(self, raw: typing.Any, /) -> bool:
        info = deviceclasses.device_class_info(raw)
        if self._classes.get(info.name) == info:
            return False
        self._classes[info.name] = info
        self._catalog_changed()
        return True

    def remove_device_class(self, obj: typing.Any, /) -> bool:
        if self._classes.pop(_name_of(obj), None) is None:
            return False
        self._catalog_changed()
        return True

    # ResourceSlices -----------------------------------------------------------------------
    def add_resource_slice(self, raw: typing.Any, /) -> bool:
        info = resourceslices.resource_slice_info(raw)
        self._forget(self._slices.get(info.name))
        self._slices[info.name] = info  # slices compare by identity: always a change
        self._catalog_changed()
        return True

    def remove_resource_slice(self, obj: typing.Any, /) -> bool:
        old = self._slices.pop(_name_of(obj), None)
        if old is None:
            return False
        self._forget(old)
        self._catalog_changed()
        return True

    def _forget(self, old: resourceslices.SliceInfo | None) -> None:
        """Drop the selector answers for a slice's devices (they are new objects now)."""
        for device in old.devices if old is not None else ():
            self._selections.pop(device, None)

    # ResourceClaims -----------------------------------------------------------------------
    def add_resource_claim(self, raw: typing.Any, /) -> bool:
        info = resourceclaims.resource_claim_info(raw)
        if self._claims.get(info.key) == info:
            return False
        self._claims[info.key] = info
        self._view = None
        return True

    def remove_resource_claim(self, obj: typing.Any, /) -> bool:
        if self._claims.pop(_key_of(obj), None) is None:
            return False
        self._view = None
        return True

    def claim(self, key: str, /) -> resourceclaims.ResourceClaimInfo | None:
        """The claim ``namespace/name`` as last seen."""
        return self._claims.get(key)

    # ResourceClaimTemplates ---------------------------------------------------------------
    def add_resource_claim_template(self, raw: typing.Any, /) -> bool:
        info = resourceclaims.resource_claim_template_info(raw)
        if self._templates.get(info.key) == info:
            return False
        self._templates[info.key] = info
        self._view = None
        return True

    def remove_resource_claim_template(self, obj: typing.Any, /) -> bool:
        if self._templates.pop(_key_of(obj), None) is None:
            return False
        self._view = None
        return True

    # Pods ---------------------------------------------------------------------------------
    def pod_changed(self, key: str, info: pods.PodInfo | None, /) -> None:
        """``key`` is now ``info`` (``None``: gone): the store tracks which pods use claims."""
        uses = info is not None and bool(info.resource_claims)
        if uses == (key in self._claimants):
            return  # the view holds keys only: the snapshot's pods say the rest
        if uses:
            self._claimants.add(key)
        else:
            self._claimants.discard(key)
        self._view = None

    # Views --------------------------------------------------------------------------------
    def _catalog_changed(self) -> None:
        self._catalog = None
        self._view = None

    def view(self) -> devices.Devices:
        """The snapshot's frozen view (the same object while nothing changed)."""
        if self._view is None:
            if self._catalog is None:
                self._catalog = devices.Catalog(
                    classes=types.MappingProxyType(dict(sorted(self._classes.items()))),
                    slices=types.MappingProxyType(dict(sorted(self._slices.items()))),
                    selections=self._selections,
                )
            self._view = devices.Devices(
                catalog=self._catalog,
                claims=types.MappingProxyType(dict(self._claims)),
                templates=types.MappingProxyType(dict(self._templates)),
                claimants=tuple(sorted(self._claimants)),
                watched=self._watched,
            )
        return self._view
