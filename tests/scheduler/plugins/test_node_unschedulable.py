"""NodeUnschedulable: cordoned nodes take no new pods, except pods tolerating the cordon.

We test these aspects:
- a cordoned node is filtered out, with the Kubernetes reason, as unresolvable;
- a toleration of ``node.kubernetes.io/unschedulable`` (by key, by Exists on every key, with
  or without the NoSchedule effect) lets the pod onto cordoned nodes; other effects do not.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.framework import statuses
from berth.scheduler.plugins import node_unschedulable
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

NODES = [b.node("open"), b.node("cordoned", unschedulable=True)]
KEY = "node.kubernetes.io/unschedulable"


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ([], ["open"]),
        ([b.toleration(KEY)], ["cordoned", "open"]),
        ([b.toleration(KEY, effect="NoSchedule")], ["cordoned", "open"]),
        ([b.toleration()], ["cordoned", "open"]),
        ([b.toleration(KEY, effect="NoExecute")], ["open"]),
        ([b.toleration("other")], ["open"]),
    ],
    ids=["none", "by-key", "by-key-and-effect", "tolerate-everything", "wrong-effect", "other-key"],
)
def test_cordoned_nodes_need_a_toleration(
    tolerations: list[dict[str, typing.Any]], expected: list[str]
) -> None:
    nodes = harness.snapshot(*NODES).nodes
    pod = harness.info(tolerations=tolerations)
    assert harness.passing(node_unschedulable.NodeUnschedulable(), pod, nodes) == expected


def test_reason_and_code() -> None:
    nodes = harness.snapshot(*NODES).nodes
    plugin = node_unschedulable.NodeUnschedulable()
    pod = harness.info()
    assert harness.why(plugin, pod, nodes) == "1/2 nodes fit: 1 node(s) were unschedulable"
    assert harness.run_filter(plugin, pod, nodes).code is (
        statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    )
