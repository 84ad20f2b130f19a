"""The starvation guard, on the simulator's virtual clock (issue 5, "Must show" 3).

A 64-pod gang arrives in a queue already busy with a continuous stream of one-pod jobs that
keeps the cluster (64 cores) full, with a backlog. Without the guard every core that frees
goes to the next small job and the gang never starts. With it, once the gang has waited
``starvationThresholdSeconds``, the cores that free are held for it (and its pods nominated)
until the whole gang fits — at the latest when every small job running at that moment has
finished.

We test these aspects:
- guard on: the gang starts within threshold + one small job's duration of arriving, whole
  (no partial gang at any moment), and small work resumes afterwards;
- guard off (threshold 0): the gang never starts while the stream lasts, and says why.
"""

from __future__ import annotations

import typing

import pytest

from berth.sim import runner, scenarios

THRESHOLD = 120  # seconds
SMALL_DURATION = 180  # seconds
ARRIVES = 300  # seconds

SCENARIO = """\
apiVersion: sim.berth.io/v1alpha1
kind: Scenario
metadata: {{name: starvation}}
spec:
  until: 30m
  profile:
    actions: [allocate, backfill, reclaim, preempt]
    plugins:
      - {{name: Priority}}
      - {{name: Gang}}
      - {{name: Proportion, args: {{starvationThresholdSeconds: {threshold}}}}}
      - {{name: NodeName}}
      - {{name: NodeUnschedulable}}
      - {{name: NodeAffinity}}
      - {{name: TaintToleration}}
      - {{name: NodeResourcesFit, args: {{scoringStrategy: {{type: LeastAllocated}}}}}}
      - {{name: BalancedAllocation}}
      - {{name: DefaultBinder}}
  nodes:
    - {{count: 4, allocatable: {{cpu: "16", memory: 128Gi}}}}
  objects:
    - {{apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {{name: q}}}}
  workloads:
    - {{name: small, queue: q, every: 4s, count: 450, duration: {small}s,
       requests: {{cpu: "1", memory: 1Gi}}}}
    - {{name: big, queue: q, at: {arrives}s, replicas: 64, minMember: 64, duration: 10m,
       requests: {{cpu: "1", memory: 1Gi}}}}
"""


def simulate(threshold: int) -> dict[str, typing.Any]:
    text = SCENARIO.format(threshold=threshold, small=SMALL_DURATION, arrives=ARRIVES)
    return runner.run(scenarios.loads(text))


def gang_of(report: dict[str, typing.Any]) -> dict[str, typing.Any]:
    (big,) = [w for w in report["workloads"] if w["workload"] == "big"]
    return big


@pytest.mark.slow
def test_with_the_guard_the_gang_starts_within_a_bounded_time() -> None:
    report = simulate(THRESHOLD)
    big = gang_of(report)
    assert big["submitted"] == ARRIVES
    assert big["started"] is not None
    assert big["started"] - big["submitted"] <= THRESHOLD + SMALL_DURATION
    assert report["summary"]["partialGangs"] == 0
    later = [
        w
        for w in report["workloads"]
        if w["workload"] == "small" and w["started"] is not None and w["started"] > big["started"]
    ]
    assert later, "small jobs go on once the gang has started"


def test_without_the_guard_the_gang_never_starts() -> None:
    report = simulate(0)
    big = gang_of(report)
    assert big["started"] is None
    assert big["reason"].startswith("gang needs minMember 64")
    assert report["end"] == 30 * 60
