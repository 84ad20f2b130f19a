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
  ``UNSCHEDULABLE_AND_UNRESOLVABLE``. A node that would fit but for what Available
  Reservations hold there (for other pods) names them, so a user looking at an idle node
  sees why: ``Insufficient cpu (node n-0: 12 cpu reserved by team/keep)``.

A pod's requests are sized with pod-level resources (``spec.resources``) where it has them
(see :func:`berth.scheduler.snapshot.pods.pod_requests`), so this plugin implements that field.

Args: ``ignoredResources`` (names never checked, as in Kubernetes' NodeResourcesFitArgs) and
``scoringStrategy`` (:mod:`berth.scheduler.plugins.resource_scoring`): when given, the plugin
also scores nodes (``LeastAllocated``, ``MostAllocated`` or ``RequestedToCapacityRatio``, per
resource if asked); without it, it only filters. It is Berth's one resource score: the former
LeastAllocated and MostAllocated plugins are its strategies (a profile naming them is refused
at load with what to write instead, as kube-scheduler did).
"""

from __future__ import annotations

import collections.abc

import numpy as np

from berth.api import quantities, resources
from berth.scheduler.framework import (
    cyclestate,
    filtering,
    handles,
    interfaces,
    reasons,
    registries,
    statuses,
)
from berth.scheduler.plugins import names, resource_scoring
from berth.scheduler.snapshot import nodetable, podconstraints, pods, reservations

__all__ = [
    "NAME",
    "TOO_MANY_PODS",
    "NodeResourcesFit",
    "NodeResourcesFitArgs",
    "NodeResourcesFitScoring",
    "insufficient",
    "new",
]

NAME = names.NODE_RESOURCES_FIT
TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str, /) -> str:
    """The reason for one resource: ``Insufficient nvidia.com/gpu`` (``Too many pods``)."""
    return TOO_MANY_PODS if resource == resources.PODS else f"Insufficient {resource}"


class NodeResourcesFitArgs(registries.ArgsModel):
    """Arguments of NodeResourcesFit."""

    ignored_resources: tuple[str, ...] = ()
    """Resource names the filter never checks (e.g. an extended resource a device plugin
    oversubscribes). Empty by default: every requested resource must fit."""
    scoring_strategy: resource_scoring.ScoringStrategy | None = None
    """How the plugin scores nodes; unset, it does not score (module docstring)."""


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

    def __init__(
        self, args: NodeResourcesFitArgs, handle: handles.ExtendedHandle | None = None
    ) -> None:
        self._ignored = frozenset(args.ignored_resources)
        self._handle = handle

    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        if pod.invalid is not None:
            return statuses.new(
                statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                pod.invalid,
                reason_code=reasons.ReasonCode.INVALID,
            )
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
                reason_code=reasons.ReasonCode.NOT_ENOUGH_RESOURCES,
            )
        passed = fit_mask(vec, nodes=nodes).copy()
        return filtering.NodeFilter(
            passed=passed,
            explain=lambda: _explain(vec, nodes, held=self._held(pod, nodes)),
            reason_code=reasons.ReasonCode.NOT_ENOUGH_RESOURCES,
        )

    def _held(
        self, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> dict[int, list[reservations.ReservationInfo]]:
        """Available reservations ``pod`` may not use, by the row of their node (asked only
        to explain; an owner's own reservation is handed back to it before this filter)."""
        if self._handle is None or not self._handle.in_session:
            return {}
        out: dict[int, list[reservations.ReservationInfo]] = {}
        for info in self._handle.snapshot().reservations.values():
            row = nodes.index.get(str(info.node_name)) if info.node_name else None
            if row is not None and info.available and not reservations.is_owner(info, pod):
                out.setdefault(row, []).append(info)
        return out


def _explain(
    vec: nodetable.IntArray,
    nodes: nodetable.NodeTable,
    *,
    held: collections.abc.Mapping[int, collections.abc.Sequence[reservations.ReservationInfo]],
) -> filtering.Reasons:
    free = nodes.free()
    out: dict[str, filtering.BoolArray] = {}
    for col in np.flatnonzero(vec):
        short = free[:, col] < vec[col]
        if not short.any():
            continue
        name = nodes.resources[col]
        plain = short.copy()
        if name != resources.PODS:
            for row, infos in sorted(held.items()):
                holding = [(i.key, _remaining(i, name)) for i in infos]
                holding = [(key, milli) for key, milli in holding if milli > 0]
                amount = sum(milli for _, milli in holding)
                if not short[row] or not holding or free[row, col] + amount < vec[col]:
                    continue
                plain[row] = False
                only = np.zeros(len(nodes), dtype=np.bool_)
                only[row] = True
                quantity = quantities.format_milli(amount, resources.format_for(name))
                by = ", ".join(key for key, _ in sorted(holding))
                reason = f"node {nodes.names[row]}: {quantity} {name} reserved by {by}"
                out[f"{insufficient(name)} ({reason})"] = only
        if plain.any():
            out[insufficient(name)] = plain
    return out


def _remaining(info: reservations.ReservationInfo, name: str) -> int:
    """What ``info`` still holds of resource ``name`` (milli-units)."""
    return max(reservations.held(info).get(name, 0) - info.allocated.get(name, 0), 0)


class NodeResourcesFitScoring(NodeResourcesFit, interfaces.ScorePlugin):
    """PreFilter, Filter, Score: NodeResourcesFit with a ``scoringStrategy``."""

    def __init__(
        self, args: NodeResourcesFitArgs, handle: handles.ExtendedHandle | None = None
    ) -> None:
        super().__init__(args, handle)
        assert args.scoring_strategy is not None  # new() builds this class only then
        self._scorer = resource_scoring.Scorer(args.scoring_strategy, key=NAME)

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        return self._scorer.scores(pod, nodes)

    def score_extensions(self) -> None:
        return None


def new(args: NodeResourcesFitArgs, handle: handles.ExtendedHandle) -> NodeResourcesFit:
    """Build the plugin (scoring too when the args carry a ``scoringStrategy``)."""
    if args.scoring_strategy is not None:
        return NodeResourcesFitScoring(args, handle)
    return NodeResourcesFit(args, handle)
