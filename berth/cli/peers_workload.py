"""The batch workload of ``berth bench peers`` and how it is judged (pure: no cluster).

- :func:`jobs`: ``count`` Jobs of parallelism 4 spread evenly over the queues, each pod asking
  1, 2 or 3 cpu (and 2 GiB of memory per cpu) with a run time drawn uniformly between two
  bounds, from a seed: the same Jobs for every system.
- :func:`manifest`: one Job as each system is handed it: for Kueue, labelled
  ``kueue.x-k8s.io/queue-name`` with its LocalQueue; for Berth, labelled with its Queue
  (``scheduling.berth.io/queue``) and naming Berth's scheduler (Berth derives the gang of 4 from
  the Job). The run time is the KWOK annotation ``sim.berth.io/duration``.
- :func:`fair_shares`: the weighted fair share of each queue given what it asks for —
  weighted max-min (progressive filling): capacity is split by weight among the queues that
  still want more, a queue asking less than its part keeps what it asks and the rest is split
  again. On one resource (cpu: every pod asks memory in proportion) this is weighted DRF.
- :class:`Timeline`: samples of what each queue holds and asks for over time, and from them the
  mean absolute error between each queue's share of the cluster and its fair share, over the
  samples where the cluster is oversubscribed (the only time shares are contested).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import random
import typing

from berth.api import core, keys
from berth.api import objects as api_objects

__all__ = [
    "PARALLELISM",
    "BatchJob",
    "BatchJobSpec",
    "JobSpec",
    "Sample",
    "Timeline",
    "fair_shares",
    "jobs",
    "manifest",
]

PARALLELISM = 4
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_MEMORY_PER_CPU_GI = 2


class BatchJobSpec(typing.TypedDict):
    """A ``batch/v1`` Job's spec: the fields written here."""

    parallelism: int
    completions: int
    backoffLimit: int
    template: core.PodTemplateSpec


class BatchJob(api_objects.KubeObject):
    """A ``batch/v1`` Job as :func:`manifest` writes it."""

    spec: BatchJobSpec


@dataclasses.dataclass(frozen=True)
class JobSpec:
    name: str
    queue: str
    cpu: int  # per pod
    seconds: int  # run time of each pod once started

    @property
    def total_cpu(self) -> int:
        return self.cpu * PARALLELISM


def jobs(
    count: int,
    queues: collections.abc.Sequence[str],
    *,
    seed: int = 1,
    seconds: tuple[int, int] = (10, 30),
) -> list[JobSpec]:
    """``count`` Jobs, round-robin over ``queues``, from ``seed`` (see the module docstring)."""
    rng = random.Random(seed)
    return [
        JobSpec(
            f"job-{i:04d}",
            queues[i % len(queues)],
            cpu=rng.choice((1, 2, 3)),
            seconds=rng.randint(*seconds),
        )
        for i in range(count)
    ]


def manifest(spec: JobSpec, *, system: typing.Literal["kueue", "berth"]) -> BatchJob:
    """The Job ``spec`` as ``system`` is handed it (see the module docstring)."""
    resources = {"cpu": str(spec.cpu), "memory": f"{spec.cpu * _MEMORY_PER_CPU_GI}Gi"}
    pod_spec: core.PodSpec = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "work",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": resources, "limits": dict(resources)},
            }
        ],
    }
    labels: dict[str, str] = {}
    if system == "kueue":
        labels[KUEUE_QUEUE_LABEL] = spec.queue
    else:
        labels[keys.QUEUE_LABEL] = spec.queue
        pod_spec["schedulerName"] = keys.DEFAULT_SCHEDULER_NAME
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": spec.name, "labels": labels},
        "spec": {
            "parallelism": PARALLELISM,
            "completions": PARALLELISM,
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "labels": {"berth.io/bench-queue": spec.queue},
                    "annotations": {keys.SIM_DURATION_ANNOTATION: f"{spec.seconds}s"},
                },
                "spec": pod_spec,
            },
        },
    }


def fair_shares(
    capacity: float,
    demands: collections.abc.Mapping[str, float],
    weights: collections.abc.Mapping[str, float],
) -> dict[str, float]:
    """Each queue's weighted max-min fair share of ``capacity`` given its demand."""
    shares = dict.fromkeys(demands, 0.0)
    wanting = {q for q, d in demands.items() if d > 0}
    left = capacity
    while wanting and left > 1e-9:
        total = sum(weights[q] for q in wanting)
        part = {q: left * weights[q] / total for q in wanting}
        sated = {q for q in wanting if demands[q] - shares[q] <= part[q] + 1e-9}
        if not sated:
            for q in wanting:
                shares[q] += part[q]
            break
        for q in sated:
            left -= demands[q] - shares[q]
            shares[q] = demands[q]
        wanting -= sated
    return shares


@dataclasses.dataclass(frozen=True)
class Sample:
    at: float  # seconds since the first Job was created
    held: dict[str, float]  # cpu each queue's bound, unfinished pods hold
    asked: dict[str, float]  # cpu each queue's unfinished Jobs ask for (held + waiting)


@dataclasses.dataclass
class Timeline:
    """Samples over a run and what they say about fairness (see the module docstring)."""

    capacity: float
    weights: dict[str, float]
    samples: list[Sample] = dataclasses.field(default_factory=list)

    def contested(self) -> list[Sample]:
        return [s for s in self.samples if sum(s.asked.values()) > self.capacity + 1e-9]

    def series(self) -> dict[str, list[tuple[float, float, float]]]:
        """Per queue: (time, share of the cluster held, fair share) at every sample."""
        out: dict[str, list[tuple[float, float, float]]] = {q: [] for q in self.weights}
        for sample in self.samples:
            fair = fair_shares(self.capacity, sample.asked, self.weights)
            for queue in self.weights:
                out[queue].append(
                    (
                        round(sample.at, 2),
                        round(sample.held.get(queue, 0.0) / self.capacity, 4),
                        round(fair.get(queue, 0.0) / self.capacity, 4),
                    )
                )
        return out

    def errors(self) -> dict[str, float | None]:
        """Per queue, and ``all``: the mean |share held - fair share| over contested samples."""
        contested = self.contested()
        if not contested:
            return {q: None for q in [*self.weights, "all"]}
        per: dict[str, list[float]] = {q: [] for q in self.weights}
        for sample in contested:
            fair = fair_shares(self.capacity, sample.asked, self.weights)
            for queue in self.weights:
                held = sample.held.get(queue, 0.0)
                per[queue].append(abs(held - fair.get(queue, 0.0)) / self.capacity)
        result: dict[str, float | None] = {q: round(sum(v) / len(v), 4) for q, v in per.items()}
        every = [e for v in per.values() for e in v]
        result["all"] = round(sum(every) / len(every), 4)
        return result

    def idle_while_waiting(self) -> float | None:
        """The mean fraction of the cluster's cpu left idle while Jobs waited."""
        contested = self.contested()
        if not contested:
            return None
        idle = [1 - sum(s.held.values()) / self.capacity for s in contested]
        return round(sum(idle) / len(idle), 4)
