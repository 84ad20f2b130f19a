"""``berth bench basic|gang|cycle|<constraint shapes>``: one JSON object each, on small workloads.

We test these aspects:
- each scenario prints exactly one JSON object with the documented keys, and places every pod;
- the workloads have the documented shape at full size (counted, not run);
- an unknown output format is a usage error;
- ``gpu-sharing`` prints one object: per mix, the policies asked for and Berth's margin;
- the constraint shapes place every pod without breaking a constraint (independent checker);
- ``backlog`` (docs/scheduler.md: 1000 full nodes and 50 000 pending pods by default) prints one
  object timing a cycle with nothing changed and one after a pod ended, which places what the
  ended pod freed; ``pod-events`` (docs/performance.md: 20 000 pods, three events each by
  default) one object with the CPU time per event of each kind.
"""

from __future__ import annotations

import json

import click.testing
import pytest

from berth.cli import bench, main, soak
from berth.sim import benchmarks
from berth.util import allocator
from tests import constraint_checker

KEYS = {
    "scenario",
    "nodes",
    "pods",
    "placed",
    "seconds",
    "cpu_seconds",
    "pods_per_second",
    "p50_ms",
    "p99_ms",
    "rss_mb",
    "errors",
    "disabled",
}


@pytest.mark.parametrize(
    ("args", "nodes", "pods"),
    [
        (["basic", "--nodes", "50", "--pods", "300"], 50, 300),
        (["gang", "--nodes", "40", "--pods", "60"], 40, 60),
        (["cycle", "--nodes", "60", "--pods", "200"], 60, 200),
        (["anti-affinity", "--nodes", "100", "--pods", "80"], 100, 80),
        (["preferred-affinity", "--nodes", "60", "--pods", "100"], 60, 100),
        (["topology-spread", "--nodes", "60", "--pods", "100"], 60, 100),
        (["host-ports", "--nodes", "100", "--pods", "80"], 100, 80),
        (["volumes", "--nodes", "100", "--pods", "80"], 100, 80),
    ],
    ids=[
        "basic",
        "gang",
        "cycle",
        "anti-affinity",
        "preferred-affinity",
        "topology-spread",
        "host-ports",
        "volumes",
    ],
)
def test_bench_prints_one_json_object(args: list[str], nodes: int, pods: int) -> None:
    outcome = click.testing.CliRunner().invoke(main.cli, ["bench", *args])
    assert outcome.exit_code == 0, outcome.output
    (line,) = outcome.output.splitlines()
    report = json.loads(line)
    assert set(report) == KEYS
    assert (report["scenario"], report["nodes"], report["pods"]) == (args[0], nodes, pods)
    assert report["placed"] == pods
    assert report["errors"] == 0
    assert report["seconds"] > 0 and report["pods_per_second"] > 0
    assert report["cpu_seconds"] > 0
    assert 0 < report["p50_ms"] <= report["p99_ms"]
    assert report["rss_mb"] > 0
    assert report["disabled"] == []


def test_bench_leaves_a_plugin_out_of_the_default_profile() -> None:
    args = ["bench", "basic", "--nodes", "20", "--pods", "40", "--disable", "GpuSharing"]
    outcome = click.testing.CliRunner().invoke(main.cli, args)
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(outcome.output)
    assert report["disabled"] == ["GpuSharing"] and report["placed"] == 40
    # Without NodeResourcesFit nothing keeps pods off full nodes: more pods than room all land.
    args = ["bench", "basic", "--nodes", "1", "--pods", "60", "--disable", "NodeResourcesFit"]
    report = json.loads(click.testing.CliRunner().invoke(main.cli, args).output)
    assert report["placed"] == 60


def test_bench_refuses_a_plugin_not_in_the_default_profile() -> None:
    args = ["bench", "gang", "--disable", "GpuShare"]
    outcome = click.testing.CliRunner().invoke(main.cli, args)
    assert outcome.exit_code == 2
    assert "'GpuShare' is not a plugin of the default profile (Priority," in outcome.output


def count(workload: benchmarks.Workload, kind: str, *, bound: bool | None = None) -> int:
    objs = [o for o in workload.objects if o["kind"] == kind]
    if bound is not None:
        objs = [o for o in objs if ("nodeName" in o["spec"]) is bound]
    return len(objs)


def test_full_size_workloads_have_the_documented_shape() -> None:
    basic = benchmarks.basic()
    assert (
        count(basic, "Node"),
        count(basic, "Pod", bound=True),
        count(basic, "Pod", bound=False),
    ) == (
        5000,
        1000,
        10_000,
    )
    gang = benchmarks.gang()
    assert (count(gang, "Node"), count(gang, "PodGroup"), count(gang, "Pod")) == (5000, 1, 1000)
    cycle = benchmarks.cycle()
    assert count(cycle, "Node") == 5000
    assert count(cycle, "Pod", bound=True) == 40_000
    assert count(cycle, "Pod", bound=False) == 10_000
    assert count(cycle, "Queue") == 10
    pending_groups = {
        o["metadata"]["labels"]["scheduling.berth.io/pod-group"]
        for o in cycle.objects
        if o["kind"] == "Pod" and "nodeName" not in o["spec"]
    }
    assert len(pending_groups) == 500


def test_an_unknown_output_format_is_a_usage_error() -> None:
    outcome = click.testing.CliRunner().invoke(main.cli, ["bench", "basic", "--output", "table"])
    assert outcome.exit_code == 2
    assert "Invalid value for '--output'" in outcome.output


@pytest.mark.parametrize(
    "scenario", ["anti-affinity", "preferred-affinity", "topology-spread", "host-ports", "volumes"]
)
def test_constraint_workloads_place_within_their_constraints(scenario: str) -> None:
    """Every pod of a constraint shape is placed, and none breaks its constraint (one pod per
    node with anti-affinity or a host port; zones within the skew)."""
    workload = benchmarks.SCENARIOS[scenario](nodes=150, pods=100)
    bench, result = benchmarks.run(workload)
    assert bench.placed == 100
    by_key = {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": o
        for o in workload.objects
        if o["kind"] == "Pod"
    }
    nodes = [o for o in workload.objects if o["kind"] == "Node"]
    running = [o for o in workload.objects if o["kind"] == "Pod" and "nodeName" in o["spec"]]
    bindings = [(by_key[k], n) for k, n in result.bindings().items()]
    storage = [o for o in workload.objects if o["kind"] not in ("Node", "Pod")]
    assert (
        constraint_checker.violations(nodes, running=running, bindings=bindings, storage=storage)
        == []
    )


@pytest.mark.slow
def test_soak_reports_rss_over_time_while_pods_churn() -> None:
    result = soak.measure(nodes=4, seconds=6, rate=10, lifetime=0.5, interval=1, warmup=2)
    assert result["scenario"] == "soak"
    # The driver keeps to its schedule (rate x seconds) and stops on time; on a loaded machine
    # it creates fewer, so the count is bounded above, not below.
    assert 0 < result["pods_created"] <= 10 * 6
    assert 0 < result["pods_bound"] <= result["pods_created"]
    samples = result["rss_mb"]
    assert len(samples) >= 5
    assert all(mb > 10 for _, mb in samples)
    assert [at for at, _ in samples] == sorted(at for at, _ in samples)
    assert isinstance(result["rss_growth_pct_after_warmup"], float)
    if allocator.heap() is not None:  # glibc: the C heap sampled with the RSS
        heaps = result["c_heap_mb"]
        assert [at for at, _, _ in heaps] == [at for at, _ in samples]
        assert all(
            0 < in_use <= obtained < mb
            for (_, obtained, in_use), (_, mb) in zip(heaps, samples, strict=True)
        )


def test_soak_under_tracemalloc_names_the_lines_that_grew() -> None:
    result = soak.measure(
        nodes=4, seconds=6, rate=10, lifetime=0.5, interval=1, warmup=2, trace_top=5
    )
    assert result["pods_bound"] > 0
    assert 0 < result["traced_mb_warm"] < result["rss_mb_end"]
    grew = result["traced_growth"]
    assert 0 < len(grew) <= 5
    for line in grew:
        path, _, number = line["where"].rpartition(":")
        # A source file, or code Python generated (a dataclass's __init__ is "<string>").
        assert (path.endswith(".py") or path.startswith("<")) and number.isdigit()
        assert line["kib"] > 0
    assert [line["kib"] for line in grew] == sorted((line["kib"] for line in grew), reverse=True)


def test_gpu_sharing_prints_one_object_per_run() -> None:
    result = click.testing.CliRunner().invoke(
        main.cli,
        [
            "bench",
            "gpu-sharing",
            "--mix",
            "fractional",
            "--policy",
            "berth-default",
            "--policy",
            "best-fit",
            "--scale",
            "0.1",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["scenario"] == "gpu-sharing" and report["seeds"] == [1]
    (mix,) = report["mixes"].values()
    assert set(mix["policies"]) == {"berth-default", "best-fit"}
    assert set(mix["policies"]["best-fit"]) == {
        "allocatedAt100",
        "allocatedAt130",
        "waitingAt130",
        "cpuSeconds",
    }
    assert isinstance(mix["berthOverBestFitAt130"], float)


def _defaults(name: str) -> dict[str, object]:
    command = bench.command.commands[name]
    return {p.name: p.default for p in command.params}


def test_backlog_times_a_cycle_unchanged_after_a_pod_ended_and_after_a_job_came() -> None:
    assert _defaults("backlog") == {"nodes": 1_000, "pods": 50_000}
    outcome = click.testing.CliRunner().invoke(
        main.cli, ["bench", "backlog", "--nodes", "20", "--pods", "200"]
    )
    assert outcome.exit_code == 0, outcome.output
    (line,) = outcome.output.splitlines()
    report = json.loads(line)
    assert (report["scenario"], report["nodes"], report["pods"]) == ("backlog", 20, 200)
    assert report["placed_first"] == 0  # the nodes are full
    assert report["placed_after_change"] > 0  # the pod that ended made room
    assert report["no_change_ms"] > 0 and report["one_change_ms"] > 0
    assert report["one_arrival_ms"] > 0
    # Nothing placed after the change stays: the new job waits, parked with the rest.
    assert report["parked"] == 200 + 1 - report["placed_after_change"]


def test_pod_events_times_each_kind_of_event() -> None:
    assert _defaults("pod-events") == {"pods": 20_000}
    outcome = click.testing.CliRunner().invoke(main.cli, ["bench", "pod-events", "--pods", "200"])
    assert outcome.exit_code == 0, outcome.output
    (line,) = outcome.output.splitlines()
    report = json.loads(line)
    assert (report["pods"], report["events"]) == (200, 600)  # created, bound, running
    for key in ("us_per_event", "us_created", "us_bound", "us_running"):
        assert report[key] > 0, key
