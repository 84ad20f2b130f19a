"""Job traces (CSV, Helios / Philly style) -> scenario workloads: ``berth sim --trace``.

Public GPU-cluster traces (SenseTime's Helios, Microsoft's Philly) list one job per row with
its submit time, run time, GPU and CPU counts and its user or virtual cluster. This module
reads such a CSV by its header, accepting the usual spellings of each column:

=============  ==============================================================  ==========
what           columns (first found wins, case-insensitive)                     required
=============  ==============================================================  ==========
job id         ``job_id``, ``jobid``, ``job_name``, ``jobname``, ``id``          no
submit time    ``submit_time``, ``submitted_time``, ``submit``                    yes
run time       ``duration``, ``run_time``, ``runtime`` (seconds), or             yes
               ``start_time`` and ``end_time``
GPUs           ``gpu_num``, ``num_gpus``, ``num_gpu``, ``gpus``, ``gpu``          no (0)
GPU share      ``gpu_milli`` (Alibaba PAI's openb traces): thousandths of each    no (whole)
               GPU; below 1000 the pods ask that share of ``GPUs`` devices with
               KAI-Scheduler's ``gpu-fraction`` annotation
GPU models     ``gpu_spec``, ``gpu_model``, ``gpu_type``: the models the job      no (any)
               accepts, ``|``-separated (``V100M16|V100M32``)
CPUs           ``cpu_num``, ``num_cpus``, ``cpus``, ``cpu``                       no (1/pod)
memory         ``memory``, ``mem`` (a quantity, e.g. ``64Gi``)                    no
workers        ``node_num``, ``num_nodes``, ``nodes``, ``workers``, ``replicas``  no (1)
queue          ``vc``, ``virtual_cluster``, ``queue``, else ``user``              no
estimate       ``expected_runtime``, ``time_limit`` (seconds): what the pods      no
               declare they run for (EASY backfill), as a user's estimate
=============  ==============================================================  ==========

Times are seconds (numbers) or timestamps (``2020-04-01 00:00:03``, ISO 8601); the earliest
submit time becomes time zero. Each row becomes one workload of one job: ``workers`` pods
that form a gang (a distributed job needs all its workers), GPUs and CPUs split evenly between
them (rounded up), in the namespace and queue named after the row's virtual cluster (or user).
Every row is kept whatever its final state: a killed or failed job still held its resources.
Workloads are named ``job-<n>`` in submit order; the row's id is kept in the pods' label
``sim.berth.io/trace-id``. Used by ``berth sim --trace``.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import math
import pathlib
import re
import typing

from berth.api import durations, keys, quantities, resources
from berth.scheduler.snapshot import gpushare
from berth.sim import errors, scenarios

__all__ = ["Trace", "TraceJob", "load", "parse_rows"]

_COLUMNS: dict[str, tuple[str, ...]] = {
    "id": ("job_id", "jobid", "job_name", "jobname", "id"),
    "submit": ("submit_time", "submitted_time", "submit"),
    "duration": ("duration", "run_time", "runtime"),
    "start": ("start_time",),
    "end": ("end_time",),
    "gpus": ("gpu_num", "num_gpus", "num_gpu", "gpus", "gpu"),
    "gpu_milli": ("gpu_milli",),
    "gpu_models": ("gpu_spec", "gpu_model", "gpu_type"),
    "cpus": ("cpu_num", "num_cpus", "cpus", "cpu"),
    "memory": ("memory", "mem"),
    "workers": ("node_num", "num_nodes", "nodes", "workers", "replicas"),
    "queue": ("vc", "virtual_cluster", "queue"),
    "user": ("user", "user_name", "username"),
    "estimate": ("expected_runtime", "time_limit"),
}
_MAX_ERRORS = 20
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


@dataclasses.dataclass(frozen=True)
class TraceJob:
    """One row of a trace, in the simulator's units."""

    line: int  # in the CSV file, for messages
    id: str
    submit_ms: int  # from the trace's earliest submit
    duration_ms: int
    gpus: int
    cpus_milli: int | None  # None: the trace has no CPU column
    memory_milli: int | None
    workers: int
    queue: str
    estimate_ms: int | None = None  # what the pods declare they run for, if the trace says
    gpu_milli: int | None = None  # thousandths of each GPU (below 1000: a share), if the trace says
    gpu_models: tuple[str, ...] = ()  # the GPU models the job accepts (any when empty)


@dataclasses.dataclass(frozen=True)
class Trace:
    """A trace turned into workloads, with the queues it submits to."""

    source: str
    jobs: tuple[TraceJob, ...]
    workloads: tuple[scenarios.Workload, ...]
    queues: tuple[str, ...]  # sorted


def load(path: pathlib.Path | str) -> Trace:
    """Read the CSV trace at ``path``; a missing column or a bad row raises ``TraceError``."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise errors.TraceError(f"{path}: cannot read the trace: {exc}") from None
    jobs = parse_rows(rows, source=str(path))
    width = len(str(len(jobs) - 1))
    workloads = tuple(_workload(job, name=f"job-{i:0{width}d}") for i, job in enumerate(jobs))
    return Trace(
        source=str(path),
        jobs=jobs,
        workloads=workloads,
        queues=tuple(sorted({j.queue for j in jobs})),
    )


def compose(
    scenario: scenarios.Scenario | None,
    *,
    trace: Trace | None = None,
    nodes: list[scenarios.NodePool] | None = None,
    until: durations.Duration | None = None,
) -> scenarios.Scenario:
    """A scenario with a trace's workloads added, its node pools or ``until`` replaced.

    Queues the trace submits to that the scenario does not define are created with weight 1.
    Without a scenario, the trace runs alone (``nodes`` is then required). The result is
    validated again as a whole (a trace workload may clash with a scenario's).
    """
    if scenario is None:
        if not nodes:
            raise errors.TraceError("a trace without a scenario needs node pools (--nodes)")
        name = pathlib.Path(trace.source).stem if trace is not None else "scenario"
        # Untyped: the scenario as its file holds it (its YAML), edited as JSON, then
        # validated again as a whole.
        data: dict[str, typing.Any] = {
            "apiVersion": scenarios.API_VERSION,
            "kind": "Scenario",
            "metadata": {"name": name},
            "spec": {"nodes": []},
        }
    else:
        data = scenario.to_api()
    spec = data["spec"]
    if nodes:
        spec["nodes"] = [pool.to_api() for pool in nodes]
    if until is not None:
        spec["until"] = str(until)
    if trace is not None:
        manifests = [
            *spec.get("objects", []),
            *(e["apply"] for e in spec.get("events", []) if "apply" in e),
        ]
        defined = {m["metadata"]["name"] for m in manifests if m.get("kind") == "Queue"}
        spec["objects"] = [
            *spec.get("objects", []),
            *(
                {
                    "apiVersion": keys.API_VERSION,
                    "kind": "Queue",
                    "metadata": {"name": queue},
                    "spec": {"weight": 1},
                }
                for queue in trace.queues
                if queue not in defined and queue != keys.DEFAULT_QUEUE
            ),
        ]
        spec["workloads"] = [*spec.get("workloads", []), *(w.to_api() for w in trace.workloads)]
    return scenarios.from_data(data, source=trace.source if trace is not None else None)


def parse_rows(rows: list[list[str]], *, source: str = "trace") -> tuple[TraceJob, ...]:
    """Parse a header row and data rows into jobs sorted by submit time (then file order)."""
    if not rows:
        raise errors.TraceError(f"{source}: the trace is empty (it needs a header row)")
    header = [name.strip().lower() for name in rows[0]]
    where = {
        what: next((header.index(c) for c in candidates if c in header), None)
        for what, candidates in _COLUMNS.items()
    }
    if where["submit"] is None:
        raise errors.TraceError(
            f"{source}: no submit time column (one of {', '.join(_COLUMNS['submit'])})"
        )
    if where["duration"] is None and (where["start"] is None or where["end"] is None):
        raise errors.TraceError(
            f"{source}: no run time column (one of {', '.join(_COLUMNS['duration'])}, "
            f"or start_time and end_time)"
        )
    problems: list[str] = []
    parsed: list[tuple[float, TraceJob]] = []
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        try:
            parsed.append(_row(row, where, line=number))
        except ValueError as exc:
            problems.append(f"{source}:{number}: {exc}")
            if len(problems) >= _MAX_ERRORS:
                break
    if problems:
        raise errors.TraceError("bad trace rows:\n" + "\n".join(f"  {p}" for p in problems))
    if not parsed:
        raise errors.TraceError(f"{source}: the trace has no jobs")
    parsed.sort(key=lambda item: (item[0], item[1].line))
    start = parsed[0][0]
    return tuple(
        dataclasses.replace(job, submit_ms=round((submit - start) * 1000)) for submit, job in parsed
    )


def _row(row: list[str], where: dict[str, int | None], *, line: int) -> tuple[float, TraceJob]:
    """One data row: its submit time in seconds and the job (``submit_ms`` still 0)."""

    def cell(what: str) -> str | None:
        index = where[what]
        if index is None:
            return None
        if index >= len(row):
            raise ValueError(f"the row has no {_COLUMNS[what][0]} column")
        text = row[index].strip()
        return text or None

    submit_text = cell("submit")
    if submit_text is None:
        raise ValueError("the submit time is empty")
    submit = _time(submit_text, column="submit time")
    duration_text = cell("duration")
    if duration_text is not None:
        seconds = _number(duration_text, column="duration")
    else:
        start_text, end_text = cell("start"), cell("end")
        if start_text is None or end_text is None:
            raise ValueError("the row has neither a duration nor both start and end times")
        seconds = _time(end_text, column="end_time") - _time(start_text, column="start_time")
    if seconds < 0:
        raise ValueError(f"the run time ({seconds:g}s) is negative")
    workers_text = cell("workers")
    workers = int(_number(workers_text, column="workers")) if workers_text else 1
    if workers < 1:
        raise ValueError(f"the job has {workers} workers; it needs at least one")
    gpus_text, cpus_text, memory_text = cell("gpus"), cell("cpus"), cell("memory")
    gpus = int(_number(gpus_text, column="GPU count")) if gpus_text else 0
    milli_text = cell("gpu_milli")
    gpu_milli = round(_number(milli_text, column="gpu_milli")) if milli_text else None
    if gpu_milli is not None and not 0 <= gpu_milli <= 1000:
        raise ValueError(f"gpu_milli {milli_text!r} must be between 0 and 1000 (of one GPU)")
    models_text = cell("gpu_models")
    models = tuple(m.strip() for m in models_text.split("|") if m.strip()) if models_text else ()
    cpus = round(_number(cpus_text, column="CPU count") * 1000) if cpus_text else None
    memory = _quantity(memory_text) if memory_text else None
    if gpus < 0 or (cpus is not None and cpus < 0):
        raise ValueError("GPU and CPU counts must not be negative")
    estimate_text = cell("estimate")
    estimate = _number(estimate_text, column="expected runtime") if estimate_text else None
    if estimate is not None and estimate < 0:
        raise ValueError(f"the expected runtime ({estimate:g}s) is negative")
    owner = cell("queue") or cell("user") or keys.DEFAULT_QUEUE
    job = TraceJob(
        line=line,
        id=cell("id") or f"line{line}",
        submit_ms=0,
        duration_ms=math.ceil(seconds * 1000),
        gpus=gpus,
        cpus_milli=cpus,
        memory_milli=memory,
        workers=workers,
        queue=_dns_label(owner),
        estimate_ms=math.ceil(estimate * 1000) if estimate is not None else None,
        gpu_milli=gpu_milli,
        gpu_models=models,
    )
    return submit, job


def _number(text: str, *, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{column} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{column} {text!r} is not a finite number")
    return value


def _time(text: str, *, column: str) -> float:
    """Seconds: a plain number, or a timestamp (naive ones are read as UTC)."""
    try:
        return _number(text, column=column)
    except ValueError:
        pass
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{column} {text!r} is neither seconds nor a timestamp like 2020-04-01 00:00:03"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()


def _quantity(text: str) -> int:
    try:
        milli = quantities.parse_milli(text)
    except ValueError as exc:
        raise ValueError(f"memory: {exc}") from None
    if milli < 0:
        raise ValueError(f"memory {text!r} must not be negative")
    return milli


def _dns_label(text: str) -> str:
    """A queue / namespace name from a user or virtual cluster id (``vc:Research-1`` ->
    ``vc-research-1``)."""
    label = _NOT_DNS.sub("-", text.lower()).strip("-")[:63].strip("-")
    return label or keys.DEFAULT_QUEUE


def _per_worker(total: int, workers: int) -> int:
    return -(-total // workers)


def _workload(job: TraceJob, *, name: str) -> scenarios.Workload:
    """One job of the trace as a workload of one arrival."""
    requests: dict[str, int] = {}
    annotations: dict[str, str] = {}
    shared = job.gpu_milli is not None and 0 < job.gpu_milli < 1000
    if shared:
        # A share of each of its GPUs (at least one), as KAI-Scheduler's pods ask it.
        assert job.gpu_milli is not None
        annotations[gpushare.FRACTION_ANNOTATION] = f"{job.gpu_milli / 1000:g}"
        devices = max(_per_worker(job.gpus, job.workers), 1)
        if devices > 1:
            annotations[gpushare.DEVICES_ANNOTATION] = str(devices)
    elif job.gpus:
        requests[resources.GPU] = _per_worker(job.gpus, job.workers) * 1000
    requests[resources.CPU] = (
        _per_worker(job.cpus_milli, job.workers) if job.cpus_milli is not None else 1000
    )
    if job.memory_milli is not None:
        requests[resources.MEMORY] = _per_worker(job.memory_milli, job.workers)
    estimate = durations.format_duration(job.estimate_ms) if job.estimate_ms is not None else None
    return scenarios.Workload.model_validate(
        {
            "expectedRuntime": estimate,
            "annotations": annotations,
            "gpuModels": list(job.gpu_models),
            "name": name,
            "namespace": job.queue,
            "queue": job.queue,
            "at": durations.format_duration(job.submit_ms),
            "replicas": job.workers,
            "minMember": job.workers,
            "duration": durations.format_duration(job.duration_ms),
            "requests": {name: f"{milli}m" for name, milli in requests.items()},
            "labels": {"sim.berth.io/trace-id": _dns_label(job.id)},
        }
    )
