"""The API server's audit log, read back: who bound, evicted, watched or was refused what.

The log is the independent witness of the real-cluster tests: a binding counted here was
accepted by the API server, whatever the client believed. Each line is one ``audit.k8s.io/v1``
Event in JSON (``--audit-log-format=json``): at the ResponseComplete stage for every request, and
at ResponseStarted too for long-running ones — a watch is logged when it starts streaming and
again when it ends (:func:`watches`).

The API server appends to the log while tests read it, so the last line may be half-written: only
complete lines (ended by a newline) are read; the rest is the next read's.
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import datetime
import json
import pathlib
import typing

__all__ = [
    "AuditEvent",
    "GroupResources",
    "Policy",
    "PolicyRule",
    "Request",
    "Watch",
    "bindings",
    "overlapping",
    "read",
    "refused",
    "timestamp",
    "watches",
]


@dataclasses.dataclass(frozen=True)
class Request:
    """One audited request, the fields the tests look at."""

    user: str
    verb: str
    resource: str  # "pods/binding" for a subresource
    namespace: str
    name: str
    code: int
    uri: str
    authorization: str  # the authorizer's decision ("allow", "forbid"; "" if none was made)
    at: float = 0.0  # when the request was received (requestReceivedTimestamp), epoch seconds

    @property
    def succeeded(self) -> bool:
        return 200 <= self.code < 300


@dataclasses.dataclass(frozen=True)
class Watch:
    """One watch request: who opened it on what, when it started streaming and when it ended."""

    audit_id: str
    user: str
    user_agent: str
    resource: str
    uri: str
    started: datetime.datetime
    ended: datetime.datetime | None  # None: still open when the log was read

    def open_at(self, moment: datetime.datetime) -> bool:
        return self.started <= moment and (self.ended is None or moment < self.ended)


class UserInfo(typing.TypedDict, total=False):
    username: str


class ObjectReference(typing.TypedDict, total=False):
    resource: str
    subresource: str
    namespace: str
    name: str


class ResponseStatus(typing.TypedDict, total=False):
    code: int


class GroupResources(typing.TypedDict):
    group: str
    resources: list[str]  # "pods/binding": a subresource


class PolicyRule(typing.TypedDict, total=False):
    """A rule of an ``audit.k8s.io/v1`` Policy: the first that matches a request sets its level."""

    level: typing.Required[str]  # None, Metadata, Request, RequestResponse
    verbs: list[str]
    users: list[str]
    resources: list[GroupResources]


class Policy(typing.TypedDict):
    """The API server's ``--audit-policy-file``: which requests it logs, and how much."""

    apiVersion: str
    kind: str
    omitStages: list[str]
    rules: list[PolicyRule]


class AuditEvent(typing.TypedDict, total=False):
    """An ``audit.k8s.io/v1`` Event: the fields read here (the log has more; they are kept)."""

    auditID: str
    stage: str  # RequestReceived, ResponseStarted, ResponseComplete, Panic
    requestURI: str
    verb: str
    user: UserInfo
    userAgent: str
    objectRef: ObjectReference
    responseStatus: ResponseStatus
    requestReceivedTimestamp: str
    stageTimestamp: str
    annotations: dict[str, str]


def _events(path: pathlib.Path) -> list[AuditEvent]:
    """Every audit event of the log's complete lines, in order (a missing log has none)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    # A line being written has no newline yet (and may end inside a character): leave it.
    complete = raw[: raw.rfind(b"\n") + 1]
    out: list[AuditEvent] = []
    for number, line in enumerate(complete.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not an audit event: {exc}") from None
    return out


def _resource(event: AuditEvent) -> str:
    ref = event.get("objectRef") or {}
    resource = str(ref.get("resource") or "")
    if ref.get("subresource"):
        resource = f"{resource}/{ref['subresource']}"
    return resource


def _time(value: object) -> datetime.datetime:
    return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def read(path: pathlib.Path) -> list[Request]:
    """Every completed request in the log (a missing log has none), from its complete lines."""
    out: list[Request] = []
    for event in _events(path):
        if event.get("stage") != "ResponseComplete":
            continue
        ref = event.get("objectRef") or {}
        out.append(
            Request(
                user=str((event.get("user") or {}).get("username") or ""),
                verb=str(event.get("verb") or ""),
                resource=_resource(event),
                namespace=str(ref.get("namespace") or ""),
                name=str(ref.get("name") or ""),
                code=int((event.get("responseStatus") or {}).get("code") or 0),
                uri=str(event.get("requestURI") or ""),
                authorization=str(
                    (event.get("annotations") or {}).get("authorization.k8s.io/decision") or ""
                ),
                at=timestamp(event.get("requestReceivedTimestamp")),
            )
        )
    return out


def timestamp(text: object) -> float:
    """An RFC 3339 timestamp (the audit log's, an object's ``creationTimestamp``) in epoch
    seconds; 0 if absent."""
    if not isinstance(text, str) or not text:
        return 0.0
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def bindings(requests: typing.Iterable[Request]) -> collections.Counter[tuple[str, str]]:
    """Successful bindings per pod (namespace, name)."""
    return collections.Counter(
        (r.namespace, r.name)
        for r in requests
        if r.resource == "pods/binding" and r.verb == "create" and r.succeeded
    )


def refused(requests: typing.Iterable[Request], *, user: str) -> list[Request]:
    """The requests of ``user`` that authentication or authorization (RBAC) refused.

    A 403 from admission (a namespace being deleted refuses new objects) is not a refusal of
    the user: the authorizer allowed the request.
    """
    return [
        r for r in requests if r.user == user and (r.code == 401 or r.authorization == "forbid")
    ]


def watches(path: pathlib.Path, *, user: str) -> list[Watch]:
    """The watches ``user`` opened, in the order they started streaming."""
    started: dict[str, Watch] = {}
    for event in _events(path):
        if event.get("verb") != "watch":
            continue
        if str((event.get("user") or {}).get("username") or "") != user:
            continue
        audit_id = str(event.get("auditID") or "")
        stage = event.get("stage")
        if stage == "ResponseStarted":
            started[audit_id] = Watch(
                audit_id=audit_id,
                user=user,
                user_agent=str(event.get("userAgent") or ""),
                resource=_resource(event),
                uri=str(event.get("requestURI") or ""),
                started=_time(event.get("stageTimestamp")),
                ended=None,
            )
        elif stage == "ResponseComplete" and audit_id in started:
            ended = _time(event.get("stageTimestamp"))
            started[audit_id] = dataclasses.replace(started[audit_id], ended=ended)
    return sorted(started.values(), key=lambda w: w.started)


def overlapping(found: typing.Iterable[Watch]) -> dict[str, list[Watch]]:
    """Per resource, the watches open at the same time as another of that resource (a process
    following each kind with one watch has none: a watch that ends is followed by the next)."""
    by_resource: dict[str, list[Watch]] = collections.defaultdict(list)
    for watch in found:
        by_resource[watch.resource].append(watch)
    out: dict[str, list[Watch]] = {}
    for resource, listed in by_resource.items():
        clashing = [
            w
            for w in listed
            if any(o is not w and (o.open_at(w.started) or w.open_at(o.started)) for o in listed)
        ]
        if clashing:
            out[resource] = clashing
    return out
