"""Structural-schema admission of custom objects and the CEL rules.

We test these aspects:
- defaults are applied (nested, and inside list items); unknown fields are pruned and reported,
  except under ``x-kubernetes-preserve-unknown-fields``; metadata is never pruned;
- each check reports the API server's message and field path (table);
- CEL rules: messages, ``fieldPath``, evaluation errors, quantities, transition rules
  (``oldSelf``) only on update, and the string/list extensions.
"""

from __future__ import annotations

import typing

import pytest

from berth.emulator import cel, validation

SCHEMA: dict[str, typing.Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "name": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
                "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0},
                "when": {"type": "string", "format": "date-time"},
                "items": {
                    "type": "array",
                    "maxItems": 2,
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["key"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "key": {"type": "string"},
                            "w": {"type": "integer", "default": 1},
                        },
                    },
                },
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "amount": {"x-kubernetes-int-or-string": True},
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "x-kubernetes-list-type": "set",
                },
            },
        }
    },
}


def _admit(spec: dict[str, typing.Any]) -> validation.Admission:
    return validation.admit(
        SCHEMA, {"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": spec}, old=None
    )


def test_defaults_pruning_and_metadata() -> None:
    admitted = _admit(
        {"size": 1, "items": [{"key": "k"}], "bogus": 1, "free": {"any": {"thing": 1}}}
    )
    assert admitted.causes == ()
    assert admitted.object["spec"] == {
        "size": 1,
        "mode": "a",
        "items": [{"key": "k", "w": 1}],
        "free": {"any": {"thing": 1}},
    }
    assert admitted.object["metadata"] == {"name": "x", "labels": {"a": "b"}}
    assert admitted.unknown_fields == ("spec.bogus",)


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({}, "spec.size", "Required value"),
        (
            {"size": "1"},
            "spec.size",
            'Invalid value: "1": spec.size in body must be of type integer: "string"',
        ),
        (
            {"size": 0},
            "spec.size",
            "Invalid value: 0: spec.size in body should be greater than or equal to 1",
        ),
        (
            {"size": 11},
            "spec.size",
            "Invalid value: 11: spec.size in body should be less than or equal to 10",
        ),
        (
            {"size": 1, "mode": "c"},
            "spec.mode",
            'Unsupported value: "c": supported values: "a", "b"',
        ),
        ({"size": 1, "name": "abcd"}, "spec.name", "Too long: may not be more than 3 bytes"),
        (
            {"size": 1, "name": "A1"},
            "spec.name",
            "Invalid value: \"A1\": spec.name in body should match '^[a-z]+$'",
        ),
        (
            {"size": 1, "ratio": 0},
            "spec.ratio",
            "Invalid value: 0: spec.ratio in body should be greater than 0",
        ),
        (
            {"size": 1, "when": "yesterday"},
            "spec.when",
            'Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"',
        ),
        (
            {"size": 1, "items": [{"key": "a"}, {"key": "b"}, {"key": "c"}]},
            "spec.items",
            "Too many: 3: must have at most 2 items",
        ),
        (
            {"size": 1, "items": [{"key": "a"}, {"key": "a"}]},
            "spec.items[1]",
            'Duplicate value: map[string]interface {}{"key"="a"}',
        ),
        ({"size": 1, "tags": ["x", "x"]}, "spec.tags[1]", 'Duplicate value: "x"'),
        (
            {"size": 1, "amount": True},
            "spec.amount",
            'Invalid value: true: spec.amount in body must be of type integer or string: "boolean"',
        ),
    ],
    ids=[
        "required",
        "type",
        "minimum",
        "maximum",
        "enum",
        "max-length",
        "pattern",
        "exclusive-minimum",
        "format",
        "max-items",
        "list-map-keys",
        "list-set",
        "int-or-string",
    ],
)
def test_checks_report_field_paths(spec: dict[str, typing.Any], field: str, message: str) -> None:
    causes = _admit(spec).causes
    assert [(c.field, c.message) for c in causes] == [(field, message)]


def _rule_schema(rule: dict[str, typing.Any]) -> dict[str, typing.Any]:
    return {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "x-kubernetes-validations": [rule],
            }
        },
    }


@pytest.mark.parametrize(
    ("rule", "spec", "old", "expected"),
    [
        ({"rule": "self.a < self.b", "message": "a before b"}, {"a": 1, "b": 2}, None, None),
        (
            {"rule": "self.a < self.b", "message": "a before b"},
            {"a": 3, "b": 2},
            None,
            ("spec", 'Invalid value: "object": a before b'),
        ),
        (
            {"rule": "self.a < 1", "fieldPath": ".a", "message": "small"},
            {"a": 3},
            None,
            ("spec.a", 'Invalid value: "object": small'),
        ),
        (
            {"rule": "self.a < 1"},
            {"a": 3},
            None,
            ("spec", 'Invalid value: "object": failed rule: self.a < 1'),
        ),
        (
            {"rule": "self.missing > 1"},
            {},
            None,
            (
                "spec",
                "Invalid value: \"object\": no such key: 'missing' "
                "evaluating rule: self.missing > 1",
            ),
        ),
        (
            {"rule": "quantity(self.q).isLessThan(quantity('1Gi'))", "message": "q"},
            {"q": "512Mi"},
            None,
            None,
        ),
        (
            {
                "rule": "quantity(self.q).add(quantity('1')).compareTo(quantity('1500m')) > 0",
                "message": "sum",
            },
            {"q": "600m"},
            None,
            None,
        ),
        ({"rule": "self.a == oldSelf.a", "message": "immutable"}, {"a": 2}, None, None),
        (
            {"rule": "self.a == oldSelf.a", "message": "immutable"},
            {"a": 2},
            {"a": 1},
            ("spec", 'Invalid value: "object": immutable'),
        ),
        (
            {
                "rule": "self.n.lowerAscii().startsWith('ab') && self.l.isSorted() "
                "&& self.l.sum() == 3",
                "message": "ext",
            },
            {"n": "ABc", "l": [1, 2]},
            None,
            None,
        ),
    ],
    ids=[
        "holds",
        "fails",
        "field-path",
        "default-message",
        "evaluation-error",
        "quantity",
        "quantity-arithmetic",
        "transition-skipped-on-create",
        "transition-on-update",
        "extensions",
    ],
)
def test_cel_rules(
    rule: dict[str, typing.Any],
    spec: dict[str, typing.Any],
    old: dict[str, typing.Any] | None,
    expected: tuple[str, str] | None,
) -> None:
    obj = {"metadata": {"name": "x"}, "spec": spec}
    previous = {"metadata": {"name": "x"}, "spec": old} if old is not None else None
    causes = validation.admit(_rule_schema(rule), obj, old=previous).causes
    assert [(c.field, c.message) for c in causes] == ([expected] if expected else [])


def test_rules_that_do_not_compile_are_refused() -> None:
    with pytest.raises(cel.CelError):
        cel.compile_rule("self.a <")
