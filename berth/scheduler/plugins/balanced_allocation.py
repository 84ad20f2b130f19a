"""BalancedAllocation: prefer nodes whose resources stay evenly used.

Kubernetes' ``NodeResourcesBalancedAllocation``, vectorised: per configured resource the used
fraction ``requested / allocatable`` with the pod's own request included (capped at 1; a
resource the node does not offer is left out), and the score is ``(1 - std) * 100`` truncated,
where std is the population standard deviation of the fractions (half their difference for
two resources, Kubernetes' special case). Scores are kept by the node table per request vector
and refreshed only for the rows placements changed.

Args: ``resources`` (names; cpu and memory by default).

Like Kubernetes' balance, it counts what pods really request (no non-zero defaults for
best-effort containers, unlike NodeResourcesFit's scoring strategies).
"""

from __future__ import annotations

import math

import numpy as np
import pydantic

from berth.api import resources
from berth.scheduler.framework import cyclestate, filtering, handles, interfaces, registries
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import nodetable, pods

__all__ = ["NAME", "BalancedAllocation", "BalancedAllocationArgs", "new", "scores"]

NAME = names.BALANCED_ALLOCATION


class BalancedAllocationArgs(registries.ArgsModel):
    """Arguments of BalancedAllocation."""

    resources: tuple[str, ...] = pydantic.Field(
        default=(resources.CPU, resources.MEMORY), min_length=1
    )
    """Resources whose used fractions should stay even; Kubernetes' default: cpu, memory."""


def scores(
    vec: nodetable.IntArray, /, *, nodes: nodetable.NodeTable, names_: tuple[str, ...]
) -> interfaces.ScoreArray:
    """Per row, ``(1 - std of used fractions) * 100`` after adding ``vec`` (shared)."""
    cols = [nodes.column[n] for n in names_ if n in nodes.column]

    def compute(rows: nodetable.IntArray | None) -> interfaces.ScoreArray:
        alloc = nodes.allocatable if rows is None else nodes.allocatable[rows]
        used = nodes.requested if rows is None else nodes.requested[rows]
        size = alloc.shape[0]
        if not cols:
            return np.full(size, interfaces.MAX_NODE_SCORE, dtype=np.int64)
        capacity = alloc[:, cols]
        offered = capacity > 0
        requested = used[:, cols] + vec[cols]
        fractions = np.minimum(requested / np.maximum(capacity, 1), 1.0) * offered
        count = offered.sum(axis=1)
        mean = fractions.sum(axis=1) / np.maximum(count, 1)
        spread = ((fractions - mean[:, None]) * offered) ** 2
        std = np.sqrt(spread.sum(axis=1) / np.maximum(count, 1))
        pair = count == 2
        if pair.any():
            # Kubernetes' exact formula for two resources, so truncation matches it.
            first = np.argmax(offered, axis=1)
            last = offered.shape[1] - 1 - np.argmax(offered[:, ::-1], axis=1)
            picked = np.arange(size)
            halves = np.abs(fractions[picked, first] - fractions[picked, last]) / 2
            std = np.where(pair, halves, std)
        std = np.where(count >= 2, std, 0.0)
        return ((1 - std) * interfaces.MAX_NODE_SCORE).astype(np.int64)

    items = [(col, int(vec[col])) for col in cols]

    def per_row(allocatable: list[int], requested: list[int]) -> int:
        fractions = [
            min(float(requested[col] + add) / float(allocatable[col]), 1.0)
            for col, add in items
            if allocatable[col] > 0
        ]
        std = 0.0
        if len(fractions) == 2:
            std = abs(fractions[0] - fractions[1]) / 2
        elif len(fractions) > 2:
            mean = sum(fractions) / len(fractions)
            std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
        return int((1 - std) * interfaces.MAX_NODE_SCORE)

    return nodes.incremental((NAME, names_, vec.tobytes()), compute=compute, per_row=per_row)


class BalancedAllocation(interfaces.ScorePlugin):
    """Score (already 0..100: no normalisation)."""

    name = NAME

    def __init__(self, args: BalancedAllocationArgs) -> None:
        self._names = tuple(args.resources)

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        # The table's cached scores, read-only: the runtime only reads them (no normaliser).
        return scores(nodes.vector(pod.requests), nodes=nodes, names_=self._names)

    def score_extensions(self) -> None:
        return None


def new(args: BalancedAllocationArgs, handle: handles.ExtendedHandle) -> BalancedAllocation:
    """Build the plugin."""
    return BalancedAllocation(args)
