"""Reports: what a recorder's facts become in the JSON report.

We test these aspects:
- allocation series hold one sample per changing instant (changes that cancel vanish);
- utilization is the time average of bound requests over capacity;
- waits: nearest-rank percentiles per queue, jobs still waiting count up to the end;
- waits by job size: a job's pods together, by its dominant resource, rounded up to a power
  of two; a gang started over is not counted twice;
- Jain's index is 1 when queues get their demand-capped fair shares, lower when one is
  starved, and null when queues never compete;
- a gang with some but not all of ``minMember`` pods bound after a cycle is a partial gang;
- nodes holding no pod are averaged over time and counted at the end;
- the report is plain JSON data.
"""

from __future__ import annotations

import json

import pytest

from berth.api import resources
from berth.sim import fairness, records, reports

R = resources.ResourceList
CPU4 = R({"cpu": 4000})


def recorder(*queues: str) -> records.Recorder:
    rec = records.Recorder(capacity=R({"cpu": 8000, "pods": 20_000}), nodes=2)
    rec.queues_changed(
        [
            fairness.QueueShape(name=q, parent=None, weight=1, guaranteed=R(), limit=None)
            for q in queues
        ],
        at=0,
    )
    return rec


def submit(
    rec: records.Recorder,
    name: str,
    *,
    queue: str,
    at: int,
    pods: int = 1,
    min_member: int = 1,
    requests: R = CPU4,
) -> list[str]:
    rec.job_submitted(
        records.JobRecord(
            namespace="ns",
            name=name,
            workload="w",
            queue=queue,
            min_member=min_member,
            submitted=at,
        )
    )
    keys = [f"ns/{name}-{i}" for i in range(pods)]
    for key in keys:
        rec.pod_created(key, job=f"ns/{name}", queue=queue, requests=requests, at=at)
    return keys


def test_series_keep_one_sample_per_instant_and_drop_cancelled_changes() -> None:
    series = records.Series(R())
    series.set(5, CPU4)
    series.set(5, CPU4 + CPU4)
    series.set(7, CPU4)
    series.set(7, CPU4 + CPU4)  # back to the previous value within the instant
    series.set(9, CPU4 + CPU4)  # no change
    assert series.samples == [(0, R()), (5, CPU4 + CPU4)]


def test_utilization_is_the_time_average_over_capacity() -> None:
    rec = recorder("a")
    (pod,) = submit(rec, "j", queue="a", at=0)
    rec.pod_bound(pod, node="n1", at=0)
    rec.pod_succeeded(pod, at=50_000)
    rec.finish(at=100_000)
    report = reports.build(rec, scenario="s", seed=1)
    assert report["summary"]["utilization"] == {"cpu": 0.25, "pods": 0.0}
    assert report["queues"]["a"]["allocated"] == [
        {"t": 0.0, "resources": {"cpu": "4"}},
        {"t": 50.0, "resources": {}},
    ]


def test_waits_are_nearest_rank_and_count_jobs_still_waiting() -> None:
    rec = recorder("a")
    for i, wait in enumerate((10, 20, 30)):
        (pod,) = submit(rec, f"j{i}", queue="a", at=0)
        rec.pod_bound(pod, node="n1", at=wait * 1000)
    submit(rec, "late", queue="a", at=50_000)
    rec.finish(at=100_000)
    wait = reports.build(rec, scenario="s", seed=1)["summary"]["wait"]["a"]
    assert wait == {"p50": 20.0, "p90": 50.0, "jobs": 4, "started": 3, "pendingAtEnd": 1}


def test_waits_by_size_put_a_big_gang_in_its_own_row_beside_the_small_jobs() -> None:
    # 8 CPUs, and memory in the same capacity: which resource a job is sized by is the
    # larger share it asks of the cluster.
    rec = records.Recorder(
        capacity=R({"cpu": 8000, "memory": 64 * 2**30 * 1000, "pods": 20_000}), nodes=2
    )
    rec.queues_changed(
        [fairness.QueueShape(name="a", parent=None, weight=1, guaranteed=R(), limit=None)], at=0
    )
    for i, wait in enumerate((0, 10, 20)):
        (pod,) = submit(rec, f"small{i}", queue="a", at=0, requests=R({"cpu": 1000}))
        rec.pod_bound(pod, node="n1", at=wait * 1000)
    # Three and four CPUs: the same row, up to 4.
    gang = submit(rec, "gang", queue="a", at=0, pods=3, min_member=3, requests=R({"cpu": 1000}))
    (four,) = submit(rec, "four", queue="a", at=0, requests=R({"cpu": 4000}))
    rec.pod_bound(four, node="n2", at=5_000)
    # Started over: its pods come again under the same names, and it is still 3 CPUs.
    for key in gang:
        rec.pod_created(key, job="ns/gang", queue="a", requests=R({"cpu": 1000}), at=1_000)
    for key in gang:
        rec.pod_bound(key, node="n2", at=60_000)
    # Half the memory and a little CPU: sized by memory.
    submit(rec, "mem", queue="a", at=0, requests=R({"cpu": 100, "memory": 20 * 2**30 * 1000}))
    submit(rec, "none", queue="a", at=90_000, requests=R())
    rec.finish(at=100_000)
    rows = reports.build(rec, scenario="s", seed=1)["summary"]["waitBySize"]
    assert [(r["resource"], r["upTo"], r["jobs"], r["started"]) for r in rows] == [
        (None, None, 1, 0),
        ("cpu", "1", 3, 3),
        ("cpu", "4", 2, 2),
        ("memory", "32Gi", 1, 0),
    ]
    assert [(r["p50"], r["p90"], r["max"]) for r in rows] == [
        (10.0, 10.0, 10.0),
        (10.0, 20.0, 20.0),
        (5.0, 60.0, 60.0),
        (100.0, 100.0, 100.0),
    ]
    json.dumps(rows)


@pytest.mark.parametrize(
    ("values", "fraction", "expected"),
    [([], 0.5, None), ([3.0], 0.9, 3.0), ([1.0, 2.0, 3.0, 4.0], 0.5, 2.0), ([4.0, 1.0], 0.9, 4.0)],
    ids=["empty", "single", "median", "top"],
)
def test_percentile(values: list[float], fraction: float, expected: float | None) -> None:
    assert reports.percentile(values, fraction) == expected


def test_jain_is_one_when_competing_queues_get_their_fair_share() -> None:
    rec = recorder("a", "b")
    for queue in ("a", "b"):
        pods = submit(rec, queue, queue=queue, at=0, pods=2)
        rec.pod_bound(pods[0], node="n1", at=0)  # one each: half the cluster each
    rec.finish(at=10_000)
    summary = reports.build(rec, scenario="s", seed=1)["summary"]
    assert (summary["jainIndex"], summary["contendedSeconds"]) == (1.0, 10.0)


def test_jain_drops_when_one_queue_takes_everything() -> None:
    rec = recorder("a", "b")
    hog = submit(rec, "hog", queue="a", at=0, pods=2)
    submit(rec, "starved", queue="b", at=0, pods=2)
    for pod in hog:
        rec.pod_bound(pod, node="n1", at=0)
    rec.finish(at=10_000)
    # a has 2.0x its demand-capped share (half the cluster), b has 0: Jain = 4 / (2 * 4).
    assert reports.build(rec, scenario="s", seed=1)["summary"]["jainIndex"] == 0.5


def test_jain_is_null_when_queues_never_compete() -> None:
    rec = recorder("a", "b")
    (pod,) = submit(rec, "alone", queue="a", at=0)
    rec.pod_bound(pod, node="n1", at=0)
    rec.finish(at=10_000)
    summary = reports.build(rec, scenario="s", seed=1)["summary"]
    assert (summary["jainIndex"], summary["contendedSeconds"]) == (None, 0.0)


def test_a_gang_partly_bound_after_a_cycle_counts() -> None:
    rec = recorder("a")
    first, second = submit(rec, "gang", queue="a", at=0, pods=2, min_member=2)
    rec.pod_bound(first, node="n1", at=0)
    rec.cycle_done(decisions=1)
    rec.pod_bound(second, node="n2", at=0)
    rec.cycle_done(decisions=1)
    report = reports.build(rec, scenario="s", seed=1)
    assert report["summary"]["partialGangs"] == 1
    assert report["workloads"][0]["started"] == 0.0


def test_the_report_is_plain_json() -> None:
    rec = recorder("a")
    submit(rec, "j", queue="a", at=0)
    rec.finish(at=1000)
    report = reports.build(
        rec,
        scenario="s",
        seed=7,
        reservations=[{"metadata": {"namespace": "ns", "name": "r"}, "spec": {"owners": []}}],
    )
    assert json.loads(json.dumps(report)) == report
    assert report["reservations"] == [
        {
            "namespace": "ns",
            "name": "r",
            "phase": "Pending",
            "nodeName": None,
            "availableAt": None,
            "reason": None,
            "message": None,
            "owners": [],
            "currentOwners": [],
        }
    ]
    assert (report["kind"], report["seed"]) == ("Report", 7)


def test_empty_nodes_are_time_averaged_and_counted_at_the_end() -> None:
    rec = recorder("a")
    keys = submit(rec, "j", queue="a", at=0, pods=2)
    rec.pod_bound(keys[0], node="n1", at=0)  # one of the two nodes empty from 0 ...
    rec.pod_bound(keys[1], node="n2", at=4_000)  # ... none from 4 s ...
    rec.pod_succeeded(keys[1], at=6_000)  # ... one again from 6 s
    rec.finish(at=10_000)
    empty = reports.build(rec, scenario="s", seed=1)["summary"]["emptyNodes"]
    assert empty == {"mean": (4 * 1 + 2 * 0 + 4 * 1) / 10, "atEnd": 1}
