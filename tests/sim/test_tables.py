"""``--output table``: the rich tables and the progress callback.

We test these aspects:
- the summary, queue and workload tables show the report's numbers (utilization, Jain's
  index, fair and average shares, waits, reasons);
- many workload generators are cut at a fixed number of rows;
- times are written for humans; the progress bar accepts updates without a terminal.
"""

from __future__ import annotations

import io

import pytest
import rich.console

from berth.sim import runner, tables
from tests.sim import builders

SPEC = """\
until: 1h
nodes:
  - {count: 1, allocatable: {cpu: "4", nvidia.com/gpu: "2"}}
objects:
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: a}, spec: {weight: 3}}
workloads:
  - {name: fits, namespace: a, queue: a, duration: 10m, requests: {cpu: "1", nvidia.com/gpu: "1"}}
  - {name: never, namespace: a, queue: a, replicas: 3, minMember: 3, duration: 10m,
     requests: {nvidia.com/gpu: "1"}}
"""


def render(report: dict[str, object], *, width: int = 140) -> str:
    console = rich.console.Console(file=io.StringIO(), width=width, record=True)
    tables.render(report, console=console)
    return console.export_text()


def test_tables_show_the_report() -> None:
    text = render(runner.run(builders.scenario(SPEC)))
    assert "berth sim: test" in text
    assert "utilization nvidia.com/gpu" in text and "8.3%" in text  # 1 GPU of 2 for 10m of 1h
    assert "Jain's index" in text and "queues never competed" in text
    row = next(line for line in text.splitlines() if line.startswith("│ a "))
    assert "100%" in row  # fair share: the only queue is entitled to everything
    assert "a/never waits: can never fit: needs 3 nvidia.com/gpu, the cluster has 2" in text
    assert "1h00m" in text  # the never-started job waited the whole run


def test_many_workloads_are_cut_short() -> None:
    lines = "".join(
        f"  - {{name: w{i}, duration: 1m, requests: {{cpu: 10m}}}}\n" for i in range(35)
    )
    report = runner.run(
        builders.scenario('nodes: [{count: 1, allocatable: {cpu: "4"}}]\nworkloads:\n' + lines)
    )
    text = render(report)
    assert "5 more (see --output json)" in text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (12.5, "12.5s"), (270.0, "4m30s"), (3720.0, "1h02m")],
    ids=["none", "seconds", "minutes", "hours"],
)
def test_times_are_written_for_humans(seconds: float | None, text: str) -> None:
    assert tables.format_seconds(seconds) == text


def test_the_progress_bar_takes_updates() -> None:
    console = rich.console.Console(file=io.StringIO(), width=80)
    with tables.progress(console=console, until=None) as update:
        update(0, 10_000)
        update(5_000, 20_000)
