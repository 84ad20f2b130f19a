"""Scenario tables for VolumeBinding, VolumeRestrictions and NodeVolumeLimits, in the in-memory
cluster (which plays kube-controller-manager's PV binder and a provisioner when a claim gets its
selected node).

Each case runs one default-profile cycle and checks every binding and the exact reasons. The
cases follow kube-scheduler's documented behaviour:

- ``WaitForFirstConsumer``: a static local volume decides the node; a provisioner's
  ``allowedTopologies`` do; no volume fits anywhere; a claim already annotated with a selected
  node keeps the pod there; gang members sharing an unbound claim land on one node; pods
  already using an unbound claim narrow its node but never stand in for its volume;
- a bound claim's PersistentVolume node affinity, also against the pod's own node selector;
- pods alike but for their claims (replicas of one job, jobs of one shape) are each judged by
  their own claims;
- an unbound ``Immediate`` claim, a missing claim, a missing StorageClass, an ephemeral volume
  whose claim is not created yet: the pod waits naming the field, the others are placed;
- ``ReadWriteOncePod``: a second user waits, two gang members never share one;
- CSI attach limits: a node at its limit takes no new volume, a volume already attached there
  does not count twice; a node over its limit still takes a pod attaching no new volume;
- each waiting pod's reason carries its obstacle's code (``VolumeNodeConflict``,
  ``VolumeClaimProblem``, ``VolumeInUse``, ``VolumeLimitExceeded``; ``Unschedulable`` when
  filters of different kinds share the nodes).
"""

from __future__ import annotations

import dataclasses
import typing

import pytest

from berth.scheduler import loop
from berth.scheduler.snapshot import volumes
from berth.sim import cluster
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler.constraints import specs as s
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]
EBS = "ebs.csi.aws.com"
RWOP = ("ReadWriteOncePod",)


@dataclasses.dataclass(frozen=True)
class Scenario:
    id: str
    objects: list[Obj]
    bound: dict[str, str]  # every binding of the cycle: pod name -> node
    pods: dict[str, str] = dataclasses.field(default_factory=dict)  # pod -> exact reason
    groups: dict[str, str] = dataclasses.field(default_factory=dict)  # group -> exact reason
    codes: dict[str, str] = dataclasses.field(default_factory=dict)  # pod -> reason code


TWO = [b.node("n1"), b.node("n2")]
LOCAL = s.storage_class("local")

# n1 is full; claim c0's volume is on n1, c1's on n2.
CLAIMS_ON_A_FULL_AND_A_FREE_NODE = [
    b.node("n1", cpu="1"),
    b.node("n2", cpu="1"),
    b.pod("busy", node="n1", cpu="1"),
    LOCAL,
    s.volume("pv0", nodes=["n1"], claim="c0"),
    s.claim("c0", volume="pv0"),
    s.volume("pv1", nodes=["n2"], claim="c1"),
    s.claim("c1", volume="pv1"),
]

# Claim "shared" is unbound, its only volume on n1, yet pods already use it on n1 and n2.
USERS_OF_AN_UNBOUND_CLAIM = [
    *TWO,
    LOCAL,
    s.volume("pv", nodes=["n1"]),
    s.claim("shared"),
    b.pod("old-1", node="n1", spec=s.claims("shared")),
    b.pod("old-2", node="n2", spec=s.claims("shared")),
]
PORT = s.ports((80, "TCP", ""))

SCENARIOS = [
    # VolumeBinding: WaitForFirstConsumer -----------------------------------------------------
    Scenario(
        "wffc-static-local-volume-picks-the-node",
        [
            *TWO,
            LOCAL,
            s.volume("pv", nodes=["n2"]),
            s.claim("data"),
            b.pod("p", spec=s.claims("data")),
        ],
        {"p": "n2"},
    ),
    Scenario(
        "wffc-no-volume-fits-anywhere",
        [
            *TWO,
            LOCAL,
            s.volume("small", nodes=["n1"], size="1Gi"),
            s.claim("data", size="5Gi"),
            b.pod("p", spec=s.claims("data")),
            b.pod("plain"),
        ],
        {"plain": "n1"},
        pods={"p": "0/2 nodes fit: 2 node(s) didn't find available persistent volumes to bind"},
        codes={"p": "VolumeNodeConflict"},
    ),
    Scenario(
        "wffc-provisioner-allowed-topologies",
        [
            b.node("a1", labels={s.ZONE: "a"}),
            b.node("b1", labels={s.ZONE: "b"}),
            s.storage_class("zonal", provisioner=EBS, zones=["b"]),
            s.claim("data", storage_class="zonal"),
            b.pod("p", spec=s.claims("data")),
        ],
        {"p": "b1"},
    ),
    Scenario(
        "wffc-claim-already-selected-stays-there",
        [
            *TWO,
            s.storage_class("fast", provisioner=EBS),
            s.claim("data", storage_class="fast", annotations={volumes.SELECTED_NODE: "n2"}),
            b.pod("p", spec=s.claims("data")),
        ],
        {"p": "n2"},
    ),
    Scenario(
        # kube-scheduler's assumed volumes: the first pod's claim takes the only volume, the
        # second claim finds none left in the same cycle (never the same volume twice).
        "wffc-two-claims-one-volume-one-pod-placed",
        [
            *TWO,
            LOCAL,
            s.volume("pv", nodes=["n1"]),
            s.claim("a"),
            s.claim("b"),
            b.pod("p-a", spec=s.claims("a"), created=b.EPOCH + 1),
            b.pod("p-b", spec=s.claims("b"), created=b.EPOCH + 2),
        ],
        {"p-a": "n1"},
        pods={"p-b": "0/2 nodes fit: 2 node(s) didn't find available persistent volumes to bind"},
        codes={"p-b": "VolumeNodeConflict"},
    ),
    Scenario(
        # The smallest fitting volume goes first; the next claim takes the next one there.
        "wffc-claims-of-different-pods-share-no-volume-on-one-node",
        [
            b.node("n1"),
            LOCAL,
            s.volume("small", nodes=["n1"], size="1Gi"),
            s.volume("big", nodes=["n1"], size="10Gi"),
            s.claim("a", size="1Gi"),
            s.claim("b", size="1Gi"),
            s.claim("c", size="1Gi"),
            b.pod("p-a", spec=s.claims("a"), created=b.EPOCH + 1),
            b.pod("p-b", spec=s.claims("b"), created=b.EPOCH + 2),
            b.pod("p-c", spec=s.claims("c"), created=b.EPOCH + 3),
        ],
        {"p-a": "n1", "p-b": "n1"},
        pods={"p-c": "0/1 nodes fit: 1 node(s) didn't find available persistent volumes to bind"},
    ),
    Scenario(
        # A gang of four, a claim each, one volume per node: each member on its own node.
        "wffc-gang-members-each-get-their-own-volume",
        [
            *(b.node(f"n{i}") for i in range(4)),
            LOCAL,
            *(s.volume(f"pv{i}", nodes=[f"n{i}"]) for i in range(4)),
            *(s.claim(f"data-{i}") for i in range(4)),
            b.pod_group("g", min_member=4),
            *(b.pod(f"g-{i}", group="g", spec=s.claims(f"data-{i}")) for i in range(4)),
        ],
        {"g-0": "n0", "g-1": "n1", "g-2": "n2", "g-3": "n3"},
    ),
    Scenario(
        # Three members, two volumes: no member binds (the third finds no volume left, and the
        # gang is all or nothing), and the volumes the first two took are given back.
        "wffc-gang-short-of-volumes-binds-none",
        [
            *TWO,
            LOCAL,
            s.volume("pv0", nodes=["n1"]),
            s.volume("pv1", nodes=["n2"]),
            *(s.claim(f"data-{i}") for i in range(3)),
            s.claim("later"),
            b.pod_group("g", min_member=3),
            *(b.pod(f"g-{i}", group="g", spec=s.claims(f"data-{i}")) for i in range(3)),
            b.pod("after", spec=s.claims("later"), created=b.EPOCH + 60),
        ],
        {"after": "n1"},
    ),
    Scenario(
        "two-claims-need-one-node-holding-both",
        [
            b.node("n1"),
            b.node("n2"),
            b.node("n3"),
            LOCAL,
            s.volume("pv-a", nodes=["n1", "n2"]),
            s.volume("pv-b", nodes=["n2", "n3"]),
            s.claim("a"),
            s.claim("b"),
            b.pod("p", spec=s.claims("a", "b")),
        ],
        {"p": "n2"},
    ),
    Scenario(
        "gang-members-sharing-an-unbound-claim-land-together",
        [
            *TWO,
            LOCAL,
            s.volume("pv-a", nodes=["n1"]),
            s.volume("pv-b", nodes=["n2"]),
            s.claim("shared"),
            *b.gang("g", 2, spec=s.claims("shared")),
        ],
        {"g-0": "n1", "g-1": "n1"},
    ),
    # Pods already use the unbound claim on n1 and n2, but its only volume admits n1: the
    # users do not vouch for a volume, so a new user goes where one is found, or waits (found
    # by Hypothesis: the gang went to n1 and n2 and the claim bound to n1's volume).
    Scenario(
        "claim-users-on-a-node-without-its-volume-do-not-admit-it",
        [
            *USERS_OF_AN_UNBOUND_CLAIM,
            b.pod("p", spec={**s.claims("shared"), **PORT}),
            b.pod("q", spec={**s.claims("shared"), **PORT}),
        ],
        {"p": "n1"},
        pods={
            "q": "0/2 nodes fit: 1 node(s) didn't find available persistent volumes to bind,"
            " 1 node(s) didn't have free ports for the requested pod ports"
        },
    ),
    Scenario(
        "gang-sharing-a-claim-whose-volume-admits-one-node-of-its-users-waits",
        [*USERS_OF_AN_UNBOUND_CLAIM, *b.gang("g", 2, spec={**s.claims("shared"), **PORT})],
        {},
        groups={
            "g": "gang needs minMember 2, only 1 could be placed; 0/2 nodes fit: 1 node(s)"
            " didn't find available persistent volumes to bind, 1 node(s) didn't have free"
            " ports for the requested pod ports"
        },
    ),
    # VolumeBinding: bound claims ---------------------------------------------------------------
    Scenario(
        "bound-volume-node-affinity",
        [
            *TWO,
            LOCAL,
            s.volume("pv", nodes=["n2"], claim="data"),
            s.claim("data", volume="pv"),
            b.pod("p", spec=s.claims("data")),
        ],
        {"p": "n2"},
    ),
    Scenario(
        "bound-volume-conflicts-with-node-selector",
        [
            *TWO,
            LOCAL,
            s.volume("pv", nodes=["n2"], claim="data"),
            s.claim("data", volume="pv"),
            b.pod("p", spec=s.claims("data"), node_selector={s.HOSTNAME: "n1"}),
        ],
        {},
        pods={
            "p": "0/2 nodes fit: 1 node(s) didn't match Pod's node affinity/selector,"
            " 1 node(s) had volume node affinity conflict"
        },
        codes={"p": "Unschedulable"},
    ),
    # Pods alike but for their claims are judged each by its own: n1 is full, so the pod
    # whose volume is there waits, and the one whose volume is on n2 still goes.
    Scenario(
        "replicas-of-one-job-with-claims-on-different-nodes",
        [
            *CLAIMS_ON_A_FULL_AND_A_FREE_NODE,
            b.pod_group("job", min_member=1),
            b.pod("job-0", group="job", cpu="1", spec=s.claims("c0")),
            b.pod("job-1", group="job", cpu="1", spec=s.claims("c1")),
        ],
        {"job-1": "n2"},
    ),
    Scenario(
        "jobs-alike-but-for-their-claims",
        [
            *CLAIMS_ON_A_FULL_AND_A_FREE_NODE,
            b.pod("a", queue="default", cpu="1", spec=s.claims("c0"), created=b.EPOCH - 2),
            b.pod("b", queue="default", cpu="1", spec=s.claims("c1"), created=b.EPOCH - 1),
        ],
        {"b": "n2"},
    ),
    # VolumeBinding: the pod waits, naming the field ----------------------------------------
    Scenario(
        "immediate-claim-not-bound-yet",
        [
            *TWO,
            s.storage_class("fast", provisioner=EBS, wait=False),
            s.claim("data", storage_class="fast"),
            b.pod("p", spec=s.claims("data")),
            b.pod("plain"),
        ],
        {"plain": "n1"},
        pods={
            "p": "pod has unbound immediate PersistentVolumeClaims (default/data, StorageClass"
            " fast)"
        },
        codes={"p": "VolumeClaimProblem"},
    ),
    Scenario(
        "missing-claim",
        [*TWO, b.pod("p", spec=s.claims("nope")), b.pod("plain")],
        {"plain": "n1"},
        pods={
            "p": 'persistentvolumeclaim "default/nope" not found'
            " (spec.volumes[0].persistentVolumeClaim.claimName)"
        },
        codes={"p": "VolumeClaimProblem"},
    ),
    Scenario(
        "missing-storage-class",
        [
            *TWO,
            s.claim("data", storage_class="gone"),
            b.pod("p", spec=s.claims("data")),
            b.pod("plain"),
        ],
        {"plain": "n1"},
        pods={
            "p": 'storageclass.storage.k8s.io "gone" not found'
            " (spec.storageClassName of persistentvolumeclaim default/data)"
        },
        codes={"p": "VolumeClaimProblem"},
    ),
    Scenario(
        "ephemeral-claim-not-created-yet",
        [
            *TWO,
            b.pod(
                "p",
                spec={"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]},
            ),
        ],
        {},
        pods={
            "p": "waiting for the ephemeral volume controller to create the persistentvolumeclaim"
            ' "default/p-scratch" (spec.volumes[0].ephemeral)'
        },
        codes={"p": "VolumeClaimProblem"},
    ),
    # VolumeRestrictions ------------------------------------------------------------------------
    Scenario(
        "rwop-claim-in-use-waits",
        [
            *TWO,
            LOCAL,
            s.volume("pv", claim="data"),
            s.claim("data", volume="pv", modes=RWOP),
            b.pod("old", node="n1", spec=s.claims("data")),
            b.pod("p", spec=s.claims("data")),
        ],
        {},
        pods={
            "p": "node has pod using PersistentVolumeClaim with the same name and"
            " ReadWriteOncePod access mode (default/data)"
        },
        codes={"p": "VolumeInUse"},
    ),
    Scenario(
        "rwop-claim-free-is-used",
        [
            *TWO,
            LOCAL,
            s.volume("pv", claim="data"),
            s.claim("data", volume="pv", modes=RWOP),
            b.pod("p", spec=s.claims("data")),
        ],
        {"p": "n1"},
    ),
    Scenario(
        "rwop-gang-members-never-share-it",
        [
            *TWO,
            LOCAL,
            s.volume("pv", claim="data"),
            s.claim("data", volume="pv", modes=RWOP),
            *b.gang("g", 2, spec=s.claims("data")),
        ],
        {},
        groups={
            "g": "gang needs minMember 2, only 1 could be placed; node has pod using"
            " PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
            " (default/data)"
        },
    ),
    # NodeVolumeLimits ---------------------------------------------------------------------------
    Scenario(
        "attach-limit-reached-goes-elsewhere",
        [
            *TWO,
            s.csi_node("n1", ebs_csi_aws_com=1),
            s.csi_node("n2", ebs_csi_aws_com=1),
            LOCAL,
            s.volume("pv1", claim="c1", driver=EBS),
            s.volume("pv2", claim="c2", driver=EBS),
            s.claim("c1", volume="pv1"),
            s.claim("c2", volume="pv2"),
            b.pod("old", node="n1", spec=s.claims("c1")),
            b.pod("p", spec=s.claims("c2")),
        ],
        {"p": "n2"},
    ),
    Scenario(
        "attached-volume-counts-once-new-one-does-not-fit",
        [
            b.node("n1"),
            s.csi_node("n1", ebs_csi_aws_com=1),
            LOCAL,
            s.volume("pv1", claim="c1", driver=EBS),
            s.volume("pv2", claim="c2", driver=EBS),
            s.claim("c1", volume="pv1"),
            s.claim("c2", volume="pv2"),
            b.pod("old", node="n1", spec=s.claims("c1")),
            b.pod("same", spec=s.claims("c1")),
            b.pod("other", spec=s.claims("c2")),
        ],
        {"same": "n1"},
        pods={"other": "0/1 nodes fit: 1 node(s) exceed max volume count"},
        codes={"other": "VolumeLimitExceeded"},
    ),
    Scenario(
        # The limit was lowered under the node's volumes: only a pod attaching a new volume of
        # the driver is refused; one sharing the attached volume, or using none of the
        # driver's, needs no new attachment.
        "node-over-its-limit-takes-pods-adding-no-volume",
        [
            b.node("n1"),
            s.csi_node("n1", ebs_csi_aws_com=0),
            LOCAL,
            s.volume("pv1", claim="c1", driver=EBS),
            s.volume("pv2", claim="c2", driver=EBS),
            s.volume("pv3", nodes=["n1"]),
            s.claim("c1", volume="pv1"),
            s.claim("c2", volume="pv2"),
            s.claim("c3"),
            b.pod("old", node="n1", spec=s.claims("c1")),
            b.pod("same", spec=s.claims("c1")),
            b.pod("local", spec=s.claims("c3")),
            b.pod("other", spec=s.claims("c2", "c1")),
        ],
        {"same": "n1", "local": "n1"},
        pods={"other": "0/1 nodes fit: 1 node(s) exceed max volume count"},
        codes={"other": "VolumeLimitExceeded"},
    ),
]


def _key(name: str) -> str:
    return f"default/{name}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[x.id for x in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    bound, pods, groups = harness.cycle(*scenario.objects)
    assert bound == {_key(k): v for k, v in scenario.bound.items()}
    for name, reason in scenario.pods.items():
        assert pods[_key(name)] == reason
    for name, reason in scenario.groups.items():
        assert groups[_key(name)] == reason
    if scenario.codes:
        codes, _ = harness.reason_codes(*scenario.objects)
        assert {k: codes[_key(k)] for k in scenario.codes} == scenario.codes


def _run(*objects: Obj) -> cluster.InMemoryCluster:
    clock = clocks.VirtualClock(b.EPOCH)
    sim = harness.in_memory(*objects, clock=clock)
    scheduler: loop.Scheduler = harness.scheduler(harness.profile_with(), clock=clock)
    scheduler.run_once(sim, sim)
    return sim


def test_wffc_claim_gets_the_static_volume_reserved_then_the_pod_binds() -> None:
    sim = _run(
        *TWO,
        LOCAL,
        s.volume("pv", nodes=["n2"]),
        s.claim("data"),
        b.pod("p", spec=s.claims("data")),
    )
    claim = sim.get("PersistentVolumeClaim", name="data")
    volume = sim.get("PersistentVolume", name="pv")
    assert claim is not None and volume is not None
    assert volume["spec"]["claimRef"]["name"] == "data"  # reserved, as kube-scheduler pre-binds
    assert claim["spec"]["volumeName"] == "pv"
    assert volumes.SELECTED_NODE not in claim["metadata"]["annotations"]  # nothing to provision
    pod = sim.get("Pod", name="p")
    assert pod is not None and pod["spec"]["nodeName"] == "n2"


def test_wffc_claim_to_provision_is_annotated_with_the_node() -> None:
    sim = _run(
        *TWO,
        s.storage_class("fast", provisioner=EBS),
        s.claim("data", storage_class="fast"),
        b.pod("p", spec=s.claims("data"), node_selector={s.HOSTNAME: "n2"}),
    )
    claim = sim.get("PersistentVolumeClaim", name="data")
    assert claim is not None
    assert claim["metadata"]["annotations"][volumes.SELECTED_NODE] == "n2"
    assert claim["status"]["phase"] == "Bound"  # the in-memory provisioner's part
    pod = sim.get("Pod", name="p")
    assert pod is not None and pod["spec"]["nodeName"] == "n2"


def test_pod_is_not_bound_while_its_claim_cannot_bind() -> None:
    # The only volume vanished after the cycle chose the node, and the class has no
    # provisioner: nothing binds the claim, so the binding waits (PreBind), the pod pending.
    clock = clocks.VirtualClock(b.EPOCH)
    sim = harness.in_memory(
        *TWO,
        LOCAL,
        s.volume("pv", nodes=["n2"]),
        s.claim("data"),
        b.pod("p", spec=s.claims("data")),
        clock=clock,
    )
    scheduler = harness.scheduler(harness.profile_with(), clock=clock)
    result = scheduler.run_session(sim.snapshot())
    sim.delete("PersistentVolume", namespace=None, name="pv")
    sim.apply(result)
    assert result.bindings() == {"default/p": "n2"}
    pod = sim.get("Pod", name="p")
    assert pod is not None and not pod["spec"].get("nodeName")
    claim = sim.get("PersistentVolumeClaim", name="data")
    assert claim is not None and not claim["spec"].get("volumeName")
