"""TaintToleration: pods go only where they tolerate the taints, and prefer fewer taints.

Kubernetes' ``TaintToleration`` plugin, vectorised over the node table's distinct taints (a
cluster has few): the pod's tolerations are matched against each distinct taint once, then one
boolean reduction over ``[rows, taints]`` answers for every node.

- Filter (static): a row fails when it has a ``NoSchedule`` or ``NoExecute`` taint the pod does
  not tolerate; the reason names the node's first such taint, in the node's order,
  ``untolerated taint {dedicated: infer}``.
- Score: the number of ``PreferNoSchedule`` taints the pod does not tolerate (only tolerations
  with an empty or ``PreferNoSchedule`` effect count, as in Kubernetes), normalised in reverse:
  the row with the fewest scores 100.
"""

from __future__ import annotations

import collections.abc
import typing

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

__all__ = ["NAME", "TaintToleration", "new", "untolerated", "untolerated_reason"]

NAME = names.TAINT_TOLERATION
_HARD = frozenset({taints.NO_SCHEDULE, taints.NO_EXECUTE})


def untolerated_reason(taint: taints.Taint, /) -> str:
    """The "why pending" reason for one taint: ``untolerated taint {key: value}``."""
    return f"untolerated taint {taint}"


def untolerated(
    tolerations: collections.abc.Iterable[taints.Toleration],
    /,
    *,
    candidates: collections.abc.Sequence[taints.Taint],
    effects: collections.abc.Container[str],
) -> filtering.BoolArray:
    """Which of ``candidates`` have an effect in ``effects`` and no tolerating toleration."""
    tolerations = tuple(tolerations)
    return np.array(
        [
            t.effect in effects and not any(taints.tolerates(tol, taint=t) for tol in tolerations)
            for t in candidates
        ],
        dtype=np.bool_,
    )


def _hard_mask(pod: pods.PodInfo, nodes: nodetable.NodeTable) -> filtering.BoolArray:
    bad = untolerated(pod.tolerations, candidates=nodes.distinct_taints, effects=_HARD)
    if not bad.any():
        return np.ones(len(nodes), dtype=np.bool_)
    hit = typing.cast(filtering.BoolArray, nodes.taint_matrix()[:, bad].any(axis=1))
    return ~hit


def _explain(
    pod: pods.PodInfo, nodes: nodetable.NodeTable, passed: filtering.BoolArray
) -> filtering.Reasons:
    by_reason: dict[str, list[int]] = {}
    for row in np.flatnonzero(~passed):
        for taint in nodes.taints[row]:
            if taint.effect in _HARD and not any(
                taints.tolerates(tol, taint=taint) for tol in pod.tolerations
            ):
                by_reason.setdefault(untolerated_reason(taint), []).append(int(row))
                break
    out: dict[str, filtering.BoolArray] = {}
    for reason, rows in by_reason.items():
        mask = np.zeros(len(nodes), dtype=np.bool_)
        mask[rows] = True
        out[reason] = mask
    return out


def prefer_counts(pod: pods.PodInfo, /, *, nodes: nodetable.NodeTable) -> interfaces.ScoreArray:
    """Per row, how many ``PreferNoSchedule`` taints the pod does not tolerate (cached)."""
    soft = tuple(t for t in pod.tolerations if t.effect in ("", taints.PREFER_NO_SCHEDULE))

    def compute() -> interfaces.ScoreArray:
        bad = untolerated(
            soft, candidates=nodes.distinct_taints, effects=(taints.PREFER_NO_SCHEDULE,)
        )
        if not bad.any():
            counts = np.zeros(len(nodes), dtype=np.int64)
        else:
            counts = nodes.taint_matrix()[:, bad].sum(axis=1, dtype=np.int64)
        counts.setflags(write=False)
        return counts

    return nodes.cached((NAME, "prefer", soft), compute=compute)


class TaintToleration(
    interfaces.StaticFilterPlugin,
    interfaces.PreScorePlugin,
    interfaces.ScorePlugin,
    interfaces.ScoreExtensions,
):
    """Filter (static), PreScore, Score with reverse normalisation."""

    name = NAME

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        passed = _hard_mask(pod, nodes)
        return filtering.NodeFilter(
            passed=passed,
            code=statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            explain=lambda: _explain(pod, nodes, passed),
        )

    def pre_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> statuses.Status:
        has_soft = any(t.effect == taints.PREFER_NO_SCHEDULE for t in nodes.distinct_taints)
        return statuses.SUCCESS if has_soft else statuses.SKIP

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        return prefer_counts(pod, nodes=nodes).copy()

    def score_extensions(self) -> interfaces.ScoreExtensions:
        return self

    def normalize_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        scores: interfaces.ScoreArray,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        top = int(scores[feasible].max()) if feasible.any() else 0
        if top <= 0:
            return np.full_like(scores, interfaces.MAX_NODE_SCORE)
        return interfaces.MAX_NODE_SCORE - scores * interfaces.MAX_NODE_SCORE // top


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> TaintToleration:
    """Build the plugin (it takes no arguments)."""
    return TaintToleration()
