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
import signal
import subprocess
import time
import urllib.parse

import pytest

from berth.emulator import testing
from tests.cli import test_up

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
    env = test_up.environment(tmp_path)
    kubeconfig = tmp_path / "kubeconfig"
    audit = tmp_path / "audit.jsonl"
    process = subprocess.Popen(
        [
            test_up.BERTH,
            "up",
            "--nodes",
            "2x cpu=4,memory=8Gi",
            "--log-level",
            "warning",
            "--kubeconfig",
            str(kubeconfig),
            "--audit-log",
            str(audit),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert "berth up: Kubernetes API at" in process.stdout.readline()
        kubectl_env = env | {"KUBECONFIG": str(kubeconfig)}

        def kubectl(*args: str, input: str | None = None) -> str:
            return subprocess.run(
                [testing.kubectl_binary(), *args],
                env=kubectl_env,
                input=input,
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout

        kubectl("apply", "-f", "-", input=OBJECTS)

        def handled(kind: str, name: str) -> dict[str, object] | None:
            found = json.loads(kubectl("get", kind, name, "-o", "json"))
            annotations = found["metadata"].get("annotations") or {}
            return found if MARK in annotations and found.get("status") else None

        deadline = time.monotonic() + 60
        seen: dict[str, dict[str, object] | None] = {}
        while time.monotonic() < deadline:
            seen = {kind: handled(kind, name) for kind, name, _, _ in KINDS}
            if all(seen.values()):
                break
            time.sleep(0.2)
        assert all(seen.values()), {k: v is not None for k, v in seen.items()}
        for _, _, resource, manager in KINDS:
            writes = status_writes(audit, resource)
            assert writes, resource
            assert {writer for writer, _ in writes} == {manager}, writes
            assert any(200 <= code < 300 for _, code in writes)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
