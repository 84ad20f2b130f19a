"""The partition experiment against the emulator: a leader cut off never writes after its
successor, and after healing every pod is scheduled exactly once.

Two ``berth run`` replicas with short lease timings (4 s / 3 s / 0.5 s) against the emulator
(in this process, writing an audit log); the leader-to-be reaches it through the fault proxy
(:mod:`berth.chaos.proxy`), whose fault lasts longer than the Lease while the follower takes
over and fills the nodes. Counted by :mod:`berth.chaos.partition` from the audit log and the
pods, for a partition the leader notices (connections reset) and one it does not (a black
hole):

- the old leader's successful writes after the new leader's first write: 0, and it exits
  non-zero (it stepped down);
- every pod bound, none twice, none failed; the other tenant's canary untouched and its
  limited queue not over its limit; the survivor schedules pods created after healing;
- the proxy injected the fault (and, for the reset, reset connections).
"""

from __future__ import annotations

import pathlib

import pytest

from berth.chaos import partition, proxy, sigstop
from berth.emulator import testing
from tests.kube import conftest

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("fault", [proxy.Fault.RESET, proxy.Fault.DROP], ids=lambda f: f.value)
async def test_a_partitioned_leader_steps_down_without_writing(
    tmp_path: pathlib.Path, fault: proxy.Fault
) -> None:
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
        summary = await partition.run_many(experiment, runs=1, fault=fault)
    finally:
        running.threaded.stop()
    assert summary["violations"] == [] and summary["incomplete"] == [], summary
    (run,) = summary["detail"]
    assert run["new_leader_writes"] > 0
    assert run["late_writes"] == 0
    assert run["bound"] == experiment.pods
    assert run["bound_twice"] == run["failed_pods"] == 0
    assert run["scheduled_after"] is True
    assert run["old_leader_exit"] == 1
    assert summary["proxy"]["faults"] == 1
    if fault is proxy.Fault.RESET:
        assert summary["proxy"]["resets"] > 0
    else:
        assert summary["proxy"]["dropped_bytes"] > 0
