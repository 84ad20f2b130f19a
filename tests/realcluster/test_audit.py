"""Reading the API server's audit log while the API server writes it (``berth.realcluster.audit``).

No control plane needed. We test these aspects:

- complete lines are read, ResponseComplete events only, with user, verb, resource (and
  subresource), namespace, name, code and the authorizer's decision;
- a half-written last line (no newline yet, even cut inside a character) is left for the next
  read, never an error; once completed, it is read;
- a complete line that is not JSON is an error naming the file and line; a missing log is empty.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from berth.realcluster import audit


def _event(name: str, *, stage: str = "ResponseComplete", code: int = 201) -> str:
    return json.dumps(
        {
            "stage": stage,
            "verb": "create",
            "user": {"username": "system:serviceaccount:berth-system:berth"},
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
