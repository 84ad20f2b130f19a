"""Fair share through ``berth up`` and real kubectl (issue 16, "Must show" 2).

``qa`` (weight 3) and ``qb`` (weight 1) under a 40-cpu parent on five 8-cpu simulated nodes
(examples/05-fair-share). qa applies 50 one-cpu pods and runs 40; then qb applies 20.

We test these aspects:
- qa first holds all 40 cores;
- within a few cycles of qb's pods arriving the bound pods are 30 qa and 10 qb, and stay so;
- the evicted qa pods' events say who reclaimed them.
"""

from __future__ import annotations

import pathlib
import signal
import subprocess
import time

import pytest

from berth.emulator import testing
from tests.cli import test_up

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pods(queue: str, count: int) -> str:
    return "".join(
        f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {queue}-{i:02d}, labels: {{scheduling.berth.io/queue: {queue}}}}}
spec:
  schedulerName: berth-scheduler
  containers: [{{name: main, image: busybox:1.36, command: [sleep, infinity],
                resources: {{requests: {{cpu: "1", memory: 64Mi}}}}}}]
"""
        for i in range(count)
    )


@pytest.mark.slow
def test_qa_and_qb_end_30_10_through_kubectl(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "up.kubeconfig"
    env = test_up.environment(tmp_path)
    process = subprocess.Popen(
        [
            test_up.BERTH,
            "up",
            "--kubeconfig",
            str(kubeconfig),
            "--nodes",
            "5x cpu=8,memory=32Gi",
            "--log-level",
            "warning",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert "berth up: Kubernetes API at http://127.0.0.1:" in process.stdout.readline()
        process.stdout.readline()
        kubectl_env = env | {"KUBECONFIG": str(kubeconfig)}

        def kubectl(*args: str, input: str | None = None) -> str:
            return subprocess.run(
                [testing.kubectl_binary(), *args],
                env=kubectl_env,
                input=input,
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            ).stdout

        def bound() -> dict[str, int]:
            out = kubectl(
                "get",
                "pods",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{'\\n'}{end}",
            )
            counts = {"qa": 0, "qb": 0}
            for line in out.splitlines():
                name, _, node = line.partition(" ")
                if node.strip():
                    counts[name.split("-")[0]] += 1
            return counts

        def until(expected: dict[str, int], *, seconds: float) -> dict[str, int]:
            deadline = time.monotonic() + seconds
            seen = bound()
            while seen != expected and time.monotonic() < deadline:
                time.sleep(0.5)
                seen = bound()
            return seen

        kubectl("apply", "-f", str(ROOT / "examples" / "05-fair-share" / "queues.yaml"))
        kubectl("apply", "-f", "-", input=pods("qa", 50))
        assert until({"qa": 40, "qb": 0}, seconds=60) == {"qa": 40, "qb": 0}
        kubectl("apply", "-f", "-", input=pods("qb", 20))
        assert until({"qa": 30, "qb": 10}, seconds=60) == {"qa": 30, "qb": 10}
        time.sleep(3)  # several more cycles: nothing moves back
        assert bound() == {"qa": 30, "qb": 10}
        events = kubectl("get", "events", "-o", "jsonpath={.items[*].message}")
        assert "reclaimed by queue qb" in events
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
