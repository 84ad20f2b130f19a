"""Storage kinds (``core/v1`` PersistentVolumeClaim and PersistentVolume, ``storage.k8s.io/v1``
StorageClass and CSINode) as they cross the wire: typed records.

Only the fields Berth reads or writes are declared (the snapshot's volume parser,
:mod:`berth.scheduler.snapshot.volumes`, and the simulator's stand-in for the PV binder and a
provisioner, :mod:`berth.sim.cluster`); every other field is carried along untouched. See
:mod:`berth.api.objects` for what ``total=False`` promises.
"""

from __future__ import annotations

import typing_extensions

from berth.api import core, dra, objects

__all__ = [
    "CSINode",
    "CSINodeDriver",
    "CSINodeSpec",
    "CSIPersistentVolumeSource",
    "ClaimReference",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "PersistentVolumeClaimSpec",
    "PersistentVolumeClaimStatus",
    "PersistentVolumeSpec",
    "PersistentVolumeStatus",
    "StorageClass",
    "TopologySelectorLabelRequirement",
    "TopologySelectorTerm",
    "VolumeNodeAffinity",
    "VolumeNodeResources",
]


class PersistentVolumeClaimSpec(typing_extensions.TypedDict, total=False):
    storageClassName: str | None
    accessModes: list[str]  # ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod
    resources: core.ResourceRequirements  # requests.storage
    volumeName: str


class PersistentVolumeClaimStatus(typing_extensions.TypedDict, total=False):
    phase: str  # Pending, Bound, Lost


class PersistentVolumeClaim(objects.KubeObject, total=False):
    spec: PersistentVolumeClaimSpec
    status: PersistentVolumeClaimStatus


class ClaimReference(typing_extensions.TypedDict, total=False):
    """A volume's ``spec.claimRef`` (an ``ObjectReference`` to the claim it is bound to)."""

    namespace: str
    name: str
    uid: str


class CSIPersistentVolumeSource(typing_extensions.TypedDict, total=False):
    driver: str
    volumeHandle: str


class VolumeNodeAffinity(typing_extensions.TypedDict, total=False):
    required: dra.NodeSelector


class PersistentVolumeSpec(typing_extensions.TypedDict, total=False):
    storageClassName: str | None
    capacity: dict[str, str]  # {storage}
    accessModes: list[str]
    claimRef: ClaimReference
    csi: CSIPersistentVolumeSource
    nodeAffinity: VolumeNodeAffinity


class PersistentVolumeStatus(typing_extensions.TypedDict, total=False):
    phase: str  # Pending, Available, Bound, Released, Failed


class PersistentVolume(objects.KubeObject, total=False):
    spec: PersistentVolumeSpec
    status: PersistentVolumeStatus


class TopologySelectorLabelRequirement(typing_extensions.TypedDict, total=False):
    key: str
    values: list[str]


class TopologySelectorTerm(typing_extensions.TypedDict, total=False):
    matchLabelExpressions: list[TopologySelectorLabelRequirement]


class StorageClass(objects.KubeObject, total=False):
    """``storage.k8s.io/v1`` StorageClass: its fields sit at the top level (it has no spec)."""

    provisioner: str
    volumeBindingMode: str  # Immediate (default), WaitForFirstConsumer
    allowedTopologies: list[TopologySelectorTerm]
    parameters: dict[str, str]
    allowVolumeExpansion: bool


class VolumeNodeResources(typing_extensions.TypedDict, total=False):
    count: int  # volumes of the driver the node can attach


class CSINodeDriver(typing_extensions.TypedDict, total=False):
    name: str
    nodeID: str
    allocatable: VolumeNodeResources
    topologyKeys: list[str]


class CSINodeSpec(typing_extensions.TypedDict, total=False):
    drivers: list[CSINodeDriver]


class CSINode(objects.KubeObject, total=False):
    """``storage.k8s.io/v1`` CSINode: the CSI drivers of a node and how many volumes each
    attaches (the scheduler's attach limits)."""

    spec: CSINodeSpec
