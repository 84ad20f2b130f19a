"""Node selector requirements and taint tolerations on one node, the reference semantics.

We test these aspects:
- every operator (In, NotIn, Exists, DoesNotExist, Gt, Lt) on a present and an absent label;
- Gt/Lt compare integers and refuse non-integer values; malformed requirements match nothing;
- a term ANDs its requirements, an empty term matches nothing, matchFields is metadata.name;
- tolerations: effects (empty matches all), Exists/Equal, empty key with Exists, values.
"""

from __future__ import annotations

import pytest

from berth.scheduler.snapshot import selectors, taints

R = selectors.Requirement


@pytest.mark.parametrize(
    ("req", "value", "expected"),
    [
        (R("zone", "In", ("a", "b")), "a", True),
        (R("zone", "In", ("a", "b")), "c", False),
        (R("zone", "In", ("a",)), None, False),
        (R("zone", "NotIn", ("a",)), "b", True),
        (R("zone", "NotIn", ("a",)), "a", False),
        (R("zone", "NotIn", ("a",)), None, True),
        (R("gpu", "Exists"), "", True),
        (R("gpu", "Exists"), None, False),
        (R("gpu", "DoesNotExist"), None, True),
        (R("gpu", "DoesNotExist"), "x", False),
        (R("cores", "Gt", ("8",)), "16", True),
        (R("cores", "Gt", ("8",)), "8", False),
        (R("cores", "Gt", ("8",)), None, False),
        (R("cores", "Gt", ("8",)), "many", False),
        (R("cores", "Lt", ("8",)), "4", True),
        (R("cores", "Lt", ("8",)), "-1", True),
        (R("cores", "Lt", ("8",)), "9", False),
        (R("cores", "Gt", ("x",)), "9", False),
        (R("cores", "Gt", ("1", "2")), "9", False),
        (R("zone", "In", ()), "a", False),
        (R("gpu", "Exists", ("x",)), "x", False),
        (R("zone", "Near", ("a",)), "a", False),
    ],
    ids=[
        "in-hit",
        "in-miss",
        "in-absent",
        "notin-hit",
        "notin-miss",
        "notin-absent-matches",
        "exists-empty-value",
        "exists-absent",
        "doesnotexist-absent",
        "doesnotexist-present",
        "gt-above",
        "gt-equal",
        "gt-absent",
        "gt-not-a-number",
        "lt-below",
        "lt-negative",
        "lt-above",
        "gt-bad-bound",
        "gt-two-values",
        "in-without-values",
        "exists-with-values",
        "unknown-operator",
    ],
)
def test_requirement_operators(
    req: selectors.Requirement, value: str | None, expected: bool
) -> None:
    assert selectors.requirement_matches(req, value=value) is expected


@pytest.mark.parametrize(
    ("term", "labels", "name", "expected"),
    [
        (
            selectors.SelectorTerm(expressions=(R("zone", "In", ("a",)), R("gpu", "Exists"))),
            {"zone": "a", "gpu": "1"},
            "n1",
            True,
        ),
        (
            selectors.SelectorTerm(expressions=(R("zone", "In", ("a",)), R("gpu", "Exists"))),
            {"zone": "a"},
            "n1",
            False,
        ),
        (selectors.SelectorTerm(), {"zone": "a"}, "n1", False),
        (selectors.SelectorTerm(fields=(R("metadata.name", "In", ("n1",)),)), {}, "n1", True),
        (selectors.SelectorTerm(fields=(R("metadata.name", "NotIn", ("n1",)),)), {}, "n1", False),
        (selectors.SelectorTerm(fields=(R("metadata.uid", "In", ("n1",)),)), {}, "n1", False),
        (selectors.SelectorTerm(fields=(R("metadata.name", "Exists"),)), {}, "n1", False),
    ],
    ids=[
        "all-requirements",
        "one-missing",
        "empty-term",
        "field-in",
        "field-notin",
        "unsupported-field",
        "unsupported-field-operator",
    ],
)
def test_terms(
    term: selectors.SelectorTerm, labels: dict[str, str], name: str, expected: bool
) -> None:
    assert selectors.matches(term, labels=labels, node_name=name) is expected


T = taints.Taint
Tol = taints.Toleration


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Tol("k", "Equal", "v", "NoSchedule"), T("k", "v", "NoSchedule"), True),
        (Tol("k", "Equal", "v", "NoSchedule"), T("k", "w", "NoSchedule"), False),
        (Tol("k", "Equal", "v", "NoSchedule"), T("k", "v", "NoExecute"), False),
        (Tol("k", "Equal", "v", ""), T("k", "v", "NoExecute"), True),
        (Tol("k", "Exists", "", ""), T("k", "anything", "PreferNoSchedule"), True),
        (Tol("k", "Exists", "", ""), T("other", "", "NoSchedule"), False),
        (Tol("", "Exists", "", ""), T("any", "thing", "NoExecute"), True),
        (Tol("", "Exists", "", "NoSchedule"), T("any", "thing", "NoExecute"), False),
        (Tol("k", "", "v", ""), T("k", "v", "NoSchedule"), True),
        (Tol("k", "Equal", "", ""), T("k", "", "NoSchedule"), True),
        (Tol("k", "Sometimes", "v", ""), T("k", "v", "NoSchedule"), False),
    ],
    ids=[
        "equal-match",
        "equal-other-value",
        "effect-differs",
        "empty-effect-matches-all",
        "exists-any-value",
        "exists-other-key",
        "empty-key-exists-tolerates-all",
        "empty-key-with-effect",
        "empty-operator-is-equal",
        "empty-values-equal",
        "unknown-operator",
    ],
)
def test_tolerations(toleration: taints.Toleration, taint: taints.Taint, expected: bool) -> None:
    assert taints.tolerates(toleration, taint=taint) is expected


def test_taints_and_tolerations_parse_with_defaults() -> None:
    assert taints.parse_taints(
        [{"key": "k"}, {"key": "g", "value": "1", "effect": "NoExecute"}]
    ) == (
        T("k", "", "NoSchedule"),
        T("g", "1", "NoExecute"),
    )
    assert taints.parse_tolerations([{"key": "k", "tolerationSeconds": 30}]) == (
        Tol(key="k", operator="Equal", toleration_seconds=30),
    )
    assert str(T("dedicated", "infer")) == "{dedicated: infer}"
