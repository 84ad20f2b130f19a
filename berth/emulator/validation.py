"""Structural-schema validation of custom objects: defaults, pruning, checks and CEL rules.

:func:`admit` does to a custom object what the API server does with a CRD version's
``openAPIV3Schema``: apply ``default`` values, prune fields the schema does not declare (unless
``x-kubernetes-preserve-unknown-fields``), check types, formats, enums, bounds, patterns,
lengths, required fields and list-map keys, then evaluate every ``x-kubernetes-validations``
rule (:mod:`berth.emulator.cel`; transition rules only on update when the old value exists).
Problems come back as :class:`~berth.emulator.errors.Cause` values with field paths and the API
server's wording, so a 422 from the emulator reads like one from a real cluster.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import typing

from berth.api import defaulting, objects, schemas
from berth.emulator import cel, errors

__all__ = ["Admission", "admit"]

Schema = schemas.JSONSchemaProps


@dataclasses.dataclass(frozen=True)
class Admission:
    """The outcome: the defaulted, pruned object, the causes, and the pruned field paths."""

    object: objects.KubeObject
    causes: tuple[errors.Cause, ...]
    unknown_fields: tuple[str, ...]


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _type_name(value: typing.Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        # Outside int64 the API server's JSON decoder yields a float64: not an integer.
        return "integer" if _INT64_MIN <= value <= _INT64_MAX else "number"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if value is None:
        return "null"
    return "object"


def _show(value: typing.Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(_type_name(value))
    return json.dumps(value)


def _join(path: str, field: str) -> str:
    return f"{path}.{field}" if path else field


def _prune(
    schema: Schema, value: typing.Any, path: str, unknown: list[str], *, root: bool = False
) -> typing.Any:
    if schema.get("x-kubernetes-preserve-unknown-fields") and not schema.get("properties"):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        result: dict[str, object] = {}
        for name, child in value.items():
            if (root or embedded) and name in ("apiVersion", "kind", "metadata"):
                result[name] = child  # ObjectMeta is the API server's, whatever the schema says
            elif name in properties:
                result[name] = _prune(properties[name], child, _join(path, name), unknown)
            elif isinstance(extra, dict):
                result[name] = _prune(extra, child, _join(path, name), unknown)
            elif extra is True or preserve:
                result[name] = child
            else:
                unknown.append(_join(path, name))
        return result
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [
            _prune(schema["items"], item, f"{path}[{i}]", unknown) for i, item in enumerate(value)
        ]
    return value


_FORMATS: dict[str, typing.Callable[[str], bool]] = {
    "date-time": lambda s: _parses(
        lambda: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
    ),
    "date": lambda s: _parses(lambda: datetime.date.fromisoformat(s)),
    "int-or-string": lambda s: True,
}


def _parses(fn: typing.Callable[[], object]) -> bool:
    try:
        fn()
    except ValueError:
        return False
    return True


class _Checker:
    def __init__(self) -> None:
        self.causes: list[errors.Cause] = []

    def bad(self, path: str, message: str, reason: str = "FieldValueInvalid") -> None:
        self.causes.append(errors.Cause(path, message, reason))

    def check(self, schema: Schema, value: typing.Any, path: str, old: typing.Any) -> None:
        before = len(self.causes)
        self._check_value(schema, value, path, old)
        if len(self.causes) == before:
            self._rules(schema, value, path, old)

    def _check_value(self, schema: Schema, value: typing.Any, path: str, old: typing.Any) -> None:
        if value is None:
            if not schema.get("nullable") and schema.get("type"):
                self.bad(
                    path,
                    f'Invalid value: "null": {path} in body must be of type '
                    f'{schema["type"]}: "null"',
                    "FieldValueTypeInvalid",
                )
            return
        expected = schema.get("type")
        actual = _type_name(value)
        if schema.get("x-kubernetes-int-or-string"):
            if actual not in ("integer", "string"):
                self.bad(
                    path,
                    f"Invalid value: {_show(value)}: {path} in body must be of type "
                    f"integer or string: {_show(actual)}",
                    "FieldValueTypeInvalid",
                )
                return
        elif expected and not (
            actual == expected or (expected == "number" and actual == "integer")
        ):
            self.bad(
                path,
                f"Invalid value: {_show(value)}: {path} in body must be of type "
                f"{expected}: {_show(actual)}",
                "FieldValueTypeInvalid",
            )
            return
        if "enum" in schema and value not in schema["enum"]:
            supported = ", ".join(json.dumps(e) for e in schema["enum"])
            self.bad(
                path,
                f"Unsupported value: {_show(value)}: supported values: {supported}",
                "FieldValueNotSupported",
            )
        if isinstance(value, int | float) and not isinstance(value, bool):
            self._number(schema, value, path)
        if isinstance(value, str):
            self._string(schema, value, path)
        if isinstance(value, list):
            self._array(schema, value, path, old)
        if isinstance(value, dict):
            self._object(schema, value, path, old)
        for combinator in ("allOf", "anyOf", "oneOf"):
            self._combinator(combinator, schema.get(combinator), value, path)
        negated = schema.get("not")
        if isinstance(negated, dict) and self._valid(negated, value, path):
            self.bad(
                path, f"Invalid value: {_show(value)}: {path} in body must not match the schema"
            )

    def _valid(self, schema: Schema, value: typing.Any, path: str) -> bool:
        probe = _Checker()
        probe._check_value(schema, value, path, None)
        return not probe.causes

    def _combinator(self, name: str, schemas: typing.Any, value: typing.Any, path: str) -> None:
        if not isinstance(schemas, list):
            return
        passing = sum(1 for s in schemas if self._valid(s, value, path))
        if name == "allOf" and passing < len(schemas):
            for sub in schemas:
                self._check_value(sub, value, path, None)
        elif name == "anyOf" and passing == 0:
            self.bad(
                path,
                f"Invalid value: {_show(value)}: {path} in body must match at least "
                f"one schema (anyOf)",
            )
        elif name == "oneOf" and passing != 1:
            self.bad(
                path,
                f"Invalid value: {_show(value)}: {path} in body must match exactly "
                f"one schema (oneOf)",
            )

    def _number(self, schema: Schema, value: float, path: str) -> None:
        minimum, maximum = schema.get("minimum"), schema.get("maximum")
        if minimum is not None:
            if schema.get("exclusiveMinimum") and value <= minimum:
                self.bad(
                    path,
                    f"Invalid value: {_show(value)}: {path} in body should be greater "
                    f"than {minimum}",
                )
            elif value < minimum:
                self.bad(
                    path,
                    f"Invalid value: {_show(value)}: {path} in body should be greater "
                    f"than or equal to {minimum}",
                )
        if maximum is not None:
            if schema.get("exclusiveMaximum") and value >= maximum:
                self.bad(
                    path,
                    f"Invalid value: {_show(value)}: {path} in body should be less than {maximum}",
                )
            elif value > maximum:
                self.bad(
                    path,
                    f"Invalid value: {_show(value)}: {path} in body should be less "
                    f"than or equal to {maximum}",
                )
        multiple = schema.get("multipleOf")
        if multiple and value % multiple:
            self.bad(
                path,
                f"Invalid value: {_show(value)}: {path} in body should be a multiple of {multiple}",
            )

    def _string(self, schema: Schema, value: str, path: str) -> None:
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            self.bad(
                path,
                f"Too long: may not be more than {schema['maxLength']} bytes",
                "FieldValueTooLong",
            )
        if "minLength" in schema and len(value) < schema["minLength"]:
            self.bad(
                path,
                f"Invalid value: {_show(value)}: {path} in body should be at least "
                f"{schema['minLength']} chars long",
            )
        pattern = schema.get("pattern")
        if pattern and re.search(pattern, value) is None:
            self.bad(
                path, f"Invalid value: {_show(value)}: {path} in body should match '{pattern}'"
            )
        check = _FORMATS.get(str(schema.get("format", "")))
        if check is not None and not check(value):
            self.bad(
                path,
                f"Invalid value: {_show(value)}: {path} in body must be of type "
                f"{schema['format']}: {_show(value)}",
            )

    def _array(self, schema: Schema, value: list[typing.Any], path: str, old: typing.Any) -> None:
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            self.bad(
                path,
                f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                "FieldValueTooMany",
            )
        if "minItems" in schema and len(value) < schema["minItems"]:
            self.bad(
                path,
                f"Invalid value: {len(value)}: {path} in body should have at least "
                f"{schema['minItems']} items",
            )
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "set" or schema.get("uniqueItems"):
            seen: list[typing.Any] = []
            for i, item in enumerate(value):
                if item in seen:
                    self.bad(
                        f"{path}[{i}]", f"Duplicate value: {_show(item)}", "FieldValueDuplicate"
                    )
                seen.append(item)
        if list_type == "map":
            keys = schema.get("x-kubernetes-list-map-keys") or []
            seen_keys: set[str] = set()
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    identity = json.dumps([item.get(k) for k in keys])
                    if identity in seen_keys:
                        shown = ", ".join(f'"{k}"={json.dumps(item.get(k))}' for k in keys)
                        self.bad(
                            f"{path}[{i}]",
                            f"Duplicate value: map[string]interface {{}}{{{shown}}}",
                            "FieldValueDuplicate",
                        )
                    seen_keys.add(identity)
        items = schema.get("items")
        if isinstance(items, dict):
            old_items = old if isinstance(old, list) else []
            for i, item in enumerate(value):
                self.check(
                    items, item, f"{path}[{i}]", old_items[i] if i < len(old_items) else None
                )

    def _object(
        self, schema: Schema, value: objects.JSONObject, path: str, old: typing.Any
    ) -> None:
        old_map = old if isinstance(old, dict) else {}
        for name in schema.get("required") or ():
            if name not in value:
                self.causes.append(errors.required(_join(path, name)))
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            self.bad(
                path,
                f"Too many: {len(value)}: must have at most {schema['maxProperties']} items",
                "FieldValueTooMany",
            )
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            self.bad(
                path,
                f"Invalid value: {len(value)}: {path} in body should have at least "
                f"{schema['minProperties']} properties",
            )
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for name, child in value.items():
            sub = properties.get(name) or (extra if isinstance(extra, dict) else None)
            if sub is not None:
                self.check(sub, child, _join(path, name), old_map.get(name))

    def _rules(self, schema: Schema, value: typing.Any, path: str, old: typing.Any) -> None:
        for spec in schema.get("x-kubernetes-validations") or ():
            text = str(spec.get("rule", ""))
            field = path
            if spec.get("fieldPath"):
                field = (
                    path + str(spec["fieldPath"]) if path else str(spec["fieldPath"]).lstrip(".")
                )
            try:
                rule = cel.compile_rule(text)
                if rule.transition and old is None and not spec.get("optionalOldSelf"):
                    continue
                if cel.evaluate(rule, value=value, old=old):
                    continue
                message = str(spec.get("message") or f"failed rule: {_rule_text(text)}")
            except cel.CelError as exc:
                message = f"{exc} evaluating rule: {_rule_text(text)}"
            reason = str(spec.get("reason") or "FieldValueInvalid")
            self.bad(field, f"Invalid value: {_show(value)}: {message}", reason)


def _rule_text(text: str) -> str:
    return " ".join(text.split())


def admit(schema: Schema, obj: objects.JSONObject, *, old: objects.JSONObject | None) -> Admission:
    """Default, prune and validate ``obj`` against ``schema`` (``old`` for transition rules)."""
    unknown: list[str] = []
    defaulted = defaulting.apply_defaults(schema, obj)
    pruned = _prune(schema, defaulted, "", unknown, root=True)
    checker = _Checker()
    body_schema = schema.copy()
    body_schema.pop("required", None)
    properties = dict(schema.get("properties") or {})
    properties.pop("metadata", None)  # ObjectMeta is checked by the REST layer, not the schema
    body_schema["properties"] = properties
    checker.check(body_schema, pruned, "", old)
    for name in schema.get("required") or ():
        if name not in pruned:
            checker.causes.append(errors.required(name))
    return Admission(pruned, tuple(checker.causes), tuple(unknown))
