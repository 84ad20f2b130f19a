"""Reading an API server's audit log: who sent which request, when, and how it was answered.

Lines are ``audit.k8s.io/v1`` Events as kube-apiserver writes them with ``--audit-log-path``
(and as :mod:`berth.emulator.auditing` writes them); only the ``ResponseComplete`` stage is
read. Times are the server's (``stageTimestamp``), comparable with each other only.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import pathlib

__all__ = ["WRITE_VERBS", "Entry", "read"]

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclasses.dataclass(frozen=True)
class Entry:
    """One answered request."""

    at: float  # seconds since the epoch, the server's clock
    verb: str
    uri: str
    user_agent: str
    code: int

    @property
    def write(self) -> bool:
        return self.verb in WRITE_VERBS

    @property
    def succeeded(self) -> bool:
        return 200 <= self.code <= 299

    @property
    def lease(self) -> bool:
        return "/leases/" in self.uri or self.uri.endswith("/leases")


def read(path: pathlib.Path, *, offset: int = 0) -> tuple[list[Entry], int]:
    """The complete entries from byte ``offset`` on, and the offset to read on from."""
    entries: list[Entry] = []
    with path.open("rb") as source:
        source.seek(offset)
        data = source.read()
    end = data.rfind(b"\n") + 1  # a half-written last line is read next time
    for line in data[:end].splitlines():
        entry = _parse(line)
        if entry is not None:
            entries.append(entry)
    return entries, offset + end


def _parse(line: bytes) -> Entry | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("stage") != "ResponseComplete":
        return None
    try:
        stamp = datetime.datetime.fromisoformat(str(event["stageTimestamp"]).replace("Z", "+00:00"))
        status = event.get("responseStatus") or {}
        return Entry(
            at=stamp.timestamp(),
            verb=str(event.get("verb", "")),
            uri=str(event.get("requestURI", "")),
            user_agent=str(event.get("userAgent", "")),
            code=int(status.get("code", 0)),
        )
    except (KeyError, TypeError, ValueError):
        return None
