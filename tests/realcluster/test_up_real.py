"""``berth up --real`` as a user runs it: a real control plane, the examples, Ctrl+C.

We test these aspects:
- it prints the administrator's kubeconfig, under its state directory, for the real kubectl;
- ``kubectl apply`` of every example folder reaches what the README promises: the queues get
  their status, the gang of four runs, the reservation is taken by its owner (Succeeded) on its
  node, and the plain pod runs;
- the API server's audit log shows one watch per kind from Berth's replica: every kind the
  scheduler follows is watched (the informers' kinds, Berth's own through Kopf, CRDs), and no
  two watches of one kind are ever open at once;
- Ctrl+C stops Berth and every component of the control plane, and the command exits 0;
- installed as the README's install table says (a fresh virtualenv, the checkout with its
  ``[real]`` extra), ``berth up --real --mode admission --kubeconfig F`` with nodes of a pool
  named ``n`` labelled ``gpu=yes`` (YAML 1.1 booleans, were they written bare) writes F, prints
  admission mode's next steps, and those steps, run as printed, get a pod gated, admitted and
  bound by kube-scheduler on the node Berth pinned;
- ``berth up --real --mode admission --admission-namespaces all`` (the chart's
  ``admission.namespaces=all``) prints each step of its start-up, and says in its next steps
  that it gates every namespace's pods;
  plain pods (no label, no scheduler named) in the ``default`` namespace are then gated and
  admitted by Berth in the ``default`` queue, whose usage ``kubectl get bq`` (its row, from the
  Queue the leader creates) and ``kubectl berth queue default`` show: 2 running, 1 pending;
- options of the embedded cluster that mean nothing with ``--real`` are refused, saying why, and
  ``--autoscale`` (Karpenter) without it.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys

import pytest

from berth.realcluster import audit, binaries, install
from tests.packaging import venvs
from tests.realcluster import cluster

pytestmark = pytest.mark.realcluster

ROOT = pathlib.Path(__file__).resolve().parents[2]
WATCHED = {
    # The informers'
    "pods", "nodes", "namespaces", "priorityclasses", "persistentvolumeclaims",
    "persistentvolumes", "storageclasses", "csinodes",
    # The informers' DRA kinds (the real control plane serves resource.k8s.io/v1)
    "deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates",
    # The leader's Kopf: Berth's own kinds, and the CRDs
    "queues", "podgroups", "reservations", "customresourcedefinitions",
}  # fmt: skip
BERTH = str(pathlib.Path(sys.executable).parent / "berth")


def _alive_under(directory: pathlib.Path) -> list[str]:
    """Command lines of running processes that mention ``directory`` (its components)."""
    found = []
    for proc in pathlib.Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(directory) in cmdline:
            found.append(cmdline)
    return found


@pytest.mark.timeout(300)
def test_up_real_runs_the_examples_then_stops_everything(tmp_path: pathlib.Path) -> None:
    try:
        binaries.find()
    except binaries.BinariesMissing as missing:
        pytest.skip(f"no real control plane: {missing}")
    env = dict(os.environ, BERTH_STATE_DIR=str(tmp_path / "berth"))
    env["PATH"] = str(pathlib.Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    state = tmp_path / "berth" / "real-cluster"
    process = subprocess.Popen(
        [BERTH, "up", "--real", "--nodes", "8x cpu=16,memory=64Gi,nvidia.com/gpu=4",
         "--log-level", "warning"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            if "export KUBECONFIG=" in line:
                break
        assert lines and "export KUBECONFIG=" in lines[-1], "".join(lines)
        kubeconfig = lines[-1].split("export KUBECONFIG=", 1)[1].split("#")[0].strip()
        assert kubeconfig == str(state / "admin.kubeconfig")
        assert any("Berth runs as system:serviceaccount:berth-system:berth" in x for x in lines)
        kube = dict(env, KUBECONFIG=kubeconfig)

        def kubectl(*args: str) -> str:
            return subprocess.run(
                ["kubectl", *args], env=kube, capture_output=True, text=True, check=True,
                timeout=150,
            ).stdout  # fmt: skip

        for folder in sorted(p for p in (ROOT / "examples").iterdir() if p.name[:2].isdigit()):
            kubectl("apply", "-f", str(folder))
        wait = f"--timeout={cluster.WAIT}"
        kubectl("wait", "queue/research", "--for=jsonpath={.status.children[0]}=team-a", wait)
        for i in range(4):
            kubectl("wait", f"pod/train-{i}", "--for=jsonpath={.status.phase}=Running", wait)
        kubectl("wait", "reservation/train-capacity", "--for=jsonpath={.status.phase}=Succeeded",
                wait)  # fmt: skip
        node = kubectl("get", "reservation/train-capacity", "-o", "jsonpath={.status.nodeName}")
        assert kubectl("get", "pod/trainer", "-o", "jsonpath={.spec.nodeName}") == node
        kubectl("wait", "pod/hello", "--for=jsonpath={.status.phase}=Running", wait)
        watched = audit.watches(state / "logs" / "audit.log", user=install.USER)
        assert audit.overlapping(watched) == {}
        assert {w.resource for w in watched} >= WATCHED, sorted({w.resource for w in watched})
        assert _alive_under(state)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
        assert _alive_under(state) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


PLAIN_PODS = "".join(
    f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: plain-{index}}}
spec:
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""
    for index, cpu in ((0, "1"), (1, "1"), (2, "64"))
)


@pytest.mark.timeout(300)
def test_up_real_gating_every_namespace_shows_the_default_queues_usage(
    tmp_path: pathlib.Path,
) -> None:
    try:
        binaries.find()
    except binaries.BinariesMissing as missing:
        pytest.skip(f"no real control plane: {missing}")
    env = dict(os.environ, BERTH_STATE_DIR=str(tmp_path / "berth"))
    env["PATH"] = str(pathlib.Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    kubeconfig = tmp_path / "real.kubeconfig"
    process = subprocess.Popen(
        [BERTH, "up", "--real", "--mode", "admission", "--admission-namespaces", "all",
         "--kubeconfig", str(kubeconfig), "--nodes", "2x cpu=4,memory=8Gi",
         "--log-level", "warning"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        printed: list[str] = []
        for line in process.stdout:
            printed.append(line)
            if "Press Ctrl+C" in line:
                break
        text = " ".join("".join(printed).split())
        # Each step of its start-up (docs/real-cluster.md), then what to type next.
        steps = [line.removeprefix("berth up --real: ").strip() for line in printed]
        started = ("starting etcd", "starting kube-apiserver", "installing Berth's chart")
        for step in (*started, "waiting for the nodes to be Ready"):
            assert step in steps, printed
        assert "Berth's webhook gates every new pod of every namespace but kube-system" in text
        assert "kube-scheduler binds them" in text
        kube = dict(env, KUBECONFIG=str(kubeconfig))

        def kubectl(*args: str, input: str | None = None) -> str:
            return subprocess.run(
                ["kubectl", *args], env=kube, input=input, capture_output=True, text=True,
                check=True, timeout=150,
            ).stdout  # fmt: skip

        kubectl("apply", "-f", "-", input=PLAIN_PODS)
        wait = f"--timeout={cluster.WAIT}"
        for name in ("plain-0", "plain-1"):
            kubectl("wait", f"pod/{name}", "--for=jsonpath={.status.phase}=Running", wait)
            pod = json.loads(kubectl("get", f"pod/{name}", "-o", "json"))
            # Gated by the webhook, admitted by Berth, bound by kube-scheduler where pinned.
            admitted = pod["metadata"]["annotations"]["scheduling.berth.io/admitted-node"]
            assert pod["spec"]["nodeName"] == admitted
            assert pod["spec"]["schedulerName"] == "default-scheduler"
        too_big = json.loads(kubectl("get", "pod/plain-2", "-o", "json"))
        assert too_big["spec"]["schedulingGates"] == [{"name": "scheduling.berth.io/admission"}]
        kubectl("wait", "queue/default", "--for=jsonpath={.status.runningPods}=2", wait)
        kubectl("wait", "queue/default", "--for=jsonpath={.status.pendingPods}=1", wait)
        table = kubectl("get", "bq")
        # NAME STATE PARENT GUARANTEED ALLOCATED FAIRSHARE PENDING RUNNING: all 8 cpu its share.
        assert re.search(r"^default\s+Open\s+0\s+2 cpu\s+8 cpu\s+1\s+2\s", table, re.M), table
        line = " ".join(kubectl("berth", "queue", "default").split())
        assert "1 pending, 2 running" in line, line
        assert "allocated 2 cpu of fair share 8 cpu" in line, line
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def test_up_real_refuses_options_of_the_embedded_cluster() -> None:
    result = subprocess.run(
        [BERTH, "up", "--real", "--speedup", "5"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--speedup does not apply to --real: KWOK runs pods in real time" in result.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_up_real_from_a_fresh_install_in_admission_mode_writes_the_kubeconfig_asked(
    tmp_path: pathlib.Path,
) -> None:
    try:
        binaries.find()
    except binaries.BinariesMissing as missing:
        pytest.skip(f"no real control plane: {missing}")
    (row,) = [s for s in venvs.documented_sets() if "berth up --real" in s.commands]
    venv = venvs.editable_venv(tmp_path / "install", row)
    kubeconfig = tmp_path / "mine.kubeconfig"
    # The virtualenv's home is fresh: point it at the binaries this machine has (never build).
    found = {k: os.environ[k] for k in ("BERTH_K8S_BIN", "KUBEBUILDER_ASSETS") if k in os.environ}
    cache = os.environ.get("BERTH_CACHE") or str(pathlib.Path.home() / ".cache" / "berth")
    env = venv.env(BERTH_CACHE=cache, **found)
    process = subprocess.Popen(
        [venv.bin("berth"), "up", "--real", "--mode", "admission", "--kubeconfig", str(kubeconfig),
         "--nodes", "2x cpu=4 name=n label=gpu=yes", "--log-level", "warning"],
        env=env, cwd=venvs.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        printed: list[str] = []
        for line in process.stdout:
            printed.append(line)
            if "Press Ctrl+C" in line:
                break
        text = "".join(printed)
        assert "Press Ctrl+C" in text, text
        assert "in admission mode" in text
        assert "and kube-scheduler binds them" in " ".join(text.split())
        assert f"export KUBECONFIG={kubeconfig.resolve()}" in text
        assert kubeconfig.stat().st_mode & 0o077 == 0  # the administrator's key: owner only
        kube = dict(env, KUBECONFIG=str(kubeconfig))

        def kubectl(*args: str) -> str:
            return subprocess.run(
                [venv.bin("kubectl"), *args], env=kube, cwd=venvs.REPO, capture_output=True,
                text=True, check=True, timeout=150,
            ).stdout  # fmt: skip

        assert kubectl("get", "nodes", "-l", "gpu=yes", "-o", "name").split() == [
            "node/n-0",
            "node/n-1",
        ]
        assert (
            kubectl("get", "node", "n-0", "-o", "jsonpath={.metadata.labels.sim\\.berth\\.io/pool}")
            == "n"
        )
        for line in printed:
            command = line.split("#")[0].strip()
            if command.startswith("kubectl "):
                kubectl(*shlex.split(command)[1:])
        kubectl("wait", "pod/hello", "--for=jsonpath={.spec.nodeName}", f"--timeout={cluster.WAIT}")
        hello = json.loads(kubectl("get", "pod/hello", "-o", "json"))
        admitted = hello["metadata"]["annotations"]["scheduling.berth.io/admitted-node"]
        assert hello["spec"]["nodeName"] == admitted
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def test_autoscale_needs_the_real_control_plane() -> None:
    result = subprocess.run(
        [BERTH, "up", "--autoscale"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--autoscale applies to --real" in result.stderr
