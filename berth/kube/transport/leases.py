"""The ``coordination.k8s.io/v1`` Lease calls leader election needs: read, create, replace.

:class:`LeaseClient` speaks for one Lease object (namespace and name fixed). It reads the
object into a :class:`LeaseRecord` (the election-relevant spec plus the ``resourceVersion``),
creates it, and replaces it with optimistic concurrency: :meth:`LeaseClient.update` sends the
``resourceVersion`` it read, so a writer that lost a race gets
:class:`~berth.kube.transport.errors.Conflict` (409) instead of silently overwriting the winner.
Deciding *what* to write is :mod:`berth.operator.leadership`'s job; this module only moves the
object.

Times on the wire are ``MicroTime`` (RFC 3339 with microseconds, UTC); in Python they are
seconds since the epoch, written only for humans and other tools: electing never compares
them with a local clock (see leadership's observed-time rule).
"""

from __future__ import annotations

import dataclasses
import datetime
import typing

import kubernetes_asyncio.client

from berth.api import coordination, objects
from berth.kube.transport import errors, rest

__all__ = ["LeaseClient", "LeaseRecord", "LeaseSpec", "format_micro_time", "parse_micro_time"]

_GROUP_VERSION = "coordination.k8s.io/v1"
_MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def format_micro_time(when: float) -> str:
    """``when`` (seconds since the epoch) as a Kubernetes ``MicroTime``."""
    return datetime.datetime.fromtimestamp(when, tz=datetime.UTC).strftime(_MICRO_TIME)


def parse_micro_time(text: str) -> float:
    """A ``MicroTime`` or RFC 3339 ``Time`` as seconds since the epoch (``ValueError`` if not)."""
    parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed.timestamp()


@dataclasses.dataclass(frozen=True)
class LeaseSpec:
    """The Lease's ``spec`` as leader election reads and writes it."""

    holder_identity: str  # "" when nobody holds it (released)
    lease_duration_seconds: int
    acquire_time: float | None = None  # seconds since the epoch
    renew_time: float | None = None
    lease_transitions: int = 0

    def to_api(self) -> coordination.LeaseSpec:
        spec: coordination.LeaseSpec = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.lease_transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = format_micro_time(self.acquire_time)
        if self.renew_time is not None:
            spec["renewTime"] = format_micro_time(self.renew_time)
        return spec

    @classmethod
    def from_api(cls, raw: coordination.LeaseSpec) -> LeaseSpec:
        """Parse a Lease ``spec``; anything missing or malformed reads as absent."""
        return cls(
            holder_identity=_str(raw.get("holderIdentity")),
            lease_duration_seconds=_int(raw.get("leaseDurationSeconds")),
            acquire_time=_time(raw.get("acquireTime")),
            renew_time=_time(raw.get("renewTime")),
            lease_transitions=_int(raw.get("leaseTransitions")),
        )


@dataclasses.dataclass(frozen=True)
class LeaseRecord:
    """A Lease as read: its spec and the version to replace it at."""

    spec: LeaseSpec
    resource_version: str
    body: coordination.Lease = dataclasses.field(compare=False, repr=False)
    """The whole object as read, so that a replacement keeps its labels and annotations."""

    @classmethod
    def from_api(cls, body: coordination.Lease) -> LeaseRecord:
        metadata = body.get("metadata")
        spec = body.get("spec")
        version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        return cls(
            spec=LeaseSpec.from_api(spec if isinstance(spec, dict) else {}),
            resource_version=str(version or ""),
            body=body,
        )


class LeaseClient:
    """Reads and writes one Lease object."""

    def __init__(
        self, api: kubernetes_asyncio.client.ApiClient, *, namespace: str, name: str
    ) -> None:
        self._api = api
        self.namespace = namespace
        self.name = name
        self._collection = f"/apis/{_GROUP_VERSION}/namespaces/{namespace}/leases"
        self._path = f"{self._collection}/{name}"

    @property
    def description(self) -> str:
        """``namespace/name``, for log lines."""
        return f"{self.namespace}/{self.name}"

    async def get(self, *, timeout: float | None = None) -> LeaseRecord | None:
        """The Lease, or None if it does not exist."""
        try:
            body = await self._lease("GET", self._path, timeout=timeout)
        except errors.NotFound:
            return None
        return LeaseRecord.from_api(body)

    async def create(self, spec: LeaseSpec, *, timeout: float | None = None) -> LeaseRecord:
        """Create the Lease with ``spec``; :class:`~errors.Conflict` if it exists already."""
        body: coordination.Lease = {
            "apiVersion": _GROUP_VERSION,
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec.to_api(),
        }
        created = await self._lease("POST", self._collection, body=body, timeout=timeout)
        return LeaseRecord.from_api(created)

    async def update(
        self, current: LeaseRecord, spec: LeaseSpec, *, timeout: float | None = None
    ) -> LeaseRecord:
        """Replace ``current`` with ``spec``; :class:`~errors.Conflict` if it changed since."""
        metadata: objects.ObjectMeta = {**(current.body.get("metadata") or {})}
        metadata["resourceVersion"] = current.resource_version
        old_spec = current.body.get("spec")
        new_spec: coordination.LeaseSpec = {**old_spec} if isinstance(old_spec, dict) else {}
        # Keep spec fields this module does not manage (e.g. preferredHolder, strategy), but
        # not times the new spec leaves out.
        new_spec.pop("acquireTime", None)
        new_spec.pop("renewTime", None)
        new_spec.update(spec.to_api())
        body: coordination.Lease = {**current.body, "metadata": metadata, "spec": new_spec}
        updated = await self._lease("PUT", self._path, body=body, timeout=timeout)
        return LeaseRecord.from_api(updated)

    async def _lease(
        self,
        method: str,
        path: str,
        *,
        body: coordination.Lease | None = None,
        timeout: float | None,
    ) -> coordination.Lease:
        answer = await rest.request(self._api, method=method, path=path, body=body, timeout=timeout)
        return typing.cast(coordination.Lease, answer)  # the API server answers the Lease


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _time(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_micro_time(value)
    except ValueError:
        return None
