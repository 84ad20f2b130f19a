"""``berth emulator`` and ``berth bench emulator``.

We test these aspects:
- ``--help`` documents the node pool SPEC; a bad SPEC is a usage error (exit 2);
- the standalone server writes a kubeconfig that kubectl uses, serves the simulated nodes, and
  stops cleanly on SIGTERM;
- the benchmark prints one JSON object with creates/s, binds/s and watch events/s.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys

from click import testing as click_testing

from berth.cli import main
from berth.emulator import testing


def test_help_documents_the_spec() -> None:
    result = click_testing.CliRunner().invoke(main.cli, ["emulator", "--help"])
    assert result.exit_code == 0
    assert "COUNTx RESOURCES" in result.output and "taint=KEY[=VALUE]:EFFECT" in result.output


def test_bad_spec_is_a_usage_error() -> None:
    result = click_testing.CliRunner().invoke(main.cli, ["emulator", "--nodes", "three nodes"])
    assert result.exit_code == 2
    assert "a pool starts with a count" in result.output


def test_standalone_server_with_nodes(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    berth = pathlib.Path(sys.executable).parent / "berth"
    process = subprocess.Popen(
        [
            str(berth),
            "emulator",
            "--kubeconfig",
            str(kubeconfig),
            "--nodes",
            "2x cpu=4",
            "--nodes",
            "1x name=gpu nvidia.com/gpu=8",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert "berth emulator: serving http://127.0.0.1:" in ready, process.stderr
        env = dict(
            os.environ,
            KUBECONFIG=str(kubeconfig),
            HOME=str(tmp_path),
            KUBECACHEDIR=str(tmp_path / "cache"),
        )
        nodes = subprocess.run(
            [testing.kubectl_binary(), "get", "nodes", "-o", "name"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        assert nodes.stdout.split() == ["node/gpu-0", "node/pool0-0", "node/pool0-1"]
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0
    assert "stopped" in out


def test_bench_prints_one_json_object() -> None:
    args = ["bench", "emulator", "--pods", "40", "--watchers", "2", "--concurrency", "4"]
    result = click_testing.CliRunner().invoke(main.cli, args)
    assert result.exit_code == 0, result.output
    numbers = json.loads(result.output)
    assert numbers["pods"] == 40 and numbers["watch_events"] == 2 * 2 * 40
    for key in ("creates_per_second", "binds_per_second", "watch_events_per_second"):
        assert numbers[key] > 0
