"""Fixtures of the real-cluster tier (``-m realcluster``): one real control plane per session.

A pytest plugin (``tests/conftest.py`` loads it), so that every folder can use the cluster.

The binaries come from ``BERTH_K8S_BIN``, ``KUBEBUILDER_ASSETS`` or ``hack/build-k8s``'s cache
(``hack/test`` builds them when Go is available); without them every test here is skipped with
the message saying how to provide them. The plane runs KWOK nodes, and Berth's chart is
installed in admission mode (its RBAC is scheduler mode's plus pod create/delete), so one
installation serves both modes. Every process is stopped at the end of the session, and every
Berth process at the end of its test, also when a test fails.
"""

from __future__ import annotations

import asyncio
import collections.abc
import pathlib
import tempfile

import pytest

from berth.emulator import kubelets
from berth.realcluster import binaries, controlplane, install, processes
from tests.realcluster import cluster

NODES = ("6x cpu=8,memory=32Gi,pods=110", "2x cpu=4,memory=16Gi label=pool=small name=small")


LOG_LINES = 60
"""Lines of each component's log a failed real-cluster test shows."""


def _tail(path: pathlib.Path, lines: int) -> str:
    try:
        text = path.read_bytes()[-200_000:].decode("utf-8", errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> collections.abc.Iterator[None]:
    """A failed real-cluster test shows the end of each component's log and of each Berth
    process's it started (kept after the session in the logs folder), not just their paths."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    handle = getattr(item, "funcargs", {}).get("real")
    if (
        not report.failed
        or report.when == "teardown"
        or not isinstance(handle, cluster.RealCluster)
    ):
        return
    logs = [(name, p.log) for name, p in handle.plane.processes.items()]
    logs += [(f"berth {b.identity}", b.process.log) for b in handle.started]
    for name, path in logs:
        report.sections.append(
            (f"{name}: last {LOG_LINES} lines of {path}", _tail(path, LOG_LINES))
        )


@pytest.fixture(scope="session")
def real_cluster() -> collections.abc.Iterator[cluster.RealCluster]:
    try:
        found = binaries.find()
    except binaries.BinariesMissing as missing:
        pytest.skip(f"no real control plane: {missing}")
    # Not under pytest's basetemp: another pytest run on the machine prunes old basetemps, and
    # the logs are worth keeping after a failure (they are removed after a passing session).
    directory = pathlib.Path(tempfile.mkdtemp(prefix="berth-realcluster-"))
    plane = controlplane.ControlPlane(
        directory,
        pools=[kubelets.parse_pool(spec, index=i) for i, spec in enumerate(NODES)],
        binaries=found,
        audited_users=[install.USER],
    )
    with plane:
        installation = asyncio.run(install.install(plane, mode="admission"))
        webhooks = install.webhook_configuration(plane)
        assert webhooks is not None
        handle = cluster.RealCluster(plane, installation, webhooks)
        yield handle
        handle.stop_berth()
    print(f"real-cluster logs: {directory / 'logs'}")


@pytest.fixture
def real(real_cluster: cluster.RealCluster) -> collections.abc.Iterator[cluster.RealCluster]:
    """The session's cluster, checked alive; the test's Berth processes stop after it."""
    try:
        real_cluster.plane.check()
    except processes.ComponentFailed as failed:
        pytest.fail(str(failed), pytrace=False)
    refused_before = len(real_cluster.refused())
    try:
        yield real_cluster
    finally:
        real_cluster.clean_up()
    refused = real_cluster.refused()[refused_before:]
    if refused:
        pytest.fail(f"the API server refused Berth (chart RBAC): {refused}", pytrace=False)
