"""The API server's audit log, read back: who bound, evicted or was refused what.

The log is the independent witness of the real-cluster tests: a binding counted here was
accepted by the API server, whatever the client believed. Each line is one ``audit.k8s.io/v1``
Event in JSON (``--audit-log-format=json``) at the ResponseComplete stage. The API server
appends to the log while tests read it, so the last line may be half-written: only complete
lines (ended by a newline) are read; the rest is the next read's.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib
import typing

__all__ = ["Request", "bindings", "read", "refused"]


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

    @property
    def succeeded(self) -> bool:
        return 200 <= self.code < 300


def read(path: pathlib.Path) -> list[Request]:
    """Every completed request in the log (a missing log has none), from its complete lines."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    # A line being written has no newline yet (and may end inside a character): leave it.
    complete = raw[: raw.rfind(b"\n") + 1]
    out: list[Request] = []
    for number, line in enumerate(complete.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            event: dict[str, typing.Any] = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not an audit event: {exc}") from None
        if event.get("stage") != "ResponseComplete":
            continue
        ref = event.get("objectRef") or {}
        resource = str(ref.get("resource") or "")
        if ref.get("subresource"):
            resource = f"{resource}/{ref['subresource']}"
        out.append(
            Request(
                user=str((event.get("user") or {}).get("username") or ""),
                verb=str(event.get("verb") or ""),
                resource=resource,
                namespace=str(ref.get("namespace") or ""),
                name=str(ref.get("name") or ""),
                code=int((event.get("responseStatus") or {}).get("code") or 0),
                uri=str(event.get("requestURI") or ""),
                authorization=str(
                    (event.get("annotations") or {}).get("authorization.k8s.io/decision") or ""
                ),
            )
        )
    return out


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
