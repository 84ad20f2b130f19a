"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take no new pods.

Kubernetes' ``NodeUnschedulable`` filter, vectorised: a pod that tolerates the
``node.kubernetes.io/unschedulable:NoSchedule`` taint (DaemonSets do) may still go there.
Static: it depends only on the pod's tolerations and the nodes' flags.
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
from berth.scheduler.snapshot import nodetable, pods, taints

__all__ = ["NAME", "REASON", "UNSCHEDULABLE_TAINT", "NodeUnschedulable", "new"]

NAME = names.NODE_UNSCHEDULABLE
REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = taints.Taint(
    key="node.kubernetes.io/unschedulable", effect=taints.NO_SCHEDULE
)


def tolerates_unschedulable(pod: pods.PodInfo, /) -> bool:
    """Whether the pod may go to cordoned nodes."""
    return any(taints.tolerates(t, taint=UNSCHEDULABLE_TAINT) for t in pod.tolerations)


class NodeUnschedulable(interfaces.StaticFilterPlugin):
    """Filter (static)."""

    name = NAME

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        if tolerates_unschedulable(pod):
            return filtering.passing(len(nodes))
        return filtering.NodeFilter(
            passed=np.logical_not(nodes.unschedulable),
            code=statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            reason=REASON,
        )


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> NodeUnschedulable:
    """Build the plugin (it takes no arguments)."""
    return NodeUnschedulable()
