"""The example scenarios of ``examples/sim``: their reports show what their README says.

We test these aspects (one test per scenario, asserting the README's "Today" lines):
- fair-share: a full cluster, both teams served, team-a (weight 3) ahead of team-b (weight 1)
  until 2h, the weight change in the fair-share series and an even split after it, Jain's
  index near 1;
- reclaim: prod gets its guarantee the minute it arrives, only research is evicted and its
  evicted gangs restart whole;
- starvation-guard: the big gang starts within the hour, long before the stream ends;
- reservation: the serving job starts the minute it arrives on the reserved node, and batch
  pods stay off that node until it is done;
- no example ever leaves a gang partly bound.
"""

from __future__ import annotations

import functools
import pathlib
import typing

import pytest

from berth.sim import runner, scenarios

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sim"
NAMES = ("fair-share", "reclaim", "starvation-guard", "reservation")
GPU = "nvidia.com/gpu"

Report = dict[str, typing.Any]


@functools.cache
def report(name: str) -> Report:
    return runner.run(scenarios.load(EXAMPLES / f"{name}.yaml"))


def jobs(name: str, workload: str) -> list[Report]:
    return [w for w in report(name)["workloads"] if w["workload"] == workload]


def allocated_at(queue: Report, t: float) -> dict[str, str]:
    """The queue's allocation in force at time ``t``."""
    current: dict[str, str] = {}
    for sample in queue["allocated"]:
        if sample["t"] > t:
            break
        current = sample["resources"]
    return current


@pytest.mark.parametrize("name", NAMES)
def test_no_example_leaves_a_gang_partly_bound(name: str) -> None:
    assert report(name)["summary"]["partialGangs"] == 0


def test_fair_share_keeps_the_cluster_full_and_follows_the_new_weights() -> None:
    result = report("fair-share")
    summary = result["summary"]
    assert summary["utilization"][GPU] > 0.95
    assert summary["jainIndex"] >= 0.95
    team_a, team_b = result["queues"]["team-a"], result["queues"]["team-b"]
    assert [s["t"] for s in team_b["fairShareSeries"]] == [0.0, 7200.0]
    assert [s["resources"][GPU] for s in team_b["fairShareSeries"]] == ["8", "16"]
    # Weight 3 against 1: 24 and 8 of the 32 GPUs once the first jobs end; 16 each from 2h.
    for t in (3600.0, 6600.0):
        assert (allocated_at(team_a, t)[GPU], allocated_at(team_b, t)[GPU]) == ("24", "8")
    for t in (7800.0, 10800.0, 14000.0):
        assert (allocated_at(team_a, t)[GPU], allocated_at(team_b, t)[GPU]) == ("16", "16")
    assert summary["wait"]["team-a"]["started"] > summary["wait"]["team-b"]["started"] > 40


def test_reclaim_gives_prod_its_guarantee_at_once() -> None:
    result = report("reclaim")
    serve = jobs("reclaim", "serve")
    assert [j["wait"] for j in serve] == [0.0, 0.0, 0.0, 0.0]
    assert allocated_at(result["queues"]["prod"], 3780.0)[GPU] == "16"
    assert allocated_at(result["queues"]["research"], 3780.0)[GPU] == "16"
    assert all(j["evictions"] == 0 for j in serve)
    evicted = [j for j in jobs("reclaim", "sweep") if j["evictions"]]
    assert len(evicted) == 8
    assert all(j["restarts"] == 1 and j["evictions"] <= 2 for j in evicted)
    assert result["summary"]["evictions"] == 16


def test_the_starvation_guard_starts_the_big_gang_well_before_the_stream_ends() -> None:
    result = report("starvation-guard")
    (big,) = jobs("starvation-guard", "big")
    assert big["started"] is not None and big["finished"] is not None
    assert big["started"] - big["submitted"] <= 3600.0  # today: 34 minutes
    assert big["finished"] - big["started"] == 3600.0
    assert len(set(big["pods"].values())) == 2  # a whole node for each of its pods
    last_small = max(j["submitted"] for j in jobs("starvation-guard", "small"))
    assert big["started"] < last_small
    assert result["summary"]["jobs"]["started"] == result["summary"]["jobs"]["submitted"]


def test_the_reservation_holds_a_node_for_the_serving_job() -> None:
    result = report("reservation")
    (reservation,) = result["reservations"]
    assert (reservation["namespace"], reservation["name"]) == ("serving", "serve-capacity")
    assert reservation["owners"] == [{"labelSelector": {"matchLabels": {"app": "serve"}}}]
    assert reservation["phase"] == "Succeeded"  # allocateOnce: used by its first owner
    node = reservation["nodeName"]
    (serve,) = jobs("reservation", "serve")
    assert (serve["submitted"], serve["started"], serve["finished"]) == (3600.0, 3600.0, 7200.0)
    assert set(serve["pods"].values()) == {node}
    for job in jobs("reservation", "batch"):
        if node in job["pods"].values():
            assert job["started"] >= serve["finished"], f"{job['name']} used the held node"
