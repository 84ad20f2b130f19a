"""Workload generators: arrival times and the objects of each job.

We test these aspects:
- fixed arrivals are evenly spaced; Poisson arrivals are seeded (same seed, same times;
  another seed, other times) and average to ``every``;
- a gang or a queued job gets a PodGroup; a job with neither is plain pods;
- pods carry the scheduler name, labels, the duration annotation, requests, node selector,
  tolerations and priority; names are zero-padded so that name order is arrival order.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import keys
from berth.sim import scenarios, workloads


def workload(**fields: typing.Any) -> scenarios.Workload:
    return scenarios.Workload.model_validate(
        {"name": "train", "namespace": "team-a", "duration": "30m", **fields}
    )


def test_fixed_arrivals_are_evenly_spaced() -> None:
    times = workloads.arrival_times(workload(at="10s", every="5m", count=3), seed=1)
    assert times == [10_000, 310_000, 610_000]


def test_poisson_arrivals_depend_only_on_the_seed() -> None:
    w = workload(every="1m", count=400, arrival="poisson")
    first = workloads.arrival_times(w, seed=7)
    assert first == workloads.arrival_times(w, seed=7)
    assert first != workloads.arrival_times(w, seed=8)
    assert first == sorted(first)
    mean_gap = (first[-1] - first[0]) / (len(first) - 1)
    assert 45_000 < mean_gap < 75_000


@pytest.mark.parametrize(
    ("fields", "grouped", "queue"),
    [
        ({"replicas": 4, "minMember": 4}, True, "default"),
        ({"queue": "team-a"}, True, "team-a"),
        ({"replicas": 2}, False, None),
    ],
    ids=["gang", "queued", "plain"],
)
def test_jobs_get_a_pod_group_when_they_are_gangs_or_queued(
    fields: dict[str, typing.Any], grouped: bool, queue: str | None
) -> None:
    job = workloads.make_job(workload(**fields), index=0)
    assert (job.pod_group is not None) == grouped
    assert job.queue == queue
    for pod in job.pods:
        labels = pod["metadata"]["labels"]
        assert (keys.POD_GROUP_LABEL in labels) == grouped
    if job.pod_group is not None:
        assert job.pod_group["spec"]["queue"] == queue
        assert job.pod_group["spec"]["minMember"] == fields.get("minMember", 1)


def test_pods_carry_everything_the_scheduler_reads() -> None:
    w = workload(
        queue="team-a",
        count=12,
        every="1m",
        replicas=10,
        minMember=10,
        priority=5,
        requests={"cpu": "8", "nvidia.com/gpu": "1"},
        labels={"team": "a"},
        nodeSelector={"pool": "gpu"},
        tolerations=[{"key": "dedicated", "operator": "Exists"}],
    )
    job = workloads.make_job(w, index=3)
    assert job.name == "train-03"
    assert [p["metadata"]["name"] for p in job.pods][:2] == ["train-03-0", "train-03-1"]
    pod = job.pods[0]
    assert pod["metadata"]["labels"] == {
        "team": "a",
        workloads.WORKLOAD_LABEL: "train",
        workloads.JOB_LABEL: "train-03",
        keys.POD_GROUP_LABEL: "train-03",
    }
    assert pod["metadata"]["annotations"] == {keys.SIM_DURATION_ANNOTATION: "30m"}
    spec = pod["spec"]
    assert spec["schedulerName"] == keys.DEFAULT_SCHEDULER_NAME
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "8", "nvidia.com/gpu": "1"}
    assert spec["nodeSelector"] == {"pool": "gpu"}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert spec["priority"] == 5
    assert job.duration_ms == 30 * 60 * 1000
