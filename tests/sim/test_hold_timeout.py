"""The starvation guard's cost, said and bounded (issue #33): the room it holds for a starving
gang is in the gang's reason, and past ``drainTimeoutSeconds`` the room is given back with a
reason saying so.

Three 8-GPU nodes, each filled by one burst of queue batch's 1-GPU pods (40 minutes, 6 hours,
2 hours), then a stream of batch's 8-hour 1-GPU jobs; a gang of two 8-GPU pods of queue
research (weight 3: its share has room for the gang) arrives after the bursts. Batch is not
reclaimable: the gang waits for pods to end, as the guard has it.
"""

from __future__ import annotations

import typing

from tests.sim import builders

SPEC = (
    """\
seed: 1
until: %(until)s
"""
    + builders.guard_profile(proportion="starvationThresholdSeconds: 300%(timeout)s")
    + """\
nodes:
  - {count: 3, namePrefix: gpu-, allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}
objects:
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: research},
     spec: {weight: 3}}
  - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: batch},
     spec: {weight: 1, reclaimable: false}}
workloads:
  - {name: short, namespace: batch, queue: batch, at: 0s, every: 1s, count: 8,
     duration: 40m, expectedRuntime: 40m,
     requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}
  - {name: long, namespace: batch, queue: batch, at: 1m, every: 1s, count: 8,
     duration: 6h, expectedRuntime: 6h, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}
  - {name: mid, namespace: batch, queue: batch, at: 2m, every: 1s, count: 8,
     duration: 2h, expectedRuntime: 2h, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}
  - {name: stream, namespace: batch, queue: batch, at: 4m, every: 2m, count: 200,
     duration: 8h, expectedRuntime: 8h, requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}
  - {name: big, namespace: research, queue: research, at: 3m, replicas: 2, minMember: 2,
     duration: 1h, requests: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "8"}}
"""
)


def _run(*, until: str, timeout: int | None = None) -> dict[str, typing.Any]:
    extra = f", drainTimeoutSeconds: {timeout}" if timeout is not None else ""
    return builders.run(SPEC % {"until": until, "timeout": extra})


def _by_workload(report: dict[str, typing.Any], name: str) -> list[dict[str, typing.Any]]:
    return [w for w in report["workloads"] if w["workload"] == name]


def test_the_room_held_for_a_starving_gang_is_in_its_reason() -> None:
    # At 45 minutes the 40-minute pods' node has emptied and is held for the gang: nobody
    # else starts there (the stream's 8-hour jobs would outlive the wait), and the reason says
    # what sits idle for it.
    report = _run(until="45m")
    (big,) = _by_workload(report, "big")
    assert big["started"] is None
    assert "holding 2 nodes for 2/2 pods as they free, " in big["reason"], big["reason"]
    assert "8 nvidia.com/gpu idle meanwhile" in big["reason"], big["reason"]
    later = [w for w in _by_workload(report, "stream") if w["started"] and w["started"] > 40 * 60]
    assert not later


def test_with_no_timeout_the_gang_starts_once_its_nodes_have_freed() -> None:
    report = _run(until="10h")
    (big,) = _by_workload(report, "big")
    assert big["started"] is not None
    assert big["started"] < 6 * 3600  # the 2-hour pods' node, never the 6-hour one's
    assert report["summary"]["partialGangs"] == 0


def test_a_hold_past_its_timeout_gives_the_room_back_and_says_so() -> None:
    # drainTimeoutSeconds 1800: the hold that began at the threshold (8 minutes) ends at 38
    # minutes, and the gang is held for again only 30 minutes later; at 50 minutes it says so.
    report = _run(until="50m", timeout=1800)
    (big,) = _by_workload(report, "big")
    assert big["started"] is None
    assert big["reason"].startswith(
        "gave back the room held for it on 2 nodes after 1800s (drainTimeoutSeconds); "
        "may be held for again in "
    ), big["reason"]
    # Given back, the 40-minute pods' node took the stream's work again.
    later = [w for w in _by_workload(report, "stream") if w["started"] and w["started"] > 40 * 60]
    assert later
