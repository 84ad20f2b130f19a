"""One PersistentVolume, one claim: Berth beside the real kube-scheduler, on the real control plane.

kube-controller-manager's PV binder runs here, no provisioner: local volumes are created ahead,
one or more per node, and claims of ``WaitForFirstConsumer`` or ``Immediate`` classes, of mixed
sizes and access modes (``ReadWriteOnce``, ``ReadWriteOncePod``), are used by pods that arrive
together or one a second. Every case is created twice, on two identical sets of four nodes:
once for kube-scheduler (its own class, volumes and claims) and once for Berth, and both must
end where the shapes say — the number of running pods is decided by the shapes, whatever the
order (every claim fits every volume of its class; where claims are short of volumes each has
one user) — with, for both:

- no volume bound or reserved for two claims, no claim ``Lost`` (kube-controller-manager's
  verdict on a volume handed to two claims), and a running pod's claims all bound;
- the pods that cannot run waiting, their ``PodScheduled`` condition saying so.

We test these aspects (the issue's "must show" 1):

- one volume, two claims, two pods applied together: exactly one pod runs;
- six claims on four volumes, a claim and its pod arriving one a second: four run, none shares;
- a gang of four pods (a PodGroup for Berth), a claim each, four volumes one per node: all
  four run, each on its own volume (its own node);
- twenty random cases (volumes, claims, users, classes, arrival order and timing, seeded; the
  seed is in every failure message), all at once: never a shared volume, and Berth agrees with
  kube-scheduler on every case.
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
import typing
import uuid

import pytest

from berth.api import keys
from berth.emulator import kubelets
from berth.realcluster import nodes, processes
from tests.realcluster import cluster

pytestmark = pytest.mark.realcluster

Obj = dict[str, typing.Any]
SETS = ("kube", "berth")
NODES = 4
HOST = "kubernetes.io/hostname"
RWO, RWOP, ROX = "ReadWriteOnce", "ReadWriteOncePod", "ReadOnlyMany"
# A volume's access modes for a claim's: ReadWriteOncePod goes with no other mode.
VOLUME_MODES = {RWO: [(RWO,), (RWO, ROX)], RWOP: [(RWOP,)]}
TEST_LABEL = "berth-test/volume-sharing"
SETTLE = 240.0


@dataclasses.dataclass(frozen=True)
class Volume:
    node: int
    size: str
    modes: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Claim:
    size: str
    mode: str
    users: int = 1


@dataclasses.dataclass(frozen=True)
class Case:
    """A storage shape, its arrivals and how many pods must end up running."""

    name: str
    wait: bool  # WaitForFirstConsumer (else Immediate)
    volumes: tuple[Volume, ...]
    claims: tuple[Claim, ...]
    arrivals: tuple[tuple[str, int], ...]  # ("claim" | "pod:<user>" , claim index), in order
    steps: tuple[int, ...]  # the second each arrival comes at
    running: int
    gang: bool = False  # the pods form one gang (a PodGroup for Berth)


def expected_running(*, wait: bool, volumes: int, claims: tuple[Claim, ...]) -> int:
    """Pods that run whatever the order: every claim fits every volume of its case."""
    if volumes >= len(claims):
        return sum(c.users if c.mode == RWO else 1 for c in claims)
    assert all(c.users == 1 for c in claims), "short of volumes: one user per claim"
    return volumes


def random_case(rng: random.Random, name: str) -> Case:
    wait = rng.random() < 0.7
    mode = rng.choice([RWO, RWOP])
    count = rng.randint(1, 4)
    made_volumes = tuple(
        Volume(
            node=rng.randrange(NODES),
            size=rng.choice(["1Gi", "2Gi", "5Gi"]),
            modes=rng.choice(VOLUME_MODES[mode]),
        )
        for _ in range(count)
    )
    claim_count = rng.randint(1, 6)
    shared = wait and count >= claim_count  # users vary only where every claim gets a volume
    claims = tuple(
        Claim(rng.choice(["500Mi", "1Gi"]), mode, rng.randint(1, 2) if shared else 1)
        for _ in range(claim_count)
    )
    arrivals = [("claim", i) for i in range(claim_count)]
    arrivals += [(f"pod:{u}", i) for i, c in enumerate(claims) for u in range(c.users)]
    rng.shuffle(arrivals)
    steps = tuple(sorted(rng.randint(0, 3) for _ in arrivals))
    return Case(
        name,
        wait,
        made_volumes,
        claims,
        tuple(arrivals),
        steps,
        expected_running(wait=wait, volumes=count, claims=claims),
    )


# ----- manifests ----------------------------------------------------------------------------


def _names(case: Case, label: str, run: str) -> tuple[str, str]:
    """The case's StorageClass for one node set, and its namespace."""
    return f"{run}-{case.name}-{label}", f"{run}-{case.name}-{label}"


def _storage(case: Case, label: str, run: str) -> list[Obj]:
    cls, _ = _names(case, label, run)
    out: list[Obj] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": cls, "labels": {TEST_LABEL: run}},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer" if case.wait else "Immediate",
        }
    ]
    for i, volume in enumerate(case.volumes):
        node = f"vol-{label}-{volume.node}"
        out.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"{cls}-pv{i}", "labels": {TEST_LABEL: run}},
                "spec": {
                    "storageClassName": cls,
                    "capacity": {"storage": volume.size},
                    "accessModes": list(volume.modes),
                    "local": {"path": f"/mnt/{cls}-pv{i}"},
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": HOST, "operator": "In", "values": [node]}
                                    ]
                                }
                            ]
                        }
                    },
                },
            }
        )
    return out


def _arrival(case: Case, label: str, run: str, what: str, index: int) -> list[Obj]:
    cls, namespace = _names(case, label, run)
    claim = case.claims[index]
    meta: Obj = {"namespace": namespace, "labels": {TEST_LABEL: run}}
    if what == "claim":
        return [
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {**meta, "name": f"c{index}"},
                "spec": {
                    "storageClassName": cls,
                    "accessModes": [claim.mode],
                    "resources": {"requests": {"storage": claim.size}},
                },
            }
        ]
    user = what.partition(":")[2]
    labels = dict(meta["labels"])
    if case.gang and label == "berth":
        labels[keys.POD_GROUP_LABEL] = "gang"
    spec: Obj = {
        "restartPolicy": "Never",
        "nodeSelector": {"vol-set": label},
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            }
        ],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"c{index}"}}],
    }
    if label == "berth":
        spec["schedulerName"] = keys.DEFAULT_SCHEDULER_NAME
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**meta, "name": f"p{index}-{user}", "labels": labels},
            "spec": spec,
        }
    ]


# ----- verdicts -----------------------------------------------------------------------------


@dataclasses.dataclass
class Verdict:
    running: int
    undecided: list[str]  # pods neither running nor said to be unschedulable
    broken: list[str]  # what must never be: shared volumes, Lost claims, unbound running claims

    def settled(self, want: int) -> bool:
        return (
            self.broken != []
            or self.running > want
            or (self.running == want and not self.undecided)
        )


def _verdict(pods: list[Obj], claims: list[Obj], volumes: list[Obj]) -> Verdict:
    broken: list[str] = []
    owner: dict[str, str] = {}
    by_name = {c["metadata"]["name"]: c for c in claims}
    for claim in claims:
        name = claim["metadata"]["name"]
        if (claim.get("status") or {}).get("phase") == "Lost":
            broken.append(f"claim {name} is Lost")
        volume = (claim.get("spec") or {}).get("volumeName")
        if volume:
            if volume in owner:
                broken.append(f"volume {volume} bound to claims {owner[volume]} and {name}")
            owner[volume] = name
    for volume in volumes:
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        held = by_name.get(str(ref.get("name")))
        bound_to = ((held or {}).get("spec") or {}).get("volumeName")
        if held is not None and bound_to and bound_to != volume["metadata"]["name"]:
            broken.append(
                f"volume {volume['metadata']['name']} reserved for claim {ref['name']},"
                f" which is bound to {bound_to}"
            )
    running, undecided = 0, []
    for pod in pods:
        name = pod["metadata"]["name"]
        if (pod.get("status") or {}).get("phase") == "Running":
            running += 1
            for use in pod["spec"].get("volumes") or ():
                if "persistentVolumeClaim" not in use:
                    continue  # the ServiceAccount token's projected volume
                claim = by_name.get(use["persistentVolumeClaim"]["claimName"]) or {}
                if (claim.get("status") or {}).get("phase") != "Bound":
                    broken.append(f"pod {name} runs with claim {claim} not bound")
            continue
        conditions = (pod.get("status") or {}).get("conditions") or ()
        if not any(
            c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions
        ):
            undecided.append(name)
    return Verdict(running, undecided, broken)


def _observe(real: cluster.RealCluster, run: str) -> dict[str, Verdict]:
    """Per namespace (case and node set), what it came to so far."""
    found = real.json("get", "pods,pvc", "-A", "-l", f"{TEST_LABEL}={run}")["items"]
    volumes = real.json("get", "pv", "-l", f"{TEST_LABEL}={run}")["items"]
    spaces = sorted({o["metadata"]["namespace"] for o in found})
    out = {}
    for space in spaces:
        mine = [o for o in found if o["metadata"]["namespace"] == space]
        pods = [o for o in mine if o["kind"] == "Pod"]
        claims = [o for o in mine if o["kind"] == "PersistentVolumeClaim"]
        theirs = [v for v in volumes if v["spec"].get("storageClassName") == space]
        out[space] = _verdict(pods, claims, theirs)
    return out


# ----- running cases ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def volume_nodes(real_cluster: cluster.RealCluster) -> typing.Iterator[None]:
    """Two identical sets of four nodes: ``vol-kube-*`` and ``vol-berth-*``."""
    pools = [
        kubelets.parse_pool(f"{NODES}x cpu=4,memory=16Gi,pods=50 label=vol-set={s} name=vol-{s}")
        for s in SETS
    ]
    real_cluster.create(*nodes.node_manifests(pools))
    real_cluster.kubectl("wait", "--for=condition=Ready", "nodes", "-l", "vol-set",
                         f"--timeout={cluster.WAIT}")  # fmt: skip
    yield
    real_cluster.kubectl("delete", "nodes", "-l", "vol-set", "--wait=false")


def run_cases(real: cluster.RealCluster, cases: list[Case], *, seed: int | None = None) -> None:
    """Create every case for both schedulers (its arrivals a second apart), wait until each has
    settled, and check it (see the module docstring)."""
    run = f"vs{uuid.uuid4().hex[:5]}"
    told = f" (seed {seed})" if seed is not None else ""
    try:
        real.berth()
        for case in cases:
            for label in SETS:
                _, namespace = _names(case, label, run)
                real.kubectl("create", "namespace", namespace)
                real.namespaces.append(namespace)
        real.create(*[o for c in cases for label in SETS for o in _storage(c, label, run)])
        for namespace in (n for c in cases for s in SETS for n in [_names(c, s, run)[1]]):
            processes.wait_until(
                f"ServiceAccount {namespace}/default",
                lambda ns=namespace: (
                    real.plane.kubectl(  # type: ignore[misc]
                        "get", "sa", "default", "-n", ns, check=False
                    ).returncode
                    == 0
                ),
                timeout=60.0,
            )
        for case in cases:
            if case.gang:
                for label in SETS:
                    if label == "berth":
                        group = {
                            "apiVersion": keys.API_VERSION,
                            "kind": "PodGroup",
                            "metadata": {"name": "gang", "namespace": _names(case, label, run)[1]},
                            "spec": {"minMember": sum(c.users for c in case.claims)},
                        }
                        real.create(group)
        last = max((s for c in cases for s in c.steps), default=0)
        started = time.monotonic()
        for step in range(last + 1):
            # Arrivals one a second: part of the workload, not a wait for anything.
            time.sleep(max(0.0, started + step - time.monotonic()))
            now = [
                o
                for c in cases
                for (what, index), at in zip(c.arrivals, c.steps, strict=True)
                if at == step
                for label in SETS
                for o in _arrival(c, label, run, what, index)
            ]
            if now:
                real.create(*now)
        want = {_names(c, s, run)[1]: c.running for c in cases for s in SETS}
        seen: dict[str, Verdict] = {}

        def settled() -> bool:
            seen.update(_observe(real, run))
            return all(space in seen and seen[space].settled(n) for space, n in want.items())

        try:
            processes.wait_until(
                "every case settled", settled, timeout=SETTLE, interval=1.0,
                watch=[b.process for b in real.started],
            )  # fmt: skip
        except processes.ComponentFailed as failed:
            pytest.fail(f"{failed}{told}: {seen}", pytrace=False)
        problems = {
            space: (seen[space].running, n, seen[space].broken)
            for space, n in want.items()
            if seen[space].broken or seen[space].running != n
        }
        assert not problems, f"(running, expected, broken) per case{told}: {problems}"
    finally:
        real.clean_up()
        real.kubectl("delete", "pv,storageclass", "-l", f"{TEST_LABEL}={run}", "--wait=false")


@pytest.mark.timeout(600)
def test_one_volume_two_claims_applied_together_one_pod_runs(
    real: cluster.RealCluster, volume_nodes: None
) -> None:
    claims = (Claim("1Gi", RWO), Claim("1Gi", RWO))
    case = Case(
        "one-pv",
        True,
        (Volume(0, "1Gi", (RWO,)),),
        claims,
        (("claim", 0), ("claim", 1), ("pod:0", 0), ("pod:0", 1)),
        (0, 0, 0, 0),
        1,
    )
    run_cases(real, [case])


@pytest.mark.timeout(600)
def test_six_claims_on_four_volumes_arriving_one_a_second(
    real: cluster.RealCluster, volume_nodes: None
) -> None:
    case = Case(
        "six-on-four",
        True,
        tuple(Volume(i, size, (RWO,)) for i, size in enumerate(["1Gi", "2Gi", "5Gi", "1Gi"])),
        tuple(Claim(size, RWO) for size in ["1Gi", "500Mi", "1Gi", "1Gi", "500Mi", "1Gi"]),
        tuple(a for i in range(6) for a in (("claim", i), ("pod:0", i))),
        tuple(i // 2 for i in range(12)),
        4,
    )
    run_cases(real, [case])


@pytest.mark.timeout(600)
def test_a_gang_with_a_claim_each_gets_a_volume_each(
    real: cluster.RealCluster, volume_nodes: None
) -> None:
    case = Case(
        "gang",
        True,
        tuple(Volume(i, "1Gi", (RWOP,)) for i in range(NODES)),
        tuple(Claim("1Gi", RWOP) for _ in range(NODES)),
        tuple(a for i in range(NODES) for a in (("claim", i), ("pod:0", i))),
        tuple(0 for _ in range(2 * NODES)),
        NODES,
        gang=True,
    )
    run_cases(real, [case])


@pytest.mark.timeout(900)
def test_twenty_random_orders_never_share_a_volume_and_agree_with_kube_scheduler(
    real: cluster.RealCluster, volume_nodes: None
) -> None:
    seed = int(os.environ.get("BERTH_TEST_SEED") or time.time())
    rng = random.Random(seed)
    run_cases(real, [random_case(rng, f"r{i:02d}") for i in range(20)], seed=seed)
