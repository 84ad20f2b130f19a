"""Errors of talking to the Kubernetes API, as :mod:`berth.kube` raises them.

::

    KubeError
     ├── ConfigError           no usable kubeconfig or in-cluster configuration
     ├── APIError              the API server answered, with a status outside 2xx
     │    ├── Unauthorized     401: credentials missing or expired
     │    ├── Forbidden        403: RBAC denies the verb on the resource
     │    ├── NotFound         404
     │    ├── Conflict         409: stale resourceVersion, or the object already exists
     │    └── Gone             410: the watch's resourceVersion is too old: re-list
     ├── TransportError        no answer: connection refused or reset, TLS, timeout
     └── NotLeader             not sent: this replica may no longer write for the leader

Callers outside :mod:`berth.kube` see only these, never a client library's exception, so that
the client library stays a detail of this package (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import collections.abc
import typing

from berth.api import objects

__all__ = [
    "APIError",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "Gone",
    "KubeError",
    "NotFound",
    "NotLeader",
    "TransportError",
    "Unauthorized",
    "from_status",
]


class KubeError(Exception):
    """Base of every error talking to the Kubernetes API."""


class ConfigError(KubeError):
    """No way to reach the API server is configured, or the configuration is unusable."""


class APIError(KubeError):
    """The API server answered with a non-2xx status; ``status`` and its Status object."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        reason: str = "",
        body: objects.Status | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason  # the Status object's ``reason`` ("Conflict", "Forbidden", ...)
        self.body: objects.Status = {**body} if body else {}


class Unauthorized(APIError):
    """401: the credentials are missing, wrong or expired."""


class Forbidden(APIError):
    """403: authenticated, but RBAC does not allow this."""


class NotFound(APIError):
    """404: no such object (or no such resource type)."""


class Conflict(APIError):
    """409: the object changed since it was read, or already exists."""


class Gone(APIError):
    """410: the resourceVersion is too old to watch from."""


class TransportError(KubeError):
    """The request got no answer: the API server is unreachable, or too slow."""


class NotLeader(KubeError):
    """A write acting for the leader was not sent: the Lease may belong to another replica
    (:mod:`berth.kube.transport.fencing`). Nothing reached the API server; do not retry."""


_BY_STATUS: dict[int, type[APIError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
}


def from_status(
    status: int, *, body: collections.abc.Mapping[str, object] | None, what: str
) -> APIError:
    """The error for an HTTP ``status`` and its decoded Status ``body`` (any JSON object, or
    None: the answer's fields are checked before they are used); ``what`` names the call."""
    found = body or {}
    message = found.get("message") if isinstance(found.get("message"), str) else None
    reason = found.get("reason") if isinstance(found.get("reason"), str) else ""
    cls = _BY_STATUS.get(status, APIError)
    text = f"{what}: {status} {reason or 'error'}" + (f": {message}" if message else "")
    # A failed request's answer is the API server's meta/v1 Status.
    answer = typing.cast(objects.Status, found)
    return cls(text, status=status, reason=str(reason or ""), body=answer)
