"""NodeName: a pod that names its node (``spec.nodeName``) fits only that node.

Kubernetes' ``NodeName`` filter, vectorised. A pending pod normally names no node and passes
every row; the filter matters for pods built with a fixed node (e.g. a reserve pod whose
template pins one). Static: the answer depends only on the pod's signature and node names.
"""

from __future__ import annotations

import numpy as np

from berth.scheduler.framework import (
    cyclestate,
    filtering,
    handles,
    interfaces,
    registries,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import nodetable, pods

__all__ = ["NAME", "REASON", "NodeName", "new"]

NAME = names.NODE_NAME
REASON = "node(s) didn't match the requested node name"


def fits(pod: pods.PodInfo, /, *, nodes: nodetable.NodeTable) -> filtering.BoolArray:
    """Rows the pod may use: all of them, or only the one it names."""
    if pod.node_name is None:
        return np.ones(len(nodes), dtype=np.bool_)
    passed = np.zeros(len(nodes), dtype=np.bool_)
    row = nodes.index.get(pod.node_name)
    if row is not None:
        passed[row] = True
    return passed


class NodeName(interfaces.StaticFilterPlugin):
    """Filter (static)."""

    name = NAME

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        return filtering.NodeFilter(
            passed=fits(pod, nodes=nodes),
            code=statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            reason=REASON,
        )


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> NodeName:
    """Build the plugin (it takes no arguments)."""
    return NodeName()
