"""Label and field selectors.

We test these aspects:
- every label selector operator matches as Kubernetes does (table);
- malformed label selectors and unknown or malformed field selectors are 400 BadRequest;
- field selectors on supported fields, with booleans and missing fields;
- the object form (matchLabels + matchExpressions) used by PodDisruptionBudgets.
"""

from __future__ import annotations

import pytest

from berth.emulator import errors, selectors

LABELS = {"app": "web", "tier": "front", "n": "5"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("app in (web,db)", True),
        ("app notin (web, db)", False),
        ("tier", True),
        ("!tier", False),
        ("!missing", True),
        ("app=web,tier=back", False),
        ("n>4", True),
        ("n<4", False),
        ("app=", False),
        ("example.com/role in (a)", False),
    ],
    ids=[
        "empty",
        "equals",
        "double-equals",
        "not-equals",
        "not-equals-other",
        "not-equals-missing",
        "in",
        "notin",
        "exists",
        "not-exists",
        "not-exists-missing",
        "and",
        "gt",
        "lt",
        "empty-value",
        "prefixed-key",
    ],
)
def test_label_selectors(selector: str, expected: bool) -> None:
    assert selectors.parse_label_selector(selector).matches(LABELS) is expected


@pytest.mark.parametrize(
    "selector",
    ["app in (web", "=web", "app=web=x", "a b", "app in web", "n>x", "-bad-=1", "app=(x)"],
    ids=[
        "unclosed",
        "no-key",
        "double-op",
        "space",
        "in-without-parens",
        "gt-not-int",
        "bad-key",
        "paren-value",
    ],
)
def test_bad_label_selectors(selector: str) -> None:
    with pytest.raises(errors.StatusError) as caught:
        selectors.parse_label_selector(selector)
    assert caught.value.code == 400


POD = {
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"nodeName": "n1"},
    "status": {"phase": "Running"},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=p", True),
        ("spec.nodeName!=n1", False),
        ("spec.nodeName==n1", True),
        ("status.phase=Running,metadata.namespace=ns", True),
        ("spec.nodeName=", False),
        ("spec.schedulerName=", True),
    ],
    ids=["name", "not-equal", "double-equals", "and", "empty-means-unset", "missing-is-empty"],
)
def test_field_selectors(selector: str, expected: bool) -> None:
    parsed = selectors.parse_field_selector(selector, key=("", "pods"))
    assert parsed.matches(POD) is expected


@pytest.mark.parametrize(
    "selector",
    ["spec.bogus=x", "metadata.name", "status.phase~x"],
    ids=["unknown-field", "no-operator", "bad-operator"],
)
def test_bad_field_selectors(selector: str) -> None:
    with pytest.raises(errors.StatusError) as caught:
        selectors.parse_field_selector(selector, key=("", "pods"))
    assert caught.value.code == 400


def test_boolean_fields_default_to_false() -> None:
    parsed = selectors.parse_field_selector("spec.unschedulable=false", key=("", "nodes"))
    assert parsed.matches({"metadata": {"name": "n"}, "spec": {}})


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
        ({"matchLabels": {"app": "db"}}, False),
        (None, False),
        ({}, True),
    ],
    ids=["labels", "in", "does-not-exist", "mismatch", "none-matches-nothing", "empty-matches-all"],
)
def test_label_selector_objects(selector: dict[str, object] | None, expected: bool) -> None:
    assert selectors.matches_label_selector_object(selector, LABELS) is expected
