"""``berth up``: Berth's Kopf handlers own the statuses of Queues, PodGroups and Reservations.

We test these aspects (issue #18, must-show 1), through ``berth up --audit-log`` and the real
kubectl:

- a Queue, a PodGroup and a Reservation applied with kubectl each carry Kopf's handling mark
  (the ``kopf.scheduling.berth.io/last-handled-configuration`` annotation, where Berth's Kopf
  settings keep it) and get a status;
- every write to their ``status`` subresource in the API server's audit log names its Kopf
  handler as the field manager (``berth-kopf/<kind>-status``): nothing else wrote them.
"""

from __future__ import annotations

import json
import pathlib
import urllib.parse

import pytest

from tests.workloads import cluster

MARK = "kopf.scheduling.berth.io/last-handled-configuration"
OBJECTS = """
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata:
  name: team
spec:
  weight: 1
---
apiVersion: scheduling.berth.io/v1alpha1
kind: PodGroup
metadata:
  name: gang
spec:
  minMember: 2
  queue: team
---
apiVersion: scheduling.berth.io/v1alpha1
kind: Reservation
metadata:
  name: held
spec:
  queue: team
  template:
    spec:
      containers:
      - name: reserve
        resources:
          requests:
            cpu: "1"
  owners:
  - labelSelector:
      matchLabels:
        app: train
"""
# (kind for kubectl, name, the status path's resource, the Kopf handler's field manager)
KINDS = (
    ("queue", "team", "queues/team", "berth-kopf/queue-status"),
    ("podgroup", "gang", "podgroups/gang", "berth-kopf/podgroup-status"),
    ("reservation", "held", "reservations/held", "berth-kopf/reservation-status"),
)


def status_writes(audit: pathlib.Path, resource: str) -> list[tuple[str, int]]:
    """(field manager, response code) of every write to ``resource``'s status."""
    found = []
    for line in audit.read_text().splitlines():
        event = json.loads(line)
        uri = urllib.parse.urlsplit(event["requestURI"])
        if event["verb"] in ("patch", "update") and uri.path.endswith(f"/{resource}/status"):
            query = urllib.parse.parse_qs(uri.query)
            found.append((query.get("fieldManager", [""])[0], event["responseStatus"]["code"]))
    return found


@pytest.mark.slow
def test_kopf_handlers_mark_and_write_the_status_of_each_kind(tmp_path: pathlib.Path) -> None:
    audit = tmp_path / "audit.jsonl"
    with cluster.berth_up(
        tmp_path, nodes="2x cpu=4,memory=8Gi", extra=("--audit-log", str(audit))
    ) as kubectl:
        kubectl("apply", "-f", "-", input=OBJECTS)

        def handled() -> dict[str, dict[str, object]] | None:
            seen = {kind: kubectl.get(kind, name) for kind, name, _, _ in KINDS}
            marked = all(
                MARK in (obj["metadata"].get("annotations") or {}) and obj.get("status")
                for obj in seen.values()
            )
            return seen if marked else None

        cluster.eventually(handled, what="Kopf's marks and a status on each kind", timeout=60)
        for _, _, resource, manager in KINDS:
            writes = status_writes(audit, resource)
            assert writes, resource
            assert {writer for writer, _ in writes} == {manager}, writes
            assert any(200 <= code < 300 for _, code in writes)
