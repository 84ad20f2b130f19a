"""LeastAllocated: prefer the nodes with the most room left (spread).

Kubernetes' ``NodeResourcesFit`` LeastAllocated strategy, vectorised: for each configured
resource, ``(allocatable - requested) * 100 / allocatable`` with the pod's own request
included (0 when over capacity), then the weighted mean over the resources a node offers.
Integer arithmetic, exactly as Kubernetes computes it. Scores are kept by the node table per
request vector and refreshed only for the rows placements changed.

Args: ``resources`` (name and weight; cpu and memory at weight 1 by default).
"""

from __future__ import annotations

import numpy as np
import pydantic
import pydantic.alias_generators

from berth.api import resources
from berth.scheduler.framework import cyclestate, filtering, handles, interfaces
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import nodetable, pods

__all__ = ["NAME", "LeastAllocated", "LeastAllocatedArgs", "ResourceWeight", "new", "scores"]

NAME = names.LEAST_ALLOCATED


class ResourceWeight(pydantic.BaseModel):
    """A resource the score looks at, and its weight in the mean."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    name: str = pydantic.Field(min_length=1)
    """Resource name, e.g. ``cpu`` or ``nvidia.com/gpu``."""
    weight: int = pydantic.Field(default=1, ge=1, le=100)
    """Weight of this resource in the mean (1..100)."""


class LeastAllocatedArgs(pydantic.BaseModel):
    """Arguments of LeastAllocated."""

    model_config = pydantic.ConfigDict(
        alias_generator=pydantic.alias_generators.to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )

    resources: tuple[ResourceWeight, ...] = pydantic.Field(
        default=(ResourceWeight(name=resources.CPU), ResourceWeight(name=resources.MEMORY)),
        min_length=1,
    )
    """Resources scored, with weights; Kubernetes' default: cpu and memory, weight 1 each."""


def scores(
    vec: nodetable.IntArray,
    /,
    *,
    nodes: nodetable.NodeTable,
    weights: tuple[tuple[str, int], ...],
) -> interfaces.ScoreArray:
    """Per row, the weighted mean free share (0..100) after adding ``vec`` (shared)."""
    present = [(nodes.column[n], w) for n, w in weights if n in nodes.column]

    def compute(rows: nodetable.IntArray | None) -> interfaces.ScoreArray:
        alloc = nodes.allocatable if rows is None else nodes.allocatable[rows]
        used = nodes.requested if rows is None else nodes.requested[rows]
        total = np.zeros(alloc.shape[0], dtype=np.int64)
        weight_sum = np.zeros(alloc.shape[0], dtype=np.int64)
        for col, weight in present:
            capacity = alloc[:, col]
            requested = used[:, col] + vec[col]
            offered = capacity > 0
            share = (capacity - requested) * interfaces.MAX_NODE_SCORE // np.maximum(capacity, 1)
            share[(requested > capacity) | ~offered] = 0
            total += share * weight
            weight_sum += offered * weight
        return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0)

    items = [(col, weight, int(vec[col])) for col, weight in present]

    def per_row(allocatable: list[int], requested: list[int]) -> int:
        total = weight_sum = 0
        for col, weight, add in items:
            capacity, used = allocatable[col], requested[col] + add
            if capacity <= 0:
                continue
            share = (
                0 if used > capacity else (capacity - used) * interfaces.MAX_NODE_SCORE // capacity
            )
            total += share * weight
            weight_sum += weight
        return total // weight_sum if weight_sum else 0

    return nodes.incremental((NAME, weights, vec.tobytes()), compute=compute, per_row=per_row)


class LeastAllocated(interfaces.ScorePlugin):
    """Score (already 0..100: no normalisation)."""

    name = NAME

    def __init__(self, args: LeastAllocatedArgs) -> None:
        self._weights = tuple((r.name, r.weight) for r in args.resources)

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        return scores(nodes.vector(pod.requests), nodes=nodes, weights=self._weights).copy()

    def score_extensions(self) -> None:
        return None


def new(args: LeastAllocatedArgs, handle: handles.ExtendedHandle) -> LeastAllocated:
    """Build the plugin."""
    return LeastAllocated(args)
