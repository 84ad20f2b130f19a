"""NodeAffinity: nodeSelector, required and preferred node affinity.

We test these aspects:
- nodeSelector pairs must all match;
- required affinity with every operator (In, NotIn, Exists, DoesNotExist, Gt, Lt), terms
  ORed and requirements ANDed, matchFields on metadata.name, an empty term matching nothing,
  and nodeSelector ANDed with affinity;
- the reason text and the unresolvable code;
- preferred terms: summed weights, normalised so the best feasible node scores 100, only
  feasible nodes counting for the maximum; PreScore skips pods without preferences.
"""

from __future__ import annotations

import typing

import numpy as np
import pytest

from berth.scheduler.framework import cyclestate, statuses
from berth.scheduler.plugins import node_affinity
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

NODES = [
    b.node("a1", labels={"zone": "a", "cores": "8", "gpu": "t4"}),
    b.node("a2", labels={"zone": "a", "cores": "64"}),
    b.node("b1", labels={"zone": "b", "cores": "16", "gpu": "a100"}),
    b.node("c1", labels={"cores": "lots"}),
]
E = b.expr


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, ["a1", "a2", "b1", "c1"]),
        ({"node_selector": {"zone": "a"}}, ["a1", "a2"]),
        ({"node_selector": {"zone": "a", "gpu": "t4"}}, ["a1"]),
        ({"node_selector": {"zone": "z"}}, []),
        ({"affinity": b.affinity(required=[[E("zone", "In", "a", "b")]])}, ["a1", "a2", "b1"]),
        ({"affinity": b.affinity(required=[[E("zone", "NotIn", "a")]])}, ["b1", "c1"]),
        ({"affinity": b.affinity(required=[[E("gpu", "Exists")]])}, ["a1", "b1"]),
        ({"affinity": b.affinity(required=[[E("gpu", "DoesNotExist")]])}, ["a2", "c1"]),
        ({"affinity": b.affinity(required=[[E("cores", "Gt", "8")]])}, ["a2", "b1"]),
        ({"affinity": b.affinity(required=[[E("cores", "Lt", "16")]])}, ["a1"]),
        (
            {"affinity": b.affinity(required=[[E("zone", "In", "a"), E("gpu", "Exists")]])},
            ["a1"],
        ),
        (
            {"affinity": b.affinity(required=[[E("zone", "In", "b")], [E("cores", "Gt", "32")]])},
            ["a2", "b1"],
        ),
        (
            {"affinity": b.affinity(required_fields=[E("metadata.name", "In", "c1", "zz")])},
            ["c1"],
        ),
        (
            {"affinity": b.affinity(required_fields=[E("metadata.name", "NotIn", "a1")])},
            ["a2", "b1", "c1"],
        ),
        ({"affinity": b.affinity(required=[[]])}, []),
        (
            {
                "node_selector": {"zone": "a"},
                "affinity": b.affinity(required=[[E("gpu", "DoesNotExist")]]),
            },
            ["a2"],
        ),
        (
            {"affinity": b.affinity(preferred=[(5, [E("zone", "In", "z")])])},
            ["a1", "a2", "b1", "c1"],
        ),
    ],
    ids=[
        "nothing-asked",
        "selector",
        "selector-all-pairs",
        "selector-no-match",
        "in",
        "notin-includes-unlabelled",
        "exists",
        "doesnotexist",
        "gt-skips-non-numbers",
        "lt",
        "term-ands",
        "terms-or",
        "match-fields-in",
        "match-fields-notin",
        "empty-term-matches-nothing",
        "selector-and-affinity",
        "preferred-never-filters",
    ],
)
def test_required_node_affinity(fields: dict[str, typing.Any], expected: list[str]) -> None:
    nodes = harness.snapshot(*NODES).nodes
    assert harness.passing(node_affinity.NodeAffinity(), harness.info(**fields), nodes) == expected


def test_reason_and_code() -> None:
    nodes = harness.snapshot(*NODES).nodes
    plugin = node_affinity.NodeAffinity()
    pod = harness.info(node_selector={"zone": "a"})
    assert harness.why(plugin, pod, nodes) == (
        "2/4 nodes fit: 2 node(s) didn't match Pod's node affinity/selector"
    )
    assert harness.run_filter(plugin, pod, nodes).code is (
        statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    )


@pytest.mark.parametrize(
    ("preferred", "feasible", "expected"),
    [
        ([(10, [E("zone", "In", "a")])], None, {"a1": 100, "a2": 100, "b1": 0, "c1": 0}),
        (
            [(10, [E("zone", "In", "a")]), (30, [E("gpu", "Exists")])],
            None,
            {"a1": 100, "a2": 25, "b1": 75, "c1": 0},
        ),
        (
            [(10, [E("zone", "In", "a")]), (30, [E("gpu", "Exists")])],
            ["a2", "c1"],
            {"a2": 100, "c1": 0},
        ),
        ([(50, [E("zone", "In", "z")])], None, {"a1": 0, "a2": 0, "b1": 0, "c1": 0}),
    ],
    ids=["one-term", "weights-sum-and-normalise", "max-over-feasible-only", "no-match-all-zero"],
)
def test_preferred_affinity_scores(
    preferred: list[tuple[int, list[dict[str, typing.Any]]]],
    feasible: list[str] | None,
    expected: dict[str, int],
) -> None:
    nodes = harness.snapshot(*NODES).nodes
    pod = harness.info(affinity=b.affinity(preferred=preferred))
    assert harness.scores(node_affinity.NodeAffinity(), pod, nodes, feasible=feasible) == expected


def test_pre_score_skips_pods_without_preferences() -> None:
    nodes = harness.snapshot(*NODES).nodes
    plugin = node_affinity.NodeAffinity()
    mask = np.ones(len(nodes), dtype=np.bool_)
    state = cyclestate.CycleState()
    assert plugin.pre_score(state, harness.info(), nodes, mask).is_skip()
    preferring = harness.info(affinity=b.affinity(preferred=[(1, [E("zone", "In", "a")])]))
    assert plugin.pre_score(state, preferring, nodes, mask).is_success()
