"""Berth against the real kube-scheduler on the same constrained pods (scheduler mode).

We test these aspects:
- one generated set of pods with random constraints (required anti-affinity, hard and soft
  topology spread, preferred and required pod affinity, host ports) is created twice, once for
  kube-scheduler on one set of nodes and once for Berth on an identical set (same zones, same
  capacity), one pod at a time to both; when both have settled, the independent checker
  (``tests/constraint_checker``, written apart from Berth's plugins) finds no required
  constraint broken by Berth's bindings, replayed in the order the API server's audit log
  recorded them, and Berth placed at least as many pods as kube-scheduler.
"""

from __future__ import annotations

import random
import time
import typing

import pytest

from berth.api import keys
from berth.emulator import kubelets
from berth.realcluster import install, nodes, processes
from tests import constraint_checker
from tests.realcluster import cluster

pytestmark = pytest.mark.realcluster

Obj = dict[str, typing.Any]
SETS = ("kube", "berth")
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
PODS = 36
SEED = 20261124


def _node_pools(label: str) -> list[kubelets.NodePool]:
    return [
        kubelets.parse_pool(
            f"2x cpu=4,memory=16Gi,pods=20 label=diff-set={label} label={ZONE}=z{zone} "
            f"name=diff-{label}-z{zone}"
        )
        for zone in range(3)
    ]


def _pods(seed: int, *, node_set: str, scheduler: str) -> list[Obj]:
    """The same pods for each run (same seed), bound to that run's node set."""
    rng = random.Random(seed)
    out = []
    for i in range(PODS):
        app = rng.choice(["web", "db", "cache"])
        same_app = {"matchLabels": {"app": app}}
        spec: Obj = {
            "schedulerName": scheduler,
            "nodeSelector": {"diff-set": node_set},
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": rng.choice(["250m", "500m", "1"]), "memory": "256Mi"}
                    },
                }
            ],
        }
        roll = rng.random()
        if roll < 0.25:
            term = {"labelSelector": same_app, "topologyKey": HOST}
            spec["affinity"] = {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            }
        elif roll < 0.45:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
                    "labelSelector": same_app,
                }
            ]
        elif roll < 0.6:
            term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}
            spec["affinity"] = {
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 50, "podAffinityTerm": term}
                    ]
                }
            }
        elif roll < 0.7:
            spec["containers"][0]["ports"] = [
                {"containerPort": 80, "hostPort": rng.choice([8080, 9090])}
            ]
        elif roll < 0.78:
            term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}
            spec["affinity"] = {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            }
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i:02d}", "labels": {"app": app}},
                "spec": spec,
            }
        )
    return out


def _decided(pod: Obj) -> bool:
    if (pod.get("spec") or {}).get("nodeName"):
        return True
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions)


@pytest.fixture
def node_sets(real: cluster.RealCluster) -> typing.Iterator[dict[str, list[Obj]]]:
    made = {label: nodes.node_manifests(_node_pools(label)) for label in SETS}
    real.create(*[n for group in made.values() for n in group])
    real.kubectl("wait", "--for=condition=Ready", "nodes", "-l", "diff-set",
                 f"--timeout={cluster.WAIT}")  # fmt: skip
    yield made
    real.kubectl("delete", "nodes", "-l", "diff-set", "--wait=false")


@pytest.mark.timeout(400)
def test_berth_breaks_no_constraint_and_places_as_many_as_kube_scheduler(
    real: cluster.RealCluster, node_sets: dict[str, list[Obj]]
) -> None:
    real.berth()
    spaces = {label: real.namespace() for label in SETS}
    schedulers = {"kube": "default-scheduler", "berth": keys.DEFAULT_SCHEDULER_NAME}
    generated = {label: _pods(SEED, node_set=label, scheduler=schedulers[label]) for label in SETS}
    # One pod at a time to each scheduler, the next once both have decided the last: both see
    # the same arrivals, and the audit log's binding order is the order Berth decided in
    # (a batch bound in one cycle is bound concurrently, in no recorded order).
    for index in range(PODS):
        for label in SETS:
            real.create(generated[label][index], namespace=spaces[label])
        name = generated["berth"][index]["metadata"]["name"]

        def decided(name: str = name) -> bool:
            return all(
                _decided(real.json("get", "pod", name, "-n", spaces[label])) for label in SETS
            )

        processes.wait_until(f"both schedulers decided {name}", decided, timeout=60, interval=0.2)
    # Pods that wait for a db pod's zone may still be placed once one lands: wait for quiet.
    last, quiet_since = None, time.monotonic()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and time.monotonic() - quiet_since < 8:
        now = {label: sum(bool(p["spec"].get("nodeName")) for p in real.pods(spaces[label]))
               for label in SETS}  # fmt: skip
        if now != last:
            last, quiet_since = now, time.monotonic()
        time.sleep(1)
    assert last is not None
    placed = {label: {p["metadata"]["name"]: p for p in real.pods(spaces[label])} for label in SETS}
    order = [
        r.name
        for r in real.audited()
        if r.resource == "pods/binding"
        and r.succeeded
        and r.namespace == spaces["berth"]
        and r.user == install.USER
    ]
    bindings = [
        (placed["berth"][name], placed["berth"][name]["spec"]["nodeName"]) for name in order
    ]
    all_nodes = [n for group in node_sets.values() for n in group]
    assert constraint_checker.violations(all_nodes, running=[], bindings=bindings) == []
    bound = {label: sum(bool(p["spec"].get("nodeName")) for p in placed[label].values())
             for label in SETS}  # fmt: skip
    assert bound["berth"] >= bound["kube"], bound
