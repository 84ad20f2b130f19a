"""Kubernetes API clients, configured the way kubectl configures itself.

Where the connection comes from, in kubectl's order: an explicit kubeconfig path (``--kubeconfig``);
else the ``KUBECONFIG`` list (files merged, the first to set a value wins, missing files skipped);
else ``~/.kube/config``; and when none of those exists inside a pod, the in-cluster service
account. ``context`` picks a kubeconfig context other than the current one. The namespace a
command works in by default is the context's (``default`` when it names none), or the service
account's in a pod.

Callers outside :mod:`berth.kube` get a :class:`Connection` and plain JSON dicts and see only
:mod:`berth.kube.transport.errors`, never the client library (docs/architecture.md). Today's caller
is the ``kubectl-create-reservation`` plugin (synchronous, one request per run, :func:`connect`) and
the operator (asynchronous, long-running, :func:`connect_async`).
"""

from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import os
import pathlib
import typing
import urllib.parse
import urllib.request

import aiohttp.helpers
import kubernetes.client
import kubernetes.config
import kubernetes_asyncio.client
import kubernetes_asyncio.config
import urllib3.exceptions

from berth.kube.transport import errors, rest

__all__ = [
    "AsyncApiClient",
    "AsyncConnection",
    "Connection",
    "DEFAULT_NAMESPACE",
    "DEFAULT_TIMEOUT",
    "IDLE_CONNECTION_SECONDS",
    "connect",
    "connect_async",
    "create",
    "kubeconfig_paths",
]

DEFAULT_NAMESPACE = "default"
DEFAULT_TIMEOUT = 30.0
"""Seconds one request may take, connection included: kubectl's ``--request-timeout`` is
unlimited by default, but a command line tool that hangs on a dead API server helps nobody."""

IDLE_CONNECTION_SECONDS = 90.0
"""How long an idle connection to the API server is kept for the next request (client-go's)."""

# The library's configuration loaders carry no annotations; reached through an ``Any`` so that
# mypy --strict accepts the calls without an ignore per line.
_config: typing.Any = kubernetes.config
_async_config: typing.Any = kubernetes_asyncio.config

AsyncApiClient: typing.TypeAlias = kubernetes_asyncio.client.ApiClient
"""The asynchronous client the operator's calls go through (see :class:`AsyncConnection`)."""
_SERVICE_ACCOUNT = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclasses.dataclass(frozen=True)
class Connection:
    """A configured client and what it is connected to."""

    api: kubernetes.client.ApiClient
    namespace: str  # the context's (or the service account's) namespace
    server: str  # the API server's URL, for messages
    origin: str  # where the configuration came from, for messages ("in-cluster", a path)


def kubeconfig_paths(
    kubeconfig: str | None = None, *, environ: collections.abc.Mapping[str, str] | None = None
) -> list[pathlib.Path]:
    """The kubeconfig files that apply, in precedence order; only those that exist.

    An explicit ``kubeconfig`` must exist (:class:`~berth.kube.transport.errors.ConfigError`
    otherwise), as kubectl insists; the ``KUBECONFIG`` list and the home default are optional.
    """
    if kubeconfig:
        path = pathlib.Path(kubeconfig).expanduser()
        if not path.is_file():
            raise errors.ConfigError(f"kubeconfig {kubeconfig} does not exist")
        return [path]
    env = os.environ if environ is None else environ
    listed = env.get("KUBECONFIG", "")
    if listed:
        candidates = [pathlib.Path(p).expanduser() for p in listed.split(os.pathsep) if p]
    else:
        candidates = [pathlib.Path("~/.kube/config").expanduser()]
    return [p for p in candidates if p.is_file()]


@contextlib.contextmanager
def connect(
    *, kubeconfig: str | None = None, context: str | None = None
) -> collections.abc.Iterator[Connection]:
    """A connection configured as kubectl would be with these flags; closed on exit."""
    connection = _from_kubeconfig(kubeconfig=kubeconfig, context=context)
    try:
        yield connection
    finally:
        connection.api.close()  # type: ignore[no-untyped-call]


@dataclasses.dataclass(frozen=True)
class _KubeconfigContext:
    """The kubeconfig files and the context a connection uses; None files: in-cluster."""

    files: str | None  # the paths joined with os.pathsep, as the loaders take them
    name: str | None
    namespace: str


def _choose(*, kubeconfig: str | None, context: str | None) -> _KubeconfigContext:
    paths = kubeconfig_paths(kubeconfig)
    if not paths:
        if context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            return _KubeconfigContext(files=None, name=None, namespace=_service_account_namespace())
        raise errors.ConfigError(
            "no kubeconfig found (KUBECONFIG is unset or lists no file, and ~/.kube/config does "
            "not exist): pass --kubeconfig or set KUBECONFIG"
        )
    joined = os.pathsep.join(str(p) for p in paths)
    try:
        contexts, current = _config.list_kube_config_contexts(config_file=joined)
    except kubernetes.config.ConfigException as exc:
        raise errors.ConfigError(f"kubeconfig {joined}: {exc}") from None
    by_name = {c["name"]: c for c in contexts or []}
    name = context or (current or {}).get("name")
    if name is None:
        raise errors.ConfigError(f"kubeconfig {joined} sets no current context: pass --context")
    if name not in by_name:
        raise errors.ConfigError(f'context "{name}" does not exist in {joined}')
    namespace = (by_name[name].get("context") or {}).get("namespace") or DEFAULT_NAMESPACE
    return _KubeconfigContext(files=joined, name=name, namespace=namespace)


def _service_account_namespace() -> str:
    try:
        return (_SERVICE_ACCOUNT / "namespace").read_text().strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


def _from_kubeconfig(*, kubeconfig: str | None, context: str | None) -> Connection:
    chosen = _choose(kubeconfig=kubeconfig, context=context)
    if chosen.files is None:
        return _in_cluster()
    joined, name = chosen.files, chosen.name
    try:
        api = _config.new_client_from_config(config_file=joined, context=name, persist_config=False)
    except (kubernetes.config.ConfigException, ValueError, OSError) as exc:
        raise errors.ConfigError(f'kubeconfig {joined}, context "{name}": {exc}') from None
    return Connection(api, chosen.namespace, str(api.configuration.host), joined)


def _in_cluster() -> Connection:
    configuration = kubernetes.client.Configuration()
    try:
        _config.load_incluster_config(client_configuration=configuration)
    except kubernetes.config.ConfigException as exc:
        raise errors.ConfigError(f"in-cluster configuration: {exc}") from None
    api = kubernetes.client.ApiClient(configuration)
    return Connection(api, _service_account_namespace(), str(configuration.host), "in-cluster")


# Asynchronous connections (the operator) ----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AsyncConnection:
    """A configured ``kubernetes_asyncio`` client and what it is connected to.

    Outside :mod:`berth.kube` the client is opaque: hand it to :mod:`berth.kube.transport.rest` (raw
    JSON requests), :class:`berth.kube.transport.leases.LeaseClient` and the like.
    """

    api: AsyncApiClient
    namespace: str  # the context's (or the service account's) namespace
    server: str  # the API server's URL, for messages
    origin: str  # where the configuration came from, for messages ("in-cluster", a path)


@contextlib.asynccontextmanager
async def connect_async(
    *, kubeconfig: str | None = None, context: str | None = None
) -> collections.abc.AsyncIterator[AsyncConnection]:
    """An asynchronous connection configured as kubectl would be; closed on exit.

    Same rules as :func:`connect`. In a pod, the service account's token is re-read as the
    kubelet rotates it, so a long-running operator does not end up with expired credentials.
    """
    chosen = _choose(kubeconfig=kubeconfig, context=context)
    configuration = kubernetes_asyncio.client.Configuration()
    try:
        if chosen.files is None:
            _async_config.load_incluster_config(client_configuration=configuration)
            origin = "in-cluster"
        else:
            await _async_config.load_kube_config(
                config_file=chosen.files,
                context=chosen.name,
                client_configuration=configuration,
                persist_config=False,
            )
            origin = chosen.files
    except (kubernetes_asyncio.config.ConfigException, ValueError, OSError) as exc:
        where = "in-cluster configuration" if chosen.files is None else f"kubeconfig {chosen.files}"
        raise errors.ConfigError(f"{where}: {exc}") from None
    _settle_environment(configuration)
    api = kubernetes_asyncio.client.ApiClient(configuration)
    # kubernetes_asyncio's session trusts the environment, so aiohttp looks up ~/.netrc and
    # the proxy variables in a worker thread on every request: two thread hops per binding.
    # _settle_environment did the proxy part once; .netrc is not kubectl's either.
    api.rest_client.pool_manager._trust_env = False
    # aiohttp closes a connection idle for 15 s; client-go keeps one 90 s (IdleConnTimeout). A
    # scheduler idle between bursts then opened up to one TLS connection per binding in flight
    # at the start of every burst, each a handshake (the session takes no such option).
    connector = api.rest_client.pool_manager.connector
    if connector is not None:
        connector._keepalive_timeout = IDLE_CONNECTION_SECONDS
    try:
        yield AsyncConnection(api, chosen.namespace, str(configuration.host), origin)
    finally:
        await api.close()


def _settle_environment(configuration: kubernetes_asyncio.client.Configuration) -> None:
    """Use the proxy the environment names for the API server (``HTTPS_PROXY``, ``NO_PROXY``),
    found once here as aiohttp would find it per request; a kubeconfig ``proxy-url`` wins."""
    server = urllib.parse.urlsplit(str(configuration.host))
    if configuration.proxy or not server.hostname or urllib.request.proxy_bypass(server.hostname):
        return
    found = aiohttp.helpers.proxies_from_env().get(server.scheme)
    if found is None:
        return
    configuration.proxy = str(found.proxy)
    if found.proxy_auth is not None:
        configuration.proxy_headers = {"Proxy-Authorization": found.proxy_auth.encode()}


def _collection_path(*, api_version: str, plural: str, namespace: str | None) -> str:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"


def create(
    connection: Connection,
    *,
    body: collections.abc.Mapping[str, object],  # any object of any kind, as JSON
    plural: str,
    namespace: str | None,
    dry_run: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> rest.Body:
    """POST ``body`` to its collection and return the object the API server stored.

    ``namespace`` is None for cluster-scoped kinds. ``dry_run`` asks the server to validate,
    default and admit the object without storing it (``dryRun=All``).
    """
    path = _collection_path(api_version=str(body["apiVersion"]), plural=plural, namespace=namespace)
    what = f"POST {path}"
    api = connection.api
    method, url, headers, payload, _ = api.param_serialize(
        method="POST",
        resource_path=path,
        query_params=[("dryRun", "All")] if dry_run else [],
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        body=dict(body),
        auth_settings=rest.AUTH_SETTINGS,
    )
    try:
        response = api.call_api(
            method, url, header_params=headers, body=payload, _request_timeout=timeout
        )
        data = response.read()  # type: ignore[no-untyped-call]
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise errors.TransportError(f"{what}: {connection.server} did not answer: {exc}") from exc
    except kubernetes.client.ApiException as exc:  # TLS failures arrive as status 0
        raise errors.TransportError(f"{what}: {connection.server}: {exc.reason}") from exc
    decoded = rest.decode(data)
    if not 200 <= response.status < 300:
        raise errors.from_status(response.status, body=decoded, what=what)
    if decoded is None:
        raise errors.TransportError(f"{what}: the answer is not a JSON object")
    return decoded
