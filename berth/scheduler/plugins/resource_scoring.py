"""NodeResourcesFit's ``scoringStrategy``: one resource score, a strategy per resource.

Kubernetes' ``NodeResourcesFitArgs.scoringStrategy`` (``type: LeastAllocated |
MostAllocated | RequestedToCapacityRatio``, ``resources: [{name, weight}]``,
``requestedToCapacityRatio.shape``), with two additions for clusters of scarce devices:

- ``resources[].type``: one resource may use its own strategy, so a profile packs
  ``nvidia.com/gpu`` (MostAllocated) while spreading cpu and memory (LeastAllocated) in one
  weighted mean. With a large weight on the scarce resource a GPU pod goes to the node whose
  GPUs are most used; among nodes using as many, cpu and memory spread decides. An extended
  resource the pod does not request is left out of the mean (as in Kubernetes), so cpu-only
  pods are scored as before.
- ``scarce``: resources kept for the pods that request them. A pod requesting none of them
  scores the nodes offering any in the lower half of the range (``score // 2``) and the other
  nodes in the upper half (``50 + score // 2``), so cpu-only work fills cpu nodes first and
  goes to GPU nodes only when it must (KAI's ``resourcetype`` idea, as a score, not a filter).
  While no node offers a scarce resource (or the pod requests one) the score is the plain
  mean: a cluster without GPUs is scored exactly as before.

The arithmetic is :mod:`allocation_scores`' (integer, as Kubernetes); scores are kept by the
node table per request vector and refreshed only for the rows placements changed.
"""

from __future__ import annotations

import itertools

import numpy as np
import pydantic

from berth.api import resources
from berth.scheduler.framework import interfaces, registries
from berth.scheduler.plugins import allocation_scores
from berth.scheduler.snapshot import nodetable, pods

__all__ = ["Scorer", "ScoringStrategy", "StrategyResource"]

Strategy = allocation_scores.Strategy
HALF = interfaces.MAX_NODE_SCORE // 2


class StrategyResource(allocation_scores.ResourceWeight):
    """A resource of the strategy: name, weight, and optionally its own strategy."""

    type: Strategy | None = None
    """This resource's strategy when it differs from ``scoringStrategy.type``."""


class RequestedToCapacityRatio(registries.ArgsModel):
    """RequestedToCapacityRatio's parameters."""

    shape: tuple[allocation_scores.ShapePoint, ...] = pydantic.Field(min_length=1)
    """Points (utilization percent, score 0..10) of a piecewise linear function."""

    @pydantic.field_validator("shape")
    @classmethod
    def _increasing(
        cls, shape: tuple[allocation_scores.ShapePoint, ...]
    ) -> tuple[allocation_scores.ShapePoint, ...]:
        utils = [p.utilization for p in shape]
        if any(b <= a for a, b in itertools.pairwise(utils)):
            raise ValueError("utilization values must be strictly increasing")
        return shape


class ScoringStrategy(registries.ArgsModel):
    """``scoringStrategy`` of NodeResourcesFit (see the module docstring)."""

    type: Strategy = Strategy.LEAST_ALLOCATED
    """The strategy of every resource that names none of its own."""
    resources: tuple[StrategyResource, ...] = pydantic.Field(
        default=(StrategyResource(name=resources.CPU), StrategyResource(name=resources.MEMORY)),
        min_length=1,
    )
    """Resources scored, with weights (and optionally their own strategy)."""
    requested_to_capacity_ratio: RequestedToCapacityRatio | None = None
    """The shape, required when any resource uses RequestedToCapacityRatio."""
    scarce: tuple[str, ...] = ()
    """Resources kept for the pods that request them (module docstring)."""

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> ScoringStrategy:
        names = [r.name for r in self.resources]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"resource {name} is listed twice")
        uses_ratio = any(
            (r.type or self.type) is Strategy.REQUESTED_TO_CAPACITY_RATIO for r in self.resources
        )
        if uses_ratio and self.requested_to_capacity_ratio is None:
            raise ValueError(
                "requestedToCapacityRatio.shape is required by the RequestedToCapacityRatio "
                "strategy"
            )
        return self


class Scorer:
    """The per-pod score of one :class:`ScoringStrategy` (0..100, no normalisation)."""

    def __init__(self, strategy: ScoringStrategy, *, key: str) -> None:
        ratio = (
            allocation_scores.ratio_shares(strategy.requested_to_capacity_ratio.shape)
            if strategy.requested_to_capacity_ratio is not None
            else None
        )
        terms: list[allocation_scores.Term] = []
        share: allocation_scores.Share
        row_share: allocation_scores.RowShare
        for item in strategy.resources:
            kind = item.type or strategy.type
            if kind is Strategy.LEAST_ALLOCATED:
                share, row_share = allocation_scores.least_share, allocation_scores.least_row_share
            elif kind is Strategy.MOST_ALLOCATED:
                share, row_share = allocation_scores.most_share, allocation_scores.most_row_share
            else:
                assert ratio is not None  # the model's validator requires the shape
                share, row_share = ratio
            terms.append((item.name, item.weight, share, row_share))
        self._terms = tuple(terms)
        self._scarce = tuple(strategy.scarce)
        self._key = (key, strategy.model_dump_json())

    def scores(self, pod: pods.PodInfo, nodes: nodetable.NodeTable) -> interfaces.ScoreArray:
        """Per row, the pod's score (may be the table's cached, read-only array)."""
        vec = nodes.vector(pod.score_requests)
        mean = allocation_scores.weighted_scores(vec, nodes=nodes, terms=self._terms, key=self._key)
        scarce = [nodes.column[n] for n in self._scarce if n in nodes.column]
        if not scarce or any(int(vec[col]) > 0 for col in scarce):
            return mean
        offers = (nodes.allocatable[:, scarce] > 0).any(axis=1)
        if not offers.any():
            return mean
        return np.where(offers, mean // 2, HALF + mean // 2)
