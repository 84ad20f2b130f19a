"""Evaluating a CRD schema's CEL rules (``x-kubernetes-validations``) on an object.

The API server checks these rules when an object is written; Berth's tests check them here
with ``cel-python`` (the emulator has its own evaluator, :mod:`berth.emulator.cel`, with
transition rules and the string and list extensions, and borrows :data:`FUNCTIONS`). The walk
follows the API server's: a rule on a schema node is evaluated with ``self`` bound to the
object's value at that node, for every value present (each list item, each map value), after
defaulting. Standard CEL plus the Kubernetes quantity library (``quantity``, ``isQuantity``,
``compareTo``, ``isGreaterThan``, ``isLessThan``, ``sign``, ``isInteger``, ``asInteger``) is
available. Transition rules (``oldSelf``) are not supported and are refused when compiled.
The quantity library is shared with the DRA device selectors (:mod:`berth.api.device_cel`).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import re
import typing

import celpy
import celpy.adapter
import celpy.celparser
import celpy.celtypes
import celpy.evaluation

from berth.api import apiextensions, errors, quantities, schemas

__all__ = ["CelQuantity", "FUNCTIONS", "RuleError", "Validator", "Violation", "crd_validator"]


class RuleError(errors.ApiError):
    """A CEL rule that does not compile (or uses what this evaluator does not support)."""


@dataclasses.dataclass(frozen=True, order=True)
class CelQuantity:
    """A quantity as CEL sees it: what the Kubernetes ``quantity()`` function returns."""

    milli: int


def _quantity(text: typing.Any) -> CelQuantity:
    try:
        return CelQuantity(quantities.parse_milli(str(text)))
    except errors.QuantityError as exc:
        # celpy turns ValueError into a CEL evaluation error, as a failed quantity() is.
        raise ValueError(str(exc)) from None


def _is_quantity(text: typing.Any) -> celpy.celtypes.BoolType:
    try:
        quantities.parse_milli(str(text))
    except errors.QuantityError:
        return celpy.celtypes.BoolType(False)
    return celpy.celtypes.BoolType(True)


def _compare_to(left: CelQuantity, right: CelQuantity) -> celpy.celtypes.IntType:
    return celpy.celtypes.IntType((left.milli > right.milli) - (left.milli < right.milli))


def _is_greater_than(left: CelQuantity, right: CelQuantity) -> celpy.celtypes.BoolType:
    return celpy.celtypes.BoolType(left.milli > right.milli)


def _is_less_than(left: CelQuantity, right: CelQuantity) -> celpy.celtypes.BoolType:
    return celpy.celtypes.BoolType(left.milli < right.milli)


def _sign(value: CelQuantity) -> celpy.celtypes.IntType:
    return celpy.celtypes.IntType((value.milli > 0) - (value.milli < 0))


def _is_integer(value: CelQuantity) -> celpy.celtypes.BoolType:
    return celpy.celtypes.BoolType(value.milli % 1000 == 0)


def _as_integer(value: CelQuantity) -> celpy.celtypes.IntType:
    if value.milli % 1000:
        raise ValueError("cannot convert a fractional quantity to an integer")
    return celpy.celtypes.IntType(value.milli // 1000)


FUNCTIONS: collections.abc.Mapping[str, collections.abc.Callable[..., typing.Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "sign": _sign,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
}
"""The Kubernetes CEL library functions this evaluator provides, by name."""


_GLOBAL_ONLY = ("quantity", "isQuantity", "sign")
_MEMBER_ONLY = (
    "compareTo",
    "isGreaterThan",
    "isLessThan",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "add",
    "sub",
)
_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def call_form_error(text: str) -> str | None:
    """Why the API server would not compile ``text``'s use of the quantity library, if it would not.

    cel-python resolves ``q.f()`` and ``f(q)`` alike, where Kubernetes declares each quantity
    function in one form only: ``sign`` is a global function (``sign(q)``; its documentation
    says ``q.sign()``, which the API server refuses), the comparisons and conversions are
    member functions.
    """
    code = _STRING_LITERAL.sub("''", text)
    for name in _GLOBAL_ONLY:
        if re.search(rf"\.\s*{name}\s*\(", code):
            return f"found no matching overload for '{name}': write {name}(...), a global function"
    for name in _MEMBER_ONLY:
        if re.search(rf"(?<![.\w]){name}\s*\(", code):
            return (
                f"found no matching overload for '{name}': write q.{name}(...), a member function"
            )
    return None


@dataclasses.dataclass(frozen=True)
class Violation:
    """A rule the object broke: where (``spec.limit``), which rule, and its message."""

    path: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: {self.message}"


@dataclasses.dataclass(frozen=True)
class _Compiled:
    rule: schemas.ValidationRule
    runner: celpy.Runner


@functools.lru_cache(maxsize=512)
def _compile(text: str) -> celpy.Runner:
    if "oldSelf" in text:
        raise RuleError(f"transition rules (oldSelf) are not supported: {text}")
    if (problem := call_form_error(text)) is not None:
        raise RuleError(f"CEL rule does not compile: {text}: {problem}")
    environment = celpy.Environment()
    try:
        ast = environment.compile(text)
    except celpy.celparser.CELParseError as exc:
        raise RuleError(f"CEL rule does not compile: {text}: {exc}") from None
    return environment.program(ast, functions=dict(FUNCTIONS))


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part


class Validator:
    """Checks objects against the CEL rules of one structural schema (compiled once)."""

    def __init__(self, schema: schemas.JSONSchemaProps) -> None:
        self._schema = schema
        self._compiled: dict[int, tuple[_Compiled, ...]] = {}
        self._compile_all(schema)

    @property
    def rules(self) -> list[schemas.ValidationRule]:
        """Every rule of the schema, in walk order."""
        return [c.rule for group in self._compiled.values() for c in group]

    def _compile_all(self, schema: schemas.JSONSchemaProps) -> None:
        found = schema.get("x-kubernetes-validations", [])
        if found:
            self._compiled[id(schema)] = tuple(_Compiled(r, _compile(r["rule"])) for r in found)
        for child in (schema.get("properties") or {}).values():
            self._compile_all(child)
        for below in (schema.get("items"), schema.get("additionalProperties")):
            if isinstance(below, collections.abc.Mapping):
                self._compile_all(below)

    def validate(self, obj: typing.Any) -> list[Violation]:
        """Every violation in ``obj`` (a JSON-like value already defaulted), in walk order."""
        out: list[Violation] = []
        self._walk(self._schema, obj, "", out)
        return out

    def _walk(
        self,
        schema: schemas.JSONSchemaProps,
        value: typing.Any,
        path: str,
        out: list[Violation],
    ) -> None:
        if value is None:
            return
        for compiled in self._compiled.get(id(schema), ()):
            self._check(compiled, value, path, out)
        if isinstance(value, collections.abc.Mapping):
            properties = schema.get("properties") or {}
            for name, child in properties.items():
                if name in value:
                    self._walk(child, value[name], _join(path, name), out)
            extra = schema.get("additionalProperties")
            if isinstance(extra, collections.abc.Mapping):
                for name, item in value.items():
                    self._walk(extra, item, f"{path}[{name}]", out)
        elif isinstance(value, list) and isinstance(
            items := schema.get("items"), collections.abc.Mapping
        ):
            for index, item in enumerate(value):
                self._walk(items, item, f"{path}[{index}]", out)

    @staticmethod
    def _check(compiled: _Compiled, value: typing.Any, path: str, out: list[Violation]) -> None:
        rule = compiled.rule
        # Without a message the API server says which rule failed.
        message = rule.get("message", f"failed rule: {rule['rule']}")
        where = path + rule.get("fieldPath", "") if path else rule.get("fieldPath", "")[1:]
        try:
            result = compiled.runner.evaluate({"self": celpy.adapter.json_to_cel(value)})
        except celpy.evaluation.CELEvalError as exc:
            out.append(Violation(where, rule["rule"], f"{message} (error: {exc})"))
            return
        if isinstance(result, celpy.evaluation.CELEvalError):
            out.append(Violation(where, rule["rule"], f"{message} (error: {result})"))
        elif not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            out.append(Violation(where, rule["rule"], message))


def crd_validator(crd: apiextensions.CustomResourceDefinition) -> Validator:
    """The validator of a CustomResourceDefinition's storage version."""
    versions = crd["spec"]["versions"]
    version = next((v for v in versions if v.get("storage")), versions[0])
    return Validator(version["schema"]["openAPIV3Schema"])
