"""The real ``kubectl`` binary against the emulator, never with ``--validate=false``.

We test these aspects:
- ``kubectl apply -f crds/`` and then every example manifest succeeds;
- ``kubectl get bq,bpg,resv -A`` prints each CRD's printer columns; ``get berth -A`` lists all
  three kinds through their category;
- ``kubectl explain reservation.spec`` describes the fields from the CRD's schema;
- an object breaking a CEL rule is refused with the rule's message; an unknown field is refused
  (kubectl asks for strict server-side field validation);
- ``kubectl get pods -w`` streams changes as they happen;
- ``kubectl delete`` of an object with a finalizer waits until the finalizer is removed;
- pods and nodes print their usual columns; apply twice reports "configured" and merges;
  server-side apply creates and then updates.
"""

from __future__ import annotations

import pathlib
import queue
import subprocess
import threading
import time
import typing

import pytest
import yaml

from berth.emulator import testing

REPO = pathlib.Path(__file__).resolve().parents[2]
CRDS = REPO / "crds"


def _is_manifest(path: pathlib.Path) -> bool:
    """Kubernetes objects, not ``berth sim`` scenarios (``sim.berth.io``), which share examples/."""
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return bool(documents) and all(
        isinstance(d, dict) and "kind" in d and not str(d.get("apiVersion", "")).startswith("sim.")
        for d in documents
    )


# examples/workloads/ needs other operators' CRDs (tests/workloads applies them with those).
EXAMPLES = sorted(
    p
    for p in (REPO / "examples").rglob("*.yaml")
    if _is_manifest(p) and "workloads" not in p.relative_to(REPO / "examples").parts
)
BERTH_CRDS = pytest.mark.skipif(not any(CRDS.glob("*.yaml")), reason="crds/ is not generated yet")


class Lines:
    """The lines a running process prints, readable with a timeout."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self._queue: queue.Queue[str] = queue.Queue()
        assert process.stdout is not None
        stdout = process.stdout
        threading.Thread(
            target=lambda: [self._queue.put(line) for line in stdout], daemon=True
        ).start()

    def until(self, predicate: typing.Callable[[str], bool], *, timeout: float = 10.0) -> list[str]:
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            seen.append(line.rstrip("\n"))
            if predicate(line):
                return seen
        raise AssertionError(f"the expected line never came; saw: {seen}")


def _apply_berth(emulator: testing.RunningEmulator) -> None:
    emulator.kubectl("apply", "-f", str(CRDS))
    emulator.kubectl("apply", *(f"--filename={path}" for path in EXAMPLES))


@BERTH_CRDS
def test_crds_and_examples_apply_and_print_their_columns(emulator: testing.RunningEmulator) -> None:
    _apply_berth(emulator)
    out = emulator.kubectl("get", "bq,bpg,resv", "-A").stdout
    wide = emulator.kubectl("get", "bq,bpg,resv", "-A", "-o", "wide").stdout
    for crd in CRDS.glob("*.yaml"):
        spec = yaml.safe_load(crd.read_text())["spec"]
        for column in spec["versions"][0].get("additionalPrinterColumns", ()):
            # Columns with a priority are kubectl's -o wide extras.
            shown = wide if column.get("priority", 0) else out
            assert column["name"].upper() in shown, (column["name"], shown)
    assert "queue.scheduling.berth.io/team-a" in out
    assert "podgroup.scheduling.berth.io/train" in out
    assert "reservation.scheduling.berth.io/train-capacity" in out


@BERTH_CRDS
def test_category_lists_all_three_kinds(emulator: testing.RunningEmulator) -> None:
    _apply_berth(emulator)
    out = emulator.kubectl("get", "berth", "-A").stdout
    for kind in ("queue", "podgroup", "reservation"):
        assert f"{kind}.scheduling.berth.io/" in out


@BERTH_CRDS
def test_explain_reads_the_crd_schema(emulator: testing.RunningEmulator) -> None:
    emulator.kubectl("apply", "-f", str(CRDS))
    out = emulator.kubectl("explain", "reservation.spec").stdout
    assert "KIND:       Reservation" in out
    assert "owners\t<[]Object> -required-" in out
    assert "template\t<Object> -required-" in out


@BERTH_CRDS
def test_cel_rule_refuses_with_its_message(emulator: testing.RunningEmulator) -> None:
    emulator.kubectl("apply", "-f", str(CRDS))
    bad = """
apiVersion: scheduling.berth.io/v1alpha1
kind: Reservation
metadata: {name: both}
spec:
  ttl: 1h
  expires: "2026-01-01T00:00:00Z"
  owners: [{object: {name: x}}]
  template: {spec: {containers: [{name: c, image: i}]}}
"""
    result = emulator.kubectl("apply", "-f", "-", input=bad, check=False)
    schema = yaml.safe_load((CRDS / "reservations.yaml").read_text())
    rules = schema["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    message = next(
        r["message"] for r in rules["x-kubernetes-validations"] if "expires" in r["rule"]
    )
    assert result.returncode == 1
    assert 'The Reservation "both" is invalid' in result.stderr
    assert message in result.stderr


def test_schema_errors_and_unknown_fields_are_refused(
    emulator: testing.RunningEmulator, test_crd: dict[str, typing.Any]
) -> None:
    emulator.kubectl("apply", "-f", "-", input=yaml.safe_dump(test_crd))
    widget = "apiVersion: test.berth.io/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: %s}\n"
    too_big = emulator.kubectl("apply", "-f", "-", input=widget % "11", check=False)
    assert (
        "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"
        in too_big.stderr
    )
    unknown = emulator.kubectl("apply", "-f", "-", input=widget % "1, bogus: 1", check=False)
    assert 'strict decoding error: unknown field "spec.bogus"' in unknown.stderr
    cel = emulator.kubectl("apply", "-f", "-", input=widget % '1, limit: "50m"', check=False)
    assert "limit must be more than 100m" in cel.stderr


def test_get_pods_watch_streams(emulator: testing.RunningEmulator) -> None:
    pod = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\n"
        "spec: {containers: [{name: c, image: i}]}\n"
    )
    emulator.kubectl("apply", "-f", "-", input=pod % "first")
    watcher = emulator.kubectl_popen("get", "pods", "-w")
    try:
        lines = Lines(watcher)
        header_and_first = lines.until(lambda line: line.startswith("first"))
        assert header_and_first[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        emulator.kubectl("apply", "-f", "-", input=pod % "second")
        assert lines.until(lambda line: line.startswith("second"))[-1].split()[:3] == [
            "second",
            "0/1",
            "Pending",
        ]
        emulator.kubectl("delete", "pod", "first", "--wait=false")
        lines.until(lambda line: line.startswith("first"))
    finally:
        watcher.terminate()
        watcher.communicate(timeout=10)


def test_delete_waits_for_finalizers(
    emulator: testing.RunningEmulator, test_crd: dict[str, typing.Any]
) -> None:
    emulator.kubectl("apply", "-f", "-", input=yaml.safe_dump(test_crd))
    widget = (
        "apiVersion: test.berth.io/v1\nkind: Widget\n"
        "metadata: {name: w, finalizers: [test.berth.io/hold]}\nspec: {size: 1}\n"
    )
    emulator.kubectl("apply", "-f", "-", input=widget)
    widgets = emulator.call(emulator.api.resource, "test.berth.io/v1", "widgets")
    deleting = emulator.kubectl_popen("delete", "widget", "w", "--timeout=30s")
    try:
        deadline = time.monotonic() + 10
        while not emulator.call(emulator.api.get, widgets, namespace="default", name="w")[
            "metadata"
        ].get("deletionTimestamp"):
            assert time.monotonic() < deadline, "kubectl never asked for the deletion"
            time.sleep(0.05)
        assert deleting.poll() is None, "kubectl did not wait for the finalizer"
        emulator.call(
            emulator.api.patch,
            widgets,
            [{"op": "remove", "path": "/metadata/finalizers"}],
            namespace="default",
            name="w",
            patch_type="application/json-patch+json",
        )
        out, err = deleting.communicate(timeout=20)
    finally:
        if deleting.poll() is None:
            deleting.kill()
            deleting.communicate()
    assert deleting.returncode == 0, err
    assert 'widget.test.berth.io "w" deleted' in out


def test_pods_and_nodes_print_their_usual_columns(emulator: testing.RunningEmulator) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.37.0"},
        },
    }
    emulator.call(emulator.api.create, emulator.api.resource("v1", "nodes"), node)
    nodes = emulator.kubectl("get", "nodes").stdout.splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[1].split()[:3] == ["n1", "Ready", "worker"]
    emulator.kubectl("run", "p", "--image=busybox", "--restart=Never")
    wide = emulator.kubectl("get", "pods", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[:8] == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED",
    ]


def test_apply_twice_merges_and_server_side_apply(emulator: testing.RunningEmulator) -> None:
    deployment = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {tier: front}}
spec:
  replicas: %d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:%s"}, {name: side, image: busybox}]}
"""
    assert "created" in emulator.kubectl("apply", "-f", "-", input=deployment % (1, "1")).stdout
    assert "configured" in emulator.kubectl("apply", "-f", "-", input=deployment % (3, "2")).stdout
    stored = emulator.kubectl("get", "deploy", "web", "-o", "yaml").stdout
    spec = yaml.safe_load(stored)["spec"]
    assert spec["replicas"] == 3
    assert [c["image"] for c in spec["template"]["spec"]["containers"]] == ["nginx:2", "busybox"]
    config = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa}\ndata: {a: %s}\n"
    first = emulator.kubectl("apply", "--server-side", "-f", "-", input=config % '"1"')
    assert "serverside-applied" in first.stdout
    emulator.kubectl("apply", "--server-side", "-f", "-", input=config % '"2"')
    assert emulator.kubectl("get", "cm", "ssa", "-o", "jsonpath={.data.a}").stdout == "2"
