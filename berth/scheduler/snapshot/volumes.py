"""The storage a pod's claims reach: PersistentVolumeClaims, PersistentVolumes, StorageClasses
and the CSI attach limits of nodes, parsed once from the API's dicts.

What kube-scheduler's volume plugins read, in frozen form:

- :class:`ClaimInfo`: a claim's class, the volume it is bound to (``spec.volumeName`` once its
  ``status.phase`` is ``Bound``), access modes, requested storage and the node kube-scheduler's
  way of delayed binding selected for it (annotation :data:`SELECTED_NODE`);
- :class:`VolumeInfo`: a PersistentVolume's class, capacity, access modes, required node
  affinity, the claim it is reserved for or bound to (``spec.claimRef``), its CSI driver and
  the ``resourceVersion`` it was read at (a reservation of it is written conditional on it);
- :class:`ClassInfo`: a StorageClass's provisioner, binding mode and allowed topologies;
- :class:`Volumes`: all of them for one snapshot, plus per node the CSI drivers' attach limits
  (CSINode ``spec.drivers[].allocatable.count``).

Malformed objects never raise: a claim or volume with a bad field carries ``problem`` (naming
the field), and a pod using it waits with that reason.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import types
import typing

from berth.api import errors, storage
from berth.scheduler.snapshot import ids, selectors, wire

__all__ = [
    "BOUND",
    "EMPTY",
    "NO_PROVISIONER",
    "READ_WRITE_ONCE_POD",
    "SELECTED_NODE",
    "ClaimInfo",
    "ClassInfo",
    "VolumeInfo",
    "Volumes",
    "attach_limits",
    "claim_info",
    "class_info",
    "volume_info",
]

SELECTED_NODE = "volume.kubernetes.io/selected-node"
"""The claim annotation naming the node a delayed-binding claim is to be provisioned for."""
NO_PROVISIONER = "kubernetes.io/no-provisioner"
"""The provisioner of classes of statically provisioned (local) volumes only."""
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
BOUND = "Bound"
_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
_STORAGE = "storage"


@dataclasses.dataclass(frozen=True)
class ClaimInfo:
    """One PersistentVolumeClaim."""

    key: str  # namespace/name
    uid: str
    storage_class: str  # spec.storageClassName; "" when unset or empty (no class)
    volume_name: str  # spec.volumeName ("" until the PV binder picks one)
    phase: str  # status.phase
    access_modes: frozenset[str]
    request: int  # spec.resources.requests.storage, milli-bytes
    selected_node: str | None  # the SELECTED_NODE annotation
    deleting: bool
    problem: str | None = None  # a malformed field, named

    @property
    def bound(self) -> bool:
        """The PV binder finished: the claim has its volume."""
        return bool(self.volume_name) and self.phase == BOUND

    @property
    def read_write_once_pod(self) -> bool:
        return READ_WRITE_ONCE_POD in self.access_modes


@dataclasses.dataclass(frozen=True)
class VolumeInfo:
    """One PersistentVolume."""

    name: str
    storage_class: str
    capacity: int  # milli-bytes
    access_modes: frozenset[str]
    node_affinity: tuple[selectors.SelectorTerm, ...] | None  # None: any node
    claim: str | None  # spec.claimRef as namespace/name
    csi_driver: str | None
    handle: str  # the CSI volume handle (the name when not CSI): what counts as one attachment
    phase: str
    deleting: bool
    version: str = ""  # metadata.resourceVersion as read

    @property
    def available(self) -> bool:
        """Free for any claim of its class (not reserved, not released or failed)."""
        return self.claim is None and self.phase in ("", "Available") and not self.deleting


@dataclasses.dataclass(frozen=True)
class ClassInfo:
    """One StorageClass."""

    name: str
    provisioner: str
    wait_for_first_consumer: bool  # volumeBindingMode
    allowed_topologies: tuple[selectors.SelectorTerm, ...] | None  # None: anywhere

    @property
    def provisions(self) -> bool:
        """A provisioner creates volumes for its claims (not static volumes only)."""
        return bool(self.provisioner) and self.provisioner != NO_PROVISIONER


@dataclasses.dataclass(frozen=True)
class Volumes:
    """The storage objects of one snapshot."""

    claims: collections.abc.Mapping[str, ClaimInfo] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )
    volumes: collections.abc.Mapping[str, VolumeInfo] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )
    classes: collections.abc.Mapping[str, ClassInfo] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )
    # node name -> CSI driver -> how many of its volumes the node may attach
    attach_limits: collections.abc.Mapping[str, collections.abc.Mapping[str, int]] = (
        dataclasses.field(default_factory=lambda: types.MappingProxyType({}))
    )

    @functools.cached_property
    def _free_by_class(self) -> dict[str, tuple[VolumeInfo, ...]]:
        found: dict[str, list[VolumeInfo]] = {}
        for volume in self.volumes.values():
            if volume.available:
                found.setdefault(volume.storage_class, []).append(volume)
        return {
            cls: tuple(sorted(vols, key=lambda v: (v.capacity, v.name)))
            for cls, vols in found.items()
        }

    def candidates(self, claim: ClaimInfo, /) -> tuple[VolumeInfo, ...]:
        """The volumes the PV binder could give ``claim``: of its class, available or reserved
        for it (``claimRef``), smallest first (capacity and modes still to be checked)."""
        free = self._free_by_class.get(claim.storage_class, ())
        reserved = (
            tuple(
                v
                for v in self.volumes.values()
                if v.claim == claim.key and v.storage_class == claim.storage_class
            )
            if self._reserved_any
            else ()
        )
        if not reserved:
            return free
        return tuple(sorted((*reserved, *free), key=lambda v: (v.capacity, v.name)))

    @functools.cached_property
    def _reserved_any(self) -> bool:
        return any(v.claim is not None and v.phase != BOUND for v in self.volumes.values())

    def limits(self, driver: str, /) -> collections.abc.Mapping[str, int]:
        """Node -> how many volumes of ``driver`` it may attach (nodes declaring a limit)."""
        cache = self._limits_by_driver
        found = cache.get(driver)
        if found is None:
            found = cache[driver] = {
                node: drivers[driver]
                for node, drivers in self.attach_limits.items()
                if driver in drivers
            }
        return found

    @functools.cached_property
    def _limits_by_driver(self) -> dict[str, dict[str, int]]:
        return {}

    def driver_of(self, claim: ClaimInfo, /) -> tuple[str, str] | None:
        """The CSI driver and volume handle ``claim`` attaches on a node: its bound volume's,
        else (to be provisioned) its class's provisioner and the claim itself."""
        if claim.volume_name:
            volume = self.volumes.get(claim.volume_name)
            if volume is None or volume.csi_driver is None:
                return None
            return volume.csi_driver, volume.handle
        cls = self.classes.get(claim.storage_class)
        if cls is None or not cls.provisions:
            return None
        return cls.provisioner, f"claim:{claim.key}"


EMPTY = Volumes()


def _modes(raw: typing.Any) -> frozenset[str]:
    return frozenset(str(m) for m in raw) if isinstance(raw, list) else frozenset()


def _storage(raw: collections.abc.Mapping[str, str], *, field: str) -> tuple[int, str | None]:
    text = raw.get(_STORAGE)
    if text is None:
        return 0, None
    try:
        return wire.milli(text), None
    except errors.QuantityError as exc:
        return 0, f"invalid {field}.storage: {exc}"


def claim_info(raw: typing.Any, /) -> ClaimInfo:
    """Parse a PersistentVolumeClaim."""
    obj = typing.cast(storage.PersistentVolumeClaim, wire.as_raw(raw))
    meta = wire.part(obj.get("metadata"))
    spec, status = wire.part(obj.get("spec")), wire.part(obj.get("status"))
    annotations = wire.part(meta.get("annotations"))
    request, problem = _storage(
        wire.part(wire.part(spec.get("resources")).get("requests")),
        field="spec.resources.requests",
    )
    selected = annotations.get(SELECTED_NODE)
    return ClaimInfo(
        key=ids.key_of(str(meta.get("namespace") or "default"), name=str(meta.get("name") or "")),
        uid=str(meta.get("uid") or ""),
        storage_class=str(spec.get("storageClassName") or ""),
        volume_name=str(spec.get("volumeName") or ""),
        phase=str(status.get("phase") or ""),
        access_modes=_modes(spec.get("accessModes")),
        request=request,
        selected_node=str(selected) if selected else None,
        deleting=bool(meta.get("deletionTimestamp")),
        problem=problem,
    )


def _node_affinity(raw: storage.VolumeNodeAffinity) -> tuple[selectors.SelectorTerm, ...] | None:
    required = wire.part(raw.get("required"))
    if not required:
        return None
    required_affinity, _ = selectors.parse_node_affinity(
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": dict(required)}}
    )
    return required_affinity


def volume_info(raw: typing.Any, /) -> VolumeInfo:
    """Parse a PersistentVolume (a malformed capacity counts as none: no claim fits it)."""
    obj = typing.cast(storage.PersistentVolume, wire.as_raw(raw))
    meta = wire.part(obj.get("metadata"))
    spec, status = wire.part(obj.get("spec")), wire.part(obj.get("status"))
    name = str(meta.get("name") or "")
    capacity, _ = _storage(wire.part(spec.get("capacity")), field="spec.capacity")
    ref = wire.part(spec.get("claimRef"))
    claim = (
        ids.key_of(str(ref.get("namespace") or "default"), name=str(ref.get("name")))
        if ref.get("name")
        else None
    )
    csi = wire.part(spec.get("csi"))
    driver = str(csi["driver"]) if csi.get("driver") else None
    return VolumeInfo(
        name=name,
        storage_class=str(spec.get("storageClassName") or ""),
        capacity=capacity,
        access_modes=_modes(spec.get("accessModes")),
        node_affinity=_node_affinity(wire.part(spec.get("nodeAffinity"))),
        claim=claim,
        csi_driver=driver,
        handle=str(csi.get("volumeHandle") or name),
        phase=str(status.get("phase") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        version=str(meta.get("resourceVersion") or ""),
    )


def class_info(raw: typing.Any, /) -> ClassInfo:
    """Parse a StorageClass (``allowedTopologies`` terms hold ``matchLabelExpressions``)."""
    obj = wire.as_raw(raw)
    topologies = obj.get("allowedTopologies")
    allowed: tuple[selectors.SelectorTerm, ...] | None = None
    if isinstance(topologies, list) and topologies:
        allowed = tuple(
            selectors.SelectorTerm(
                expressions=tuple(
                    selectors.Requirement(
                        key=str(e.get("key") or ""),
                        operator=selectors.IN,
                        values=tuple(str(v) for v in e.get("values") or ()),
                    )
                    for e in (t.get("matchLabelExpressions") or [])
                    if isinstance(e, dict)
                )
            )
            for t in topologies
            if isinstance(t, dict)
        )
    return ClassInfo(
        name=str(wire.part(obj.get("metadata")).get("name") or ""),
        provisioner=str(obj.get("provisioner") or ""),
        wait_for_first_consumer=obj.get("volumeBindingMode") == _WAIT_FOR_FIRST_CONSUMER,
        allowed_topologies=allowed,
    )


def attach_limits(raw: typing.Any, /) -> tuple[str, dict[str, int]]:
    """A CSINode: its node's name and, per driver that declares one, its attach limit."""
    obj = typing.cast(storage.CSINode, wire.as_raw(raw))
    limits: dict[str, int] = {}
    drivers = wire.part(obj.get("spec")).get("drivers")
    for driver in drivers if isinstance(drivers, list) else ():
        if not isinstance(driver, dict) or not driver.get("name"):
            continue
        count = wire.part(driver.get("allocatable")).get("count")
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            limits[str(driver["name"])] = count
    return str(wire.part(obj.get("metadata")).get("name") or ""), limits
