"""Learned run times (issue #33): where pods declare no run time, the starvation guard
estimates when a held gang can start from the run times of its queue's finished pods, so
EASY backfill works without hints and the gang starts no later for it.

The starvation-guard example's stream of 30-minute one-GPU jobs that declare nothing, a
stream of 3-minute jobs that do, and a 16-GPU gang. Learning is turned off for the control by
asking more finished pods than the scenario ever has (``runstats.MIN_SAMPLES``).
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.snapshot import runstats
from tests.sim import builders

SPEC = (
    """\
seed: 1
until: 5h
# The plugins this needs, with Proportion's drainPreemptSeconds off: what is tested is what run-time
# estimates open to backfill, not the bound that deadline puts on the gang's start.
"""
    + builders.guard_profile(proportion="drainPreemptSeconds: null", gpu_weight=50)
    + """\
nodes:
  - {count: 4, namePrefix: gpu-, allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}
objects:
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: research}}
workloads:
  - {name: small, namespace: research, queue: research, every: 1m, count: 200,
     duration: 30m, requests: {cpu: "4", memory: 16Gi, nvidia.com/gpu: "1"}}
  - {name: short, namespace: research, queue: research, at: 91m, every: 30s, count: 200,
     duration: 3m, requests: {cpu: "4", memory: 16Gi, nvidia.com/gpu: "1"},
     expectedRuntime: 3m}
  - {name: big, namespace: research, queue: research, at: 90m, replicas: 2, minMember: 2,
     duration: 1h, requests: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "8"}}
"""
)


def _started(report: dict[str, typing.Any], workload: str) -> list[float]:
    return sorted(
        w["started"]
        for w in report["workloads"]
        if w["workload"] == workload and w["started"] is not None
    )


def test_learned_run_times_open_held_room_to_short_work(monkeypatch: pytest.MonkeyPatch) -> None:
    learned = builders.run(SPEC)
    monkeypatch.setattr(runstats, "MIN_SAMPLES", 10**6)
    unlearned = builders.run(SPEC)
    gang_learned, gang_unlearned = _started(learned, "big"), _started(unlearned, "big")
    assert gang_learned and gang_unlearned
    # Backfill into the held room does not delay the gang.
    assert gang_learned[0] <= gang_unlearned[0]
    # Without an estimate of the 30-minute pods' ends, the held GPUs stay idle; with the
    # queue's finished pods as the estimate, the declared 3-minute jobs use them meanwhile.
    before_learned = sum(1 for t in _started(learned, "short") if t < gang_learned[0])
    before_unlearned = sum(1 for t in _started(unlearned, "short") if t < gang_unlearned[0])
    assert before_learned > before_unlearned
    busy = learned["summary"]["utilizationWhileWaiting"]["nvidia.com/gpu"]
    idle = unlearned["summary"]["utilizationWhileWaiting"]["nvidia.com/gpu"]
    assert busy > idle
    assert learned["summary"]["partialGangs"] == 0
