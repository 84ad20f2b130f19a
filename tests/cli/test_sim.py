"""``berth sim`` on the command line (click's CliRunner).

We test these aspects:
- a scenario runs to a JSON report on stdout, or to tables; ``--plot`` writes the PNG;
- ``--seed`` and ``--until`` override the scenario;
- ``--trace`` with ``--nodes`` runs without a scenario, one queue per virtual cluster;
- bad input of every kind (scenario, trace, node spec, plot path, missing arguments) exits
  with code 2, names the problem (path and line for a scenario), prints no report and writes
  no plot: nothing half-runs.
"""

from __future__ import annotations

import json
import pathlib

import click.testing
import pytest

from berth.cli import main

SCENARIO = """\
apiVersion: sim.berth.io/v1alpha1
kind: Scenario
metadata: {name: cli}
spec:
  until: 30m
  nodes:
    - {count: 2, allocatable: {cpu: "8", nvidia.com/gpu: "2"}}
  objects:
    - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: team-a}}
  workloads:
    - {name: train, namespace: team-a, queue: team-a, every: 5m, count: 4, replicas: 2,
       minMember: 2, duration: 10m, requests: {cpu: "2", nvidia.com/gpu: "1"}}
"""

TRACE = """\
job_id,vc,gpu_num,cpu_num,node_num,submit_time,duration
a,vc1,2,8,1,2026-03-02 00:00:00,600
b,vc2,4,16,2,2026-03-02 00:05:00,900
"""


@pytest.fixture
def files(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "ok.yaml").write_text(SCENARIO, encoding="utf-8")
    (tmp_path / "trace.csv").write_text(TRACE, encoding="utf-8")
    return tmp_path


def invoke(*args: str) -> click.testing.Result:
    return click.testing.CliRunner().invoke(main.cli, ["sim", *args])


def test_a_scenario_runs_to_a_json_report_and_a_plot(files: pathlib.Path) -> None:
    plot = files / "out.png"
    result = invoke(str(files / "ok.yaml"), "--output", "json", "--plot", str(plot))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["scenario"], report["end"]) == ("cli", 1800.0)
    assert report["summary"]["jobs"]["submitted"] == 4
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tables_are_the_default_output(files: pathlib.Path) -> None:
    result = invoke(str(files / "ok.yaml"))
    assert result.exit_code == 0, result.output
    assert "berth sim: cli" in result.stdout
    assert "team-a/train" in result.stdout


def test_seed_and_until_override_the_scenario(files: pathlib.Path) -> None:
    result = invoke(str(files / "ok.yaml"), "-o", "json", "--seed", "4", "--until", "12m")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["seed"], report["end"]) == (4, 720.0)
    assert len(report["workloads"]) == 3


def test_a_trace_runs_on_the_given_nodes(files: pathlib.Path) -> None:
    result = invoke(
        "--trace", str(files / "trace.csv"), "--nodes", "2x cpu=32,nvidia.com/gpu=4", "-o", "json"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert sorted(report["queues"]) == ["vc1", "vc2"]
    assert report["cluster"]["nodes"] == 2
    assert [w["started"] for w in report["workloads"]] == [0.0, 300.0]


BAD_SCENARIO = """\
apiVersion: sim.berth.io/v1alpha1
kind: Scenario
spec:
  nodes:
    - {count: 1, allocatable: {cpu: "8"}}
  workloads:
    - {name: a, duration: 1m}
    - {name: b, duration: 1m}
    - {name: c, duration: -1m, requests: {cpu: "8 cores"}, queue: nowhere, colour: red}
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{bad}"], "bad.yaml:9:17: spec.workloads[2].duration: duration '-1m' must not be"),
        (["{bad}"], "bad.yaml:9:43: spec.workloads[2].requests.cpu: '8 cores' is not a quantity"),
        (["{bad}"], "bad.yaml:9:76: spec.workloads[2].colour: unknown field"),
        (["{undefined}"], "undefined.yaml:7:31: spec.workloads[0].queue: queue 'nowhere' is not"),
        (["{missing}"], "cannot read the scenario"),
        ([], "give a SCENARIO file"),
        (["--trace", "{trace}"], "needs --nodes"),
        (["--trace", "{bad_trace}", "--nodes", "cpu=1"], "no submit time column"),
        (["{ok}", "--nodes", "cpu=lots"], "cpu: 'lots' is not a quantity"),
        (["{ok}", "--until", "-5m"], "must not be negative"),
        (["{ok}", "--plot", "{nowhere}/x.png"], "is not a directory"),
    ],
    ids=[
        "negative-duration",
        "bad-quantity",
        "unknown-key",
        "undefined-queue",
        "missing-file",
        "no-input",
        "trace-without-nodes",
        "bad-trace",
        "bad-node-spec",
        "bad-until",
        "bad-plot-path",
    ],
)
def test_bad_input_exits_2_and_runs_nothing(
    files: pathlib.Path, args: list[str], message: str
) -> None:
    (files / "bad.yaml").write_text(BAD_SCENARIO, encoding="utf-8")
    (files / "bad.csv").write_text("when,how_long\n1,2\n", encoding="utf-8")
    undefined = BAD_SCENARIO.split("    - {name: b")[0].replace("1m}", "1m, queue: nowhere}")
    (files / "undefined.yaml").write_text(undefined, encoding="utf-8")
    plot = files / "never.png"
    paths = {
        "bad": files / "bad.yaml",
        "missing": files / "missing.yaml",
        "undefined": files / "undefined.yaml",
        "ok": files / "ok.yaml",
        "trace": files / "trace.csv",
        "bad_trace": files / "bad.csv",
        "nowhere": files / "no-such-dir",
    }
    extra = [] if "--plot" in args else ["--plot", str(plot)]
    result = invoke(*(arg.format(**paths) for arg in args), *extra)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stdout == ""
    assert not plot.exists()
