"""Reading the API server's audit log while the API server writes it (``berth.realcluster.audit``).

No control plane needed. We test these aspects:

- complete lines are read, ResponseComplete events only, with user, verb, resource (and
  subresource), namespace, name, code and the authorizer's decision;
- a half-written last line (no newline yet, even cut inside a character) is left for the next
  read, never an error; once completed, it is read;
- a complete line that is not JSON is an error naming the file and line; a missing log is empty;
- watches are read from their two stages (streaming started, ended), per user; a watch still
  open has no end; two watches of one resource open at the same time are reported, one
  following another is not.
"""

from __future__ import annotations

import json
import pathlib
import typing

import pytest

from berth.realcluster import audit

USER = "system:serviceaccount:berth-system:berth"


def _event(name: str, *, stage: str = "ResponseComplete", code: int = 201) -> str:
    return json.dumps(
        {
            "stage": stage,
            "verb": "create",
            "user": {"username": USER},
            "objectRef": {
                "resource": "pods",
                "subresource": "binding",
                "namespace": "ns",
                "name": name,
            },
            "responseStatus": {"code": code},
            "requestURI": f"/api/v1/namespaces/ns/pods/{name}/binding",
            "annotations": {"authorization.k8s.io/decision": "allow", "note": "café"},
        },
        ensure_ascii=False,  # as the API server writes it: UTF-8, not escapes
    )


def test_complete_lines_are_read_and_a_half_written_last_line_waits(
    tmp_path: pathlib.Path,
) -> None:
    log = tmp_path / "audit.log"
    last = _event("p2").encode()
    cut = last.index(b"caf") + 4  # inside the two bytes of "é"
    log.write_bytes(
        (_event("p0") + "\n" + _event("p1", stage="RequestReceived") + "\n").encode() + last[:cut]
    )
    read = audit.read(log)
    assert [(r.name, r.resource, r.verb, r.code, r.authorization) for r in read] == [
        ("p0", "pods/binding", "create", 201, "allow")
    ]
    assert read[0].succeeded and read[0].user.endswith(":berth")
    with log.open("ab") as out:
        out.write(last[cut:] + b"\n")
    assert [r.name for r in audit.read(log)] == ["p0", "p2"]
    assert audit.bindings(audit.read(log)) == {("ns", "p0"): 1, ("ns", "p2"): 1}


def test_a_broken_complete_line_is_an_error_and_a_missing_log_is_empty(
    tmp_path: pathlib.Path,
) -> None:
    assert audit.read(tmp_path / "none.log") == []
    log = tmp_path / "audit.log"
    log.write_text(_event("p0") + "\n{broken\n")
    with pytest.raises(ValueError, match=r"audit.log:2: not an audit event"):
        audit.read(log)


def watch_event(
    audit_id: str,
    stage: str,
    at: str,
    *,
    verb: str = "watch",
    resource: str = "pods",
    subresource: str | None = None,
    user: str = USER,
    code: int = 200,
) -> dict[str, typing.Any]:
    ref: dict[str, typing.Any] = {"resource": resource, "namespace": "default", "name": "p"}
    if subresource is not None:
        ref["subresource"] = subresource
    return {
        "auditID": audit_id,
        "stage": stage,
        "verb": verb,
        "user": {"username": user},
        "userAgent": "berth/berth-up-real",
        "objectRef": ref,
        "requestURI": f"/api/v1/{resource}?watch=true",
        "responseStatus": {"code": code},
        "stageTimestamp": f"2026-01-01T00:00:{at}Z",
    }


def write_events(
    path: pathlib.Path, events: list[dict[str, typing.Any]], *, tail: str = ""
) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + tail)


def test_watches_one_after_another_are_fine_two_at_once_are_not(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "audit.log"
    write_events(
        log,
        [
            watch_event("1", "ResponseStarted", "01", resource="pods"),
            watch_event("1", "ResponseComplete", "05", resource="pods"),
            watch_event(
                "2", "ResponseStarted", "05", resource="pods"
            ),  # the next one, after it ended
            watch_event("3", "ResponseStarted", "02", resource="queues"),
            watch_event("4", "ResponseStarted", "03", resource="queues"),  # a second one, at once
            watch_event("5", "ResponseStarted", "03", resource="queues", user="someone-else"),
            watch_event("6", "ResponseComplete", "04", verb="list", resource="queues"),
        ],
    )
    found = audit.watches(log, user=USER)
    assert [(w.audit_id, w.resource) for w in found] == [
        ("1", "pods"),
        ("3", "queues"),
        ("4", "queues"),
        ("2", "pods"),
    ]
    assert found[0].ended is not None and found[3].ended is None
    clashing = audit.overlapping(found)
    assert list(clashing) == ["queues"]
    assert {w.audit_id for w in clashing["queues"]} == {"3", "4"}
