"""``berth bench peers --real``, small: Kueue admits and kube-scheduler places a few Jobs, then
Berth runs the same, on a real control plane of their own.

It keeps the Kueue build (``hack/build-k8s --with kueue``; ``hack/test`` builds it) and its
install (CRDs from the module, webhooks, the manager as a local process) working. Skipped,
saying how to build it, where Kueue is not built.

We test these aspects:
- every Job runs to completion under both systems, every one of Kueue's through an admitted
  Workload (its webhook suspended them, it admitted them);
- the report has each system's rates, fair-share errors, CPU seconds, and shares over time;
- Berth starts no partial gang (its pods are bound only all four together);
- nothing is left running afterwards.
"""

from __future__ import annotations

import pytest

from berth.cli import peers
from berth.realcluster import binaries

from . import processes

pytestmark = [pytest.mark.realcluster, pytest.mark.slow]


def test_kueue_and_berth_each_run_the_same_jobs() -> None:
    try:
        binaries.find()
        binaries.extra("kueue")
    except binaries.BinariesMissing as missing:
        pytest.skip(f"no real control plane or Kueue: {missing}")
    before = processes.children()
    report = peers.measure(nodes=2, jobs=8, weights=(1, 3), seconds=(3, 6), timeout=300.0)
    assert report["complete"], report["errors"]
    kueue, berth = report["kueue_kube_scheduler"], report["berth"]
    assert kueue["workloads_admitted"] == 8
    for result in (kueue, berth):
        assert result["jobs"] == 8
        assert result["seconds_until_all_ran"] > 0
        assert result["jobs_started_per_minute"] > 0
        assert set(result["fair_share_error"]) == {"q0", "q1", "all"}
        assert set(result["series"]) == {"q0", "q1"}
    assert berth["partial_gangs"] == 0
    assert kueue["cpu_seconds"]["kueue"] > 0 and kueue["cpu_seconds"]["kube-scheduler"] > 0
    assert berth["controller_and_scheduler_cpu_seconds"] > 0
    assert processes.left_behind(before) == []
