"""``berth up --real`` when kube-apiserver restarts: the local cluster keeps running.

Berth's operator exits when it loses its Lease, as kube-scheduler does; ``berth up --real`` is
its kubelet here and starts it again. We test this aspect: with ``berth up --real`` running and
a pod scheduled, kube-apiserver is stopped (SIGTERM, then SIGKILL after 30 s, as a kubelet
stops a pod), kept down for 12 seconds (past Berth's renew deadline of 10: Berth loses its
Lease) and started again with the same flags, as a kubelet restarts a static pod.
``berth up --real`` does not exit: it says it starts Berth again, a new pod is scheduled by
Berth, and Ctrl+C still stops everything with exit code 0.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import time

import pytest

from berth.realcluster import processes
from tests.realcluster import cluster, upreal

pytestmark = pytest.mark.realcluster

DOWN = 12.0  # seconds kube-apiserver stays down: past Berth's renewDeadline (10 s)


def _apiserver(directory: pathlib.Path) -> tuple[int, list[str]]:
    """The pid and command line of the kube-apiserver serving ``directory``'s cluster."""
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode() for a in argv if a]
        if words and words[0].endswith("kube-apiserver") and str(directory) in " ".join(words):
            return int(proc.name), words
    raise AssertionError(f"no kube-apiserver of {directory} runs")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return pathlib.Path(f"/proc/{pid}/status").read_text().find("State:\tZ") >= 0


GRACE = 30.0  # a pod's default terminationGracePeriodSeconds


def _stop_as_a_kubelet_would(pid: int) -> None:
    """SIGTERM, then SIGKILL after the grace period. kube-apiserver drains in-flight requests
    before it exits, up to its request timeout (60 s); under a CPU burner a slow LIST kept one
    alive past a minute after its listener had closed."""
    os.kill(pid, signal.SIGTERM)
    try:
        processes.wait_until("kube-apiserver stopped", lambda: _gone(pid), timeout=GRACE)
    except processes.ComponentFailed:
        os.kill(pid, signal.SIGKILL)
        processes.wait_until("kube-apiserver killed", lambda: _gone(pid), timeout=GRACE)


@pytest.mark.timeout(480)
def test_up_real_starts_berth_again_after_a_kube_apiserver_restart(tmp_path: pathlib.Path) -> None:
    state = tmp_path / "berth" / "real-cluster"
    replacement: subprocess.Popen[bytes] | None = None
    try:
        with upreal.started(
            tmp_path / "berth", "--nodes", "2x cpu=8,memory=32Gi", until="export KUBECONFIG="
        ) as up:
            up.follow()

            def run_pod(name: str) -> None:
                pod = (
                    f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n"
                    "  schedulerName: berth-scheduler\n  restartPolicy: Never\n"
                    "  containers: [{name: main, image: registry.k8s.io/pause:3.10}]\n"
                )
                up.out("create", "-f", "-", input=pod)
                up.out("wait", f"pod/{name}", "--for=jsonpath={.status.phase}=Running",
                       f"--timeout={cluster.WAIT}")  # fmt: skip

            run_pod("before")
            pid, argv = _apiserver(state)
            _stop_as_a_kubelet_would(pid)
            time.sleep(DOWN)  # the fault itself: the API server is away this long
            with (tmp_path / "kube-apiserver-again.log").open("wb") as log:
                replacement = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
            processes.wait_until(
                "kube-apiserver serving again",
                lambda: up.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
                timeout=120,
            )
            run_pod("after")
            assert up.process.poll() is None, "berth up --real exited"
            processes.wait_until(
                "berth up --real saying it started Berth again",
                lambda: any("starting it again" in line for line in up.printed),
                timeout=60,
            )
            up.stop()
    finally:
        if replacement is not None and replacement.poll() is None:
            # Its etcd went with berth up: it may not stop gracefully.
            replacement.terminate()
            try:
                replacement.wait(timeout=10)
            except subprocess.TimeoutExpired:
                replacement.kill()
                replacement.wait()
