"""NodeName: a pod naming its node fits only that node.

We test these aspects:
- a pod naming no node passes every node; one naming a node passes only it; an unknown name
  passes none, with the Kubernetes reason, as unresolvable;
- the filter is static (its answer is cached per pod signature by the runtime).
"""

from __future__ import annotations

import pytest

from berth.scheduler.framework import interfaces, statuses
from berth.scheduler.plugins import node_name
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

NODES = [b.node("n1"), b.node("n2"), b.node("n3")]


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [(None, ["n1", "n2", "n3"]), ("n2", ["n2"]), ("gone", [])],
    ids=["no-node-named", "named-node", "unknown-node"],
)
def test_only_the_named_node_passes(wanted: str | None, expected: list[str]) -> None:
    nodes = harness.snapshot(*NODES).nodes
    pod = harness.info(node=wanted)
    assert harness.passing(node_name.NodeName(), pod, nodes) == expected


def test_reason_and_code() -> None:
    nodes = harness.snapshot(*NODES).nodes
    plugin = node_name.NodeName()
    pod = harness.info(node="gone")
    assert harness.why(plugin, pod, nodes) == (
        "0/3 nodes fit: 3 node(s) didn't match the requested node name"
    )
    assert harness.run_filter(plugin, pod, nodes).code is (
        statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    )
    assert isinstance(plugin, interfaces.StaticFilterPlugin)
