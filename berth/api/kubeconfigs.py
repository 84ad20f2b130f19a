"""A kubeconfig (client-go's ``clientcmd/v1`` Config) as Berth writes it: a typed record.

What the emulator hands its clients (:meth:`berth.emulator.server.Emulator.kubeconfig`): the
clusters, users and contexts, by name, and the current context. Keys are spelt as kubectl writes
them (``current-context``, ``certificate-authority-data``), hence the functional TypedDict form
where a key is not an identifier.
"""

from __future__ import annotations

import typing_extensions

__all__ = [
    "AuthInfo",
    "Cluster",
    "Context",
    "Kubeconfig",
    "NamedAuthInfo",
    "NamedCluster",
    "NamedContext",
]

Cluster = typing_extensions.TypedDict(
    "Cluster",
    {
        "server": str,
        "certificate-authority": str,
        "certificate-authority-data": str,
        "insecure-skip-tls-verify": bool,
    },
    total=False,
)

AuthInfo = typing_extensions.TypedDict(
    "AuthInfo",
    {
        "token": str,
        "client-certificate": str,
        "client-key": str,
        "client-certificate-data": str,
        "client-key-data": str,
    },
    total=False,
)


class Context(typing_extensions.TypedDict, total=False):
    cluster: str
    user: str
    namespace: str


class NamedCluster(typing_extensions.TypedDict):
    name: str
    cluster: Cluster


class NamedAuthInfo(typing_extensions.TypedDict):
    name: str
    user: AuthInfo


class NamedContext(typing_extensions.TypedDict):
    name: str
    context: Context


Kubeconfig = typing_extensions.TypedDict(
    "Kubeconfig",
    {
        "apiVersion": str,
        "kind": str,  # "Config"
        "clusters": list[NamedCluster],
        "users": list[NamedAuthInfo],
        "contexts": list[NamedContext],
        "current-context": str,
        "preferences": dict[str, str],
    },
    total=False,
)
