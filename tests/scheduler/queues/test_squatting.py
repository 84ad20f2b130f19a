"""Queue accounting cannot be squatted: a queue is charged only for pods it admits and Berth placed.

We test these aspects, on the cache's per-queue sums and through a scheduling cycle:
- a running pod with the queue's label from a namespace the queue's ``namespaceSelector`` does
  not admit is charged nowhere, whoever placed it (kube-scheduler after the opt-out label, or
  Berth's own scheduler);
- a pod of an admitted namespace that another scheduler placed without Berth admitting it (it
  skipped the gate, or got the label after creation) is charged nowhere;
- a pod carrying ``admitted-node`` for the node it runs on is charged (Berth admitted it,
  perhaps before a restart), and stays charged when its annotations are edited later;
- a pod whose marker admission found forged (:meth:`ClusterCache.disown`) is charged nowhere;
- relabelling a namespace, or changing a queue's selector, moves the charges at once;
- with 5 cpu of squatters on a node, the queue's own tenant still gets its 1 cpu limit.
"""

from __future__ import annotations

import typing

from berth.api import keys, resources
from berth.scheduler.snapshot import cache as cache_module
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]
CPU = resources.CPU
KUBE = "default-scheduler"


def namespace(name: str, **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def team_queue(*, team: str = "a", limit: str = "1") -> Obj:
    queue = b.queue("team", limit={CPU: limit})
    queue["spec"]["namespaceSelector"] = {"matchLabels": {"team": team}}
    return queue


def allocated(cache: cache_module.ClusterCache, queue: str = "team") -> dict[str, int]:
    """The cpu charged to ``queue`` (milli-cores; empty: nothing)."""
    usage = cache.snapshot(b.EPOCH).queue_usage.get(queue)
    charged = dict(usage.allocated.items()) if usage is not None else {}
    return {k: v for k, v in charged.items() if k == CPU}


def world() -> cache_module.ClusterCache:
    cache = cache_module.ClusterCache()
    for obj in (b.node("n1", cpu="16"), team_queue(), namespace("web", team="a")):
        cache.add_namespace(obj) if obj["kind"] == "Namespace" else b.load(cache, obj)
    cache.add_namespace(namespace("ml", team="b"))
    return cache


def test_a_foreign_namespace_pod_is_charged_nowhere_whoever_placed_it() -> None:
    cache = world()
    opted_out = {keys.ADMISSION_LABEL: "disabled"}
    cache.add_pod(
        b.pod(
            "squat",
            namespace="ml",
            queue="team",
            cpu="5",
            node="n1",
            scheduler=KUBE,
            labels=opted_out,
            memory=None,
        )
    )
    cache.add_pod(b.pod("berths", namespace="ml", queue="team", cpu="2", node="n1", memory=None))
    assert allocated(cache) == {}
    # It still takes room on its node, like any pod.
    snap = cache.snapshot(b.EPOCH)
    row = snap.nodes.requested[snap.nodes.index["n1"]]
    assert int(row[snap.nodes.resources.index(CPU)]) == 7000


def test_a_pod_another_scheduler_placed_without_admission_is_charged_nowhere() -> None:
    cache = world()
    cache.add_pod(
        b.pod(
            "skipped-gate",
            namespace="web",
            queue="team",
            cpu="3",
            node="n1",
            scheduler=KUBE,
            memory=None,
        )
    )
    assert allocated(cache) == {}


def test_a_pod_berth_admitted_is_charged_and_stays_charged_whatever_is_edited_later() -> None:
    cache = world()
    admitted = {keys.ADMITTED_NODE_ANNOTATION: "n1"}
    pod = b.pod(
        "ok",
        namespace="web",
        queue="team",
        cpu="1",
        node="n1",
        scheduler=KUBE,
        annotations=admitted,
        memory=None,
    )
    cache.add_pod(pod)
    assert allocated(cache) == {CPU: 1000}
    cache.add_pod({**pod, "metadata": {**pod["metadata"], "annotations": {}}})
    assert allocated(cache) == {CPU: 1000}


def test_a_marker_for_another_node_charges_nothing() -> None:
    cache = world()
    elsewhere = {keys.ADMITTED_NODE_ANNOTATION: "n2"}
    cache.add_pod(
        b.pod(
            "moved",
            namespace="web",
            queue="team",
            cpu="1",
            node="n1",
            scheduler=KUBE,
            annotations=elsewhere,
            memory=None,
        )
    )
    assert allocated(cache) == {}


def test_a_forged_marker_charges_nothing() -> None:
    cache = world()
    forged = {keys.ADMITTED_NODE_ANNOTATION: "n1"}
    pod = b.pod(
        "forger",
        namespace="web",
        queue="team",
        cpu="4",
        node="n1",
        scheduler=KUBE,
        annotations=forged,
        memory=None,
        uid="u1",
    )
    cache.disown("web/forger", uid="u1")
    cache.add_pod(pod)
    assert allocated(cache) == {}
    # Disowned after it was charged (the informer's order may be either): uncharged at once.
    other = world()
    other.add_pod(pod)
    assert allocated(other) == {CPU: 4000}
    other.disown("web/forger", uid="u1")
    assert allocated(other) == {}


def test_relabelling_a_namespace_or_the_selector_moves_the_charges() -> None:
    cache = world()
    cache.add_pod(b.pod("p", namespace="ml", queue="team", cpu="2", node="n1", memory=None))
    assert allocated(cache) == {}
    cache.add_namespace(namespace("ml", team="a"))
    assert allocated(cache) == {CPU: 2000}
    cache.add_queue(team_queue(team="c"))
    assert allocated(cache) == {}
    cache.remove_queue("team")
    assert allocated(cache) == {CPU: 2000}


def test_squatters_do_not_take_the_queues_limit_from_its_tenant() -> None:
    opted_out = {keys.ADMISSION_LABEL: "disabled"}
    objects = [
        b.node("n1", cpu="16"),
        team_queue(limit="1"),
        namespace("web", team="a"),
        namespace("ml", team="b"),
        # 5 cpu with the queue's label, placed by kube-scheduler: opted out of the gate in a
        # foreign namespace, and labelled after creation in the queue's own.
        b.pod(
            "squat-a",
            namespace="ml",
            queue="team",
            cpu="4",
            node="n1",
            scheduler=KUBE,
            labels=opted_out,
            memory=None,
        ),
        b.pod(
            "squat-b",
            namespace="web",
            queue="team",
            cpu="1",
            node="n1",
            scheduler=KUBE,
            memory=None,
        ),
        b.pod("tenant", namespace="web", queue="team", cpu="1", memory=None),
    ]
    bound, _, _ = harness.cycle(*objects)
    assert bound == {"web/tenant": "n1"}
