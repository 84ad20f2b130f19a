"""A starving gang takes back the nodes held for it past ``drainPreemptSeconds`` (issue #33).

Four nodes of 8 GPUs, half of each taken by another queue's one-GPU jobs that declare no run
time and run for ten hours (spread: that queue holds its share, so fair-share reclaim takes
none of it), then a gang of two 8-GPU pods, which fits nowhere: the starvation guard holds
two nodes for it, and once the
hold has drained for ``drainPreemptSeconds`` the gang evicts what still runs there and
starts. What it may take: smaller jobs only (never a gang as big as itself), never a
``reclaimable: false`` queue's pods; with ``drainPreemptSeconds: null`` the gang waits for the
ten-hour jobs to end, as before.
"""

from __future__ import annotations

import typing

import pytest

from tests.sim import builders

THRESHOLD, DRAIN = 300, 1800

SPEC = (
    """\
seed: 1
until: 12h
"""
    + builders.guard_profile(
        proportion="starvationThresholdSeconds: %(threshold)d%(preempt)s", gpus="LeastAllocated"
    )
    + """\
nodes:
  - {count: 4, namePrefix: gpu-, allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}
objects:
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: research}}
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: batch},
     spec: {reclaimable: %(reclaimable)s}}
workloads:
%(running)s
  - {name: train, namespace: research, queue: research, at: 10m, replicas: 2, minMember: 2,
     duration: 1h, requests: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "8"}}
"""
)

ONE_GPU_JOBS = """\
  - {name: long, namespace: batch, queue: batch, at: 0s, every: 1s, count: 16,
     duration: 10h, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}"""

A_PEER_GANG = """\
  - {name: long, namespace: batch, queue: batch, at: 0s, replicas: 4, minMember: 4,
     duration: 10h, requests: {cpu: "4", memory: 32Gi, nvidia.com/gpu: "4"}}"""


def _run(
    *, preempt: int | None = DRAIN, running: str = ONE_GPU_JOBS, reclaimable: bool = True
) -> dict[str, typing.Any]:
    chosen = f", drainPreemptSeconds: {'null' if preempt is None else preempt}"
    return builders.run(
        SPEC
        % {
            "threshold": THRESHOLD,
            "preempt": chosen,
            "running": running,
            "reclaimable": str(reclaimable).lower(),
        }
    )


def _jobs(report: dict[str, typing.Any], name: str) -> list[dict[str, typing.Any]]:
    return [w for w in report["workloads"] if w["workload"] == name]


def test_past_the_drain_the_gang_takes_back_its_nodes_and_starts() -> None:
    report = _run()
    (train,) = _jobs(report, "train")
    # Held from its threshold (10m + 5m), the gang takes the nodes back one drain later.
    held_at = 600 + THRESHOLD
    assert held_at + DRAIN <= train["started"] <= held_at + DRAIN + 120
    evicted = [t for w in _jobs(report, "long") for t in w["evictedAt"]]
    assert len(evicted) == 8  # what runs on the two nodes held for it
    assert all(held_at + DRAIN <= t <= train["started"] for t in evicted)
    assert report["summary"]["partialGangs"] == 0


def test_without_drain_preempt_the_gang_waits_for_the_long_jobs() -> None:
    report = _run(preempt=None)
    (train,) = _jobs(report, "train")
    assert train["started"] >= 10 * 3600
    assert not any(w["evictedAt"] for w in _jobs(report, "long"))


@pytest.mark.parametrize(
    ("running", "reclaimable"),
    [(A_PEER_GANG, True), (ONE_GPU_JOBS, False)],
    ids=["a-gang-as-big", "not-reclaimable"],
)
def test_what_the_gang_may_not_take_it_waits_for(running: str, reclaimable: bool) -> None:
    report = _run(running=running, reclaimable=reclaimable)
    (train,) = _jobs(report, "train")
    assert train["started"] >= 10 * 3600
    assert not any(w["evictedAt"] for w in _jobs(report, "long"))
