"""``VolumeStore``: the cache's store of storage objects and its snapshot view.

Owns the PersistentVolumeClaims (by key), PersistentVolumes, StorageClasses and CSINodes' attach
limits (by name) the cache has seen, parsed once per change, frozen into one
:class:`~berth.scheduler.snapshot.volumes.Volumes` until the next change.

PersistentVolumes the binder reserves for a claim are *assumed* (kube-scheduler's assume
cache): the volume counts as the claim's from the decision on, until the informer brings a newer
version of it (the API's word, whatever it says) or the binder forgets the assumption because
its write was refused.

Methods report whether anything changed that could let waiting work fit (the cache counts such
a change as a change of the world). Pure and synchronous;
:class:`berth.scheduler.snapshot.cache.ClusterCache` routes to it.
"""

from __future__ import annotations

import dataclasses
import types
import typing

from berth.scheduler.snapshot import volumes, wire

__all__ = ["VolumeStore"]

_Value = typing.TypeVar("_Value")


class VolumeStore:
    """Claims, volumes, classes and attach limits; :meth:`view` gives a snapshot their
    frozen form."""

    def __init__(self) -> None:
        self._claims: dict[str, volumes.ClaimInfo] = {}
        self._volumes: dict[str, volumes.VolumeInfo] = {}
        # Volumes reserved for a claim, not confirmed yet: name -> (claim key, the
        # resourceVersion the reservation was decided on). Shown as the claim's while the
        # informer's version is that one (kube-scheduler's passive assume cache).
        self._assumed: dict[str, tuple[str, str]] = {}
        self._classes: dict[str, volumes.ClassInfo] = {}
        self._attach_limits: dict[str, dict[str, int]] = {}
        self._view: volumes.Volumes | None = volumes.EMPTY

    # PersistentVolumeClaims ---------------------------------------------------------------
    def add_claim(self, raw: typing.Any, /) -> bool:
        """Add or update a PersistentVolumeClaim; whether it changed (bound or resized: a pod
        may fit now)."""
        info = volumes.claim_info(raw)
        changed = self._claims.get(info.key) != info
        self._claims[info.key] = info
        self._view = None
        return changed

    def remove_claim(self, claim: typing.Any, /) -> bool:
        """Remove a PersistentVolumeClaim (by ``namespace/name`` key or object)."""
        return self._drop(self._claims, wire.key_of(claim))

    def claim(self, key: str, /) -> volumes.ClaimInfo | None:
        """The claim ``namespace/name`` as last seen."""
        return self._claims.get(key)

    # PersistentVolumes --------------------------------------------------------------------
    def add_volume(self, raw: typing.Any, /) -> bool:
        """Add or update a PersistentVolume; a newer version ends its assumption."""
        info = volumes.volume_info(raw)
        changed = self._volumes.get(info.name) != info
        self._volumes[info.name] = info
        assumed = self._assumed.get(info.name)
        if assumed is not None and assumed[1] != info.version:
            del self._assumed[info.name]  # the API has spoken since: its word stands
        self._view = None
        return changed

    def remove_volume(self, volume: typing.Any, /) -> bool:
        """Remove a PersistentVolume (by name or object)."""
        name = wire.name_of(volume)
        self._assumed.pop(name, None)
        return self._drop(self._volumes, name)

    def assume_volume(self, name: str, /, *, claim: str, version: str) -> bool:
        """Count the volume ``name`` as reserved for ``claim`` (decided on it at ``version``);
        False when the store holds another version of it, or none."""
        info = self._volumes.get(name)
        if info is None or info.version != version:
            return False
        self._assumed[name] = (claim, version)
        self._view = None
        return True

    def forget_volume(self, name: str, /, *, version: str) -> bool:
        """Undo :meth:`assume_volume`: the volume is free again. False when that assumption is
        not held (any more)."""
        assumed = self._assumed.get(name)
        if assumed is None or assumed[1] != version:
            return False
        del self._assumed[name]
        self._view = None
        return True

    # StorageClasses and CSINodes ----------------------------------------------------------
    def add_storage_class(self, raw: typing.Any, /) -> bool:
        """Add or update a StorageClass."""
        info = volumes.class_info(raw)
        changed = self._classes.get(info.name) != info
        self._classes[info.name] = info
        self._view = None
        return changed

    def remove_storage_class(self, cls: typing.Any, /) -> bool:
        """Remove a StorageClass (by name or object)."""
        return self._drop(self._classes, wire.name_of(cls))

    def add_csi_node(self, raw: typing.Any, /) -> bool:
        """Add or update a CSINode: its node's attach limit per CSI driver."""
        node, limits = volumes.attach_limits(raw)
        changed = self._attach_limits.get(node) != limits
        self._attach_limits[node] = limits
        self._view = None
        return changed

    def remove_csi_node(self, csi_node: typing.Any, /) -> bool:
        """Remove a CSINode (by name or object)."""
        return self._drop(self._attach_limits, wire.name_of(csi_node))

    def _drop(self, kind: dict[str, _Value], name: str) -> bool:
        if kind.pop(name, None) is None:
            return False
        self._view = None
        return True

    # Snapshots ----------------------------------------------------------------------------
    def view(self) -> volumes.Volumes:
        """What a snapshot shows: assumed volumes as their claims', frozen until a change."""
        if self._view is None:
            shown = dict(self._volumes)
            for name, (claim, _) in self._assumed.items():
                shown[name] = dataclasses.replace(shown[name], claim=claim)
            self._view = volumes.Volumes(
                claims=types.MappingProxyType(dict(self._claims)),
                volumes=types.MappingProxyType(shown),
                classes=types.MappingProxyType(dict(self._classes)),
                attach_limits=types.MappingProxyType(
                    {n: types.MappingProxyType(dict(d)) for n, d in self._attach_limits.items()}
                ),
            )
        return self._view
