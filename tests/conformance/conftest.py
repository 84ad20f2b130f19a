"""The conformance suite runs every test against both API servers: the emulator and the real one.

``server`` is parametrized: ``emulator`` (Berth's, with its CRDs and two simulated nodes) and
``real`` (the session's real control plane, marked ``realcluster``: skipped where no binaries
can be had). A test asserts what the real kube-apiserver does; where the emulator differs on
purpose, the test says so with ``server.differs(reason)`` and docs/emulator.md lists it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import typing
import uuid

import pytest

from berth.api import crds
from berth.emulator import testing
from tests.realcluster import cluster

Obj = dict[str, typing.Any]


@dataclasses.dataclass
class Server:
    """One API server as the real kubectl sees it."""

    name: str
    kubeconfig: pathlib.Path
    env: dict[str, str]
    nodes: list[str]

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [testing.kubectl_binary(), *args],
            input=input,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            pytest.fail(
                f"[{self.name}] kubectl {' '.join(args)} exited {result.returncode}\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
            )
        return result

    def json(self, *args: str) -> Obj:
        decoded: Obj = json.loads(self.kubectl(*args, "-o", "json").stdout)
        return decoded

    def raw(self, path: str) -> str:
        return self.kubectl("get", "--raw", path).stdout

    def namespace(self) -> str:
        name = f"c-{uuid.uuid4().hex[:8]}"
        self.kubectl("create", "namespace", name)
        if self.name == "real":  # pods wait for the controllers' ServiceAccount
            self.kubectl(
                "wait", "--for=create", "serviceaccount/default", "-n", name, "--timeout=60s"
            )
        return name


@pytest.fixture(scope="module")
def emulator_server() -> collections.abc.Iterator[Server]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="berth-conformance-") as directory:
        running = testing.start_emulator(pathlib.Path(directory))
        try:
            definitions = running.call(
                running.api.resource, "apiextensions.k8s.io/v1", "customresourcedefinitions"
            )
            for crd in crds.render_all().values():
                running.call(running.api.create, definitions, crd)
            pools = running.start_kubelets(["2x cpu=8,memory=32Gi"], speedup=10)
            env = running.env()
            env["PATH"] = str(pathlib.Path(sys.executable).parent) + os.pathsep + env["PATH"]
            yield Server("emulator", running.kubeconfig, env, sorted(pools.nodes))
        finally:
            running.threaded.stop()


@pytest.fixture(params=["emulator", pytest.param("real", marks=pytest.mark.realcluster)])
def server(request: pytest.FixtureRequest) -> Server:
    if request.param == "emulator":
        emulated: Server = request.getfixturevalue("emulator_server")
        return emulated
    real: cluster.RealCluster = request.getfixturevalue("real_cluster")
    env = dict(os.environ, KUBECONFIG=str(real.plane.admin_kubeconfig))
    env["PATH"] = str(pathlib.Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    nodes = [n["metadata"]["name"] for n in real.json("get", "nodes")["items"]]
    return Server("real", real.plane.admin_kubeconfig, env, sorted(nodes))
