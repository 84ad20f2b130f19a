"""Max run time in ``berth sim`` (issue #33): a job past its ``maximumExecutionTimeSeconds``
(its PodGroup's, else its queue's) is requeued or failed, with a reason saying so.

One 8-GPU node. Jobs are gangs of two 4-GPU pods, so one job fills the node, and what waits
behind it starts only when its pods go. A limit of 0 or less is refused, naming the field.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.snapshot import podgroups
from berth.sim import errors
from tests.sim import builders

NODE = """\
seed: 1
until: %(until)s
nodes:
  - {count: 1, namePrefix: gpu-, allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}
"""
GANG = "replicas: 2, minMember: 2, requests: {cpu: '1', memory: 1Gi, nvidia.com/gpu: '4'}"


def _run(body: str, *, until: str) -> dict[str, typing.Any]:
    return builders.run(NODE % {"until": until} + body)


def _group(report: dict[str, typing.Any], name: str) -> dict[str, typing.Any]:
    (found,) = [g for g in report["podGroups"] if g["name"] == name]
    return found


def test_a_gang_past_its_queues_limit_is_evicted_whole_and_runs_again() -> None:
    # The queue allows an hour; the job needs two. Each run is cut at its hour (counted from
    # when both pods started), its pods recreated and placed again: two evictions of the whole
    # gang by 2h30m, and never more than an hour of running between them.
    report = _run(
        f"""\
objects:
  - {{apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {{name: batch}},
     spec: {{maximumExecutionTimeSeconds: 3600}}}}
workloads:
  - {{name: long, namespace: ml, queue: batch, at: 0s, duration: 2h, {GANG}}}
""",
        until="2h30m",
    )
    (job,) = builders.jobs(report).values()
    assert job["started"] == 0
    assert job["finished"] is None
    assert job["evictedAt"] == [3600, 3600, 7200, 7200]
    assert job["evictedFor"] == ["MaximumExecutionTimeExceeded"] * 4
    assert job["restarts"] == 2
    group = _group(report, "long-0")
    assert group["phase"] == "Running"  # placed again after its second eviction


def test_a_job_within_its_limit_runs_to_the_end() -> None:
    report = _run(
        f"""\
objects:
  - {{apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {{name: batch}},
     spec: {{maximumExecutionTimeSeconds: 3600}}}}
workloads:
  - {{name: short, namespace: ml, queue: batch, at: 0s, duration: 50m, {GANG}}}
""",
        until="2h",
    )
    (job,) = builders.jobs(report).values()
    assert job["finished"] == 3000
    assert job["evictions"] == 0


def test_a_group_asking_to_fail_is_failed_and_its_room_goes_to_the_next_job() -> None:
    # The PodGroup's own limit (30 minutes) is below its queue's (none); it asks to fail. At
    # 30m its pods go and are not recreated; the job waiting behind it starts at that instant.
    report = _run(
        f"""\
workloads:
  - {{name: capped, namespace: ml, queue: default, at: 0s, duration: 1h, {GANG},
     maximumExecutionTimeSeconds: 1800, onMaximumExecutionTime: Fail}}
  - {{name: next, namespace: ml, queue: default, at: 5m, duration: 10m, {GANG}}}
""",
        until="3h",
    )
    jobs = builders.jobs(report)
    capped, following = jobs["ml/capped-0"], jobs["ml/next-0"]
    assert capped["evictedAt"] == [1800, 1800]
    assert capped["finished"] is None
    assert capped["evictedFor"] == ["MaximumExecutionTimeExceeded"] * 2
    assert capped["restarts"] == 0  # failed: its controller made no new pods
    assert following["started"] == 1800
    assert following["finished"] == 2400
    group = _group(report, "capped-0")
    assert group["phase"] == "Failed"
    assert group["reason"] == "MaximumExecutionTimeExceeded"
    assert "ran past its maximumExecutionTimeSeconds of 1800s" in group["message"]
    assert "failed" in group["message"]


@pytest.mark.parametrize("value", [0, -60])
def test_a_limit_of_zero_or_less_is_refused_naming_the_field(value: int) -> None:
    # On a scenario's PodGroup (the model's check, as the API server's), and on a workload.
    group = f"""\
objects:
  - {{apiVersion: scheduling.berth.io/v1alpha1, kind: PodGroup,
     metadata: {{name: g, namespace: ml}}, spec: {{maximumExecutionTimeSeconds: {value}}}}}
"""
    workload = f"""\
workloads:
  - {{name: w, at: 0s, duration: 1m, maximumExecutionTimeSeconds: {value}}}
"""
    for body, field in (
        (group, "spec.maximumExecutionTimeSeconds"),
        (workload, "spec.workloads[0].maximumExecutionTimeSeconds"),
    ):
        with pytest.raises(errors.ScenarioError) as refused:
            builders.scenario(NODE % {"until": "1h"} + body)
        assert field in str(refused.value), str(refused.value)
        assert "greater than or equal to 1" in str(refused.value), str(refused.value)


def test_a_group_that_got_past_the_api_server_with_a_bad_limit_waits_saying_so() -> None:
    # Only that group: it is invalid, naming the field as the API server does.
    info = podgroups.pod_group_info(
        {
            "metadata": {"name": "g", "namespace": "ml"},
            "spec": {"minMember": 1, "maximumExecutionTimeSeconds": 0},
        }
    )
    assert info.invalid == (
        "spec.maximumExecutionTimeSeconds: Invalid value: 0: should be greater than or equal to 1"
    )
