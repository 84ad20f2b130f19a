"""NodeAffinity: ``spec.nodeSelector``, required and preferred node affinity.

Kubernetes' ``NodeAffinity`` plugin, vectorised over the node table:

- Filter (static): a row passes when it matches every ``nodeSelector`` pair and at least one
  required term (terms ORed, requirements ANDed; operators In, NotIn, Exists, DoesNotExist,
  Gt, Lt; ``matchFields`` on ``metadata.name``). Masks are cached per requirement and term by
  the node table, so a selector shared by many pod shapes is evaluated once per session.
- Score: the sum of the weights of the preferred terms a row matches, normalised so that the
  best feasible row scores 100. PreScore skips pods without preferred terms.
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

__all__ = ["NAME", "REASON", "NodeAffinity", "new", "preferred_scores", "required_mask"]

NAME = names.NODE_AFFINITY
REASON = "node(s) didn't match Pod's node affinity/selector"


def required_mask(pod: pods.PodInfo, /, *, nodes: nodetable.NodeTable) -> filtering.BoolArray:
    """Rows satisfying the pod's node selector and required node affinity."""
    mask = np.ones(len(nodes), dtype=np.bool_)
    for req in pod.node_selector:
        mask &= nodes.requirement_mask(req)
    if pod.required_affinity is not None:
        any_term = np.zeros(len(nodes), dtype=np.bool_)
        for term in pod.required_affinity:
            any_term |= nodes.term_mask(term)
        mask &= any_term
    return mask


def preferred_scores(pod: pods.PodInfo, /, *, nodes: nodetable.NodeTable) -> interfaces.ScoreArray:
    """The summed weights of the preferred terms each row matches (cached; read-only)."""

    def compute() -> interfaces.ScoreArray:
        total = np.zeros(len(nodes), dtype=np.int64)
        for preferred in pod.preferred_affinity:
            total += nodes.term_mask(preferred.term) * preferred.weight
        total.setflags(write=False)
        return total

    return nodes.cached((NAME, "preferred", pod.preferred_affinity), compute=compute)


def normalize(
    scores: interfaces.ScoreArray, /, *, feasible: filtering.BoolArray
) -> interfaces.ScoreArray:
    """Scale so that the highest feasible score becomes ``MAX_NODE_SCORE`` (all zero stays)."""
    top = int(scores[feasible].max()) if feasible.any() else 0
    if top <= 0:
        return np.zeros_like(scores)
    return scores * interfaces.MAX_NODE_SCORE // top


class NodeAffinity(
    interfaces.StaticFilterPlugin,
    interfaces.PreScorePlugin,
    interfaces.ScorePlugin,
    interfaces.ScoreExtensions,
):
    """Filter (static), PreScore, Score with normalisation."""

    name = NAME

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        if not pod.node_selector and pod.required_affinity is None:
            return filtering.passing(len(nodes))
        return filtering.NodeFilter(
            passed=required_mask(pod, nodes=nodes),
            code=statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            reason=REASON,
        )

    def pre_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> statuses.Status:
        return statuses.SUCCESS if pod.preferred_affinity else statuses.SKIP

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        return preferred_scores(pod, nodes=nodes).copy()

    def score_extensions(self) -> interfaces.ScoreExtensions:
        return self

    def normalize_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        scores: interfaces.ScoreArray,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        return normalize(scores, feasible=feasible)


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> NodeAffinity:
    """Build the plugin (it takes no arguments)."""
    return NodeAffinity()
