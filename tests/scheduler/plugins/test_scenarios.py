"""Scenario table (KAI style): nodes and pods in, placements and "why pending" out.

Each case runs one default-profile cycle on the simulator's in-memory cluster through the real
loop, and checks every binding and the exact reason of the pods and groups named. Together
they exercise every in-tree plugin end to end:

- taints (NoSchedule, NoExecute, PreferNoSchedule; Equal, Exists, effects);
- node affinity operators (In, NotIn, Exists, DoesNotExist, Gt, Lt, matchFields), preferred
  affinity, node selectors;
- resources: extended (GPUs, a resource no node has), init containers and sidecars, overhead,
  pod count, cordoned nodes; scoring choices (spread, balance);
- priorities, plain pods next to queued ones, gangs across nodes and all-or-nothing;
- bad input: a negative quantity, a missing PodGroup, a PodGroup naming a missing queue.
"""

from __future__ import annotations

import dataclasses
import typing

import pytest

from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]
T, Tol, E = b.taint, b.toleration, b.expr
C = b.container


@dataclasses.dataclass(frozen=True)
class Scenario:
    id: str
    objects: list[Obj]
    bound: dict[str, str]  # every binding of the cycle: pod name -> node
    pods: dict[str, str] = dataclasses.field(default_factory=dict)  # pod name -> exact reason
    groups: dict[str, str] = dataclasses.field(default_factory=dict)  # group -> exact reason


FULL = b.node("full", cpu="1")
FILLER = b.pod("filler", node="full", cpu="1", memory=None)
ZONES = [
    b.node("za", labels={"zone": "a", "cores": "8"}),
    b.node("zb", labels={"zone": "b", "cores": "64", "ssd": "true"}),
    b.node("zc", labels={"cores": "16"}),
]
GPUS = [b.node(f"g{i}", cpu="8", memory="64Gi", gpu=2) for i in range(3)]

SCENARIOS = [
    # Taints ---------------------------------------------------------------------------------
    Scenario(
        "untolerated-noschedule",
        [b.node("tainted", taints=[T("dedicated", "infer")]), FULL, FILLER, b.pod("p")],
        {},
        pods={"p": "0/2 nodes fit: 1 Insufficient cpu, 1 untolerated taint {dedicated: infer}"},
    ),
    Scenario(
        "tolerated-equal",
        [
            b.node("tainted", taints=[T("dedicated", "infer")]),
            FULL,
            FILLER,
            b.pod("p", tolerations=[Tol("dedicated", "infer")]),
        ],
        {"p": "tainted"},
    ),
    Scenario(
        "tolerated-exists",
        [
            b.node("tainted", taints=[T("dedicated", "infer")]),
            FULL,
            FILLER,
            b.pod("p", tolerations=[Tol("dedicated")]),
        ],
        {"p": "tainted"},
    ),
    Scenario(
        "noexecute-needs-its-effect",
        [
            b.node("draining", taints=[T("maintenance", "", "NoExecute")]),
            FULL,
            FILLER,
            b.pod("p", tolerations=[Tol("maintenance", effect="NoSchedule")]),
        ],
        {},
        pods={"p": "0/2 nodes fit: 1 Insufficient cpu, 1 untolerated taint {maintenance: }"},
    ),
    Scenario(
        "prefer-no-schedule-avoided",
        [
            b.node("a-spot", taints=[T("spot", "true", "PreferNoSchedule")]),
            b.node("b-clean"),
            b.pod("p"),
        ],
        {"p": "b-clean"},
    ),
    Scenario(
        "prefer-no-schedule-used-when-alone",
        [
            b.node("a-spot", taints=[T("spot", "true", "PreferNoSchedule")]),
            FULL,
            FILLER,
            b.pod("p"),
        ],
        {"p": "a-spot"},
    ),
    # Node affinity ----------------------------------------------------------------------------
    Scenario(
        "selector",
        [*ZONES, b.pod("p", node_selector={"zone": "b"})],
        {"p": "zb"},
    ),
    Scenario(
        "selector-matches-nothing",
        [*ZONES, b.pod("p", node_selector={"zone": "mars"})],
        {},
        pods={"p": "0/3 nodes fit: 3 node(s) didn't match Pod's node affinity/selector"},
    ),
    Scenario(
        "affinity-in",
        [*ZONES, b.pod("p", affinity=b.affinity(required=[[E("zone", "In", "b", "c")]]))],
        {"p": "zb"},
    ),
    Scenario(
        "affinity-notin-and-doesnotexist",
        [
            *ZONES,
            b.pod(
                "p",
                affinity=b.affinity(required=[[E("zone", "NotIn", "a"), E("ssd", "DoesNotExist")]]),
            ),
        ],
        {"p": "zc"},
    ),
    Scenario(
        "affinity-exists",
        [*ZONES, b.pod("p", affinity=b.affinity(required=[[E("ssd", "Exists")]]))],
        {"p": "zb"},
    ),
    Scenario(
        "affinity-gt",
        [*ZONES, b.pod("p", affinity=b.affinity(required=[[E("cores", "Gt", "10")]]))],
        {"p": "zb"},  # zb and zc qualify; both empty and equal, so the lower row wins
    ),
    Scenario(
        "affinity-lt",
        [*ZONES, b.pod("p", affinity=b.affinity(required=[[E("cores", "Lt", "10")]]))],
        {"p": "za"},
    ),
    Scenario(
        "affinity-match-fields",
        [*ZONES, b.pod("p", affinity=b.affinity(required_fields=[E("metadata.name", "In", "zc")]))],
        {"p": "zc"},
    ),
    Scenario(
        "preferred-affinity-wins-the-tie",
        [
            *ZONES,
            b.pod(
                "p",
                affinity=b.affinity(
                    preferred=[(50, [E("cores", "Gt", "10")]), (10, [E("ssd", "Exists")])]
                ),
            ),
        ],
        {"p": "zb"},
    ),
    # Resources --------------------------------------------------------------------------------
    Scenario(
        "gpu-goes-to-the-gpu-node",
        [b.node("a-cpu", cpu="64"), b.node("b-gpu", gpu=2), b.pod("p", gpu=2)],
        {"p": "b-gpu"},
    ),
    Scenario(
        "gpu-short-everywhere",
        [b.node("a-cpu", cpu="64"), b.node("b-gpu", gpu=2), b.pod("p", gpu=4)],
        {},
        pods={"p": "0/2 nodes fit: 2 Insufficient nvidia.com/gpu"},
    ),
    Scenario(
        "resource-no-node-has",
        [b.node("a"), b.node("b"), b.pod("p", requests={"example.com/fpga": "1"})],
        {},
        pods={"p": "0/2 nodes fit: 2 Insufficient example.com/fpga"},
    ),
    Scenario(
        "init-container-sizes-the-pod",
        [
            b.node("a-busy", cpu="8"),
            b.pod("busy", node="a-busy", cpu="5", memory=None),
            b.node("b-idle", cpu="2500m"),
            b.pod(
                "p",
                containers=[C(requests={"cpu": "100m"})],
                init_containers=[C("warm", requests={"cpu": "2800m"})],
            ),
        ],
        {"p": "a-busy"},
    ),
    Scenario(
        "sidecar-adds-to-the-app",
        [
            b.node("a-small", cpu="1500m"),
            b.node("b-fits", cpu="2"),
            b.pod(
                "p",
                containers=[C(requests={"cpu": "1"})],
                init_containers=[C("proxy", requests={"cpu": "1"}, restart_policy="Always")],
            ),
        ],
        {"p": "b-fits"},
    ),
    Scenario(
        "overhead-counts",
        [
            b.node("a-small", cpu="1"),
            b.node("b-fits", cpu="2"),
            b.pod("p", containers=[C(requests={"cpu": "900m"})], overhead={"cpu": "200m"}),
        ],
        {"p": "b-fits"},
    ),
    Scenario(
        "pod-count",
        [
            b.node("a-tiny", pods=1),
            b.pod("resident", node="a-tiny", cpu=None, memory=None),
            b.node("b-roomy", cpu="1"),
            b.pod("filler-b", node="b-roomy", cpu="1", memory=None),
            b.pod("p"),
        ],
        {},
        pods={"p": "0/2 nodes fit: 1 Insufficient cpu, 1 Too many pods"},
    ),
    Scenario(
        "cordoned-node-skipped",
        [b.node("a-cordoned", unschedulable=True), b.node("b-open"), b.pod("p")],
        {"p": "b-open"},
    ),
    Scenario(
        "every-filter-has-its-say",
        [
            b.node("a-cordoned", unschedulable=True, labels={"zone": "a"}),
            b.node("b-elsewhere", labels={"zone": "b"}),
            b.node("c-tainted", labels={"zone": "a"}, taints=[T("k", "v")]),
            b.node("d-full", cpu="1", labels={"zone": "a"}),
            b.pod("filler-d", node="d-full", cpu="1", memory=None),
            b.pod("p", node_selector={"zone": "a"}),
        ],
        {},
        pods={
            "p": "0/4 nodes fit: 1 Insufficient cpu, "
            "1 node(s) didn't match Pod's node affinity/selector, "
            "1 node(s) were unschedulable, 1 untolerated taint {k: v}"
        },
    ),
    Scenario(
        "spread-to-the-emptiest",
        [
            b.node("a-half", cpu="4"),
            b.pod("half", node="a-half", cpu="2", memory="16Gi"),
            b.node("b-empty", cpu="4"),
            b.pod("p"),
        ],
        {"p": "b-empty"},
    ),
    Scenario(
        "balance-resources",
        # Both nodes leave the same free share on average after the pod; b stays even.
        [
            b.node("a-lopsided", cpu="4", memory="32Gi"),
            b.pod("cpu-hog", node="a-lopsided", cpu="3", memory=None),
            b.node("b-even", cpu="4", memory="32Gi"),
            b.pod("even", node="b-even", cpu="1500m", memory="12Gi"),
            b.pod("p", cpu="100m", memory=None),
        ],
        {"p": "b-even"},
    ),
    # Priorities and plain pods ----------------------------------------------------------------
    Scenario(
        "priority-takes-the-last-room",
        [
            b.node("only", cpu="1"),
            b.pod("low", cpu="1", memory=None, priority=1),
            b.pod("high", cpu="1", memory=None, priority=1000),
        ],
        {"high": "only"},
        pods={"low": "0/1 nodes fit: 1 Insufficient cpu"},
    ),
    Scenario(
        "plain-pods-go-before-queued-ones",
        [
            b.node("only", cpu="1"),
            b.pod(
                "queued",
                cpu="1",
                memory=None,
                queue="default",
                priority=1000,
                created=b.EPOCH - 100,
            ),
            b.pod("plain", cpu="1", memory=None),
        ],
        {"plain": "only"},
        pods={"queued": "0/1 nodes fit: 1 Insufficient cpu"},
    ),
    # Gangs ------------------------------------------------------------------------------------
    Scenario(
        "gang-across-nodes",
        [*GPUS, *b.gang("train", 6, gpu=1)],
        {f"train-{i}": f"g{i // 2}" for i in range(6)},  # GPUs packed: each node fills in turn
    ),
    Scenario(
        "gang-all-or-nothing",
        [*GPUS, *b.gang("train", 7, gpu=1)],
        {},
        # Seven GPUs asked of six: never tried (gang-next-to-plain-usage tries and rolls back).
        groups={"train": "can never fit: needs 7 nvidia.com/gpu, the cluster has 6"},
    ),
    Scenario(
        "gang-next-to-plain-usage",
        [*GPUS, b.pod("plain", gpu=2), *b.gang("train", 5, gpu=1)],
        {"plain": "g0"},
        groups={
            "train": "gang needs minMember 5, only 4 could be placed; "
            "0/3 nodes fit: 3 Insufficient nvidia.com/gpu"
        },
    ),
    # Bad input --------------------------------------------------------------------------------
    Scenario(
        "negative-quantity",
        [b.node("n"), b.pod("bad", cpu="-1"), b.pod("good")],
        {"good": "n"},
        pods={"bad": "invalid resource request: containers[0] (main) cpu: negative quantity '-1'"},
    ),
    Scenario(
        "missing-pod-group",
        [b.node("n"), b.pod("orphan", group="ghost")],
        {},
        pods={"orphan": "waiting for PodGroup default/ghost to exist"},
    ),
    Scenario(
        "missing-queue",
        [b.node("n"), b.pod_group("lost", queue="nowhere"), b.pod("lost-0", group="lost")],
        {},
        groups={"lost": "queue nowhere does not exist"},
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    bound, pods, groups = harness.cycle(*scenario.objects)
    assert bound == {f"default/{k}": v for k, v in scenario.bound.items()}
    for name, reason in scenario.pods.items():
        assert pods[f"default/{name}"] == reason
    for name, reason in scenario.groups.items():
        assert groups[f"default/{name}"] == reason
