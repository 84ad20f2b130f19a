"""PodTopologySpread: pods spread evenly over topology domains (zones, nodes...).

Kubernetes' ``PodTopologySpread`` plugin, vectorised: the session's placements count, per row,
the placed pods a constraint selects (the pod's namespace, not being deleted, its label
selector with ``matchLabelKeys`` merged in), statements included, so a gang's tentatively
placed members spread too; a topology key's domains turn counts per row into counts per domain.

For each constraint, the nodes that count are those with every topology key of the pod's
constraints (of that kind: hard for Filter, soft for Score) that match the pod's node
selector and required node affinity (``nodeAffinityPolicy: Honor``, the default) and whose
taints it tolerates (``nodeTaintsPolicy: Honor``; ``Ignore`` is the default, so a domain
of cordoned or tainted nodes still counts, as in Kubernetes; a cordoned node counts as tainted
``node.kubernetes.io/unschedulable``).

- Filter (``whenUnsatisfiable: DoNotSchedule``): a node lacking the key fails (unresolvable,
  the reason naming the key);
  otherwise ``pods in its domain + 1 (if the pod matches its own selector) - the minimum over
  the domains`` must not exceed ``maxSkew``. The minimum is 0 while there are fewer domains
  than ``minDomains``.
- Score (``ScheduleAnyway``): per node, ``sum of pods in its domain * log(domains + 2) + maxSkew -
  1``, fewer scoring higher (normalised as ``100 * (max + min - s) / max``); nodes lacking a
  key score 0.
- Cluster defaults: a pod without constraints of its own gets the plugin's default constraints
  (``defaultingType: System``: ``ScheduleAnyway`` with skew 3 per node and 5 per zone), with
  the pods of the same owning ReplicaSet, ReplicationController or StatefulSet as its
  selector. (Kubernetes also derives the selector from Services selecting the pod; Berth does
  not watch Services, so a pod without such an owner gets no default constraint.)
"""

from __future__ import annotations

import collections.abc
import dataclasses
import math
import typing

import numpy as np
import pydantic

from berth.scheduler.framework import (
    cyclestate,
    filtering,
    handles,
    interfaces,
    registries,
    statuses,
)
from berth.scheduler.framework import placements as framework_placements
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import nodetable, podconstraints, pods, taints, topology

__all__ = [
    "NAME",
    "REASON",
    "DefaultConstraint",
    "missing_label_reason",
    "PodTopologySpread",
    "PodTopologySpreadArgs",
    "new",
]

NAME = names.POD_TOPOLOGY_SPREAD
REASON = "node(s) didn't match pod topology spread constraints"


def missing_label_reason(key: str, /) -> str:
    """Why a node lacking a hard constraint's topology key fails (kube-scheduler's text, with
    the key: a typo in it shows here)."""
    return f"{REASON} (missing required label {key})"


HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
_OWNER_KINDS = frozenset({"ReplicaSet", "ReplicationController", "StatefulSet"})
_HARD_TAINTS = frozenset({taints.NO_SCHEDULE, taints.NO_EXECUTE})
_UNSCHEDULABLE = taints.Taint(key="node.kubernetes.io/unschedulable", effect=taints.NO_SCHEDULE)
_NO_DOMAIN = np.iinfo(np.int32).max  # the minimum when no node counts: every skew passes


class DefaultConstraint(registries.ArgsModel):
    """A cluster default constraint (``defaultConstraints[]``): no selector of its own."""

    max_skew: int = pydantic.Field(ge=1)
    topology_key: str = pydantic.Field(min_length=1)
    when_unsatisfiable: typing.Literal["DoNotSchedule", "ScheduleAnyway"]


class PodTopologySpreadArgs(registries.ArgsModel):
    """Arguments of PodTopologySpread (kube-scheduler's ``PodTopologySpreadArgs``)."""

    default_constraints: tuple[DefaultConstraint, ...] = ()
    """Used with ``defaultingType: List`` for pods without constraints of their own."""
    defaulting_type: typing.Literal["System", "List"] = "System"
    """``System``: Kubernetes' built-in defaults (skew 3 per node, 5 per zone, both
    ``ScheduleAnyway``); ``List``: :attr:`default_constraints`."""

    @pydantic.model_validator(mode="after")
    def _list_only(self) -> PodTopologySpreadArgs:
        if self.default_constraints and self.defaulting_type != "List":
            raise ValueError("defaultConstraints need defaultingType: List")
        return self


SYSTEM_DEFAULTS = (
    DefaultConstraint(max_skew=3, topology_key=HOSTNAME, when_unsatisfiable="ScheduleAnyway"),
    DefaultConstraint(max_skew=5, topology_key=ZONE, when_unsatisfiable="ScheduleAnyway"),
)


@dataclasses.dataclass(frozen=True)
class _Rule:
    """One constraint as applied: what it counts and whether the pod counts itself."""

    constraint: podconstraints.SpreadConstraint
    key: collections.abc.Hashable  # the placements counter's key
    counts: collections.abc.Callable[[pods.PodInfo], bool]
    self_match: int


def _controller_uid(pod: pods.PodInfo) -> str | None:
    for ref in pod.owner_references:
        if ref.controller and ref.kind in _OWNER_KINDS:
            return ref.uid or f"{ref.kind}/{ref.name}"
    return None


def _explicit_rule(pod: pods.PodInfo, c: podconstraints.SpreadConstraint) -> _Rule | None:
    selector, namespace = c.selector, pod.namespace
    if selector is None:
        return None  # selects no pod: only the pod itself would count, and it fits anywhere

    def counts(other: pods.PodInfo) -> bool:
        return (
            other.namespace == namespace and not other.deleting and selector.matches(other.labels)
        )

    return _Rule(
        constraint=c,
        key=(NAME, namespace, selector),
        counts=counts,
        self_match=int(selector.matches(pod.labels)),
    )


class PodTopologySpread(
    interfaces.PreFilterPlugin,
    interfaces.FilterPlugin,
    interfaces.PreScorePlugin,
    interfaces.ScorePlugin,
    interfaces.ScoreExtensions,
    interfaces.ConstraintPlugin,
):
    """PreFilter, Filter, PreScore, Score with normalisation; see the module docstring."""

    name = NAME
    understands = frozenset({podconstraints.Field.TOPOLOGY_SPREAD})

    def __init__(self, args: PodTopologySpreadArgs, *, handle: handles.ExtendedHandle) -> None:
        chosen = SYSTEM_DEFAULTS if args.defaulting_type == "System" else args.default_constraints
        self._defaults = tuple(
            podconstraints.SpreadConstraint(
                max_skew=d.max_skew,
                topology_key=d.topology_key,
                hard=d.when_unsatisfiable == podconstraints.DO_NOT_SCHEDULE,
                selector=None,
            )
            for d in chosen
        )
        self._handle = handle

    def _placed(self) -> framework_placements.Placements:
        return self._handle.placements()

    def _rules(self, pod: pods.PodInfo, *, hard: bool) -> list[_Rule]:
        if pod.spread:
            found = [_explicit_rule(pod, c) for c in pod.spread if c.hard is hard]
            return [r for r in found if r is not None]
        if not self._defaults:
            return []
        uid = _controller_uid(pod)
        if uid is None:
            return []
        namespace = pod.namespace

        def counts(other: pods.PodInfo) -> bool:
            return (
                other.namespace == namespace
                and not other.deleting
                and _controller_uid(other) == uid
            )

        return [
            _Rule(constraint=c, key=(NAME, "owner", namespace, uid), counts=counts, self_match=1)
            for c in self._defaults
            if c.hard is hard
        ]

    # Which nodes count ---------------------------------------------------------------------
    def _eligible(
        self,
        pod: pods.PodInfo,
        rule: _Rule,
        nodes: nodetable.NodeTable,
        *,
        keys: filtering.BoolArray,
    ) -> filtering.BoolArray:
        mask = keys
        if rule.constraint.honor_node_affinity and (pod.node_selector or pod.required_affinity):
            mask = mask & _node_affinity(pod, nodes)
        if rule.constraint.honor_taints:
            mask = mask & _tolerated(pod, nodes)
        return mask

    @staticmethod
    def _has_keys(rules: list[_Rule], nodes: nodetable.NodeTable) -> filtering.BoolArray:
        mask = np.ones(len(nodes), dtype=np.bool_)
        for rule in rules:
            mask = mask & topology.domains(nodes, rule.constraint.topology_key).has
        return mask

    # Filter --------------------------------------------------------------------------------
    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        if not pod.spread and not self._defaults:
            return statuses.SKIP
        return statuses.SUCCESS if self._rules(pod, hard=True) else statuses.SKIP

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        rules = self._rules(pod, hard=True)
        keys = self._has_keys(rules, nodes)
        missing = np.zeros(len(nodes), dtype=np.bool_)
        skewed = np.zeros(len(nodes), dtype=np.bool_)
        lacking: dict[str, filtering.BoolArray] = {}
        for rule in rules:
            c = rule.constraint
            domains = topology.domains(nodes, c.topology_key)
            first_missing = ~domains.has & ~missing
            if first_missing.any():
                lacking[missing_label_reason(c.topology_key)] = first_missing
            missing |= ~domains.has
            counts = self._placed().counts(rule.key, predicate=rule.counts, carried=True)
            eligible = self._eligible(pod, rule, nodes, keys=keys)
            totals = domains.totals(counts, rows=eligible)
            present = np.zeros(domains.count, dtype=np.bool_)
            present[domains.ids[eligible & domains.has]] = True
            lowest = int(totals[present].min()) if present.any() else _NO_DOMAIN
            if c.min_domains is not None and int(np.count_nonzero(present)) < c.min_domains:
                lowest = 0
            per_row = domains.per_row(totals)
            skewed |= domains.has & (per_row + rule.self_match - lowest > c.max_skew)
        passed = ~(missing | skewed)
        code = (
            statuses.Code.UNSCHEDULABLE
            if skewed.any()
            else statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        )

        def explain() -> filtering.Reasons:
            return {**lacking, REASON: skewed & ~missing}

        return filtering.NodeFilter(passed=passed, code=code, explain=explain)

    # Score ---------------------------------------------------------------------------------
    def pre_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> statuses.Status:
        if not pod.spread and not self._defaults:
            return statuses.SKIP
        return statuses.SUCCESS if self._rules(pod, hard=False) else statuses.SKIP

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        rules = self._rules(pod, hard=False)
        keys = self._has_keys(rules, nodes)
        scored = feasible & keys
        total = np.zeros(len(nodes), dtype=np.float64)
        for rule in rules:
            c = rule.constraint
            domains = topology.domains(nodes, c.topology_key)
            counts = self._placed().counts(rule.key, predicate=rule.counts, carried=True)
            eligible = self._eligible(pod, rule, nodes, keys=keys)
            present = np.zeros(domains.count, dtype=np.bool_)
            present[domains.ids[scored]] = True
            weight = math.log(int(np.count_nonzero(present)) + 2)
            per_row = domains.per_row(domains.totals(counts, rows=eligible))
            total += per_row * weight + (c.max_skew - 1)
        out = np.rint(total).astype(np.int64)
        out[~keys] = -1  # ignored: scores 0 after normalisation
        return out

    def score_extensions(self) -> interfaces.ScoreExtensions:
        return self

    def normalize_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        scores: interfaces.ScoreArray,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        counted = feasible & (scores >= 0)
        out = np.zeros_like(scores)
        if not counted.any():
            return out
        low, high = int(scores[counted].min()), int(scores[counted].max())
        if high == 0:
            out[counted] = interfaces.MAX_NODE_SCORE
            return out
        out[counted] = interfaces.MAX_NODE_SCORE * (high + low - scores[counted]) // high
        return out


def _node_affinity(pod: pods.PodInfo, nodes: nodetable.NodeTable) -> filtering.BoolArray:
    def compute() -> filtering.BoolArray:
        mask = np.ones(len(nodes), dtype=np.bool_)
        for req in pod.node_selector:
            mask &= nodes.requirement_mask(req)
        if pod.required_affinity is not None:
            any_term = np.zeros(len(nodes), dtype=np.bool_)
            for term in pod.required_affinity:
                any_term |= nodes.term_mask(term)
            mask &= any_term
        mask.setflags(write=False)
        return mask

    return nodes.cached(
        (NAME, "affinity", pod.node_selector, pod.required_affinity), compute=compute
    )


def _tolerated(pod: pods.PodInfo, nodes: nodetable.NodeTable) -> filtering.BoolArray:
    def compute() -> filtering.BoolArray:
        tolerations = pod.tolerations
        bad = np.array(
            [
                t.effect in _HARD_TAINTS
                and not any(taints.tolerates(x, taint=t) for x in tolerations)
                for t in nodes.distinct_taints
            ],
            dtype=np.bool_,
        )
        mask = np.ones(len(nodes), dtype=np.bool_)
        if bad.any():
            mask &= ~nodes.taint_matrix()[:, bad].any(axis=1)
        if not any(taints.tolerates(x, taint=_UNSCHEDULABLE) for x in tolerations):
            mask &= ~nodes.unschedulable
        mask.setflags(write=False)
        return mask

    return nodes.cached((NAME, "tolerated", pod.tolerations), compute=compute)


def new(args: PodTopologySpreadArgs, handle: handles.ExtendedHandle) -> PodTopologySpread:
    """Build the plugin."""
    return PodTopologySpread(args, handle=handle)
