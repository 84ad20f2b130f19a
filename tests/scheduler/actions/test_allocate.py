"""The allocate action, as KAI-style scenario tables run on the in-memory cluster.

Each case gives nodes, queues, groups and pods (running and pending), runs one cycle of the
default profile (``Scheduler.run_once(cluster, cluster)``), and checks where every pending pod
went — exactly — and the "why pending" reason of the pods and groups named.

We test these aspects:
- plain pods: spreading, priority then creation order, default placement before batch work;
- node basics through the whole stack: selectors, affinity operators, taints, unschedulable
  nodes, extended resources, init-container sizing, pod count;
- gangs: all or nothing, fitting only across several nodes, elastic gangs above minMember,
  quorum not reached, minResources, rolled-back gangs leaving room for the next one;
- queues: a missing queue, job order by priority across queues;
- bad input: malformed and negative quantities, a resource no node has.
"""

from __future__ import annotations

import dataclasses

import pytest

from berth.scheduler import loop
from berth.scheduler.plugins import registry
from berth.sim import cluster as sim_cluster
from berth.util import clocks
from tests.scheduler import builders as b


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    objects: list[b.Obj]
    placed: dict[str, str | None]  # every pending pod: the node it must land on, or None
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)  # "pod/x" or "group/x"


def run_case(case: Case) -> tuple[dict[str, str | None], dict[str, str]]:
    clock = clocks.VirtualClock(b.EPOCH)
    cluster = sim_cluster.InMemoryCluster(clock=clock)
    pending: list[str] = []
    for obj in case.objects:
        cluster.put(obj)
        if obj["kind"] == "Pod" and "nodeName" not in obj["spec"]:
            pending.append(obj["metadata"]["name"])
    scheduler = loop.Scheduler(
        registry.default_profile(), registry=registry.in_tree_registry(), clock=clock
    )
    result = scheduler.run_once(cluster, cluster)
    assert result.errors == ()
    placed: dict[str, str | None] = {}
    for name in pending:
        stored = cluster.get("Pod", namespace="default", name=name)
        assert stored is not None
        placed[name] = stored["spec"].get("nodeName")
    reasons = {f"pod/{k.split('/', 1)[1]}": v for k, v in result.pod_reasons.items()}
    reasons.update({f"group/{k.split('/', 1)[1]}": v for k, v in result.group_reasons.items()})
    return placed, reasons


def t(seconds: float) -> float:
    """A creation time ``seconds`` after the epoch."""
    return b.EPOCH + seconds


CASES = [
    # Plain pods -------------------------------------------------------------------------------
    Case(
        "plain-pods-spread-over-identical-nodes",
        [b.node("n1"), b.node("n2"), b.pod("p0", created=t(0)), b.pod("p1", created=t(1))],
        {"p0": "n1", "p1": "n2"},
    ),
    Case(
        "plain-pods-avoid-the-busier-node",
        [b.node("n1"), b.node("n2"), b.pod("busy", node="n1", cpu="3"), b.pod("p")],
        {"p": "n2"},
    ),
    Case(
        "plain-pods-higher-priority-first-takes-the-last-room",
        [
            b.node("n1", cpu="2"),
            b.pod("low", cpu="2", priority=1, created=t(0)),
            b.pod("high", cpu="2", priority=10, created=t(5)),
        ],
        {"high": "n1", "low": None},
        {"pod/low": "0/1 nodes fit: 1 Insufficient cpu"},
    ),
    Case(
        "plain-pods-take-their-priority-from-the-priority-class",
        [
            b.priority_class("critical", 1000),
            b.node("n1", cpu="2"),
            b.pod("ordinary", cpu="2", created=t(0)),
            b.pod("important", cpu="2", priority_class="critical", created=t(5)),
        ],
        {"important": "n1", "ordinary": None},
    ),
    Case(
        "plain-pods-of-equal-priority-go-oldest-first",
        [
            b.node("n1", cpu="2"),
            b.pod("newer", cpu="2", created=t(5)),
            b.pod("older", cpu="2", created=t(1)),
        ],
        {"older": "n1", "newer": None},
    ),
    Case(
        "plain-pods-are-placed-before-batch-work",
        [
            b.node("n1", cpu="2"),
            b.pod("queued", cpu="2", queue="default", priority=100, created=t(0)),
            b.pod("plain", cpu="2", created=t(9)),
        ],
        {"plain": "n1", "queued": None},
        {
            # A group of one is no gang: its reason is its pod's.
            "group/pod:queued": "0/1 nodes fit: 1 Insufficient cpu"
        },
    ),
    # Node basics ------------------------------------------------------------------------------
    Case(
        "node-selector-picks-the-labelled-node",
        [
            b.node("n1", labels={"zone": "a"}),
            b.node("n2", labels={"zone": "b"}),
            b.pod("p", node_selector={"zone": "b"}),
        ],
        {"p": "n2"},
    ),
    Case(
        "node-selector-matching-nothing-explains-itself",
        [b.node("n1", labels={"zone": "a"}), b.pod("p", node_selector={"zone": "c"})],
        {"p": None},
        {"pod/p": "0/1 nodes fit: 1 node(s) didn't match Pod's node affinity/selector"},
    ),
    Case(
        "required-affinity-not-in",
        [
            b.node("n1", labels={"zone": "a"}),
            b.node("n2", labels={"zone": "b"}),
            b.pod("p", affinity=b.affinity(required=[[b.expr("zone", "NotIn", "a")]])),
        ],
        {"p": "n2"},
    ),
    Case(
        "required-affinity-gt",
        [
            b.node("n1", labels={"cores": "8"}),
            b.node("n2", labels={"cores": "64"}),
            b.pod("p", affinity=b.affinity(required=[[b.expr("cores", "Gt", "16")]])),
        ],
        {"p": "n2"},
    ),
    Case(
        "required-affinity-terms-are-ored",
        [
            b.node("n1", labels={"zone": "a"}),
            b.node("n2", labels={"disk": "ssd"}),
            b.node("n3"),
            b.pod(
                "p0",
                created=t(0),
                affinity=b.affinity(
                    required=[[b.expr("zone", "In", "x")], [b.expr("disk", "Exists")]]
                ),
            ),
        ],
        {"p0": "n2"},
    ),
    Case(
        "required-affinity-exists-and-does-not-exist",
        [
            b.node("n1", labels={"gpu": "yes", "spot": "yes"}),
            b.node("n2", labels={"gpu": "yes"}),
            b.node("n3"),
            b.pod(
                "p",
                affinity=b.affinity(
                    required=[[b.expr("gpu", "Exists"), b.expr("spot", "DoesNotExist")]]
                ),
            ),
        ],
        {"p": "n2"},
    ),
    Case(
        "required-affinity-lt",
        [
            b.node("n1", labels={"generation": "5"}),
            b.node("n2", labels={"generation": "2"}),
            b.pod("p", affinity=b.affinity(required=[[b.expr("generation", "Lt", "3")]])),
        ],
        {"p": "n2"},
    ),
    Case(
        "required-affinity-match-fields-pins-a-node-by-name",
        [
            b.node("n1"),
            b.node("n2"),
            b.pod(
                "p",
                affinity=b.affinity(required_fields=[b.expr("metadata.name", "In", "n2")]),
            ),
        ],
        {"p": "n2"},
    ),
    Case(
        "preferred-affinity-wins-among-feasible-nodes",
        [
            b.node("n1"),
            b.node("n2", labels={"gpu-type": "a100"}),
            b.pod("p", affinity=b.affinity(preferred=[(100, [b.expr("gpu-type", "In", "a100")])])),
        ],
        {"p": "n2"},
    ),
    Case(
        "untolerated-taint-steers-to-the-clean-node",
        [
            b.node("n1", taints=[b.taint("dedicated", "infer")]),
            b.node("n2"),
            b.pod("p"),
        ],
        {"p": "n2"},
    ),
    Case(
        "tolerated-taint-is-usable",
        [
            b.node("n1", taints=[b.taint("dedicated", "infer")]),
            b.pod("p", tolerations=[b.toleration("dedicated", "infer")]),
        ],
        {"p": "n1"},
    ),
    Case(
        "every-node-tainted-explains-the-taint",
        [
            b.node("n1", taints=[b.taint("dedicated", "infer")]),
            b.node("n2", taints=[b.taint("dedicated", "infer", effect="NoExecute")]),
            b.node("n3"),
            b.pod("big", cpu="8"),
        ],
        {"big": None},
        {
            # Each node counts for the first plugin rejecting it: taints come before resources.
            "pod/big": "0/3 nodes fit: 2 untolerated taint {dedicated: infer}, 1 Insufficient cpu"
        },
    ),
    Case(
        "prefer-no-schedule-is-avoided-not-forbidden",
        [
            b.node("n1", taints=[b.taint("spot", "yes", effect="PreferNoSchedule")]),
            b.node("n2", cpu="1", taints=[]),
            b.pod("fits-clean", cpu="500m", created=t(0)),
            b.pod("needs-room", cpu="2", created=t(1)),
        ],
        {"fits-clean": "n2", "needs-room": "n1"},
    ),
    Case(
        "unschedulable-nodes-are-skipped",
        [b.node("n1", unschedulable=True), b.node("n2"), b.pod("p")],
        {"p": "n2"},
    ),
    Case(
        "extended-resource-goes-where-gpus-are",
        [b.node("cpu-only"), b.node("gpu", gpu=4), b.pod("trainer", gpu=2)],
        {"trainer": "gpu"},
    ),
    Case(
        "a-resource-no-node-has-fits-nowhere",
        [b.node("n1"), b.node("n2"), b.pod("p", gpu=1)],
        {"p": None},
        {"pod/p": "0/2 nodes fit: 2 Insufficient nvidia.com/gpu"},
    ),
    Case(
        "init-container-peak-sizes-the-pod",
        [
            b.node("small", cpu="2"),
            b.node("large", cpu="4"),
            b.pod("bigger-elsewhere", node="large", cpu="500m"),
            b.pod(
                "p",
                containers=[b.container(requests={"cpu": "1"})],
                init_containers=[b.container("setup", requests={"cpu": "3"})],
            ),
        ],
        {"p": "large"},
    ),
    Case(
        "sidecar-init-containers-run-beside-the-app",
        [
            b.node("small", cpu="2"),
            b.node("large", cpu="3"),
            b.pod("bigger-elsewhere", node="large", cpu="100m"),
            b.pod(
                "p",
                containers=[b.container(requests={"cpu": "2"})],
                init_containers=[
                    b.container("proxy", requests={"cpu": "500m"}, restart_policy="Always")
                ],
            ),
        ],
        {"p": "large"},
    ),
    Case(
        "pod-overhead-counts",
        [
            b.node("n1", cpu="2"),
            b.pod("p", cpu="1800m", overhead={"cpu": "250m"}),
        ],
        {"p": None},
        {"pod/p": "0/1 nodes fit: 1 Insufficient cpu"},
    ),
    Case(
        "ephemeral-storage-is-a-resource",
        [
            b.node("n1", storage="10Gi"),
            b.node("n2", storage="100Gi"),
            b.pod("p", requests={"cpu": "100m", "ephemeral-storage": "50Gi"}),
        ],
        {"p": "n2"},
    ),
    Case(
        "pod-count-is-a-resource",
        [b.node("n1", pods=1), b.pod("r", node="n1"), b.pod("p")],
        {"p": None},
        {"pod/p": "0/1 nodes fit: 1 Too many pods"},
    ),
    Case(
        "running-pods-reduce-capacity",
        [
            b.node("n1", cpu="4"),
            b.node("n2", cpu="4"),
            b.pod("r1", node="n1", cpu="3"),
            b.pod("r2", node="n2", cpu="3"),
            b.pod("p0", cpu="1", created=t(0)),
            b.pod("p1", cpu="1", created=t(1)),
            b.pod("p2", cpu="1", created=t(2)),
        ],
        {"p0": "n1", "p1": "n2", "p2": None},
    ),
    # Gangs ------------------------------------------------------------------------------------
    Case(
        "gang-fits-only-across-several-nodes",
        [
            b.node("n1", cpu="4"),
            b.node("n2", cpu="4"),
            b.node("n3", cpu="4"),
            *b.gang("g", 3, cpu="3"),
        ],
        {"g-0": "n1", "g-1": "n2", "g-2": "n3"},
    ),
    Case(
        "gang-that-does-not-fit-takes-nothing",
        [
            b.node("n1", cpu="4"),
            b.node("n2", cpu="4"),
            b.node("n3", cpu="4"),
            b.pod("busy", node="n3", cpu="2"),
            *b.gang("g", 3, cpu="3"),
        ],
        {"g-0": None, "g-1": None, "g-2": None},
        {
            "group/g": "gang needs minMember 3, only 2 could be placed;"
            " 0/3 nodes fit: 3 Insufficient cpu",
            "pod/g-0": "pod group default/g: gang needs minMember 3, only 2 could be placed;"
            " 0/3 nodes fit: 3 Insufficient cpu",
            "pod/g-2": "0/3 nodes fit: 3 Insufficient cpu",
        },
    ),
    Case(
        "gang-larger-than-the-cluster-is-never-tried",
        [b.node("n1", cpu="4"), b.node("n2", cpu="4"), *b.gang("g", 3, cpu="3")],
        {"g-0": None, "g-1": None, "g-2": None},
        {
            "group/g": "can never fit: needs 9 cpu, the cluster has 8",
            "pod/g-0": "pod group default/g: can never fit: needs 9 cpu, the cluster has 8",
            "pod/g-2": "pod group default/g: can never fit: needs 9 cpu, the cluster has 8",
        },
    ),
    Case(
        "gang-of-gpus-across-nodes",
        [b.node("a", gpu=2), b.node("b", gpu=2), b.node("c"), *b.gang("g", 4, gpu=1)],
        # GPUs are packed by default: a fills before b
        {"g-0": "a", "g-1": "a", "g-2": "b", "g-3": "b"},
    ),
    Case(
        "elastic-gang-places-what-fits-above-min-member",
        [b.node("n1", cpu="3"), *b.gang("g", 4, min_member=2, cpu="1")],
        {"g-0": "n1", "g-1": "n1", "g-2": "n1", "g-3": None},
        {"pod/g-3": "0/1 nodes fit: 1 Insufficient cpu"},
    ),
    Case(
        "gang-waits-until-min-member-pods-exist",
        [
            b.node("n1"),
            b.pod_group("g", min_member=4),
            b.pod("g-0", group="g"),
            b.pod("g-1", group="g"),
        ],
        {"g-0": None, "g-1": None},
        {"group/g": "waiting for pods: 2/4 created, minMember 4"},
    ),
    Case(
        "gang-with-running-members-needs-only-the-rest",
        [
            b.node("n1", cpu="2"),
            b.pod_group("g", min_member=2),
            b.pod("g-0", group="g", node="n1", cpu="1"),
            b.pod("g-1", group="g", cpu="1"),
            b.pod("g-2", group="g", cpu="1"),
        ],
        {"g-1": "n1", "g-2": None},
    ),
    Case(
        "gang-min-resources-beyond-the-cluster",
        [
            b.node("n1", cpu="4"),
            b.pod_group("g", min_member=1, min_resources={"cpu": "16"}),
            b.pod("g-0", group="g"),
        ],
        {"g-0": None},
        {
            "group/g": "not enough free resources in the cluster for minResources:"
            " cpu (needs 16, 4 free)"
        },
    ),
    Case(
        "rolled-back-gang-leaves-room-for-the-next",
        [
            b.node("n1", cpu="4"),
            b.node("n2", cpu="4"),
            b.node("n3", cpu="4"),
            *b.gang("big", 4, cpu="3", created=t(0)),
            *b.gang("small", 3, cpu="3", created=t(1)),
        ],
        {
            **{f"big-{i}": None for i in range(4)},
            "small-0": "n1",
            "small-1": "n2",
            "small-2": "n3",
        },
    ),
    Case(
        "higher-priority-gang-goes-first",
        [
            b.priority_class("urgent", 1000),
            b.node("n1", cpu="4"),
            *b.gang("routine", 2, cpu="2", created=t(0)),
            b.pod_group("rush", min_member=2, priority_class="urgent", created=t(5)),
            b.pod("rush-0", group="rush", cpu="2", created=t(5)),
            b.pod("rush-1", group="rush", cpu="2", created=t(5)),
        ],
        {"rush-0": "n1", "rush-1": "n1", "routine-0": None, "routine-1": None},
    ),
    # Queues -----------------------------------------------------------------------------------
    Case(
        "queue-pod-without-group-is-a-group-of-one",
        [b.queue("research"), b.node("n1"), b.pod("solo", queue="research")],
        {"solo": "n1"},
    ),
    Case(
        "group-naming-a-missing-queue-waits-with-a-reason",
        [b.node("n1"), b.pod_group("g", queue="nope"), b.pod("g-0", group="g")],
        {"g-0": None},
        {
            "group/g": "queue nope does not exist",
            "pod/g-0": "pod group default/g: queue nope does not exist",
        },
    ),
    Case(
        "a-queue-name-with-a-typo-gets-a-did-you-mean",
        [
            b.queue("research"),
            b.node("n1"),
            b.pod("typo", queue="reserch"),
            b.pod("close", queue="defualt"),
        ],
        {"typo": None, "close": None},
        {
            "group/pod:typo": "queue reserch does not exist (did you mean research?)",
            "group/pod:close": "queue defualt does not exist (did you mean default?)",
            "pod/typo": "queue reserch does not exist (did you mean research?)",
        },
    ),
    Case(
        "jobs-of-several-queues-all-placed",
        [
            b.queue("a"),
            b.queue("b"),
            b.node("n1", cpu="4"),
            *b.gang("ga", 2, queue="a", cpu="1"),
            *b.gang("gb", 2, queue="b", cpu="1"),
        ],
        {"ga-0": "n1", "ga-1": "n1", "gb-0": "n1", "gb-1": "n1"},
    ),
    # Bad input --------------------------------------------------------------------------------
    Case(
        "negative-quantity-is-reported-and-others-go-on",
        [b.node("n1"), b.pod("bad", cpu="-1"), b.pod("good")],
        {"bad": None, "good": "n1"},
        {"pod/bad": "invalid resource request: containers[0] (main) cpu: negative quantity '-1'"},
    ),
    Case(
        "malformed-quantity-is-reported",
        [b.node("n1"), b.pod("bad", memory="lots")],
        {"bad": None},
        {
            "pod/bad": "invalid resource request: containers[0] (main) memory: 'lots' is not a"
            " quantity: write a number with an optional suffix, e.g. 500m, 4, 8Gi, 1e3"
        },
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_allocate_scenario(case: Case) -> None:
    placed, reasons = run_case(case)
    assert placed == case.placed
    for key, reason in case.reasons.items():
        assert reasons.get(key) == reason, key
    for name, node in placed.items():
        if node is None:
            assert f"pod/{name}" in reasons, f"{name} is pending without a reason"
