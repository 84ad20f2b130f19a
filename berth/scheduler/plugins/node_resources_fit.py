"""NodeResourcesFit: a pod goes only where its requests fit in what is left.

Kubernetes' ``NodeResourcesFit`` filter, vectorised: every resource the pod requests (cpu,
memory, ephemeral-storage, extended resources such as ``nvidia.com/gpu``, and ``pods``, which
counts 1 per pod) must be at most the row's ``allocatable - requested``. The fit mask is kept
by the node table per request vector and refreshed only for the rows placements changed, so
10 000 identical pods cost one full evaluation plus one row each.

- PreFilter: a pod whose requests are malformed or negative (``PodInfo.invalid``) is
  unschedulable and unresolvable, with that text.
- Filter: reasons ``Insufficient <resource>`` (``Too many pods`` for the pod count); a
  resource no node offers fails every row, and since no eviction can help the code is
  ``UNSCHEDULABLE_AND_UNRESOLVABLE``.

A pod's requests are sized with pod-level resources (``spec.resources``) where it has them
(see :func:`berth.scheduler.snapshot.pods.pod_requests`), so this plugin implements that field.

Args: ``ignoredResources`` (names never checked, as in Kubernetes' NodeResourcesFitArgs).
"""

from __future__ import annotations

import numpy as np
import pydantic
import pydantic.alias_generators

from berth.api import resources
from berth.scheduler.framework import cyclestate, filtering, handles, interfaces, statuses
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import nodetable, podconstraints, pods

__all__ = [
    "NAME",
    "TOO_MANY_PODS",
    "NodeResourcesFit",
    "NodeResourcesFitArgs",
    "insufficient",
    "new",
]

NAME = names.NODE_RESOURCES_FIT
TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str, /) -> str:
    """The reason for one resource: ``Insufficient nvidia.com/gpu`` (``Too many pods``)."""
    return TOO_MANY_PODS if resource == resources.PODS else f"Insufficient {resource}"


class NodeResourcesFitArgs(pydantic.BaseModel):
    """Arguments of NodeResourcesFit."""

    model_config = pydantic.ConfigDict(
        alias_generator=pydantic.alias_generators.to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )

    ignored_resources: tuple[str, ...] = ()
    """Resource names the filter never checks (e.g. an extended resource a device plugin
    oversubscribes). Empty by default: every requested resource must fit."""


def request_vector(
    pod: pods.PodInfo, /, *, nodes: nodetable.NodeTable, ignored: frozenset[str]
) -> tuple[nodetable.IntArray, list[str]]:
    """The pod's requests as a row vector, and the requested names no column has."""
    requests = pod.requests
    if ignored:
        requests = resources.ResourceList({k: v for k, v in requests.items() if k not in ignored})
    return nodes.vector(requests), nodes.missing(requests)


def fit_mask(vec: nodetable.IntArray, /, *, nodes: nodetable.NodeTable) -> filtering.BoolArray:
    """Rows where ``vec`` fits in ``allocatable - requested`` (shared: do not modify)."""
    cols = [int(c) for c in np.flatnonzero(vec)]

    def compute(rows: nodetable.IntArray | None) -> filtering.BoolArray:
        alloc = nodes.allocatable if rows is None else nodes.allocatable[rows]
        used = nodes.requested if rows is None else nodes.requested[rows]
        ok = np.ones(alloc.shape[0], dtype=np.bool_)
        for col in cols:  # a few columns: one pass each beats a 2-D gather
            ok &= used[:, col] + vec[col] <= alloc[:, col]
        return ok

    items = [(col, int(vec[col])) for col in cols]

    def per_row(allocatable: list[int], requested: list[int]) -> bool:
        return all(requested[col] + add <= allocatable[col] for col, add in items)

    return nodes.incremental((NAME, vec.tobytes()), compute=compute, per_row=per_row)


class NodeResourcesFit(
    interfaces.PreFilterPlugin, interfaces.FilterPlugin, interfaces.ConstraintPlugin
):
    """PreFilter, Filter."""

    name = NAME
    understands = frozenset({podconstraints.Field.POD_RESOURCES})  # sized in PodInfo.requests

    def __init__(self, args: NodeResourcesFitArgs) -> None:
        self._ignored = frozenset(args.ignored_resources)

    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        if pod.invalid is not None:
            return statuses.new(statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE, pod.invalid)
        return statuses.SUCCESS

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        vec, missing = request_vector(pod, nodes=nodes, ignored=self._ignored)
        if missing:
            rows = len(nodes)
            return filtering.NodeFilter(
                passed=np.zeros(rows, dtype=np.bool_),
                code=statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                explain=lambda: {insufficient(n): np.ones(rows, dtype=np.bool_) for n in missing},
            )
        passed = fit_mask(vec, nodes=nodes).copy()
        return filtering.NodeFilter(passed=passed, explain=lambda: _explain(vec, nodes))


def _explain(vec: nodetable.IntArray, nodes: nodetable.NodeTable) -> filtering.Reasons:
    free = nodes.free()
    out: dict[str, filtering.BoolArray] = {}
    for col in np.flatnonzero(vec):
        short = free[:, col] < vec[col]
        if short.any():
            out[insufficient(nodes.resources[col])] = short
    return out


def new(args: NodeResourcesFitArgs, handle: handles.ExtendedHandle) -> NodeResourcesFit:
    """Build the plugin."""
    return NodeResourcesFit(args)
