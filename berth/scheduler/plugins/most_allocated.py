"""MostAllocated: prefer the nodes already most used (bin packing).

Kubernetes' ``NodeResourcesFit`` MostAllocated strategy, vectorised: for each configured
resource, ``requested * 100 / allocatable`` with the pod's own request included (capped at
allocatable), then the weighted mean over the resources a node offers. Integer arithmetic, as
in Kubernetes. Scores are kept by the node table per request vector and refreshed only for the
rows placements changed.

Args: ``resources`` (name and weight; cpu and memory at weight 1 by default).

The pod counts with kube-scheduler's non-zero defaults (``PodInfo.score_requests``: 100m cpu
and 200Mi memory for each container requesting none), so best-effort pods spread too; the
nodes' load is what their pods request.

Kept for the profiles that name it: NodeResourcesFit's ``scoringStrategy`` is the general form
(a strategy per resource, RequestedToCapacityRatio, ``scarce``; docs/gpu.md), and the default
profile uses it. Unlike that strategy, this plugin counts an extended resource the pod does not
request (as it always did).
"""

from __future__ import annotations

from berth.scheduler.framework import cyclestate, filtering, handles, interfaces
from berth.scheduler.plugins import allocation_scores, names
from berth.scheduler.snapshot import nodetable, pods

__all__ = ["NAME", "MostAllocated", "MostAllocatedArgs", "new", "scores"]

NAME = names.MOST_ALLOCATED


class MostAllocatedArgs(allocation_scores.ResourceWeightsArgs):
    """Arguments of MostAllocated."""


def scores(
    vec: nodetable.IntArray,
    /,
    *,
    nodes: nodetable.NodeTable,
    weights: tuple[tuple[str, int], ...],
) -> interfaces.ScoreArray:
    """Per row, the weighted mean used share (0..100) after adding ``vec`` (shared)."""
    terms = tuple(
        (name, weight, allocation_scores.most_share, allocation_scores.most_row_share)
        for name, weight in weights
    )
    return allocation_scores.weighted_scores(vec, nodes=nodes, terms=terms, key=(NAME, weights))


class MostAllocated(interfaces.ScorePlugin):
    """Score (already 0..100: no normalisation)."""

    name = NAME

    def __init__(self, args: MostAllocatedArgs) -> None:
        self._weights = tuple((r.name, r.weight) for r in args.resources)

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        return scores(nodes.vector(pod.score_requests), nodes=nodes, weights=self._weights).copy()

    def score_extensions(self) -> None:
        return None


def new(args: MostAllocatedArgs, handle: handles.ExtendedHandle) -> MostAllocated:
    """Build the plugin."""
    return MostAllocated(args)
