"""``berth bench e2e --real`` on a tiny real cluster, with Berth killed mid-run.

The full benchmark takes an hour at 5000 nodes; this runs the ``basic`` shape on 6 nodes with
40 pods a race, and kills Berth once kube-scheduler's races are done, so it checks both what a
finished race reports on the real plane and what a fault leaves behind.

We test these aspects:
- the null scheduler's and kube-scheduler's races finish and report rates, CPU per 1000 pods,
  the API server's cores, and kube-scheduler's rate as a fraction of the ceiling;
- Berth dying mid-run ends it with a partial JSON: not complete, Berth's races missing, an
  error naming Berth and its log, which is kept and says why;
- no process of the run is left;
- the ``dra`` shape (8 devices a node, one claim a pod from a template): the null scheduler,
  kube-scheduler and Berth each bind every pod of both races with its claim allocated and
  reserved, and the run is complete; each race counts the API server's requests in its
  window, every pod's binding among them.
"""

from __future__ import annotations

import pathlib
import signal
import typing

import pytest

from berth.cli import e2e_race, e2e_real
from berth.realcluster import binaries

from . import processes

pytestmark = [pytest.mark.realcluster, pytest.mark.slow]


def test_a_scheduler_dying_leaves_a_partial_report_and_no_process() -> None:
    try:
        binaries.find()
    except binaries.BinariesMissing as missing:
        pytest.skip(f"no real control plane: {missing}")
    before = processes.children()
    original = e2e_race.phase

    async def phase(race: e2e_race.Race, contender: e2e_race.Contender, **kw: typing.Any) -> object:
        result = await original(race, contender, **kw)
        if contender.label == "kube_scheduler" and kw["paused"]:
            race.processes["berth"].signal(signal.SIGKILL)
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(e2e_race, "phase", phase)
        report = e2e_real.measure(nodes=6, shapes=["basic"], pods=40, timeout=120.0)
    basic = report["shapes"]["basic"]
    for label in ("null", "kube_scheduler"):
        for name in ("stream", "backlog"):
            race = basic[label][name]
            assert race["bound"] == 40 and race["pods_per_second"] > 0
            assert race["cpu_seconds_per_1000_pods"] is not None
            assert race["cores"]["kube-apiserver"] is not None
    assert basic["kube_scheduler"]["stream"]["fraction_of_null"] > 0
    assert not basic.get("berth")  # none of its races finished
    assert report["complete"] is False
    (error,) = report["errors"]
    assert "berth exited" in error["error"]
    logs = pathlib.Path(report["logs"])
    assert str(logs / "berth.log") in error["error"] and (logs / "berth.log").is_file()
    assert processes.left_behind(before) == []


def test_the_dra_shape_binds_every_pod_with_its_claim_allocated_by_each_scheduler() -> None:
    try:
        binaries.find()
    except binaries.BinariesMissing as missing:
        pytest.skip(f"no real control plane: {missing}")
    before = processes.children()
    report = e2e_real.measure(nodes=6, shapes=["dra"], pods=30, timeout=180.0)
    assert report["errors"] == [] and report["complete"] is True
    dra = report["shapes"]["dra"]
    assert "SchedulingWithResourceClaimTemplate" in dra["mirrors"]
    for label in e2e_real.CONTENDERS:
        for name in ("stream", "backlog"):
            race = dra[label][name]
            assert race["bound"] == race["claims_allocated"] == 30, (label, name, race)
            assert race["cpu_seconds_per_1000_pods"] is not None and race["peak_rss_mb"] > 0
            # What the API server was asked in the window: each pod's binding among it.
            assert race["api_requests"]["POST pods/binding"] >= 30, (label, name, race)
            assert race["api_requests_per_pod"] >= 1
    assert dra["ratio_berth_to_kube_scheduler"]["stream"] > 0
    assert processes.left_behind(before) == []
