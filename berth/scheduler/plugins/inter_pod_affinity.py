"""InterPodAffinity: pods near (or away from) the pods they name, and placed pods' wishes.

Kubernetes' ``InterPodAffinity`` plugin, vectorised. The session's placements count, per row,
the placed pods matching each term (kept current as statements place and evict, so a gang's
tentatively placed members count for the next member); a topology key's domains
(:mod:`berth.scheduler.snapshot.topology`) turn counts per row into counts per domain.

Filter, for every row at once (a node lacking a term's topology key is not in any of its
domains):

- **required affinity**: the node has every term's key, and in each term's domain there is a
  placed pod matching *all* terms; unless no such pod exists anywhere and the pod matches all
  its own terms (the first of a group that wants to be together);
- **required anti-affinity**: no placed pod matching a term in that term's domain;
- **existing pods' anti-affinity** (symmetric): no placed pod whose required anti-affinity
  term matches this pod is in that term's domain.

A term names pods by label selector in namespaces: its ``namespaces`` and those whose labels
its ``namespaceSelector`` matches (the snapshot's namespace labels; an empty selector matches
every namespace); its owner's namespace when neither is given.

Score: per row, the sum over the pod's preferred terms of weight * matching pods in the
term's domain (anti-affinity subtracts), plus placed pods' terms matching this pod: their
required affinity (``hardPodAffinityWeight``) and preferred (anti-)affinity, symmetric;
normalised to 0..100 between the lowest and highest feasible row.
"""

from __future__ import annotations

import collections.abc

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
from berth.scheduler.snapshot import nodetable, podconstraints, pods, topology

__all__ = [
    "NAME",
    "REASON_AFFINITY",
    "REASON_ANTI_AFFINITY",
    "REASON_EXISTING_ANTI_AFFINITY",
    "InterPodAffinity",
    "InterPodAffinityArgs",
    "missing_key_reason",
    "new",
]

NAME = names.INTER_POD_AFFINITY
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

Term = podconstraints.AffinityTerm


def missing_key_reason(key: str, /) -> str:
    """Why a node lacking a required affinity term's topology key fails."""
    return (
        f"node(s) didn't have the label {key} (topologyKey of {podconstraints.Field.POD_AFFINITY})"
    )


IntArray = nodetable.IntArray


class InterPodAffinityArgs(registries.ArgsModel):
    """Arguments of InterPodAffinity (kube-scheduler's ``InterPodAffinityArgs``)."""

    hard_pod_affinity_weight: int = pydantic.Field(default=1, ge=0, le=100)
    """The score weight of a placed pod's *required* affinity term matching the incoming pod
    (symmetric scoring). Kubernetes' default, 1."""
    ignore_preferred_terms_of_existing_pods: bool = False
    """Score only the incoming pod's preferred terms, not placed pods' ones."""


NamespaceLabels = collections.abc.Mapping[str, collections.abc.Mapping[str, str]]


def _required_anti(pod: pods.PodInfo) -> collections.abc.Iterable[Term]:
    return pod.pod_affinity.required_anti_affinity if pod.pod_affinity is not None else ()


class InterPodAffinity(
    interfaces.PreFilterPlugin,
    interfaces.FilterPlugin,
    interfaces.PreScorePlugin,
    interfaces.ScorePlugin,
    interfaces.ScoreExtensions,
    interfaces.ConstraintPlugin,
):
    """PreFilter, Filter, PreScore, Score with min-max normalisation; see the module doc."""

    name = NAME
    understands = frozenset(
        {
            podconstraints.Field.POD_AFFINITY,
            podconstraints.Field.POD_ANTI_AFFINITY,
            podconstraints.Field.NAMESPACE_SELECTOR,
        }
    )

    def __init__(self, args: InterPodAffinityArgs, *, handle: handles.ExtendedHandle) -> None:
        self._hard_weight = args.hard_pod_affinity_weight
        self._own_terms_only = args.ignore_preferred_terms_of_existing_pods
        self._handle = handle

    # Counting ----------------------------------------------------------------------------------
    def _namespace_labels(self) -> NamespaceLabels:
        return self._handle.snapshot().namespace_labels

    def _matcher(self) -> collections.abc.Callable[[Term, pods.PodInfo], bool]:
        """``term names pod``, with the session's namespace labels."""
        known = self._namespace_labels()

        def matches(term: Term, pod: pods.PodInfo) -> bool:
            return term.matches(pod.namespace, pod.labels, namespace_labels=known)

        return matches

    def _placed(self) -> framework_placements.Placements:
        return self._handle.placements()

    def _matching(self, term: Term) -> IntArray:
        """Per row, the placed pods ``term`` names."""
        matches = self._matcher()
        return self._placed().counts(
            (NAME, "term", term), predicate=lambda pod: matches(term, pod), carried=True
        )

    def _matching_all(self, terms: tuple[Term, ...]) -> IntArray:
        """Per row, the placed pods every one of ``terms`` names."""
        matches = self._matcher()
        return self._placed().counts(
            (NAME, "all", terms),
            predicate=lambda pod: all(matches(t, pod) for t in terms),
            carried=True,
        )

    def _existing_anti(self, pod: pods.PodInfo) -> list[tuple[Term, IntArray]]:
        """Placed pods' required anti-affinity terms naming ``pod``, with their owners per row."""
        owned = self._placed().grouped((NAME, "anti"), extract=_required_anti, carried=True)
        if not owned:
            return []
        matches = self._matcher()
        return [(term, counts) for term, counts in owned.items() if matches(term, pod)]

    def _scoring_terms(self, pod: pods.PodInfo) -> list[tuple[Term, int, IntArray]]:
        """Placed pods' terms naming ``pod`` that score: (term, weight, owners per row)."""
        if self._own_terms_only and not self._hard_weight:
            return []
        hard, own_only = self._hard_weight, self._own_terms_only

        def extract(owner: pods.PodInfo) -> collections.abc.Iterable[tuple[Term, int]]:
            affinity = owner.pod_affinity
            if affinity is None:
                return ()
            out: list[tuple[Term, int]] = []
            if hard:
                out += [(term, hard) for term in affinity.required_affinity]
            if not own_only:
                out += [(w.term, w.weight) for w in affinity.preferred_affinity]
                out += [(w.term, -w.weight) for w in affinity.preferred_anti_affinity]
            return out

        owned = self._placed().grouped(
            (NAME, "scoring", hard, own_only), extract=extract, carried=True
        )
        if not owned:
            return []
        matches = self._matcher()
        return [
            (term, weight, counts) for (term, weight), counts in owned.items() if matches(term, pod)
        ]

    # Filter --------------------------------------------------------------------------------------
    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        affinity = pod.pod_affinity
        if affinity is not None and (affinity.required_affinity or affinity.required_anti_affinity):
            return statuses.SUCCESS
        return statuses.SUCCESS if self._existing_anti(pod) else statuses.SKIP

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        size = len(nodes)
        existing = np.zeros(size, dtype=np.bool_)
        for term, owners in self._existing_anti(pod):
            existing |= topology.domains(nodes, term.topology_key).spread(owners) > 0
        anti = np.zeros(size, dtype=np.bool_)
        unmet = np.zeros(size, dtype=np.bool_)
        affinity = pod.pod_affinity
        if affinity is not None:
            for term in affinity.required_anti_affinity:
                matching = self._matching(term)
                anti |= topology.domains(nodes, term.topology_key).spread(matching) > 0
            if affinity.required_affinity:
                unmet = self._affinity_unmet(pod, affinity.required_affinity, nodes)
        passed = ~(existing | anti | unmet)
        code = (
            statuses.Code.UNSCHEDULABLE
            if (existing | anti).any()
            else statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        )

        def explain() -> filtering.Reasons:
            # The first rule a row breaks names it, in kube-scheduler's order; a node lacking
            # a required affinity term's topology key is told so (a typo'd key shows here).
            out: dict[str, filtering.BoolArray] = {}
            lacking = np.zeros(size, dtype=np.bool_)
            for term in affinity.required_affinity if affinity is not None else ():
                rows = ~topology.domains(nodes, term.topology_key).has & ~lacking
                if rows.any():
                    out[missing_key_reason(term.topology_key)] = rows
                    lacking |= rows
            out[REASON_AFFINITY] = unmet & ~lacking
            out[REASON_ANTI_AFFINITY] = anti & ~unmet
            out[REASON_EXISTING_ANTI_AFFINITY] = existing & ~unmet & ~anti
            return out

        return filtering.NodeFilter(passed=passed, code=code, explain=explain)

    def _affinity_unmet(
        self, pod: pods.PodInfo, terms: tuple[Term, ...], nodes: nodetable.NodeTable
    ) -> filtering.BoolArray:
        matching = self._matching_all(terms)
        has_keys = np.ones(len(nodes), dtype=np.bool_)
        found = np.ones(len(nodes), dtype=np.bool_)
        anywhere = False
        for term in terms:
            domains = topology.domains(nodes, term.topology_key)
            has_keys &= domains.has
            near = domains.spread(matching)
            found &= near > 0
            anywhere = anywhere or bool(matching[domains.has].any())
        matches = self._matcher()
        if not anywhere and all(matches(term, pod) for term in terms):
            # The first pod of a group with affinity to itself: nothing to be near yet.
            return ~has_keys
        return ~(has_keys & found)

    # Score -----------------------------------------------------------------------------------
    def pre_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> statuses.Status:
        affinity = pod.pod_affinity
        if affinity is not None and (
            affinity.preferred_affinity or affinity.preferred_anti_affinity
        ):
            return statuses.SUCCESS
        return statuses.SUCCESS if self._scoring_terms(pod) else statuses.SKIP

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        total = np.zeros(len(nodes), dtype=np.int64)
        affinity = pod.pod_affinity
        if affinity is not None:
            for sign, weighted in (
                (1, affinity.preferred_affinity),
                (-1, affinity.preferred_anti_affinity),
            ):
                for item in weighted:
                    domains = topology.domains(nodes, item.term.topology_key)
                    total += domains.spread(self._matching(item.term)) * (sign * item.weight)
        for term, weight, owners in self._scoring_terms(pod):
            total += topology.domains(nodes, term.topology_key).spread(owners) * weight
        return total

    def score_extensions(self) -> interfaces.ScoreExtensions:
        return self

    def normalize_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        scores: interfaces.ScoreArray,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        if not feasible.any():
            return np.zeros_like(scores)
        low, high = int(scores[feasible].min()), int(scores[feasible].max())
        if high == low:
            return np.zeros_like(scores)
        return (scores - low) * interfaces.MAX_NODE_SCORE // (high - low)


def new(args: InterPodAffinityArgs, handle: handles.ExtendedHandle) -> InterPodAffinity:
    """Build the plugin."""
    return InterPodAffinity(args, handle=handle)
