"""Read-only reads for command-line tools: one object, whole collections, the scheduler's inputs.

``kubectl berth`` (:mod:`berth.cli.kubectl_berth`) reads the cluster once per run and never
writes. :func:`read_cluster` lists, concurrently and in pages (:func:`berth.kube.transport.watching.
list_pages`), everything the scheduler's :class:`~berth.scheduler.snapshot.cache.ClusterCache`
is fed by the operator's informers — nodes, pods, PriorityClasses, Queues, PodGroups,
Reservations, Namespaces, the storage objects (claims, volumes, StorageClasses, CSINodes) and,
where the API server serves ``resource.k8s.io/v1``, the DRA objects (DeviceClasses,
ResourceSlices, ResourceClaims and their templates; ``ClusterObjects.dynamic_resources``) —
and :func:`fill_cache` hands them to a cache with the informers' rule for which
pods it takes, so that a dry-run session sees what the operator's scheduler sees.

Every call is a GET; failures arrive as :mod:`berth.kube.transport.errors`.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import typing

import kubernetes_asyncio.client

from berth.api import core, custom_objects, dra, keys, storage
from berth.api import objects as api_objects
from berth.kube.transport import dra_discovery, rest, watching
from berth.scheduler.snapshot import cache as cluster_cache

__all__ = [
    "CLAIMS",
    "CLAIM_TEMPLATES",
    "CSI_NODES",
    "ClusterObjects",
    "DEVICE_CLASSES",
    "EVENTS",
    "NAMESPACES",
    "NODES",
    "PODGROUPS",
    "PODS",
    "PRIORITY_CLASSES",
    "QUEUES",
    "RESERVATIONS",
    "RESOURCE_CLAIMS",
    "RESOURCE_SLICES",
    "STORAGE_CLASSES",
    "VOLUMES",
    "Collection",
    "fill_cache",
    "get",
    "list_all",
    "read_cluster",
    "takes_pod",
]

_BERTH = f"/apis/{keys.API_VERSION}"
_TERMINAL = frozenset({"Succeeded", "Failed"})


@dataclasses.dataclass(frozen=True)
class Collection:
    """A kind's REST collection: its API base path and plural, and whether it is namespaced."""

    base: str  # "/api/v1", "/apis/scheduling.berth.io/v1alpha1"
    plural: str  # "pods", "podgroups"
    namespaced: bool

    def path(self, *, namespace: str | None = None, name: str | None = None) -> str:
        """The collection (every namespace when ``namespace`` is None) or one object in it."""
        scope = f"/namespaces/{namespace}" if self.namespaced and namespace is not None else ""
        return f"{self.base}{scope}/{self.plural}" + (f"/{name}" if name is not None else "")


NODES = Collection("/api/v1", "nodes", namespaced=False)
NAMESPACES = Collection("/api/v1", "namespaces", namespaced=False)
PODS = Collection("/api/v1", "pods", namespaced=True)
EVENTS = Collection("/api/v1", "events", namespaced=True)
PRIORITY_CLASSES = Collection("/apis/scheduling.k8s.io/v1", "priorityclasses", namespaced=False)
QUEUES = Collection(_BERTH, "queues", namespaced=False)
PODGROUPS = Collection(_BERTH, "podgroups", namespaced=True)
RESERVATIONS = Collection(_BERTH, "reservations", namespaced=True)
CLAIMS = Collection("/api/v1", "persistentvolumeclaims", namespaced=True)
VOLUMES = Collection("/api/v1", "persistentvolumes", namespaced=False)
STORAGE_CLASSES = Collection("/apis/storage.k8s.io/v1", "storageclasses", namespaced=False)
CSI_NODES = Collection("/apis/storage.k8s.io/v1", "csinodes", namespaced=False)
DEVICE_CLASSES = Collection(dra_discovery.PATH, "deviceclasses", namespaced=False)
RESOURCE_SLICES = Collection(dra_discovery.PATH, "resourceslices", namespaced=False)
RESOURCE_CLAIMS = Collection(dra_discovery.PATH, "resourceclaims", namespaced=True)
CLAIM_TEMPLATES = Collection(dra_discovery.PATH, "resourceclaimtemplates", namespaced=True)


@dataclasses.dataclass(frozen=True)
class ClusterObjects:
    """Everything the scheduler's cache is built from, as the API server listed it."""

    nodes: tuple[core.Node, ...] = ()
    pods: tuple[core.Pod, ...] = ()
    priority_classes: tuple[api_objects.KubeObject, ...] = ()  # read field by field by the cache
    queues: tuple[custom_objects.Queue, ...] = ()
    pod_groups: tuple[custom_objects.PodGroup, ...] = ()
    reservations: tuple[custom_objects.Reservation, ...] = ()
    namespaces: tuple[core.Namespace, ...] = ()
    claims: tuple[storage.PersistentVolumeClaim, ...] = ()
    volumes: tuple[storage.PersistentVolume, ...] = ()
    storage_classes: tuple[storage.StorageClass, ...] = ()
    csi_nodes: tuple[storage.CSINode, ...] = ()
    dynamic_resources: bool = False  # the API server serves resource.k8s.io/v1
    device_classes: tuple[dra.DeviceClass, ...] = ()
    resource_slices: tuple[dra.ResourceSlice, ...] = ()
    resource_claims: tuple[dra.ResourceClaim, ...] = ()
    claim_templates: tuple[dra.ResourceClaimTemplate, ...] = ()


async def get(
    api: kubernetes_asyncio.client.ApiClient,
    collection: Collection,
    /,
    *,
    name: str,
    namespace: str | None = None,
    timeout: float | None = 30.0,
) -> api_objects.KubeObject:
    """One object (``NotFound`` when there is none): the caller reads it as its kind's record."""
    path = collection.path(namespace=namespace, name=name)
    # The answer to a GET of one object is that object.
    found = await rest.request(api, method="GET", path=path, timeout=timeout)
    return typing.cast(api_objects.KubeObject, found)


async def list_all(
    api: kubernetes_asyncio.client.ApiClient,
    collection: Collection,
    /,
    *,
    namespace: str | None = None,
) -> tuple[api_objects.KubeObject, ...]:
    """Every object of ``collection`` (in ``namespace``, or in all of them when None); the
    caller, which named the collection, reads them as its kind's records."""
    listing = await watching.list_pages(api, path=collection.path(namespace=namespace))
    return tuple(listing.items)


async def read_cluster(api: kubernetes_asyncio.client.ApiClient) -> ClusterObjects:
    """The scheduler's inputs, listed concurrently (see the module docstring)."""
    listed = await asyncio.gather(
        *(
            list_all(api, collection)
            for collection in (
                NODES,
                PODS,
                PRIORITY_CLASSES,
                QUEUES,
                PODGROUPS,
                RESERVATIONS,
                NAMESPACES,
                CLAIMS,
                VOLUMES,
                STORAGE_CLASSES,
                CSI_NODES,
            )
        )
    )
    nodes, pods, classes, queues, groups, reservations, namespaces = listed[:7]
    claims, volumes, storage_classes, csi_nodes = listed[7:]
    served = await dra_discovery.served(api)
    devices: list[tuple[api_objects.KubeObject, ...]] = [(), (), (), ()]
    if served:
        devices = list(
            await asyncio.gather(
                *(
                    list_all(api, collection)
                    for collection in (
                        DEVICE_CLASSES,
                        RESOURCE_SLICES,
                        RESOURCE_CLAIMS,
                        CLAIM_TEMPLATES,
                    )
                )
            )
        )
    # Each list is of the kind its collection names.
    return ClusterObjects(
        nodes=typing.cast(tuple[core.Node, ...], nodes),
        pods=typing.cast(tuple[core.Pod, ...], pods),
        priority_classes=classes,
        queues=typing.cast(tuple[custom_objects.Queue, ...], queues),
        pod_groups=typing.cast(tuple[custom_objects.PodGroup, ...], groups),
        reservations=typing.cast(tuple[custom_objects.Reservation, ...], reservations),
        namespaces=typing.cast(tuple[core.Namespace, ...], namespaces),
        claims=typing.cast(tuple[storage.PersistentVolumeClaim, ...], claims),
        volumes=typing.cast(tuple[storage.PersistentVolume, ...], volumes),
        storage_classes=typing.cast(tuple[storage.StorageClass, ...], storage_classes),
        csi_nodes=typing.cast(tuple[storage.CSINode, ...], csi_nodes),
        dynamic_resources=served,
        device_classes=typing.cast(tuple[dra.DeviceClass, ...], devices[0]),
        resource_slices=typing.cast(tuple[dra.ResourceSlice, ...], devices[1]),
        resource_claims=typing.cast(tuple[dra.ResourceClaim, ...], devices[2]),
        claim_templates=typing.cast(tuple[dra.ResourceClaimTemplate, ...], devices[3]),
    )


def takes_pod(
    pod: collections.abc.Mapping[str, object],  # a listed pod, as decoded: checked as read
    *,
    ours: collections.abc.Set[str],
) -> bool:
    """Whether the scheduler's cache holds ``pod``: the informers' rule (a scheduler's own pods
    in any phase, since finished members count for their gangs; anyone else's pods while they
    are bound and not finished, since they use node capacity)."""
    spec = pod.get("spec")
    status = pod.get("status")
    spec = spec if isinstance(spec, dict) else {}
    status = status if isinstance(status, dict) else {}
    if spec.get("schedulerName") in ours:
        return True
    return bool(spec.get("nodeName")) and status.get("phase") not in _TERMINAL


def fill_cache(
    cache: cluster_cache.ClusterCache,
    objects: ClusterObjects,
    *,
    scheduler_names: collections.abc.Set[str],
) -> list[str]:
    """Add ``objects`` to ``cache``; one line per object the cache cannot read (skipped, as
    the informers skip it). The PriorityClasses, queues, groups and reservations that pods
    resolve against go in first."""
    skipped: list[str] = []
    if objects.dynamic_resources:
        cache.watch_devices()
    # The cache's add_* read their kind's record (each checks what it reads).
    feeds: tuple[
        tuple[
            str, tuple[api_objects.KubeObject, ...], collections.abc.Callable[[typing.Any], None]
        ],
        ...,
    ] = (
        ("priorityclass", objects.priority_classes, cache.add_priority_class),
        ("namespace", objects.namespaces, cache.add_namespace),
        ("storageclass", objects.storage_classes, cache.add_storage_class),
        ("persistentvolume", objects.volumes, cache.add_volume),
        ("persistentvolumeclaim", objects.claims, cache.add_claim),
        ("csinode", objects.csi_nodes, cache.add_csi_node),
        ("deviceclass", objects.device_classes, cache.add_device_class),
        ("resourceslice", objects.resource_slices, cache.add_resource_slice),
        ("resourceclaim", objects.resource_claims, cache.add_resource_claim),
        ("resourceclaimtemplate", objects.claim_templates, cache.add_resource_claim_template),
        ("node", objects.nodes, cache.add_node),
        ("queue", objects.queues, cache.add_queue),
        ("podgroup", objects.pod_groups, cache.add_pod_group),
        ("reservation", objects.reservations, cache.add_reservation),
        ("pod", objects.pods, cache.add_pod),
    )
    for kind, items, add in feeds:
        for obj in items:
            if kind == "pod" and not takes_pod(obj, ours=scheduler_names):
                continue
            try:
                add(obj)
            except Exception as exc:  # one broken object must not hide the rest of the cluster
                skipped.append(f"{kind} {_display_name(obj)}: cannot be read ({exc})")
    return skipped


def _display_name(obj: collections.abc.Mapping[str, object]) -> str:  # any object: checked
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    name = str(metadata.get("name") or "?")
    namespace = metadata.get("namespace")
    return f"{namespace}/{name}" if namespace else name
