"""Admission mode's memory of rejected nodes (``berth.kube.admission.rejections``), pure.

We test these aspects:

- a pod is kept off the nodes it, or any member of its gang, was rejected on: its required
  node affinity gains ``metadata.name NotIn``, in every term (an empty term stays empty: it
  matches nothing either way), and a pod without node affinity gets one term;
- the memory fades ``ttl`` after the last rejection, goes with the pod or group, and keeps at
  most ``limit`` entries, the oldest going first;
- a pod never rejected is returned unchanged.
"""

from __future__ import annotations

from berth.kube.admission import rejections
from berth.scheduler.snapshot import nodes, nodetable, pods, selectors
from tests.scheduler import builders as b


def _info(name: str = "p", **fields: object) -> pods.PodInfo:
    return pods.pod_info(b.pod(name, **fields))  # type: ignore[arg-type]


def _feasible(info: pods.PodInfo, *names: str) -> list[str]:
    table = nodetable.NodeTable.build([nodes.node_info(b.node(n)) for n in names], requested={})
    mask = [True] * len(table)
    if info.required_affinity is not None:
        mask = [
            any(bool(table.term_mask(term)[row]) for term in info.required_affinity)
            for row in range(len(table))
        ]
    return [n for n, ok in zip(table.names, mask, strict=True) if ok]


def test_pod_and_its_gang_avoid_rejected_nodes() -> None:
    memory = rejections.Rejections(ttl=60)
    memory.remember("default/g-0", group="default/g", node="n1", now=0)
    own = memory.avoiding(_info("g-0", group="g"), now=1)
    sibling = memory.avoiding(_info("g-1", group="g"), now=1)
    stranger = _info("other")
    assert _feasible(own, "n1", "n2", "n3") == ["n2", "n3"]
    assert _feasible(sibling, "n1", "n2", "n3") == ["n2", "n3"]
    assert memory.avoiding(stranger, now=1) is stranger


def test_existing_terms_are_narrowed_each() -> None:
    memory = rejections.Rejections()
    affinity = b.affinity(required=[[b.expr("kubernetes.io/hostname", "In", "n1", "n2")], []])
    info = _info("p", affinity=affinity)
    memory.remember("default/p", group=None, node="n2", now=0)
    narrowed = memory.avoiding(info, now=1)
    assert narrowed.required_affinity is not None
    assert _feasible(narrowed, "n1", "n2", "n3") == ["n1"]
    away = selectors.Requirement(selectors.METADATA_NAME, selectors.NOT_IN, ("n2",))
    assert all(away in t.fields or t.empty for t in narrowed.required_affinity)


def test_memory_fades_goes_with_the_pod_and_is_bounded() -> None:
    memory = rejections.Rejections(ttl=10, limit=2)
    memory.remember("default/a", group=None, node="n1", now=0)
    assert memory.nodes_of("default/a", group=None, now=9) == {"n1"}
    assert memory.nodes_of("default/a", group=None, now=10) == frozenset()
    memory.remember("default/a", group="default/g", node="n1", now=20)
    memory.forget_pod("default/a")
    assert memory.nodes_of("default/a", group=None, now=21) == frozenset()
    assert memory.nodes_of("default/x", group="default/g", now=21) == {"n1"}
    memory.forget_group("default/g")
    assert memory.nodes_of("default/x", group="default/g", now=21) == frozenset()
    for name in ("a", "b", "c"):
        memory.remember(f"default/{name}", group=None, node="n1", now=30)
    assert memory.nodes_of("default/a", group=None, now=31) == frozenset()  # the oldest went
    assert memory.nodes_of("default/c", group=None, now=31) == {"n1"}
