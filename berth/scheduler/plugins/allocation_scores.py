"""The weighted-mean node score LeastAllocated and MostAllocated share, and their arguments.

Both strategies of Kubernetes' ``NodeResourcesFit`` score a node as the weighted mean, over the
configured resources the node offers, of a per-resource share (0..100) with the pod's own
request included; they differ only in the share. This module owns the mean (vectorised, and per
row for the node table's incremental refresh), the cache key and the arguments; each plugin
module owns its share. Only those two plugins import it.
"""

from __future__ import annotations

import collections.abc

import numpy as np
import pydantic
import pydantic.alias_generators

from berth.api import resources
from berth.scheduler.framework import interfaces
from berth.scheduler.snapshot import nodetable

__all__ = ["ResourceWeight", "ResourceWeightsArgs", "RowShare", "Share", "weighted_scores"]

Share = collections.abc.Callable[[nodetable.IntArray, nodetable.IntArray], nodetable.IntArray]
"""``share(capacity, requested)`` per row of one column; 0 where the node offers none."""
RowShare = collections.abc.Callable[[int, int], int]
"""``share(capacity, requested)`` of one row and column; called only when capacity > 0."""


class ResourceWeight(pydantic.BaseModel):
    """A resource the score looks at, and its weight in the mean."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    name: str = pydantic.Field(min_length=1)
    """Resource name, e.g. ``cpu`` or ``nvidia.com/gpu``."""
    weight: int = pydantic.Field(default=1, ge=1, le=100)
    """Weight of this resource in the mean (1..100)."""


class ResourceWeightsArgs(pydantic.BaseModel):
    """Arguments of a weighted-mean allocation score."""

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


def weighted_scores(
    vec: nodetable.IntArray,
    /,
    *,
    nodes: nodetable.NodeTable,
    weights: tuple[tuple[str, int], ...],
    key: str,
    share: Share,
    row_share: RowShare,
) -> interfaces.ScoreArray:
    """Per row, the weighted mean of ``share`` after adding ``vec`` (shared, kept per ``key``).

    Integer arithmetic, exactly as Kubernetes computes it; a resource the node does not offer
    is left out of the mean, and a node offering none of them scores 0.
    """
    present = [(nodes.column[n], w) for n, w in weights if n in nodes.column]

    def compute(rows: nodetable.IntArray | None) -> interfaces.ScoreArray:
        alloc = nodes.allocatable if rows is None else nodes.allocatable[rows]
        used = nodes.requested if rows is None else nodes.requested[rows]
        total = np.zeros(alloc.shape[0], dtype=np.int64)
        weight_sum = np.zeros(alloc.shape[0], dtype=np.int64)
        for col, weight in present:
            capacity = alloc[:, col]
            total += share(capacity, used[:, col] + vec[col]) * weight
            weight_sum += (capacity > 0) * weight
        return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0)

    items = [(col, weight, int(vec[col])) for col, weight in present]

    def per_row(allocatable: list[int], requested: list[int]) -> int:
        total = weight_sum = 0
        for col, weight, add in items:
            capacity = allocatable[col]
            if capacity <= 0:
                continue
            total += row_share(capacity, requested[col] + add) * weight
            weight_sum += weight
        return total // weight_sum if weight_sum else 0

    return nodes.incremental((key, weights, vec.tobytes()), compute=compute, per_row=per_row)
