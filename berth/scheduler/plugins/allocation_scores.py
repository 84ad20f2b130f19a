"""The weighted-mean node score of Kubernetes' ``NodeResourcesFit`` strategies.

Every strategy (LeastAllocated, MostAllocated, RequestedToCapacityRatio) scores a node as the
weighted mean, over the configured resources the node offers, of a per-resource share (0..100)
with the pod's own request included; they differ only in the share. This module owns the
shares, the mean (vectorised, and per row for the node table's incremental refresh) and a
resource's name and weight. An extended resource the pod does not request is left out of the
mean, as Kubernetes does (``calculateResourceAllocatableRequest``), so a cpu-only pod is scored
on cpu and memory alone even when the profile weighs ``nvidia.com/gpu``. Imported by
:mod:`resource_scoring` only (NodeResourcesFit's ``scoringStrategy``, the one resource score).
"""

from __future__ import annotations

import collections.abc
import enum

import numpy as np
import pydantic

from berth.api import resources
from berth.scheduler.framework import interfaces
from berth.scheduler.snapshot import nodetable

__all__ = [
    "ResourceWeight",
    "RowShare",
    "Share",
    "ShapePoint",
    "Strategy",
    "Term",
    "least_row_share",
    "least_share",
    "most_row_share",
    "most_share",
    "ratio_shares",
    "scored_terms",
    "weighted_scores",
]

Share = collections.abc.Callable[[nodetable.IntArray, nodetable.IntArray], nodetable.IntArray]
"""``share(capacity, requested)`` per row of one column; 0 where the node offers none."""
RowShare = collections.abc.Callable[[int, int], int]
"""``share(capacity, requested)`` of one row and column; called only when capacity > 0."""

MAX = interfaces.MAX_NODE_SCORE


class Strategy(enum.StrEnum):
    """How a resource's share of a node is scored (Kubernetes' ``ScoringStrategyType``)."""

    LEAST_ALLOCATED = "LeastAllocated"
    """Free share after the pod: spread."""
    MOST_ALLOCATED = "MostAllocated"
    """Used share after the pod: bin packing."""
    REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
    """The used share mapped through a piecewise linear ``shape``."""


class ShapePoint(pydantic.BaseModel):
    """One point of RequestedToCapacityRatio's shape (Kubernetes' ``UtilizationShapePoint``)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    utilization: int = pydantic.Field(ge=0, le=100)
    """Used share of the resource, percent."""
    score: int = pydantic.Field(ge=0, le=10)
    """Score at that utilization, 0..10 (scaled to 0..100)."""


class ResourceWeight(pydantic.BaseModel):
    """A resource the score looks at, and its weight in the mean."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    name: str = pydantic.Field(min_length=1)
    """Resource name, e.g. ``cpu`` or ``nvidia.com/gpu``."""
    weight: int = pydantic.Field(default=1, ge=1, le=100)
    """Weight of this resource in the mean (1..100)."""


def least_share(capacity: nodetable.IntArray, requested: nodetable.IntArray) -> nodetable.IntArray:
    """LeastAllocated: ``(capacity - requested) * 100 / capacity``, 0 when over capacity."""
    share = (capacity - requested) * MAX // np.maximum(capacity, 1)
    share[(requested > capacity) | (capacity <= 0)] = 0
    return share


def least_row_share(capacity: int, requested: int) -> int:
    """:func:`least_share` of one row."""
    if requested > capacity:
        return 0
    return (capacity - requested) * MAX // capacity


def most_share(capacity: nodetable.IntArray, requested: nodetable.IntArray) -> nodetable.IntArray:
    """MostAllocated: ``requested * 100 / capacity``, capped at capacity."""
    share = np.minimum(requested, capacity) * MAX // np.maximum(capacity, 1)
    share[capacity <= 0] = 0
    return share


def most_row_share(capacity: int, requested: int) -> int:
    """:func:`most_share` of one row."""
    return min(requested, capacity) * MAX // capacity


def ratio_shares(shape: collections.abc.Sequence[ShapePoint], /) -> tuple[Share, RowShare]:
    """RequestedToCapacityRatio's share for ``shape``: Kubernetes' broken linear function of
    the utilization ``requested * 100 / capacity`` (integer), scores scaled by 10."""
    points = [
        (p.utilization, p.score * MAX // 10) for p in sorted(shape, key=lambda p: p.utilization)
    ]

    def row_share(capacity: int, requested: int) -> int:
        util = requested * MAX // capacity
        for i, (u, s) in enumerate(points):
            if util <= u:
                if i == 0:
                    return s
                u0, s0 = points[i - 1]
                return s0 + (s - s0) * (util - u0) // (u - u0)
        return points[-1][1]

    def share(capacity: nodetable.IntArray, requested: nodetable.IntArray) -> nodetable.IntArray:
        util = requested * MAX // np.maximum(capacity, 1)
        out = np.full(util.shape, points[-1][1], dtype=np.int64)
        done = np.zeros(util.shape, dtype=np.bool_)
        for i, (u, s) in enumerate(points):
            here = ~done & (util <= u)
            if i == 0:
                out[here] = s
            else:
                u0, s0 = points[i - 1]
                out[here] = s0 + (s - s0) * (util[here] - u0) // (u - u0)
            done |= here
        out[capacity <= 0] = 0
        return out

    return share, row_share


Term = tuple[str, int, Share, RowShare]
"""One resource of the mean: name, weight, share and row share."""


def scored_terms(
    vec: nodetable.IntArray,
    /,
    *,
    nodes: nodetable.NodeTable,
    terms: collections.abc.Sequence[Term],
) -> list[tuple[int, int, Share, RowShare]]:
    """The terms the table has a column for, as columns, without the extended resources the
    pod does not request (Kubernetes skips them)."""
    out = []
    for name, weight, share, row_share in terms:
        col = nodes.column.get(name)
        if col is None or (int(vec[col]) == 0 and resources.is_scalar(name)):
            continue
        out.append((col, weight, share, row_share))
    return out


def weighted_scores(
    vec: nodetable.IntArray,
    /,
    *,
    nodes: nodetable.NodeTable,
    terms: collections.abc.Sequence[Term],
    key: collections.abc.Hashable,
) -> interfaces.ScoreArray:
    """Per row, the weighted mean of each term's share after adding ``vec`` (shared, kept per
    ``key``, which must name the terms).

    Integer arithmetic, exactly as Kubernetes computes it; a resource the node does not offer
    is left out of the mean, and a node offering none of them scores 0.
    """
    present = scored_terms(vec, nodes=nodes, terms=terms)

    def compute(rows: nodetable.IntArray | None) -> interfaces.ScoreArray:
        alloc = nodes.allocatable if rows is None else nodes.allocatable[rows]
        used = nodes.requested if rows is None else nodes.requested[rows]
        total = np.zeros(alloc.shape[0], dtype=np.int64)
        weight_sum = np.zeros(alloc.shape[0], dtype=np.int64)
        for col, weight, share, _ in present:
            capacity = alloc[:, col]
            total += share(capacity, used[:, col] + vec[col]) * weight
            weight_sum += (capacity > 0) * weight
        return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0)

    items = [(col, weight, row_share, int(vec[col])) for col, weight, _, row_share in present]

    def per_row(allocatable: list[int], requested: list[int]) -> int:
        total = weight_sum = 0
        for col, weight, row_share, add in items:
            capacity = allocatable[col]
            if capacity <= 0:
                continue
            total += row_share(capacity, requested[col] + add) * weight
            weight_sum += weight
        return total // weight_sum if weight_sum else 0

    return nodes.incremental((key, vec.tobytes()), compute=compute, per_row=per_row)
