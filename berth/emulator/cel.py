"""CEL rules of ``x-kubernetes-validations``, evaluated with ``cel-python`` (``celpy``).

The base language comes from celpy and the quantity library (``quantity()``, ``isQuantity()``,
``isGreaterThan``, ``compareTo``, ...) from :mod:`berth.api.cel`, which Berth's own model tests
use too. This module adds what an API server has beyond that: transition rules (``oldSelf``),
quantity ``add``/``sub``/``asApproximateFloat``, the string extensions (``lowerAscii``,
``upperAscii``, ``trim``, ``split``, ``replace``, ``indexOf``, ``lastIndexOf``, ``substring``,
``charAt``, ``join``), list helpers (``isSorted``, ``sum``, ``min``, ``max``) and regex
``find``/``findAll``. Used by :mod:`berth.emulator.validation`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing

from berth.api import cel as api_cel
from berth.util import extras

try:
    import celpy
    import celpy.adapter
    import celpy.celparser
    import celpy.evaluation
    from celpy import celtypes
except ModuleNotFoundError as exc:  # pragma: no cover - exercised by tests/packaging
    raise extras.missing("emulator", exc) from exc

__all__ = ["CelError", "Rule", "compile_rule", "evaluate"]


class CelError(ValueError):
    """A rule that does not compile, or that failed while evaluating (not merely false)."""


def _milli(value: typing.Any) -> int:
    if isinstance(value, api_cel.CelQuantity):
        return value.milli
    if isinstance(value, int):
        return int(value) * 1000
    raise TypeError(f"expected a quantity, got {type(value).__name__}")


def _index_of(container: typing.Any, item: typing.Any, *rest: typing.Any) -> celtypes.IntType:
    if isinstance(container, str):
        start = int(rest[0]) if rest else 0
        return celtypes.IntType(container.find(str(item), start))
    values = list(container)
    return celtypes.IntType(values.index(item) if item in values else -1)


def _last_index_of(container: typing.Any, item: typing.Any) -> celtypes.IntType:
    if isinstance(container, str):
        return celtypes.IntType(container.rfind(str(item)))
    values = list(container)
    return celtypes.IntType(len(values) - 1 - values[::-1].index(item) if item in values else -1)


_FUNCTIONS: dict[str, typing.Callable[..., typing.Any]] = {
    **api_cel.FUNCTIONS,
    "add": lambda a, b: api_cel.CelQuantity(_milli(a) + _milli(b)),
    "sub": lambda a, b: api_cel.CelQuantity(_milli(a) - _milli(b)),
    "asApproximateFloat": lambda q: celtypes.DoubleType(_milli(q) / 1000),
    "lowerAscii": lambda s: celtypes.StringType(str(s).lower()),
    "upperAscii": lambda s: celtypes.StringType(str(s).upper()),
    "trim": lambda s: celtypes.StringType(str(s).strip()),
    "split": lambda s, sep, *n: celtypes.ListType(
        celtypes.StringType(p) for p in str(s).split(str(sep), int(n[0]) - 1 if n else -1)
    ),
    "replace": lambda s, old, new, *n: celtypes.StringType(
        str(s).replace(str(old), str(new), int(n[0]) if n else -1)
    ),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "substring": lambda s, start, *end: celtypes.StringType(
        str(s)[int(start) : int(end[0]) if end else None]
    ),
    "charAt": lambda s, i: celtypes.StringType(str(s)[int(i) : int(i) + 1]),
    "join": lambda items, *sep: celtypes.StringType(
        (str(sep[0]) if sep else "").join(str(i) for i in items)
    ),
    "isSorted": lambda items: celtypes.BoolType(list(items) == sorted(items)),
    "sum": lambda items: sum(items, celtypes.IntType(0)),
    "min": lambda items: min(items),
    "max": lambda items: max(items),
    "find": lambda s, pattern: celtypes.StringType(
        m.group() if (m := re.search(str(pattern), str(s))) else ""
    ),
    "findAll": lambda s, pattern, *n: celtypes.ListType(
        celtypes.StringType(m) for m in re.findall(str(pattern), str(s))[: int(n[0]) if n else None]
    ),
}


@dataclasses.dataclass(frozen=True)
class Rule:
    """A compiled rule: the program and whether it needs ``oldSelf`` (a transition rule)."""

    text: str
    program: typing.Any
    transition: bool


@functools.lru_cache(maxsize=1024)
def compile_rule(text: str) -> Rule:
    """Compile (and cache) a rule; a syntax error raises :class:`CelError`."""
    if (problem := api_cel.call_form_error(text)) is not None:
        raise CelError(f"compilation failed: ERROR: {problem}")
    environment = celpy.Environment()
    try:
        ast = environment.compile(text)
        program = environment.program(ast, functions=_FUNCTIONS)
    except celpy.celparser.CELParseError as exc:
        raise CelError(f"compilation failed: {exc}") from None
    return Rule(text, program, transition=re.search(r"\boldSelf\b", text) is not None)


def evaluate(rule: Rule, *, value: typing.Any, old: typing.Any = None) -> bool:
    """Whether ``rule`` holds for ``value`` (``self``) and ``old`` (``oldSelf``).

    An evaluation error (a missing field, a bad quantity) raises :class:`CelError`, which the
    API server reports as the rule failing with that error.
    """
    activation: dict[str, object] = {"self": celpy.adapter.json_to_cel(value)}  # CEL values
    if rule.transition:
        activation["oldSelf"] = celpy.adapter.json_to_cel(old)
    try:
        result = rule.program.evaluate(activation)
    except celpy.evaluation.CELEvalError as exc:
        raise CelError(_describe(exc)) from None
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as exc:
        raise CelError(str(exc)) from None
    if isinstance(result, celpy.evaluation.CELEvalError):
        raise CelError(_describe(result))
    if not isinstance(result, bool | celtypes.BoolType):
        raise CelError(f"rule evaluated to {type(result).__name__}, not a boolean")
    return bool(result)


def _describe(exc: celpy.evaluation.CELEvalError) -> str:
    if exc.args and isinstance(exc.args[0], str):
        message = exc.args[0]
        if message.startswith("no such member"):
            return message.replace("no such member in mapping:", "no such key:")
        return message.split(" (in activation")[0]
    return str(exc)
