"""Job traces (Helios / Philly style CSV) turned into workloads.

We test these aspects:
- columns are found by their usual names, whatever their order and case;
- submit times (seconds or timestamps) start at zero; run time from ``duration`` or from
  ``start_time``/``end_time``; workers form a gang; GPUs and CPUs are split between workers;
- the queue is the virtual cluster, else the user, made a valid name;
- missing columns and bad rows are errors naming the file and line;
- the shipped synthetic trace (hack/gen-trace) loads.
"""

from __future__ import annotations

import pathlib

import pytest

from berth.sim import errors, traces

ROOT = pathlib.Path(__file__).resolve().parents[2]


def rows(text: str) -> list[list[str]]:
    return [line.split(",") for line in text.strip().splitlines()]


def test_helios_style_rows_become_gangs_split_over_workers(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "Job_ID,VC,GPU_NUM,CPU_NUM,NODE_NUM,Submit_Time,Duration\n"
        "j1,vc:Vision,16,96,2,2020-04-01 00:00:30,600\n"
        "j0,vc:Vision,1,6,1,2020-04-01 00:00:00,60\n",
        encoding="utf-8",
    )
    trace = traces.load(path)
    assert [j.id for j in trace.jobs] == ["j0", "j1"]
    assert [j.submit_ms for j in trace.jobs] == [0, 30_000]
    assert trace.queues == ("vc-vision",)
    gang = trace.workloads[1]
    assert (gang.name, gang.queue, gang.namespace) == ("job-1", "vc-vision", "vc-vision")
    assert (gang.replicas, gang.min_member, gang.at.ms, gang.duration.ms) == (2, 2, 30_000, 600_000)
    assert gang.requests == {"nvidia.com/gpu": 8000, "cpu": 48_000}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("submitted_time,run_time,num_gpus,user\n5,10,3,Alice\n", (0, 10_000, 3, "alice")),
        ("submit,start_time,end_time\n100,110,170\n", (0, 60_000, 0, "default")),
        ("submit_time,duration,gpu_num,vc\n1.5,0.25,1,vc_a\n", (0, 250, 1, "vc-a")),
    ],
    ids=["philly-names", "start-end", "fractions"],
)
def test_column_spellings_and_units(text: str, expected: tuple[int, int, int, str]) -> None:
    (job,) = traces.parse_rows(rows(text))
    assert (job.submit_ms, job.duration_ms, job.gpus, job.queue) == expected


def test_jobs_without_cpu_column_ask_one_cpu_per_pod() -> None:
    (job,) = traces.parse_rows(rows("submit_time,duration,gpu_num\n0,60,2\n"))
    assert job.cpus_milli is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("duration,gpu_num\n60,1\n", "no submit time column"),
        ("submit_time,gpu_num\n0,1\n", "no run time column"),
        ("submit_time,duration\n0,abc\n", "t.csv:2: duration 'abc' is not a number"),
        ("submit_time,duration\n0,-5\n", "t.csv:2: the run time (-5s) is negative"),
        ("submit_time,duration\nyesterday,5\n", "t.csv:2: submit time 'yesterday'"),
        ("submit_time,duration,node_num\n0,5,0\n", "t.csv:2: the job has 0 workers"),
        ("submit_time,duration\n", "no jobs"),
    ],
    ids=[
        "empty",
        "no-submit",
        "no-duration",
        "bad-number",
        "negative",
        "bad-time",
        "no-workers",
        "no-rows",
    ],
)
def test_bad_traces_name_the_file_and_line(text: str, message: str) -> None:
    with pytest.raises(errors.TraceError) as info:
        traces.parse_rows(rows(text) if text else [], source="t.csv")
    assert message in str(info.value)


def test_the_shipped_synthetic_trace_loads() -> None:
    trace = traces.load(ROOT / "examples" / "sim" / "traces" / "synthetic.csv")
    assert len(trace.jobs) == 300
    assert trace.queues == ("vc-nlp", "vc-research", "vc-speech", "vc-vision")
    assert any(w.min_member > 1 for w in trace.workloads)
