"""Taking a guarantee back over time, on the simulator's virtual clock (issue 5).

prod is guaranteed half the GPUs and idle for the first ten minutes, while research borrows
the whole cluster with long two-pod gangs. Then prod's four-pod gangs arrive one a minute.

We test these aspects:
- each prod gang starts the minute it arrives (reclaim gives the guarantee back at once);
- research gives back exactly what prod takes: its newest gangs, whole, each evicted once
  (an evicted gang is recreated pending and is never a victim again while it waits);
- no gang is ever partly bound, and research keeps the half prod does not claim.
"""

from __future__ import annotations

import typing

from berth.api import quantities
from berth.sim import runner, scenarios

SCENARIO = """\
apiVersion: sim.berth.io/v1alpha1
kind: Scenario
metadata: {name: reclaim-over-time}
spec:
  until: 40m
  nodes:
    - {count: 4, namePrefix: gpu-, allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}
  objects:
    - apiVersion: scheduling.berth.io/v1alpha1
      kind: Queue
      metadata: {name: prod}
      spec: {guaranteed: {nvidia.com/gpu: "16"}}
    - {apiVersion: scheduling.berth.io/v1alpha1, kind: Queue, metadata: {name: research}}
  workloads:
    - {name: sweep, namespace: research, queue: research, every: 10s, count: 16, replicas: 2,
       minMember: 2, duration: 2h, requests: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "1"}}
    - {name: serve, namespace: prod, queue: prod, at: 10m, every: 1m, count: 4, replicas: 4,
       minMember: 4, duration: 1h, requests: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "1"}}
"""
GPU = "nvidia.com/gpu"


def gpus_at(samples: list[dict[str, typing.Any]], t: float) -> int:
    held = "0"
    for sample in samples:
        if sample["t"] > t:
            break
        held = sample["resources"].get(GPU, "0")
    return quantities.parse_milli(held) // 1000


def test_prod_takes_its_guarantee_back_gang_by_gang() -> None:
    report = runner.run(scenarios.loads(SCENARIO))
    serve = [w for w in report["workloads"] if w["workload"] == "serve"]
    assert [w["wait"] for w in serve] == [0.0, 0.0, 0.0, 0.0]
    evicted = [w for w in report["workloads"] if w["workload"] == "sweep" and w["evictions"]]
    assert [w["name"] for w in evicted] == [f"sweep-{i:02d}" for i in range(8, 16)]
    assert all(w["evictions"] == 2 and w["restarts"] == 1 for w in evicted)
    assert report["summary"]["evictions"] == 16
    assert report["summary"]["partialGangs"] == 0
    queues = report["queues"]
    assert gpus_at(queues["prod"]["allocated"], 14 * 60) == 16
    assert gpus_at(queues["research"]["allocated"], 14 * 60) == 16
