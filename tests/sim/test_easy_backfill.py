"""EASY backfill (issue #17): room the starvation guard holds for a big gang goes to work that
declares it ends before the gang could start, and the gang starts no later for it.

The starvation-guard example's stream of 30-minute one-GPU jobs, plus a stream of 3-minute
ones; the small jobs' pods declare their run times (``expectedRuntime``) or do not.
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
     duration: 30m, requests: {cpu: "4", memory: 16Gi, nvidia.com/gpu: "1"}%(small)s}
  - {name: short, namespace: research, queue: research, at: 31m, every: 1m, count: 120,
     duration: 3m, requests: {cpu: "4", memory: 16Gi, nvidia.com/gpu: "1"}%(short)s}
  - {name: big, namespace: research, queue: research, at: 30m, replicas: 2, minMember: 2,
     duration: 1h, requests: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "8"}}
"""
)


def _run(*, declared: bool) -> dict[str, typing.Any]:
    small = ", expectedRuntime: 30m" if declared else ""
    short = ", expectedRuntime: 3m" if declared else ""
    return builders.run(SPEC % {"small": small, "short": short})


def _started(report: dict[str, typing.Any], workload: str) -> list[float]:
    return sorted(
        w["started"]
        for w in report["workloads"]
        if w["workload"] == workload and w["started"] is not None
    )


def test_declared_short_work_fills_the_held_room_without_delaying_the_gang() -> None:
    guarded, easy = _run(declared=False), _run(declared=True)
    gang_guarded, gang_easy = _started(guarded, "big"), _started(easy, "big")
    assert gang_guarded and gang_easy
    # The gang starts no later when short work used its held room meanwhile.
    assert gang_easy[0] <= gang_guarded[0]
    # Short jobs ran while the gang waited: more of them started before it than under the
    # plain guard, which keeps held GPUs idle.
    before_easy = sum(1 for t in _started(easy, "short") if t < gang_easy[0])
    before_guarded = sum(1 for t in _started(guarded, "short") if t < gang_guarded[0])
    assert before_easy > before_guarded
    busy = easy["summary"]["utilizationWhileWaiting"]["nvidia.com/gpu"]
    idle = guarded["summary"]["utilizationWhileWaiting"]["nvidia.com/gpu"]
    assert busy > idle
    assert easy["summary"]["partialGangs"] == 0


def test_a_queue_default_stands_in_for_pods_that_declare_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The 30-minute pods declare nothing: without their queue's default the gang's start is
    # unknown and nothing backfills; with it, the declared 3-minute pods do. Run times learned
    # from finished pods would stand in too (test_learned_runtimes): off here.
    monkeypatch.setattr(runstats, "MIN_SAMPLES", 10**6)
    spec = SPEC % {"small": "", "short": ", expectedRuntime: 3m"}
    without = builders.run(spec)
    default = builders.run(
        spec.replace(
            "metadata: {name: research}}",
            "metadata: {name: research}, spec: {defaultExpectedRuntimeSeconds: 1800}}",
        )
    )
    gang_without, gang_default = _started(without, "big"), _started(default, "big")
    assert gang_without and gang_default
    assert gang_default[0] <= gang_without[0]
    before_default = sum(1 for t in _started(default, "short") if t < gang_default[0])
    before_without = sum(1 for t in _started(without, "short") if t < gang_without[0])
    assert before_default > before_without
