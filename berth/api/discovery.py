"""API discovery (``meta/v1``): what ``/api``, ``/apis`` and ``/apis/<group>/<version>`` serve.

``APIVersions``, ``APIGroupList``, ``APIGroup`` and ``APIResourceList`` as the API server
serves them (the legacy, unaggregated documents), spelt as it does (camelCase keys), and the
``/version`` answer. The emulator builds them from what it serves
(:mod:`berth.emulator.discovery`). See :mod:`berth.api.objects` for what ``total=False``
promises.
"""

from __future__ import annotations

import typing_extensions

__all__ = [
    "APIGroup",
    "APIGroupList",
    "APIResource",
    "APIResourceList",
    "APIVersions",
    "GroupVersionForDiscovery",
    "ServerAddressByClientCIDR",
    "VersionInfo",
]


class ServerAddressByClientCIDR(typing_extensions.TypedDict):
    clientCIDR: str
    serverAddress: str


class APIVersions(typing_extensions.TypedDict, total=False):
    """``/api``: the core group's versions."""

    kind: str
    apiVersion: str
    versions: list[str]
    serverAddressByClientCIDRs: list[ServerAddressByClientCIDR]


class GroupVersionForDiscovery(typing_extensions.TypedDict):
    groupVersion: str  # "<group>/<version>"
    version: str


class APIGroup(typing_extensions.TypedDict, total=False):
    """``/apis/<group>``, and each entry of ``/apis``."""

    kind: str
    apiVersion: str
    name: str
    versions: list[GroupVersionForDiscovery]
    preferredVersion: GroupVersionForDiscovery


class APIGroupList(typing_extensions.TypedDict, total=False):
    kind: str
    apiVersion: str
    groups: list[APIGroup]


class APIResource(typing_extensions.TypedDict, total=False):
    """One resource (or subresource: ``pods/status``) of a group/version."""

    name: str
    singularName: str
    namespaced: bool
    group: str  # a subresource's kind's group, when not its parent's (Eviction: policy)
    version: str
    kind: str
    verbs: list[str]
    shortNames: list[str]
    categories: list[str]


class APIResourceList(typing_extensions.TypedDict, total=False):
    """``/api/v1`` or ``/apis/<group>/<version>``."""

    kind: str
    apiVersion: str
    groupVersion: str
    resources: list[APIResource]


class VersionInfo(typing_extensions.TypedDict, total=False):
    """``/version``: the server's version (``version.Info``)."""

    major: str
    minor: str
    gitVersion: str
    gitCommit: str
    gitTreeState: str
    buildDate: str
    goVersion: str
    compiler: str
    platform: str
    emulationMajor: str
    emulationMinor: str
    minCompatibilityMajor: str
    minCompatibilityMinor: str
