"""The virtual-time loop: arrivals, binding, running for a duration, evictions, timed events.

We test these aspects:
- a gang that fits starts at its arrival and finishes after its duration, all pods placed;
- a gang that can never fit holds nothing, never starts, and says why;
- at the end, the PodGroups and Queues left carry the status the live operator would write
  (phase, the reason's code and message, counts, queue usage);
- pods free their capacity when they finish, so queued work starts then;
- ``until`` cuts the run; without it the run ends with the last event;
- timed ``apply``/``delete`` events change the cluster at their time;
- a schedule period batches changes; a Reservation's TTL wakes the scheduler up without
  stretching the run;
- a Reservation ending by ``expires`` (or by ``ttl``) frees its capacity at exactly that
  virtual time: a waiting non-owner starts then;
- manifests at time zero (a PodGroup with pods, a plain pod, a pod already bound) are jobs;
- an eviction (here: reclaim) recreates a gang's pods all together and nothing else;
- a Simulation runs once.
"""

from __future__ import annotations

import pytest

from berth.sim import runner
from tests.sim import builders

NODES = """\
nodes:
  - {count: 2, namePrefix: gpu-, allocatable: {cpu: "16", nvidia.com/gpu: "4"}}
"""


def test_a_gang_that_fits_runs_for_its_duration() -> None:
    report = builders.run(
        NODES
        + """\
workloads:
  - {name: train, namespace: ml, at: 5m, replicas: 2, minMember: 2, duration: 30m,
     requests: {cpu: "8", nvidia.com/gpu: "4"}}
"""
    )
    job = builders.jobs(report)["ml/train-0"]
    assert (job["submitted"], job["started"], job["finished"]) == (300.0, 300.0, 2100.0)
    assert sorted(job["pods"].values()) == ["gpu-0", "gpu-1"]
    assert report["end"] == 2100.0
    assert report["summary"]["partialGangs"] == 0


def test_a_gang_that_can_never_fit_holds_nothing_and_says_why() -> None:
    report = builders.run(
        NODES
        + """\
until: 1h
workloads:
  - {name: big, namespace: ml, replicas: 3, minMember: 3, duration: 30m,
     requests: {nvidia.com/gpu: "4"}}
"""
    )
    job = builders.jobs(report)["ml/big-0"]
    assert job["started"] is None and job["finished"] is None
    assert job["pods"] == {"big-0-0": None, "big-0-1": None, "big-0-2": None}
    assert job["wait"] == 3600.0
    assert job["reason"] == "can never fit: needs 12 nvidia.com/gpu, the cluster has 8"
    assert report["cluster"]["allocated"] == [{"t": 0.0, "resources": {}}]
    assert report["summary"]["partialGangs"] == 0


def test_the_report_shows_the_podgroup_and_queue_statuses_the_operator_would_write() -> None:
    report = builders.run(
        NODES
        + """\
until: 1h
objects:
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: ml}}
workloads:
  - {name: train, namespace: ml, queue: ml, replicas: 2, minMember: 2, duration: 5h,
     requests: {cpu: "8", nvidia.com/gpu: "4"}}
  - {name: big, namespace: ml, queue: ml, at: 1m, replicas: 2, minMember: 2, duration: 30m,
     requests: {nvidia.com/gpu: "4"}}
"""
    )
    groups = {g["name"]: g for g in report["podGroups"]}
    running = groups["train-0"]
    assert (running["phase"], running["reason"], running["running"]) == ("Running", "Scheduled", 2)
    waiting = groups["big-0"]
    assert (waiting["phase"], waiting["scheduled"]) == ("Inqueue", 0)
    assert waiting["reason"] == "NotEnoughResources"
    assert waiting["message"] == builders.jobs(report)["ml/big-0"]["reason"]
    assert (waiting["queuePosition"], waiting["queuePending"]) == (1, 1)
    queue = report["queueStatuses"]["ml"]
    assert (queue["state"], queue["runningPods"], queue["pendingPods"]) == ("Open", 2, 2)
    assert queue["allocated"]["nvidia.com/gpu"] == "8"


def test_finished_pods_free_capacity_for_queued_work() -> None:
    report = builders.run(
        NODES
        + """\
workloads:
  - {name: job, namespace: ml, every: 1m, count: 3, replicas: 2, minMember: 2, duration: 10m,
     requests: {nvidia.com/gpu: "4"}}
"""
    )
    timeline = [(j["submitted"], j["started"], j["finished"]) for j in report["workloads"]]
    assert timeline == [(0.0, 0.0, 600.0), (60.0, 600.0, 1200.0), (120.0, 1200.0, 1800.0)]
    assert report["summary"]["wait"]["default"]["p50"] == 540.0


def test_until_drops_later_events_and_ends_the_run() -> None:
    report = builders.run(
        NODES
        + """\
until: 90s
workloads:
  - {name: job, every: 1m, count: 5, duration: 10m, requests: {cpu: "1"}}
"""
    )
    assert report["end"] == 90.0
    assert [w["name"] for w in report["workloads"]] == ["job-0", "job-1"]
    assert report["summary"]["jobs"] == {"submitted": 2, "started": 2, "finished": 0}


def test_timed_events_apply_and_delete_objects() -> None:
    report = builders.run(
        NODES
        + """\
objects:
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: a}, spec: {weight: 1}}
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: b}, spec: {weight: 1}}
  - apiVersion: v1
    kind: Pod
    metadata: {name: lonely, namespace: ml}
    spec: {containers: [{name: m, resources: {requests: {cpu: "1"}}}]}
events:
  - {at: 10m, apply: {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue,
                      metadata: {name: a}, spec: {weight: 3}}}
  - {at: 20m, delete: {kind: Pod, namespace: ml, name: lonely}}
"""
    )
    shares = report["queues"]["a"]["fairShareSeries"]
    assert [(s["t"], s["resources"]["cpu"]) for s in shares] == [(0.0, "16"), (600.0, "24")]
    assert report["end"] == 1200.0
    allocated = report["cluster"]["allocated"]
    assert [(s["t"], s["resources"].get("cpu")) for s in allocated] == [(0.0, "1"), (1200.0, None)]


def test_manifests_at_time_zero_are_jobs() -> None:
    report = builders.run(
        NODES
        + """\
objects:
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: PodGroup,
     metadata: {name: g, namespace: ml}, spec: {minMember: 2}}
  - apiVersion: v1
    kind: Pod
    metadata: {name: g-0, namespace: ml, labels: {scheduling.berth.io/pod-group: g},
               annotations: {sim.berth.io/duration: 5m}}
    spec: {containers: [{name: m, resources: {requests: {cpu: "1"}}}]}
  - apiVersion: v1
    kind: Pod
    metadata: {name: g-1, namespace: ml, labels: {scheduling.berth.io/pod-group: g},
               annotations: {sim.berth.io/duration: 5m}}
    spec: {containers: [{name: m, resources: {requests: {cpu: "1"}}}]}
  - apiVersion: v1
    kind: Pod
    metadata: {name: pinned, namespace: ml, annotations: {sim.berth.io/duration: 1m}}
    spec: {nodeName: gpu-1, containers: [{name: m, resources: {requests: {cpu: "2"}}}]}
"""
    )
    by_key = builders.jobs(report)
    group = by_key["ml/g"]
    assert (group["queue"], group["minMember"], group["started"], group["finished"]) == (
        "default",
        2,
        0.0,
        300.0,
    )
    assert set(group["pods"]) == {"g-0", "g-1"}
    pinned = by_key["ml/pinned"]
    assert (pinned["queue"], pinned["pods"], pinned["finished"]) == (
        None,
        {"pinned": "gpu-1"},
        60.0,
    )


RECLAIM = """\
until: 70m
nodes:
  - {count: 2, namePrefix: gpu-, allocatable: {cpu: "16", nvidia.com/gpu: "4"}}
objects:
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: prod},
     spec: {guaranteed: {nvidia.com/gpu: "4"}}}
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: research}}
workloads:
  - {name: sweep, namespace: research, queue: research, replicas: 2, minMember: 2,
     duration: 5h, requests: {nvidia.com/gpu: "2"}}
  - {name: loose, namespace: research, queue: research, replicas: 2, duration: 5h,
     requests: {nvidia.com/gpu: "2"}}
  - {name: serve, namespace: prod, queue: prod, at: 1h, replicas: 2, minMember: 2,
     duration: 1h, requests: {nvidia.com/gpu: "2"}}
"""


def test_an_evicted_gang_member_restarts_its_whole_job() -> None:
    simulation = runner.Simulation(builders.scenario(RECLAIM))
    report = simulation.run()
    by_key = builders.jobs(report)
    assert by_key["prod/serve-0"]["started"] == 3600.0
    evicted = [j for j in report["workloads"] if j["evictions"]]
    assert evicted, "reclaim evicted nothing: the prod guarantee was not honoured"
    for job in evicted:
        pods = [
            simulation.cluster.get("Pod", namespace="research", name=name) for name in job["pods"]
        ]
        bound = [p for p in pods if p is not None and p["spec"].get("nodeName")]
        if job["minMember"] > 1:
            assert job["restarts"] == 1
            assert bound == [], "a gang member kept running after its job restarted"
        else:
            assert job["restarts"] == 0
            assert len(bound) == len(pods) - job["evictions"]
    assert report["summary"]["partialGangs"] == 0


def test_a_simulation_runs_once() -> None:
    simulation = runner.Simulation(builders.scenario(NODES))
    simulation.run()
    with pytest.raises(RuntimeError, match="runs once"):
        simulation.run()


def test_a_schedule_period_batches_changes_into_the_next_cycle() -> None:
    spec = (
        NODES
        + """\
workloads:
  - {name: job, every: 10s, count: 4, duration: 1m, requests: {cpu: "1"}}
"""
    )
    starts = [w["started"] for w in builders.run(spec)["workloads"]]
    assert starts == [0.0, 10.0, 20.0, 30.0]
    batched = [w["started"] for w in builders.run("schedulePeriod: 25s\n" + spec)["workloads"]]
    assert batched == [0.0, 25.0, 25.0, 50.0]


def test_a_reservation_is_woken_up_to_expire_without_stretching_the_run() -> None:
    report = builders.run(
        NODES
        + """\
objects:
  - apiVersion: scheduling.berth.io/v1alpha1
    kind: Reservation
    metadata: {name: r, namespace: ml}
    spec:
      ttl: 24h
      owners: [{object: {name: nobody}}]
      template: {spec: {containers: [{name: m, resources: {requests: {cpu: "1"}}}]}}
workloads:
  - {name: job, duration: 10m, requests: {cpu: "1"}}
"""
    )
    assert report["reservations"][0]["phase"] == "Expired"  # at 24h, with nothing else to do
    assert report["end"] == 600.0  # the wake-up changed no pod: the run ended with the job


@pytest.mark.parametrize(
    ("lifetime", "ends"),
    [
        pytest.param('expires: "2026-01-01T00:01:00Z"', 60.0, id="expires"),
        pytest.param('expires: "2026-01-01T00:01:00.250Z"', 60.25, id="expires-mid-second"),
        pytest.param("ttl: 90s", 90.0, id="ttl"),
    ],
)
def test_a_reservation_frees_its_capacity_at_exactly_its_deadline(
    lifetime: str, ends: float
) -> None:
    report = builders.run(
        f"""\
nodes:
  - {{count: 1, namePrefix: n-, allocatable: {{cpu: "2"}}}}
objects:
  - apiVersion: scheduling.berth.io/v1alpha1
    kind: Reservation
    metadata: {{name: r, namespace: ml}}
    spec:
      {lifetime}
      owners: [{{object: {{name: nobody}}}}]
      template: {{spec: {{containers: [{{name: m, resources: {{requests: {{cpu: "2"}}}}}}]}}}}
workloads:
  - {{name: job, namespace: ml, duration: 10m, requests: {{cpu: "1"}}}}
"""
    )
    assert report["reservations"][0]["phase"] == "Expired"
    assert [w["started"] for w in report["workloads"]] == [ends]
