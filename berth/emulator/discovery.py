"""Discovery: ``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>``, ``/apis/<g>/<v>``.

Built from the :class:`~berth.emulator.resources.Registry` on each request, so a CRD is
discoverable as soon as it is stored. These are the legacy (unaggregated) documents: clients
that ask for aggregated discovery get them as plain ``application/json`` and fall back, as they
do against older API servers. Subresources are listed as ``pods/status`` and the like, with no
short names (kubectl trips over short names on subresources).
"""

from __future__ import annotations

from berth.api import discovery
from berth.emulator import resources

__all__ = [
    "KUBERNETES_VERSION",
    "api_group",
    "api_group_list",
    "api_versions",
    "resource_list",
    "version",
]

KUBERNETES_VERSION = (1, 37, 0)

_SUBRESOURCES: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    # name: (group, version, kind, verbs); an empty group/version means the parent's
    "status": ("", "", "", ("get", "patch", "update")),
    "binding": ("", "", "Binding", ("create",)),
    "eviction": ("policy", "v1", "Eviction", ("create",)),
    "finalize": ("", "", "", ("update",)),
    "scale": ("autoscaling", "v1", "Scale", ("get", "patch", "update")),
}


def version() -> discovery.VersionInfo:
    major, minor, patch = KUBERNETES_VERSION
    return {
        "major": str(major),
        "minor": str(minor),
        "gitVersion": f"v{major}.{minor}.{patch}-berth",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25",
        "compiler": "gc",
        "platform": "linux/amd64",
        "emulationMajor": str(major),
        "emulationMinor": str(minor),
        "minCompatibilityMajor": str(major),
        "minCompatibilityMinor": str(minor - 1),
    }


def api_versions(*, address: str) -> discovery.APIVersions:
    """``/api``: the core group's versions."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _entry(resource: resources.Resource) -> discovery.APIResource:
    entry: discovery.APIResource = {
        "name": resource.plural,
        "singularName": resource.singular,
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": list(resource.verbs),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    return entry


def resource_list(
    registry: resources.Registry, group: str, version: str
) -> discovery.APIResourceList | None:
    """``/api/v1`` or ``/apis/<g>/<v>``: an APIResourceList, or None for an unknown one."""
    served = registry.in_group_version(group, version)
    if not served:
        return None
    entries: list[discovery.APIResource] = []
    for resource in served:
        entries.append(_entry(resource))
        for sub in resource.subresources:
            sub_group, sub_version, sub_kind, verbs = _SUBRESOURCES.get(sub, ("", "", "", ("get",)))
            entry: discovery.APIResource = {
                "name": f"{resource.plural}/{sub}",
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": sub_kind or resource.kind,
                "verbs": list(verbs),
            }
            if sub_group:
                entry["group"], entry["version"] = sub_group, sub_version
            entries.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": entries,
    }


def api_group(registry: resources.Registry, group: str) -> discovery.APIGroup | None:
    """``/apis/<g>``: one APIGroup, or None for an unknown group."""
    versions = registry.group_versions().get(group)
    if not versions or not group:
        return None
    listed = [
        discovery.GroupVersionForDiscovery(groupVersion=f"{group}/{v}", version=v) for v in versions
    ]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": listed,
        "preferredVersion": listed[0],
    }


def api_group_list(registry: resources.Registry) -> discovery.APIGroupList:
    """``/apis``: every named group, the preferred version first."""
    groups = []
    for group in registry.group_versions():
        found = api_group(registry, group)
        if found is not None:
            found.pop("kind")
            found.pop("apiVersion")
            groups.append(found)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
