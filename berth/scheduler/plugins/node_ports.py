"""NodePorts: a pod's host ports must be free on the node.

Kubernetes' ``NodePorts`` filter, vectorised: the session's placements keep, per host port
some placed pod binds, the number of such pods per row (statements included, so two members
of one gang asking for the same port never share a node). A row fails when a placed pod binds
a conflicting port: same protocol and number, and the same host IP or either one ``0.0.0.0``.
Malformed ports (out of range) never reach here: the pod is invalid, its reason naming the
field.
"""

from __future__ import annotations

import collections.abc

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
from berth.scheduler.snapshot import nodetable, podconstraints, pods

__all__ = ["NAME", "REASON", "NodePorts", "new"]

NAME = names.NODE_PORTS
REASON = "node(s) didn't have free ports for the requested pod ports"


def _ports(pod: pods.PodInfo) -> collections.abc.Iterable[podconstraints.HostPort]:
    return pod.host_ports


class NodePorts(
    interfaces.PreFilterPlugin,
    interfaces.FilterPlugin,
    interfaces.ConstraintPlugin,
):
    """PreFilter (skips pods without host ports), Filter."""

    name = NAME
    understands = frozenset({podconstraints.Field.HOST_PORTS})

    def __init__(self, handle: handles.ExtendedHandle) -> None:
        self._handle = handle

    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        return statuses.SUCCESS if pod.host_ports else statuses.SKIP

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        busy = np.zeros(len(nodes), dtype=np.bool_)
        for port, counts in (
            self._handle.placements().grouped(NAME, extract=_ports, carried=True).items()
        ):
            if any(podconstraints.ports_conflict(port, mine) for mine in pod.host_ports):
                busy |= counts > 0
        return filtering.NodeFilter(passed=~busy, code=statuses.Code.UNSCHEDULABLE, reason=REASON)


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> NodePorts:
    """Build the plugin (it takes no arguments)."""
    return NodePorts(handle)
