"""Node selector requirements and terms, parsed once from a pod's spec.

Owns the frozen forms of ``spec.nodeSelector`` and ``spec.affinity.nodeAffinity``
(``Requirement``, ``SelectorTerm``, ``PreferredTerm``) and their meaning on one node's labels,
following Kubernetes' ``nodeaffinity`` helpers:

- requirements in a term are ANDed, terms are ORed, a term with no requirements matches nothing;
- ``In``/``NotIn``/``Exists``/``DoesNotExist``/``Gt``/``Lt`` on labels; ``NotIn`` and
  ``DoesNotExist`` match a node without the label;
- ``Gt``/``Lt`` take exactly one integer value and compare it with the label's integer value;
- ``matchFields`` supports only ``metadata.name`` with ``In``/``NotIn``;
- a malformed requirement (unknown operator, wrong number of values) matches no node, as the
  API server would have refused it.

The vectorised evaluation over all nodes lives in :mod:`berth.scheduler.snapshot.nodetable`.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

__all__ = [
    "DOES_NOT_EXIST",
    "EXISTS",
    "GT",
    "IN",
    "LT",
    "METADATA_NAME",
    "NOT_IN",
    "OPERATORS",
    "PreferredTerm",
    "Requirement",
    "SelectorTerm",
    "matches",
    "parse_node_affinity",
    "parse_node_selector",
    "parse_requirements",
    "requirement_matches",
]

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
OPERATORS = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT})
METADATA_NAME = "metadata.name"


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One ``matchExpressions``/``matchFields`` entry (or one ``nodeSelector`` pair, as ``In``)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        """False when the API server would have refused it; an invalid one matches nothing."""
        if self.operator in (IN, NOT_IN):
            return bool(self.values)
        if self.operator in (EXISTS, DOES_NOT_EXIST):
            return not self.values
        if self.operator in (GT, LT):
            return len(self.values) == 1 and _as_int(self.values[0]) is not None
        return False


@dataclasses.dataclass(frozen=True)
class SelectorTerm:
    """A node selector term: label requirements and ``metadata.name`` field requirements."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        """A term with no requirements matches no node (Kubernetes' rule)."""
        return not self.expressions and not self.fields


@dataclasses.dataclass(frozen=True)
class PreferredTerm:
    """A ``preferredDuringSchedulingIgnoredDuringExecution`` entry: weight 1..100 and a term."""

    weight: int
    term: SelectorTerm


def _as_int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def requirement_matches(req: Requirement, *, value: str | None) -> bool:
    """Whether a label (``value``; ``None`` when the node lacks it) satisfies ``req``."""
    if not req.valid:
        return False
    if req.operator == IN:
        return value is not None and value in req.values
    if req.operator == NOT_IN:
        return value is None or value not in req.values
    if req.operator == EXISTS:
        return value is not None
    if req.operator == DOES_NOT_EXIST:
        return value is None
    number, bound = _as_int(value), _as_int(req.values[0])
    if number is None or bound is None:
        return False
    return number > bound if req.operator == GT else number < bound


def matches(
    term: SelectorTerm, *, labels: collections.abc.Mapping[str, str], node_name: str
) -> bool:
    """Whether one node (its labels and name) satisfies ``term``."""
    if term.empty:
        return False
    for req in term.fields:
        if req.key != METADATA_NAME or req.operator not in (IN, NOT_IN):
            return False
        if not requirement_matches(req, value=node_name):
            return False
    return all(requirement_matches(req, value=labels.get(req.key)) for req in term.expressions)


def parse_requirements(raw: typing.Any) -> tuple[Requirement, ...]:
    """A list of ``{key, operator, values}`` requirements (node or label selector style)."""
    if not isinstance(raw, list):
        return ()
    out: list[Requirement] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        values = item.get("values") or ()
        out.append(
            Requirement(
                key=str(item.get("key", "")),
                operator=str(item.get("operator", "")),
                values=tuple(str(v) for v in values),
            )
        )
    return tuple(out)


def _term(raw: typing.Any) -> SelectorTerm:
    if not isinstance(raw, dict):
        return SelectorTerm()
    return SelectorTerm(
        expressions=parse_requirements(raw.get("matchExpressions")),
        fields=parse_requirements(raw.get("matchFields")),
    )


def parse_node_selector(raw: typing.Any) -> tuple[Requirement, ...]:
    """``spec.nodeSelector`` as ``In`` requirements, sorted by key (so equal maps compare equal)."""
    if not isinstance(raw, dict):
        return ()
    return tuple(
        Requirement(key=str(k), operator=IN, values=(str(v),)) for k, v in sorted(raw.items())
    )


def parse_node_affinity(
    raw: typing.Any,
) -> tuple[tuple[SelectorTerm, ...] | None, tuple[PreferredTerm, ...]]:
    """``spec.affinity`` -> (required terms or ``None`` when absent, preferred terms).

    ``None`` and ``()`` differ: no required affinity matches every node; a required affinity
    with no terms matches none.
    """
    node_affinity = raw.get("nodeAffinity") if isinstance(raw, dict) else None
    if not isinstance(node_affinity, dict):
        return None, ()
    required_raw = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    required: tuple[SelectorTerm, ...] | None = None
    if isinstance(required_raw, dict):
        terms = required_raw.get("nodeSelectorTerms") or []
        required = tuple(_term(t) for t in terms) if isinstance(terms, list) else ()
    preferred: list[PreferredTerm] = []
    for item in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        if not isinstance(item, dict):
            continue
        weight = item.get("weight", 0)
        if isinstance(weight, int) and not isinstance(weight, bool) and weight > 0:
            preferred.append(PreferredTerm(weight=weight, term=_term(item.get("preference"))))
    return required, tuple(preferred)
