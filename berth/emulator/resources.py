"""The resources the emulator serves: built-in kinds and those registered by CRDs.

A :class:`Resource` is one group/version/plural with what discovery advertises about it (kind,
scope, short names, categories, subresources). Objects are stored per :attr:`Resource.key`
(group and plural, without the version), so every served version of a CRD sees the same objects.
:class:`Registry` is the mutable table the server consults on every request; CRD creation and
deletion (:mod:`berth.emulator.crds`) add and remove rows.
"""

from __future__ import annotations

import dataclasses
import typing

from berth.api import apiextensions, schemas

__all__ = ["BUILTINS", "ALL_VERBS", "Registry", "Resource", "StorageKey"]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

StorageKey = tuple[str, str]  # (group, plural): where a resource's objects live in storage


@dataclasses.dataclass(frozen=True)
class Resource:
    """One served resource (a row of discovery)."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # "status", "binding", "eviction", ...
    verbs: tuple[str, ...] = ALL_VERBS
    schema: schemas.JSONSchemaProps | None = None  # CRDs: the openAPIV3Schema
    printer_columns: tuple[apiextensions.CustomResourceColumnDefinition, ...] = ()  # CRDs only
    custom: bool = False  # registered by a CRD (JSON merge only, schema-checked, ...)

    @property
    def key(self) -> StorageKey:
        return (self.group, self.plural)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _core(kind: str, plural: str, *, namespaced: bool = True, **extra: typing.Any) -> Resource:
    return Resource(
        group="",
        version="v1",
        kind=kind,
        plural=plural,
        namespaced=namespaced,
        singular=kind.lower(),
        **extra,
    )


def _in(group: str, version: str, kind: str, plural: str, **extra: typing.Any) -> Resource:
    extra.setdefault("namespaced", True)
    return Resource(
        group=group, version=version, kind=kind, plural=plural, singular=kind.lower(), **extra
    )


_RBAC = "rbac.authorization.k8s.io"
_RESOURCE = "resource.k8s.io"
BUILTINS: tuple[Resource, ...] = (
    _core(
        "Namespace",
        "namespaces",
        namespaced=False,
        short_names=("ns",),
        subresources=("status", "finalize"),
    ),
    _core("Node", "nodes", namespaced=False, short_names=("no",), subresources=("status",)),
    _core(
        "Pod",
        "pods",
        short_names=("po",),
        categories=("all",),
        subresources=("status", "binding", "eviction"),
    ),
    _core("Binding", "bindings", verbs=("create",)),
    _core("Event", "events", short_names=("ev",)),
    _core("ConfigMap", "configmaps", short_names=("cm",)),
    _core("PodTemplate", "podtemplates"),
    _core("Secret", "secrets"),
    _core(
        "Service", "services", short_names=("svc",), categories=("all",), subresources=("status",)
    ),
    _core("ServiceAccount", "serviceaccounts", short_names=("sa",)),
    _core(
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        short_names=("pvc",),
        subresources=("status",),
    ),
    _core(
        "PersistentVolume",
        "persistentvolumes",
        namespaced=False,
        short_names=("pv",),
        subresources=("status",),
    ),
    _core("Endpoints", "endpoints", short_names=("ep",)),
    _core("ResourceQuota", "resourcequotas", short_names=("quota",), subresources=("status",)),
    _core("LimitRange", "limitranges", short_names=("limits",)),
    _in("coordination.k8s.io", "v1", "Lease", "leases"),
    _in("events.k8s.io", "v1", "Event", "events", short_names=("ev",)),
    _in(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        short_names=("deploy",),
        categories=("all",),
        subresources=("status",),
    ),
    _in(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        short_names=("rs",),
        categories=("all",),
        subresources=("status",),
    ),
    _in(
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        short_names=("sts",),
        categories=("all",),
        subresources=("status",),
    ),
    _in(
        "apps",
        "v1",
        "DaemonSet",
        "daemonsets",
        short_names=("ds",),
        categories=("all",),
        subresources=("status",),
    ),
    _in("batch", "v1", "Job", "jobs", categories=("all",), subresources=("status",)),
    _in(_RBAC, "v1", "Role", "roles"),
    _in(_RBAC, "v1", "RoleBinding", "rolebindings"),
    _in(_RBAC, "v1", "ClusterRole", "clusterroles", namespaced=False),
    _in(_RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False),
    _in(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        short_names=("pdb",),
        subresources=("status",),
    ),
    _in("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", short_names=("netpol",)),
    _in(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        namespaced=False,
        short_names=("pc",),
    ),
    _in(
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        namespaced=False,
        short_names=("sc",),
    ),
    _in("storage.k8s.io", "v1", "CSINode", "csinodes", namespaced=False),
    # Dynamic Resource Allocation: strategies in berth.emulator.dra, the resourceclaim
    # controller's part in berth.emulator.claimcontroller.
    _in(_RESOURCE, "v1", "DeviceClass", "deviceclasses", namespaced=False),
    _in(_RESOURCE, "v1", "ResourceSlice", "resourceslices", namespaced=False),
    _in(_RESOURCE, "v1", "ResourceClaim", "resourceclaims", subresources=("status",)),
    _in(_RESOURCE, "v1", "ResourceClaimTemplate", "resourceclaimtemplates"),
    _in(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        namespaced=False,
    ),
    _in(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        namespaced=False,
    ),
    # Stored, never enforced: the emulator runs no admission policies (the chart's leader
    # fence is enforced by a real API server; docs/chaos.md).
    _in(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        namespaced=False,
        subresources=("status",),
    ),
    _in(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        namespaced=False,
    ),
    _in(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        namespaced=False,
        short_names=("crd", "crds"),
        subresources=("status",),
    ),
)
"""Built-in resources: what kopf, Helm, leader election and Berth's own components touch."""


class Registry:
    """Served resources by group/version/plural; the source of discovery and routing.

    ``generation`` counts changes, so that discovery and OpenAPI documents can be cached and
    their hashes change whenever a CRD comes or goes.
    """

    def __init__(self, resources: typing.Iterable[Resource] = BUILTINS) -> None:
        self._by_gvr: dict[tuple[str, str, str], Resource] = {}
        self._preferred: dict[str, str] = {}  # group -> preferred version
        self.generation = 0
        for resource in resources:
            self.add(resource)

    def add(self, resource: Resource, *, preferred: bool = False) -> None:
        self._by_gvr[(resource.group, resource.version, resource.plural)] = resource
        if preferred or resource.group not in self._preferred:
            self._preferred[resource.group] = resource.version
        self.generation += 1

    def remove_group_plural(self, group: str, plural: str) -> None:
        """Forget every version of ``plural.group`` (its CRD was deleted or replaced)."""
        for key in [k for k in self._by_gvr if k[0] == group and k[2] == plural]:
            del self._by_gvr[key]
        if not any(k[0] == group for k in self._by_gvr):
            self._preferred.pop(group, None)
        self.generation += 1

    def get(self, group: str, version: str, plural: str) -> Resource | None:
        return self._by_gvr.get((group, version, plural))

    def by_kind(self, group: str, version: str, kind: str) -> Resource | None:
        for resource in self._by_gvr.values():
            if (resource.group, resource.version, resource.kind) == (group, version, kind):
                return resource
        return None

    def in_group_version(self, group: str, version: str) -> list[Resource]:
        found = [r for r in self._by_gvr.values() if (r.group, r.version) == (group, version)]
        return sorted(found, key=lambda r: r.plural)

    def group_versions(self) -> dict[str, list[str]]:
        """Each group's versions, the preferred one first; the core group is ``""``."""
        versions: dict[str, list[str]] = {}
        for group, version, _ in sorted(self._by_gvr):
            if version not in versions.setdefault(group, []):
                versions[group].append(version)
        for group, listed in versions.items():
            preferred = self._preferred.get(group, listed[0])
            listed.sort(key=lambda v: (v != preferred, v))
        return versions

    def preferred_version(self, group: str) -> str | None:
        return self._preferred.get(group)

    def all(self) -> list[Resource]:
        return sorted(self._by_gvr.values(), key=lambda r: (r.group, r.version, r.plural))
