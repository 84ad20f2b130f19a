"""Raw-JSON REST calls to the Kubernetes API over a ``kubernetes_asyncio`` API client.

The client library gives Berth configuration (kubeconfig, in-cluster service account, token
refresh, TLS, proxy) and a connection pool (its aiohttp session); this module sends requests
through that session itself, not through the client's ``call_api``, and moves plain JSON dicts,
not generated model objects: those cost too much on the hot paths (docs/architecture.md) and
tie every caller to the library. Every asynchronous caller in :mod:`berth.kube` (leases, the
informers' lists, the binder, admission, Events) and the status writers go through
:func:`request`; the watch stream (:mod:`berth.kube.transport.watching`) shares its auth and
decoding.

Failures arrive as :mod:`berth.kube.transport.errors`: an answer outside 2xx as an ``APIError``
subclass chosen by status, no answer (refused, reset, timed out) as ``TransportError``.
"""

from __future__ import annotations

import collections.abc
import datetime
import json
import typing
import urllib.parse

import aiohttp
import kubernetes_asyncio.client
import typing_extensions

from berth.kube.transport import errors

__all__ = [
    "AUTH_SETTINGS",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "Body",
    "decode",
    "request",
]

# Untyped: any kind's object, or a list, as decoded; the caller knows the kind and reads it as
# that kind's berth.api record (typing.cast at the edge: a record promises keys, not values).
Body: typing.TypeAlias = dict[str, typing.Any]
"""A decoded JSON object as the API server sends it (Kubernetes' camelCase keys)."""


class _Options(typing_extensions.TypedDict, total=False):
    """What the client's configuration adds to a request (aiohttp's keyword arguments)."""

    proxy: str
    proxy_headers: collections.abc.Mapping[str, str]
    server_hostname: str


AUTH_SETTINGS = ["BearerToken"]
"""The auth scheme name the generated clients use for tokens (static, exec plugins, in-cluster)."""

MERGE_PATCH = "application/merge-patch+json"
"""RFC 7386 JSON merge patch: maps merge key by key, ``null`` deletes, lists are replaced."""
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
"""Kubernetes' strategic merge patch: lists with a merge key (conditions by type) are merged."""


async def request(
    api: kubernetes_asyncio.client.ApiClient,
    *,
    method: str,
    path: str,
    query: collections.abc.Mapping[str, str] | None = None,
    body: collections.abc.Mapping[str, object] | None = None,  # any JSON object
    content_type: str = "application/json",
    timeout: float | None = None,
) -> Body:
    """Send one request and return the decoded JSON object of a 2xx answer.

    ``path`` is absolute (``/apis/coordination.k8s.io/v1/namespaces/ns/leases/name``);
    ``timeout`` bounds the whole exchange in seconds (None: no limit, as the client's default).

    The request goes straight to the client's aiohttp session, with what the client's
    ``call_api`` would have added: its default headers (User-Agent), its cookie, the bearer
    token (through the configuration, so an exec plugin's or service account's token is
    refreshed as it would be), its proxy and TLS server name. ``call_api`` itself is skipped:
    it walks every header, parameter and body to sanitise generated model objects Berth never
    sends, and that walk was about a tenth of the client CPU of a binding (docs/performance.md).
    """
    what = f"{method} {path}"
    configuration = api.configuration
    transport = api.rest_client
    headers = {"Accept": "application/json", "Content-Type": content_type}
    headers.update(api.default_headers)
    if api.cookie:
        headers["Cookie"] = api.cookie
    url = f"{configuration.host}{path}"
    if query:
        url += "?" + urllib.parse.urlencode(list(query.items()))
    options: _Options = {}
    if transport.proxy:
        options["proxy"] = transport.proxy
    if transport.proxy_headers:
        options["proxy_headers"] = transport.proxy_headers
    if transport.server_hostname:
        options["server_hostname"] = transport.server_hostname
    try:
        # Inside the try: an exec plugin that cannot refresh the token fails as the request.
        settings = await configuration.auth_settings()
        for name in AUTH_SETTINGS:
            setting = settings.get(name)
            if setting:
                headers[setting["key"]] = setting["value"]
        response = await transport.pool_manager.request(
            method,
            url,
            headers=headers,
            data=_ENCODER.encode(body).encode() if body is not None else None,
            timeout=aiohttp.ClientTimeout(total=timeout) if timeout else _NO_TIMEOUT,
            **options,
        )
        async with response:
            status = response.status
            raw = await response.read()
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        refused = _not_leader(exc)
        if refused is not None:
            raise refused from None  # fenced before a byte was written (transport.fencing)
        raise errors.TransportError(f"{what}: {type(exc).__name__}: {exc}".rstrip(": ")) from exc
    decoded = decode(raw)
    if not 200 <= status <= 299:
        raise errors.from_status(status, body=decoded, what=what)
    if decoded is None:
        raise errors.APIError(f"{what}: {status} answer is not a JSON object", status=status)
    return decoded


_NO_TIMEOUT = aiohttp.ClientTimeout()
"""No limit on any part of the exchange (the session's own default would be five minutes)."""


def _json_default(value: object) -> str:
    # What the client's sanitiser did for the one non-JSON type a caller may hand over.
    if isinstance(value, datetime.date):  # datetime.datetime included
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


_ENCODER = json.JSONEncoder(default=_json_default)
"""One encoder for every body (``json.dumps`` with ``default=`` builds one per call)."""


def _not_leader(exc: BaseException) -> errors.NotLeader | None:
    seen: BaseException | None = exc
    for _ in range(8):  # a short chain: the client's error, then its cause
        if seen is None:
            return None
        if isinstance(seen, errors.NotLeader):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def decode(raw: bytes | None) -> Body | None:
    """``raw`` as a JSON object; None when it is empty, not JSON, or not an object."""
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
