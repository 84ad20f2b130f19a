"""The simulator's own benchmark: ``berth bench sim`` (10 000 jobs on 1 000 nodes by default).

:func:`scenario` builds a large scenario in code: CPU and GPU node pools in a 3:1 ratio, four
queues with weights 1..4, and per queue a stream of small CPU jobs and a stream of GPU gangs,
all with Poisson arrivals over eight hours, sized so that each pool runs at roughly 70-75% of
its bottleneck resource on average (queues form when arrivals bunch up). :func:`measure`
simulates it and times the run (wall clock: this is the one place in ``berth.sim`` that reads
real time, to report how long virtual time took), and says how deep and how long the backlog
was (:func:`backlog`): the simulator's cost should follow what changes, not how much waits.
"""

from __future__ import annotations

import dataclasses
import resource
import sys
import time
import typing

from berth.sim import reports, runner, scenarios

__all__ = ["Backlog", "StressResult", "backlog", "measure", "scenario"]

_QUEUES = (("research", 1), ("vision", 2), ("nlp", 3), ("prod", 4))
_WINDOW_MINUTES = 480


def scenario(
    *, jobs: int = 10_000, nodes: int = 1_000, seed: int = 1, schedule_period: str = "0s"
) -> scenarios.Scenario:
    """``jobs`` jobs over ``nodes`` nodes; see the module docstring."""
    gpu_nodes = max(nodes // 4, 1)
    cpu_nodes = max(nodes - gpu_nodes, 1)
    streams = 2 * len(_QUEUES)
    # Every stream gets its share of the jobs; the first ones one more when it does not divide.
    counts = [max(jobs // streams + (1 if i < jobs % streams else 0), 1) for i in range(streams)]
    # Untyped: spec.workloads entries as a scenario file holds them (its YAML); from_data
    # validates them as it validates a file's, so the bench runs what a user's scenario would.
    workloads: list[dict[str, typing.Any]] = []
    for index, (name, _) in enumerate(_QUEUES):
        batch, train = counts[2 * index], counts[2 * index + 1]
        workloads.append(
            {
                "name": "batch",
                "namespace": name,
                "queue": name,
                "arrival": "poisson",
                "every": f"{_gap_ms(batch)}ms",
                "count": batch,
                "replicas": 4,
                "duration": "50m",
                "requests": {"cpu": "16", "memory": "32Gi"},
                "nodeSelector": {"pool": "cpu"},
            }
        )
        workloads.append(
            {
                "name": "train",
                "namespace": name,
                "queue": name,
                "arrival": "poisson",
                "every": f"{_gap_ms(train)}ms",
                "count": train,
                "replicas": 2,
                "minMember": 2,
                "duration": "36m",
                "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
                "nodeSelector": {"pool": "gpu"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            }
        )
    return scenarios.from_data(
        {
            "apiVersion": scenarios.API_VERSION,
            "kind": "Scenario",
            "metadata": {"name": f"bench-{jobs}-jobs-{nodes}-nodes"},
            "spec": {
                "seed": seed,
                "schedulePeriod": schedule_period,
                "nodes": [
                    {
                        "count": cpu_nodes,
                        "namePrefix": "cpu-",
                        "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                        "labels": {"pool": "cpu"},
                    },
                    {
                        "count": gpu_nodes,
                        "namePrefix": "gpu-",
                        "allocatable": {
                            "cpu": "64",
                            "memory": "512Gi",
                            "nvidia.com/gpu": "8",
                            "pods": "110",
                        },
                        "labels": {"pool": "gpu"},
                        "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                    },
                ],
                "objects": [
                    {
                        "apiVersion": "scheduling.berth.io/v1alpha1",
                        "kind": "Queue",
                        "metadata": {"name": name},
                        "spec": {"weight": weight},
                    }
                    for name, weight in _QUEUES
                ],
                "workloads": workloads,
            },
        }
    )


@dataclasses.dataclass(frozen=True)
class Backlog:
    """How many jobs waited to start at once, and for how long the queue stayed long."""

    peak: int  # jobs submitted and not started yet, at the worst instant
    at: float  # when (seconds of virtual time)
    seconds_over: float  # virtual time during which at least ``threshold`` jobs waited
    threshold: int


def backlog(jobs: typing.Iterable[reports.WorkloadRecord], *, end: float) -> Backlog:
    """The backlog of a report's jobs (``workloads``: ``submitted`` and ``started`` seconds,
    ``started`` ``None`` when the job never started); ``seconds_over`` counts the time at
    least a tenth of the peak waited (at least one job)."""
    changes: list[tuple[float, int]] = []
    for job in jobs:
        changes.append((float(job["submitted"]), 1))
        started = job["started"]
        changes.append((float(started) if started is not None else end, -1))
    # At one instant, starts before arrivals: a job that starts as it arrives never waited.
    changes.sort(key=lambda change: (change[0], change[1]))
    waiting = peak = 0
    peak_at = 0.0
    for at, delta in changes:
        waiting += delta
        if waiting > peak:
            peak, peak_at = waiting, at
    threshold = max(peak // 10, 1)
    over, waiting, since = 0.0, 0, None
    for at, delta in changes:
        waiting += delta
        if waiting >= threshold and since is None:
            since = at
        elif waiting < threshold and since is not None:
            over += at - since
            since = None
    if since is not None:
        over += end - since
    return Backlog(peak=peak, at=peak_at, seconds_over=over, threshold=threshold)


def _gap_ms(count: int) -> int:
    """The mean gap between arrivals that spreads ``count`` jobs over the window."""
    return max(_WINDOW_MINUTES * 60_000 // count, 1)


class StressResult(typing.TypedDict):
    """The JSON object ``berth bench sim`` prints."""

    scenario: str
    nodes: int
    jobs: int
    pods: int
    seconds: float
    cpu_seconds: float
    virtual_seconds: float
    virtual_hours: float
    peak_pending_jobs: int
    peak_pending_at_hours: float
    backlog_hours: float
    backlog_threshold_jobs: int
    speedup: float | None
    schedule_period: str
    cycles: int
    ms_per_cycle: float | None
    jobs_started: int
    jobs_finished: int
    utilization: dict[str, float]
    partial_gangs: int
    rss_mb: float


def measure(
    *, jobs: int = 10_000, nodes: int = 1_000, seed: int = 1, schedule_period: str = "0s"
) -> StressResult:
    """Simulate :func:`scenario` and report how long it took, as one JSON-able object."""
    built = scenario(jobs=jobs, nodes=nodes, seed=seed, schedule_period=schedule_period)
    started, cpu_started = time.perf_counter(), time.process_time()
    report = runner.run(built)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    summary = report["summary"]
    pods = sum(len(w["pods"]) for w in report["workloads"])
    waited = backlog(report["workloads"], end=float(report["end"]))
    return {
        "scenario": "sim",
        "nodes": report["cluster"]["nodes"],
        "jobs": summary["jobs"]["submitted"],
        "pods": pods,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu_seconds, 3),  # the run's own CPU time, whatever else runs
        "virtual_seconds": report["end"],
        "virtual_hours": round(report["end"] / 3600, 2),
        "peak_pending_jobs": waited.peak,
        "peak_pending_at_hours": round(waited.at / 3600, 2),
        # How long the backlog stayed at least a tenth of its peak deep.
        "backlog_hours": round(waited.seconds_over / 3600, 2),
        "backlog_threshold_jobs": waited.threshold,
        "speedup": round(report["end"] / seconds, 1) if seconds > 0 else None,
        "schedule_period": schedule_period,
        "cycles": summary["cycles"],
        "ms_per_cycle": round(1000 * seconds / summary["cycles"], 3) if summary["cycles"] else None,
        "jobs_started": summary["jobs"]["started"],
        "jobs_finished": summary["jobs"]["finished"],
        "utilization": summary["utilization"],
        "partial_gangs": summary["partialGangs"],
        "rss_mb": round(_max_rss_mb(), 1),
    }


def _max_rss_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kilobytes, macOS bytes.
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024
