"""Properties of allocate over random clusters and workloads (hypothesis).

We test these aspects, over two cycles (the second sees what the first bound, plus new work):
- no node is ever over-committed on any resource (cpu, memory, gpu, pod count);
- no gang is ever partially bound: a group has no bound member, or at least ``minMember``;
- the same input gives the same decisions.
"""

from __future__ import annotations

import dataclasses

import hypothesis
import hypothesis.strategies as st
import numpy as np

from berth.scheduler import loop
from berth.scheduler.framework import decisions
from berth.scheduler.plugins import registry
from berth.sim import cluster as sim_cluster
from berth.util import clocks
from tests.scheduler import builders as b


@dataclasses.dataclass(frozen=True)
class Shape:
    cpu_milli: int
    memory_mi: int
    gpu: int

    def pod(self, name: str, **fields: object) -> b.Obj:
        return b.pod(
            name,
            cpu=f"{self.cpu_milli}m",
            memory=f"{self.memory_mi}Mi",
            gpu=self.gpu or None,
            **fields,  # type: ignore[arg-type]
        )


shapes = st.builds(
    Shape,
    cpu_milli=st.sampled_from([100, 500, 1000, 1500, 3000]),
    memory_mi=st.sampled_from([256, 1024, 4096]),
    gpu=st.sampled_from([0, 0, 0, 1, 2]),
)


@st.composite
def nodes(draw: st.DrawFn) -> list[b.Obj]:
    count = draw(st.integers(min_value=1, max_value=5))
    return [
        b.node(
            f"n{i}",
            cpu=str(draw(st.integers(min_value=1, max_value=8))),
            memory=f"{draw(st.sampled_from([2, 8, 16]))}Gi",
            pods=draw(st.integers(min_value=1, max_value=6)),
            gpu=draw(st.sampled_from([None, 1, 4])),
        )
        for i in range(count)
    ]


@st.composite
def workload(draw: st.DrawFn, *, prefix: str) -> list[b.Obj]:
    objects: list[b.Obj] = []
    for g in range(draw(st.integers(min_value=0, max_value=3))):
        size = draw(st.integers(min_value=1, max_value=4))
        minimum = draw(st.integers(min_value=1, max_value=size))
        shape = draw(shapes)
        name = f"{prefix}g{g}"
        objects.append(b.pod_group(name, min_member=minimum))
        objects += [shape.pod(f"{name}-{i}", group=name) for i in range(size)]
    for p in range(draw(st.integers(min_value=0, max_value=4))):
        objects.append(draw(shapes).pod(f"{prefix}p{p}", priority=draw(st.integers(0, 2))))
    return objects


def cycle_twice(
    cluster_nodes: list[b.Obj], first: list[b.Obj], second: list[b.Obj]
) -> tuple[sim_cluster.InMemoryCluster, list[decisions.CycleResult]]:
    clock = clocks.VirtualClock(b.EPOCH)
    cluster = sim_cluster.InMemoryCluster(clock=clock)
    scheduler = loop.Scheduler(
        registry.default_profile(), registry=registry.in_tree_registry(), clock=clock
    )
    results = []
    for batch in ([*cluster_nodes, *first], second):
        for obj in batch:
            cluster.put(obj)
        results.append(scheduler.run_once(cluster, cluster))
        clock.advance(10)
    return cluster, results


SETTINGS = hypothesis.settings(
    max_examples=60, deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)


@SETTINGS
@hypothesis.given(cluster_nodes=nodes(), first=workload(prefix="a"), second=workload(prefix="b"))
def test_no_node_is_ever_over_committed(
    cluster_nodes: list[b.Obj], first: list[b.Obj], second: list[b.Obj]
) -> None:
    cluster, _ = cycle_twice(cluster_nodes, first, second)
    table = cluster.snapshot().nodes
    over = table.requested > table.allocatable
    assert not over.any(), [
        (table.names[r], table.resources[c]) for r, c in zip(*np.nonzero(over), strict=True)
    ]


@SETTINGS
@hypothesis.given(cluster_nodes=nodes(), first=workload(prefix="a"), second=workload(prefix="b"))
def test_no_gang_is_ever_partially_bound(
    cluster_nodes: list[b.Obj], first: list[b.Obj], second: list[b.Obj]
) -> None:
    cluster, _ = cycle_twice(cluster_nodes, first, second)
    for group in cluster.objects("PodGroup"):
        name = group["metadata"]["name"]
        bound = [
            p for p in cluster.pods_of_group("default", name=name) if p["spec"].get("nodeName")
        ]
        assert len(bound) == 0 or len(bound) >= group["spec"]["minMember"], name


@SETTINGS
@hypothesis.given(cluster_nodes=nodes(), first=workload(prefix="a"), second=workload(prefix="b"))
def test_the_same_input_gives_the_same_decisions(
    cluster_nodes: list[b.Obj], first: list[b.Obj], second: list[b.Obj]
) -> None:
    _, once = cycle_twice(cluster_nodes, first, second)
    _, again = cycle_twice(cluster_nodes, first, second)
    assert [r.decisions for r in once] == [r.decisions for r in again]
