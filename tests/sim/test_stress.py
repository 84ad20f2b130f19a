"""The simulator's benchmark (``berth bench sim``) at a size a test can afford.

We test these aspects:
- the generated scenario is valid and has the documented shape (pools, queues, streams);
- a scaled-down run completes every job without a partial gang and reports its timing;
- ``berth bench sim`` prints exactly one JSON object.
"""

from __future__ import annotations

import json

import click.testing

from berth.cli import main
from berth.sim import stress


def test_the_benchmark_scenario_has_the_documented_shape() -> None:
    scenario = stress.scenario(jobs=10_000, nodes=1_000)
    assert [(p.name_prefix, p.count) for p in scenario.spec.nodes] == [("cpu-", 750), ("gpu-", 250)]
    assert sum(w.count for w in scenario.spec.workloads) == 10_000
    assert {w.queue for w in scenario.spec.workloads} == {"research", "vision", "nlp", "prod"}


def test_a_small_run_completes_and_reports_its_timing() -> None:
    result = stress.measure(jobs=400, nodes=40)
    assert (result["scenario"], result["nodes"], result["jobs"]) == ("sim", 40, 400)
    assert result["jobs_finished"] == 400
    assert result["partial_gangs"] == 0
    assert result["seconds"] > 0 and result["cycles"] > 0 and result["rss_mb"] > 0


def test_bench_sim_prints_one_json_object() -> None:
    result = click.testing.CliRunner().invoke(
        main.cli, ["bench", "sim", "--jobs", "80", "--nodes", "8"]
    )
    assert result.exit_code == 0, result.output
    (line,) = result.stdout.strip().splitlines()
    assert json.loads(line)["jobs"] == 80


def test_the_backlog_counts_jobs_waiting_at_once_and_how_long_the_queue_stayed_long() -> None:
    jobs = [
        {"submitted": 0.0, "started": 10.0},
        {"submitted": 0.0, "started": 3600.0},
        {"submitted": 5.0, "started": None},  # never started: it waits until the end
        {"submitted": 3600.0, "started": 3600.0},  # started as it arrived: never waited
    ]
    found = stress.backlog(jobs, end=7200.0)
    assert (found.peak, found.at, found.threshold) == (3, 5.0, 1)
    assert found.seconds_over == 7200.0  # from 0 s on, at least one job waited


def test_an_overloaded_run_reports_a_backlog_of_most_of_its_jobs() -> None:
    # Far more arrivals than 4 nodes serve: jobs pile up for hours.
    result = stress.measure(jobs=160, nodes=4)
    assert result["jobs_finished"] == 160 and result["partial_gangs"] == 0
    assert result["peak_pending_jobs"] >= 40
    assert result["backlog_hours"] >= 2 and result["virtual_hours"] >= result["backlog_hours"]
