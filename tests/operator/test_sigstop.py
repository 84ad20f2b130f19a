"""The SIGSTOP experiment against the emulator: a paused leader never writes after its successor.

Two ``berth run`` replicas with short lease timings (4 s / 3 s / 0.5 s) against the emulator
(in this process, writing an audit log); nodes that the burst fills exactly, so that a binding
made on stale data after the successor took over would over-commit a node and the simulated
kubelet would fail the pod ``OutOfcpu``. Counted from the emulator's audit log and its pods, by
:mod:`berth.chaos.sigstop` — the harness ``berth chaos sigstop`` runs on any cluster:

- the old leader's successful writes after the new leader's first write: 0;
- pods failed: 0, and every pod bound, none twice;
- the other tenant's canary untouched and its limited queue at its limit, not over it;
- the survivor still schedules (pods created after the run are bound);
- the old leader exits non-zero (it lost the Lease).
"""

from __future__ import annotations

import pathlib

import pytest

from berth.chaos import sigstop
from berth.emulator import testing
from tests.kube import conftest

pytestmark = pytest.mark.slow


async def test_a_resumed_leader_writes_nothing_after_its_successor(tmp_path: pathlib.Path) -> None:
    audit = tmp_path / "audit.log"
    running = testing.start_emulator(tmp_path, audit_log=audit)
    try:
        conftest.install_crds(running)
        running.start_kubelets(["6x cpu=20,memory=64Gi,pods=110"], speedup=10, start_delay=0)
        experiment = sigstop.Experiment(
            kubeconfig=running.kubeconfig,
            audit_log=audit,
            workdir=tmp_path / "replicas",
            pods=117,  # with the other tenant's 3 cpus, 6 nodes x 20 cpu: full
            hold=1.0,
            timeout=60.0,
        )
        summary = await sigstop.run_many(experiment, runs=2)
    finally:
        running.threaded.stop()
    assert summary.incomplete == [] and len(summary.runs) == 2
    for result in summary.runs:
        assert result.new_leader_writes > 0
        assert result.late_writes == 0, result
        assert result.failed_pods == 0, result
        assert result.bound == experiment.pods, result
        assert result.violations == [], result
        assert result.old_leader_exit == 1, result
    assert summary.as_dict()["violations"] == []
