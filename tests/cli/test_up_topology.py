"""A topology-aware gang with roles through ``berth up`` and real kubectl (issue 17).

Two racks of two 4-GPU nodes (node label ``topology.berth.io/rack``) and a cpu node; a 2-GPU
pod already on r1-0, then examples/gpu-topology: a launcher and four 2-GPU workers requiring
one rack.

We test these aspects:
- the four workers land in one rack (r2, the only one with 8 GPUs free; packing alone would
  start them on r1) and the launcher on the cpu node;
- the PodGroup's status shows each role's scheduled pods.
"""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import time

import pytest

from berth.emulator import testing
from tests.cli import test_up

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gpu-topology"
GPU_POOL = "2x cpu=16,memory=64Gi,nvidia.com/gpu=4 label=topology.berth.io/rack={rack} name={rack}"


@pytest.mark.slow
def test_workers_share_a_rack_through_kubectl(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "up.kubeconfig"
    env = test_up.environment(tmp_path)
    process = subprocess.Popen(
        [
            test_up.BERTH,
            "up",
            "--kubeconfig",
            str(kubeconfig),
            "--nodes",
            GPU_POOL.format(rack="r1"),
            "--nodes",
            GPU_POOL.format(rack="r2"),
            "--nodes",
            "1x cpu=8,memory=32Gi name=cpu",
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

        def kubectl(*args: str) -> str:
            return subprocess.run(
                [testing.kubectl_binary(), *args],
                env=kubectl_env,
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            ).stdout

        def nodes() -> dict[str, str]:
            out = kubectl(
                "get",
                "pods",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{'\\n'}{end}",
            )
            pairs = (line.partition(" ") for line in out.splitlines())
            return {name: node.strip() for name, _, node in pairs if node.strip()}

        def until(count: int, *, seconds: float) -> dict[str, str]:
            deadline = time.monotonic() + seconds
            seen = nodes()
            while len(seen) < count and time.monotonic() < deadline:
                time.sleep(0.5)
                seen = nodes()
            return seen

        kubectl("apply", "-f", str(EXAMPLE / "busy.yaml"))
        assert until(1, seconds=60) == {"busy": "r1-0"}
        kubectl("apply", "-f", str(EXAMPLE / "podgroup.yaml"), "-f", str(EXAMPLE / "pods.yaml"))
        placed = until(6, seconds=60)
        assert (placed.pop("busy"), placed.pop("train-launcher")) == ("r1-0", "cpu-0")
        # Two 2-GPU workers on each node of r2 (which worker goes where is the task order's).
        assert sorted(placed.values()) == ["r2-0", "r2-0", "r2-1", "r2-1"]
        deadline = time.monotonic() + 30
        roles = None
        while time.monotonic() < deadline:
            raw = kubectl("get", "bpg", "train", "-o", "jsonpath={.status.subGroups}")
            roles = json.loads(raw) if raw else None
            if roles and all(r["scheduled"] == r["minMember"] for r in roles):
                break
            time.sleep(0.5)
        assert roles is not None
        assert [(r["name"], r["minMember"], r["scheduled"]) for r in roles] == [
            ("launcher", 1, 1),
            ("workers", 4, 4),
        ]
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
