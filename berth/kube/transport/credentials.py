"""The operator's connection settings as plain data, for clients Berth does not configure itself.

The embedded Kopf operator (:mod:`berth.controllers.registry`) logs in with the same server,
token and certificates as the operator's own ``kubernetes_asyncio`` client, whatever the
kubeconfig or in-cluster service account said: :func:`credentials_of` reads them from that
client's configuration. Asked again when a call was refused with 401, it refreshes rotating
tokens (in-cluster, exec plugins) through the client's own refresh hook first.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing

import kubernetes_asyncio.client

__all__ = ["Credentials", "credentials_of"]


@dataclasses.dataclass(frozen=True)
class Credentials:
    """Where the API server is and how to authenticate to it."""

    server: str
    token: str | None = None
    ca_path: str | None = None
    certificate_path: str | None = None
    private_key_path: str | None = None
    insecure: bool = False


async def credentials_of(api: kubernetes_asyncio.client.ApiClient) -> Credentials:
    """The credentials ``api`` uses now (a refreshed token if its configuration rotates it)."""
    configuration: typing.Any = api.configuration
    hook = getattr(configuration, "refresh_api_key_hook", None)
    if hook is not None:
        refreshed = hook(configuration)
        if inspect.isawaitable(refreshed):
            await refreshed
    token: str | None = None
    for name in ("BearerToken", "authorization"):
        value = (configuration.api_key or {}).get(name)
        if value:
            token = str(value).removeprefix("Bearer ").strip()
            break
    return Credentials(
        server=str(configuration.host),
        token=token,
        ca_path=configuration.ssl_ca_cert or None,
        certificate_path=configuration.cert_file or None,
        private_key_path=configuration.key_file or None,
        insecure=not configuration.verify_ssl,
    )
