"""TaintToleration: NoSchedule/NoExecute taints filter, PreferNoSchedule taints score.

We test these aspects:
- untolerated NoSchedule and NoExecute taints reject a node; PreferNoSchedule never does;
- tolerations by Equal (key and value), Exists (key only), empty key with Exists, and effect
  (empty matches every effect, a specific effect only its own);
- the reason names the node's first untolerated taint, ``untolerated taint {key: value}``,
  and counts aggregate per taint, largest first; the code is unresolvable;
- scoring: fewer untolerated PreferNoSchedule taints is better, normalised in reverse, and
  only tolerations with an empty or PreferNoSchedule effect count; PreScore skips clusters
  without PreferNoSchedule taints.
"""

from __future__ import annotations

import typing

import numpy as np
import pytest

from berth.scheduler.framework import cyclestate, statuses
from berth.scheduler.plugins import taint_toleration
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

T, Tol = b.taint, b.toleration
NODES = [
    b.node("clean"),
    b.node("gpu", taints=[T("nvidia.com/gpu", "present", "NoSchedule")]),
    b.node("infer", taints=[T("dedicated", "infer", "NoSchedule")]),
    b.node("draining", taints=[T("maintenance", "", "NoExecute")]),
    b.node("spot", taints=[T("spot", "true", "PreferNoSchedule")]),
]


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ([], ["clean", "spot"]),
        ([Tol("nvidia.com/gpu", "present")], ["clean", "gpu", "spot"]),
        ([Tol("nvidia.com/gpu", "absent")], ["clean", "spot"]),
        ([Tol("nvidia.com/gpu")], ["clean", "gpu", "spot"]),
        ([Tol("dedicated", "infer", effect="NoSchedule")], ["clean", "infer", "spot"]),
        ([Tol("dedicated", "infer", effect="NoExecute")], ["clean", "spot"]),
        ([Tol("maintenance", effect="NoExecute", seconds=30)], ["clean", "draining", "spot"]),
        ([Tol()], ["clean", "draining", "gpu", "infer", "spot"]),
        ([Tol(effect="NoSchedule")], ["clean", "gpu", "infer", "spot"]),
        (
            [Tol("dedicated", "infer"), Tol("nvidia.com/gpu")],
            ["clean", "gpu", "infer", "spot"],
        ),
    ],
    ids=[
        "none",
        "equal",
        "equal-wrong-value",
        "exists",
        "effect-matches",
        "effect-differs",
        "noexecute-tolerated",
        "tolerate-everything",
        "everything-noschedule-only",
        "several",
    ],
)
def test_untolerated_hard_taints_reject(
    tolerations: list[dict[str, typing.Any]], expected: list[str]
) -> None:
    nodes = harness.snapshot(*NODES).nodes
    plugin = taint_toleration.TaintToleration()
    assert harness.passing(plugin, harness.info(tolerations=tolerations), nodes) == expected


def test_reasons_name_the_first_untolerated_taint_per_node() -> None:
    nodes = harness.snapshot(
        *[b.node(f"i{i}", taints=[T("dedicated", "infer")]) for i in range(3)],
        b.node("both", taints=[T("a", "1", "PreferNoSchedule"), T("b", "2"), T("c", "3")]),
        b.node("free"),
    ).nodes
    plugin = taint_toleration.TaintToleration()
    pod = harness.info()
    assert harness.why(plugin, pod, nodes) == (
        "1/5 nodes fit: 3 untolerated taint {dedicated: infer}, 1 untolerated taint {b: 2}"
    )
    assert harness.run_filter(plugin, pod, nodes).code is (
        statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    )


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ([], {"none": 100, "one": 50, "two": 0}),
        ([Tol("spot", "true")], {"none": 100, "one": 100, "two": 0}),
        ([Tol("spot", "true", effect="PreferNoSchedule")], {"none": 100, "one": 100, "two": 0}),
        ([Tol("spot", "true", effect="NoSchedule")], {"none": 100, "one": 50, "two": 0}),
        ([Tol()], {"none": 100, "one": 100, "two": 100}),
    ],
    ids=["none", "equal", "prefer-effect", "other-effect-does-not-count", "tolerate-everything"],
)
def test_prefer_no_schedule_scoring(
    tolerations: list[dict[str, typing.Any]], expected: dict[str, int]
) -> None:
    nodes = harness.snapshot(
        b.node("none"),
        b.node("one", taints=[T("spot", "true", "PreferNoSchedule")]),
        b.node(
            "two",
            taints=[T("spot", "true", "PreferNoSchedule"), T("old", "", "PreferNoSchedule")],
        ),
    ).nodes
    plugin = taint_toleration.TaintToleration()
    assert harness.scores(plugin, harness.info(tolerations=tolerations), nodes) == expected


def test_pre_score_skips_clusters_without_soft_taints() -> None:
    plugin = taint_toleration.TaintToleration()
    state = cyclestate.CycleState()
    hard = harness.snapshot(b.node("n", taints=[T("k")])).nodes
    soft = harness.snapshot(b.node("n", taints=[T("k", effect="PreferNoSchedule")])).nodes
    assert plugin.pre_score(state, harness.info(), hard, np.ones(1, dtype=np.bool_)).is_skip()
    assert plugin.pre_score(state, harness.info(), soft, np.ones(1, dtype=np.bool_)).is_success()
