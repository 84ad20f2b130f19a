"""The simulator wakes the scheduler when a waiting job looks again by time alone.

A gang that fits nowhere on nodes busy with ten-hour pods, and nothing else happening: the
starvation guard holds room for it once it has waited ``starvationThresholdSeconds``, at that
instant (the cycle result's ``revisit_at``), not ten hours later when the next pod ends. A
live operator finds that time with its periodic cycle; the simulator runs cycles only when
something happens, so the scheduler says when.
"""

from __future__ import annotations

from tests.sim import builders

SPEC = """\
seed: 1
until: 12h
nodes:
  - {count: 2, namePrefix: gpu-, allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}
objects:
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: research}}
workloads:
  - {name: long, namespace: research, queue: research, at: 0s, every: 1s, count: 4,
     duration: 10h, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}
  - {name: train, namespace: research, queue: research, at: 10m, replicas: 2, minMember: 2,
     duration: 1h, requests: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "8"}}
"""


def test_the_guard_holds_room_at_the_gangs_threshold_with_nothing_else_happening() -> None:
    report = builders.run(SPEC)
    held = [s["t"] for s in report["cluster"]["heldIdle"] if s["resources"]]
    # The default threshold is five minutes: the gang arrived at 10 minutes.
    assert held and held[0] == 600 + 300
    (train,) = [w for w in report["workloads"] if w["workload"] == "train"]
    # It takes the node held for it back one drainPreemptSeconds (3 hours) after the hold
    # began, again with nothing else happening then.
    assert train["started"] == 600 + 300 + 3 * 3600
