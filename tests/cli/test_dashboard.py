"""The dashboard ``berth up`` serves, opened in headless Chromium.

We test these aspects: ``berth up`` prints the dashboard's address; once a queue tree is
applied and a pod waits in it, the page (its JavaScript run by the browser) shows the queue
tree, an invalid queue as such, the waiting group with its position and the scheduler's
reason; a screenshot of the page is written.

Needs Debian's ``chromium`` (``apt-get install chromium``); skipped, saying so, without it.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from berth.emulator import testing

BERTH = str(pathlib.Path(sys.executable).parent / "berth")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)"
    ),
]

OBJECTS = """
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: research}
spec: {guaranteed: {cpu: "4"}}
---
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: team-a}
spec: {parent: research, guaranteed: {cpu: "2"}}
---
apiVersion: scheduling.berth.io/v1alpha1
kind: Queue
metadata: {name: orphan}
spec: {parent: nowhere}
---
apiVersion: v1
kind: Pod
metadata: {name: huge, labels: {scheduling.berth.io/queue: team-a}}
spec:
  schedulerName: berth-scheduler
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "64"}}}]
"""


def browse(url: str, *args: str) -> str:
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--virtual-time-budget=5000",
            *args,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_dashboard_shows_the_queue_tree_and_why_a_group_waits(
    tmp_path: pathlib.Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    env.pop("KUBECONFIG", None)
    env |= {"HOME": str(tmp_path), "KUBECACHEDIR": str(tmp_path / "cache")}
    process = subprocess.Popen(
        [BERTH, "up", "--nodes", "2x cpu=4,memory=8Gi", "--log-level", "warning"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        printed = [process.stdout.readline() for _ in range(6)]
        (dashboard,) = [line.split()[-1] for line in printed if "dashboard:" in line]
        base = dashboard.removesuffix("/dashboard")
        kubeconfig = tmp_path / ".local" / "state" / "berth" / "up" / "kubeconfig"
        subprocess.run(
            [testing.kubectl_binary(), "apply", "-f", "-"],
            input=OBJECTS,
            env=env | {"KUBECONFIG": str(kubeconfig)},
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        deadline = time.monotonic() + 30
        waiting: list[dict[str, object]] = []
        while time.monotonic() < deadline and not waiting:
            with urllib.request.urlopen(f"{base}/apis/v1/queues/team-a/waiting") as answer:
                waiting = json.loads(answer.read())["items"]
            time.sleep(0.2)
        assert waiting, "the pod never waited in team-a"

        dom = browse(dashboard, "--dump-dom")
        for text in (
            "research",
            "└ team-a",
            "orphan",
            "Invalid",
            "parent queue nowhere does not exist",
        ):
            assert text in dom, text
        assert "default/huge" in dom
        assert "1 of 1" in dom  # its position in team-a's line
        assert "0/2 nodes fit: 2 Insufficient cpu" in dom  # why it waits
        shot = tmp_path / "dashboard.png"
        browse(dashboard, f"--screenshot={shot}", "--window-size=1280,900")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
