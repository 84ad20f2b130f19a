"""An audit log of the requests the emulator served, in kube-apiserver's format.

kube-apiserver writes, with ``--audit-log-path`` and a policy at level ``Metadata``, one JSON
``audit.k8s.io/v1`` Event per line per stage. :class:`AuditLog` writes the subset that tools
read — ``verb``, ``requestURI``, ``userAgent``, ``responseStatus.code``, ``stageTimestamp``
(microseconds), ``stage: ResponseComplete`` — so that a harness counting who wrote what and
when (``berth chaos sigstop``) reads the emulator's log and a real API server's alike.
Timestamps come from one clock, the server's: entries are comparable with each other, never
with a client's clock.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import typing
import uuid

__all__ = ["AuditLog", "verb_of"]

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def verb_of(method: str, *, watch: bool = False, named: bool = True) -> str:
    """The Kubernetes verb of an HTTP request (GET on a collection is ``list``)."""
    method = method.upper()
    if method == "GET":
        return "watch" if watch else ("get" if named else "list")
    return _VERBS.get(method, method.lower())


class AuditLog:
    """Appends one line per served request to ``path`` (line-buffered: readable at once)."""

    def __init__(self, path: str | pathlib.Path) -> None:
        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._out: typing.TextIO | None = self.path.open("a", buffering=1)

    def record(
        self, *, method: str, uri: str, user_agent: str, code: int, at: float, watch: bool
    ) -> None:
        if self._out is None:
            return
        stamp = datetime.datetime.fromtimestamp(at, tz=datetime.UTC)
        event = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": str(uuid.uuid4()),
            "stage": "ResponseComplete",
            "requestURI": uri,
            "verb": verb_of(method, watch=watch),
            "userAgent": user_agent,
            "responseStatus": {"metadata": {}, "code": code},
            "stageTimestamp": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
        self._out.write(json.dumps(event) + "\n")

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
