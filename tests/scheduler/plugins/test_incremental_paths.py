"""The resource plugins' two code paths agree: NumPy over all rows and Python per changed row.

NodeResourcesFit and the three allocation scores keep their per-row results in the node table
and refresh only rows that placements changed, in plain Python when few did. We test (with
hypothesis, over random clusters, requests and placements, including nodes without a resource
and nodes pushed over capacity) that the refreshed results always equal a full recompute.
"""

from __future__ import annotations

import typing

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.scheduler.plugins import allocation_scores, balanced_allocation
from berth.scheduler.plugins import node_resources_fit as fit
from berth.scheduler.snapshot import nodetable
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

_node = st.tuples(
    st.sampled_from(["500m", "1", "4", "7"]),
    st.sampled_from(["1Gi", "3Gi", "16Gi"]),
    st.sampled_from([None, 1, 4]),
)
_request = st.tuples(
    st.sampled_from([None, "100m", "1", "3"]),
    st.sampled_from([None, "256Mi", "2Gi"]),
    st.sampled_from([None, 1, 2]),
)


def _mean(
    vec: nodetable.IntArray,
    nodes: nodetable.NodeTable,
    weights: tuple[tuple[str, int], ...],
    *,
    least: bool,
) -> list[int]:
    share, row_share = (
        (allocation_scores.least_share, allocation_scores.least_row_share)
        if least
        else (allocation_scores.most_share, allocation_scores.most_row_share)
    )
    terms = tuple((name, weight, share, row_share) for name, weight in weights)
    got = allocation_scores.weighted_scores(vec, nodes=nodes, terms=terms, key=("test", least))
    return [int(x) for x in got]


def _results(
    nodes: nodetable.NodeTable, pod_fields: dict[str, typing.Any]
) -> dict[str, list[typing.Any]]:
    pod = harness.info(**pod_fields)
    vec = nodes.vector(pod.requests)
    resources_weighted = (("cpu", 2), ("memory", 1), (b.GPU, 3))
    return {
        "fit": fit.fit_mask(vec, nodes=nodes).tolist(),
        "least": _mean(vec, nodes, resources_weighted, least=True),
        "most": _mean(vec, nodes, resources_weighted, least=False),
        "balanced": balanced_allocation.scores(
            vec, nodes=nodes, names_=("cpu", "memory", b.GPU)
        ).tolist(),
        "balanced2": balanced_allocation.scores(
            vec, nodes=nodes, names_=("cpu", "memory")
        ).tolist(),
    }


@settings(max_examples=80, deadline=None)
@given(
    cluster=st.lists(_node, min_size=1, max_size=6),
    request=_request,
    placements=st.lists(st.tuples(st.integers(0, 5), _request, st.booleans()), max_size=30),
)
def test_refreshed_rows_equal_a_full_recompute(
    cluster: list[tuple[str, str, int | None]],
    request: tuple[str | None, str | None, int | None],
    placements: list[tuple[int, tuple[str | None, str | None, int | None], bool]],
) -> None:
    nodes = harness.snapshot(
        *[b.node(f"n{i}", cpu=c, memory=m, gpu=g) for i, (c, m, g) in enumerate(cluster)]
    ).nodes
    cpu, memory, gpu = request
    pod_fields = {"cpu": cpu, "memory": memory, "gpu": gpu}
    _results(nodes, pod_fields)  # computed once in full, then refreshed below
    for row, (pcpu, pmem, pgpu), check in placements:
        other = harness.info(cpu=pcpu, memory=pmem, gpu=pgpu)
        nodes.assume(row % len(nodes), nodes.vector(other.requests))
        if check:
            assert _results(nodes, pod_fields) == _results(nodes.copy(), pod_fields)
    assert _results(nodes, pod_fields) == _results(nodes.copy(), pod_fields)
    # Only what the pod asks for is checked (a node over-committed on memory still takes a
    # pod asking for none, as in Kubernetes).
    vec = nodes.vector(harness.info(**pod_fields).requests)
    asked = vec > 0
    assert np.array_equal(
        np.array(_results(nodes, pod_fields)["fit"]),
        (nodes.free()[:, asked] >= vec[asked]).all(axis=1),
    )
