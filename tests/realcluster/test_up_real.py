"""``berth up --real`` as a user runs it: a real control plane, the examples, Ctrl+C.

We test these aspects:
- it prints the administrator's kubeconfig, under its state directory, for the real kubectl;
- ``kubectl apply`` of every example folder reaches what the README promises: the queues get
  their status, the gang of four runs, the reservation is taken by its owner (Succeeded) on its
  node, and the plain pod runs;
- Ctrl+C stops Berth and every component of the control plane, and the command exits 0;
- options of the embedded cluster that mean nothing with ``--real`` are refused, and
  ``--autoscale`` (Karpenter) without it.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

import pytest

from berth.realcluster import binaries
from tests.realcluster import cluster

pytestmark = pytest.mark.realcluster

ROOT = pathlib.Path(__file__).resolve().parents[2]
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
        kubeconfig = lines[-1].split("export KUBECONFIG=", 1)[1].strip()
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


def test_up_real_refuses_options_of_the_embedded_cluster() -> None:
    result = subprocess.run(
        [BERTH, "up", "--real", "--speedup", "5"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--speedup does not apply to --real" in result.stderr


def test_autoscale_needs_the_real_control_plane() -> None:
    result = subprocess.run(
        [BERTH, "up", "--autoscale"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "--autoscale applies to --real" in result.stderr
