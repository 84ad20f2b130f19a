"""The subset of Kubernetes JSONPath that printer columns use.

``.a.b``, ``['a.b']``, ``[0]``, ``[-1]``, ``[1:3]``, ``[*]``, ``..name`` (recursive), and filters
``[?(@.type=="Ready")]`` (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, or bare ``@.field`` for
existence), optionally wrapped in ``{...}`` as kubectl writes them. Used by
:mod:`berth.emulator.tables` for CRD ``additionalPrinterColumns``. :func:`find` returns every
match, in document order; a malformed expression raises :class:`JsonPathError`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing

__all__ = ["JsonPathError", "compile_path", "find"]


class JsonPathError(ValueError):
    """A JSONPath expression this module cannot parse."""


@dataclasses.dataclass(frozen=True)
class _Step:
    kind: str  # "field", "recursive", "index", "slice", "all", "filter"
    name: str = ""
    index: int = 0
    stop: int | None = None
    path: tuple[_Step, ...] = ()  # filter: the path after @
    op: str = ""  # filter: "" (exists) or a comparison
    literal: typing.Any = None


_FIELD = re.compile(r"(?:\\.|[A-Za-z0-9_\-$])+")
_FILTER = re.compile(
    r"\?\(\s*@(?P<path>[^=!<>)]*?)\s*(?:(?P<op>==|!=|<=|>=|<|>)\s*(?P<lit>.+?))?\s*\)"
)


def compile_path(expression: str) -> tuple[_Step, ...]:
    """Parse ``expression`` into steps (cache the result: columns are evaluated per row)."""
    text = expression.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[_Step] = []
    position = 0
    while position < len(text):
        if text.startswith("..", position):
            match = _FIELD.match(text, position + 2)
            if match is None:
                raise JsonPathError(f"unexpected text after '..' in {expression!r}")
            steps.append(_Step("recursive", name=match.group().replace("\\.", ".")))
            position = match.end()
        elif text[position] == ".":
            match = _FIELD.match(text, position + 1)
            if match is None:
                raise JsonPathError(f"unexpected text after '.' in {expression!r}")
            steps.append(_Step("field", name=match.group().replace("\\.", ".")))
            position = match.end()
        elif text[position] == "[":
            end = _closing(text, position, expression)
            steps.append(_bracket(text[position + 1 : end].strip(), expression))
            position = end + 1
        else:
            match = _FIELD.match(text, position)
            if match is None or position != 0:
                raise JsonPathError(f"unexpected {text[position]!r} in {expression!r}")
            steps.append(_Step("field", name=match.group().replace("\\.", ".")))
            position = match.end()
    return tuple(steps)


def _closing(text: str, start: int, expression: str) -> int:
    depth, quote = 0, ""
    for position in range(start, len(text)):
        char = text[position]
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return position
    raise JsonPathError(f"unterminated '[' in {expression!r}")


def _bracket(inner: str, expression: str) -> _Step:
    if inner == "*":
        return _Step("all")
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return _Step("field", name=inner[1:-1])
    if re.fullmatch(r"-?\d+", inner):
        return _Step("index", index=int(inner))
    slice_ = re.fullmatch(r"(-?\d*):(-?\d*)", inner)
    if slice_ is not None:
        start, stop = slice_.groups()
        return _Step("slice", index=int(start or 0), stop=int(stop) if stop else None)
    match = _FILTER.fullmatch(inner)
    if match is None:
        raise JsonPathError(f"unsupported expression [{inner}] in {expression!r}")
    literal: typing.Any = None
    if match["op"]:
        raw = match["lit"].strip()
        if raw[:1] in "'\"" and raw[-1:] == raw[:1]:
            literal = raw[1:-1]
        else:
            try:
                literal = json.loads(raw)
            except ValueError as exc:
                raise JsonPathError(f"bad literal {raw!r} in {expression!r}") from exc
    path = compile_path(match["path"]) if match["path"].strip() else ()
    return _Step("filter", path=path, op=match["op"] or "", literal=literal)


def _walk(values: list[typing.Any], step: _Step) -> list[typing.Any]:
    out: list[typing.Any] = []
    for value in values:
        if step.kind == "field":
            if isinstance(value, dict) and step.name in value:
                out.append(value[step.name])
        elif step.kind == "recursive":
            out.extend(_descend(value, step.name))
        elif step.kind == "all":
            if isinstance(value, list):
                out.extend(value)
            elif isinstance(value, dict):
                out.extend(value.values())
        elif step.kind == "index":
            if isinstance(value, list) and -len(value) <= step.index < len(value):
                out.append(value[step.index])
        elif step.kind == "slice":
            if isinstance(value, list):
                out.extend(value[step.index : step.stop])
        elif step.kind == "filter" and isinstance(value, list):
            out.extend(item for item in value if _keep(item, step))
    return out


def _descend(value: typing.Any, name: str) -> list[typing.Any]:
    found: list[typing.Any] = []
    if isinstance(value, dict):
        if name in value:
            found.append(value[name])
        for child in value.values():
            found.extend(_descend(child, name))
    elif isinstance(value, list):
        for child in value:
            found.extend(_descend(child, name))
    return found


def _keep(item: typing.Any, step: _Step) -> bool:
    results = [item]
    for sub in step.path:
        results = _walk(results, sub)
    if not step.op:
        return bool(results)
    if not results:
        return False
    actual, literal = results[0], step.literal
    try:
        if step.op == "==":
            return bool(actual == literal)
        if step.op == "!=":
            return bool(actual != literal)
        if step.op == "<":
            return bool(actual < literal)
        if step.op == "<=":
            return bool(actual <= literal)
        if step.op == ">":
            return bool(actual > literal)
        return bool(actual >= literal)
    except TypeError:
        return False


def find(document: typing.Any, steps: tuple[_Step, ...]) -> list[typing.Any]:
    """Every value ``steps`` reaches from ``document``."""
    values = [document]
    for step in steps:
        values = _walk(values, step)
    return values
