"""Starting and stopping the control plane's processes, with stand-in binaries (no cluster).

We test these aspects:
- without binaries, the message says where Berth looked and how to provide them;
- a component that exits is named, with its exit code, its log file and the log's last lines;
- a component that never becomes healthy fails the start after the timeout, and every process
  the control plane started is stopped (nothing stray is left);
- stopping is idempotent and also stops a SIGSTOPped process.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import signal
import socket
import subprocess
import sys

import pytest

from berth.realcluster import binaries, controlplane, processes


def test_missing_binaries_say_how_to_provide_them(tmp_path: pathlib.Path) -> None:
    with pytest.raises(binaries.BinariesMissing) as missing:
        binaries.find({"BERTH_CACHE": str(tmp_path)})
    message = str(missing.value)
    assert (
        "no etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok binary" in message
    )
    assert str(tmp_path) in message
    assert "BERTH_K8S_BIN=DIR" in message and "bash hack/build-k8s" in message


def test_envtest_assets_provide_etcd_and_the_api_server(tmp_path: pathlib.Path) -> None:
    environ = {"KUBEBUILDER_ASSETS": str(tmp_path / "assets"), "BERTH_CACHE": str(tmp_path)}
    assets, cache = tmp_path / "assets", binaries.cache_directory(environ)
    for directory, names in ((assets, ("etcd", "kube-apiserver")), (cache, binaries.COMPONENTS)):
        directory.mkdir(parents=True)
        for name in names:
            (directory / name).write_text("#!/bin/sh\n")
            (directory / name).chmod(0o755)
    found = binaries.find(environ)
    assert found["etcd"] == assets / "etcd"
    assert found["kube-apiserver"] == assets / "kube-apiserver"
    assert found["kube-scheduler"] == cache / "kube-scheduler"
    assert found["kwok"] == cache / "kwok"


def test_a_component_that_exits_is_named_with_its_log(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "etcd.log"
    process = processes.Process("etcd", ["sh", "-c", "echo address in use >&2; exit 3"], log=log)
    process.start()
    with pytest.raises(processes.ComponentFailed) as failed:
        processes.wait_until("etcd", lambda: False, timeout=30.0, watch=[process])
    message = str(failed.value)
    assert message.startswith("etcd exited with code 3; its log is ")
    assert str(log) in message and "address in use" in message


def _fake_binaries(directory: pathlib.Path) -> binaries.Binaries:
    directory.mkdir()
    paths = {}
    for name in binaries.COMPONENTS:
        path = directory / name
        path.write_text("#!/bin/sh\nexec sleep 600\n")  # runs, never healthy
        path.chmod(0o755)
        paths[name] = path
    return binaries.Binaries(paths)


def test_a_start_that_fails_stops_everything_it_started(tmp_path: pathlib.Path) -> None:
    plane = controlplane.ControlPlane(
        tmp_path / "plane", binaries=_fake_binaries(tmp_path / "bin"), start_timeout=1.0
    )
    with pytest.raises(processes.ComponentFailed, match=r"etcd not ready after 1 s"):
        plane.start()
    (etcd,) = plane.processes.values()
    assert etcd.pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(etcd.pid, 0)


def test_stop_is_idempotent_and_stops_a_stopped_process(tmp_path: pathlib.Path) -> None:
    process = processes.Process("sleeper", ["sleep", "600"], log=tmp_path / "s.log").start()
    process.signal(signal.SIGSTOP)
    process.stop(grace=5.0)
    process.stop()
    assert not process.running()
    assert subprocess.run(["kill", "-0", str(process.pid)], capture_output=True).returncode != 0


@pytest.mark.realcluster
def test_a_port_in_use_names_the_component_and_its_log(tmp_path: pathlib.Path) -> None:
    try:
        found = binaries.find()
    except binaries.BinariesMissing as missing:
        pytest.skip(f"no real control plane: {missing}")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = dataclasses.replace(controlplane.Ports.free(), etcd_client=taken.getsockname()[1])
        plane = controlplane.ControlPlane(tmp_path, binaries=found, ports=ports)
        with pytest.raises(processes.ComponentFailed) as failed:
            plane.start()
    message = str(failed.value)
    assert message.startswith("etcd exited with code 1; its log is ")
    assert "address already in use" in message
    assert not any(p.running() for p in plane.processes.values())


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_a_component_dies_with_a_killed_parent(tmp_path: pathlib.Path) -> None:
    # The parent starts a component, prints its pid and is SIGKILLed: no cleanup code runs.
    script = (
        "import os, pathlib, signal, sys\n"
        "from berth.realcluster import processes\n"
        f"log = pathlib.Path({str(tmp_path)!r}) / 's.log'\n"
        "p = processes.Process('sleeper', ['sleep', '600'], log=log)\n"
        "print(p.start().pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    parent = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    child = int(parent.stdout.strip())
    processes.wait_until("the orphan to die", lambda: not _alive(child), timeout=10.0)


def _alive(pid: int) -> bool:
    try:
        status = pathlib.Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return status != "Z"
