"""CEL device selectors of Dynamic Resource Allocation, evaluated with ``cel-python``.

A DeviceClass and each request of a ResourceClaim select devices with CEL expressions
(``spec.selectors[].cel.expression``). This module gives them the environment the API server
and kube-scheduler give them (``k8s.io/dynamic-resource-allocation/cel``):

- ``device.driver`` (string) and ``device.allowMultipleAllocations`` (bool);
- ``device.attributes["<domain>"].<id>``: the device's attributes by domain; an attribute
  written without a domain belongs to the driver's (``model`` of driver ``gpu.example.com`` is
  ``device.attributes["gpu.example.com"].model``). Values are int, bool, string or semantic
  version. A domain the device has no attribute of is an empty map, so ``has(...)`` tests
  work and a lookup of a missing attribute is a run-time error, as upstream;
- ``device.capacity["<domain>"].<id>``: quantities, with the Kubernetes quantity library
  (``quantity("10Gi")``, ``isQuantity``, ``q.compareTo(r)``, ``isGreaterThan``,
  ``isLessThan``, ``add``, ``sub``, ``asInteger``, ``asApproximateFloat``, ``isInteger``,
  ``sign(q)``);
- semantic versions (``semver("1.2.3")``, ``semver(s, true)`` normalising ``v1.2``,
  ``isSemver``, ``v.major()``, ``minor()``, ``patch()``, ``compareTo``, ``isGreaterThan``,
  ``isLessThan``; equality compares precedence, build metadata ignored);
- ``cel.bind(name, value, expression)`` (CEL's bindings extension), and standard CEL.

A selector that does not compile raises :class:`SelectorError` from :func:`compile_selector`;
one that fails on a device (a missing attribute, a non-boolean result) raises it from
:meth:`Selector.matches`. Callers turn these into reasons naming the class or claim and the
field; nothing here decides what a failure means. Unlike the API server, the type checker does
not run at compile time: a type mismatch surfaces when a device is evaluated.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import re
import typing

import celpy
import celpy.celparser
import celpy.celtypes as celtypes
import celpy.evaluation

from berth.api import cel as api_cel
from berth.api import errors

__all__ = [
    "Attribute",
    "DeviceView",
    "Selector",
    "SelectorError",
    "Version",
    "compile_selector",
    "device_view",
    "parse_version",
]


class SelectorError(errors.ApiError):
    """A device selector that does not compile, or fails while evaluating one device."""


# Semantic versions ----------------------------------------------------------------------------

_NUMBER = r"0|[1-9]\d*"
_IDENT = r"[0-9A-Za-z-]+"
_STRICT = re.compile(
    rf"^(?P<major>{_NUMBER})\.(?P<minor>{_NUMBER})\.(?P<patch>{_NUMBER})"
    rf"(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?(?:\+(?P<build>{_IDENT}(?:\.{_IDENT})*))?$"
)
_LOOSE = re.compile(
    rf"^v?(?P<major>\d+)(?:\.(?P<minor>\d+))?(?:\.(?P<patch>\d+))?"
    rf"(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?(?:\+(?P<build>{_IDENT}(?:\.{_IDENT})*))?$"
)


@functools.total_ordering
@dataclasses.dataclass(frozen=True, eq=False)
class Version:
    """A semantic version 2.0.0; ordered and equal by precedence (build metadata ignored)."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    def _key(self) -> tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]:
        # A release sorts after its pre-releases; numeric identifiers before alphanumeric.
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self._key() == other._key()

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


def parse_version(text: str, /, *, normalize: bool = False) -> Version:
    """Parse a semantic version (strict 2.0.0; ``normalize``: also ``v1``, ``1.2``, leading
    zeros, as the Kubernetes library's ``semver(s, true)``). Raises ``ValueError``."""
    match = (_LOOSE if normalize else _STRICT).match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a semantic version")
    pre = tuple(match.group("pre").split(".")) if match.group("pre") else ()
    if not normalize and any(p.isdigit() and len(p) > 1 and p[0] == "0" for p in pre):
        raise ValueError(f"{text!r}: numeric pre-release identifiers have no leading zeros")
    return Version(
        major=int(match.group("major")),
        minor=int(match.group("minor") or 0),
        patch=int(match.group("patch") or 0),
        pre=pre,
        build=tuple(match.group("build").split(".")) if match.group("build") else (),
    )


def _semver(text: typing.Any, normalize: typing.Any = False) -> Version:
    return parse_version(str(text), normalize=bool(normalize))


def _is_semver(text: typing.Any, normalize: typing.Any = False) -> celtypes.BoolType:
    try:
        parse_version(str(text), normalize=bool(normalize))
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _order(left: typing.Any, right: typing.Any) -> int:
    if isinstance(left, Version) and isinstance(right, Version):
        return (left > right) - (left < right)
    if isinstance(left, api_cel.CelQuantity) and isinstance(right, api_cel.CelQuantity):
        return (left.milli > right.milli) - (left.milli < right.milli)
    raise TypeError(f"cannot compare {type(left).__name__} with {type(right).__name__}")


def _milli(value: typing.Any) -> int:
    if isinstance(value, api_cel.CelQuantity):
        return value.milli
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value) * 1000
    raise TypeError(f"expected a quantity, got {type(value).__name__}")


def _version_part(name: str) -> collections.abc.Callable[[typing.Any], celtypes.IntType]:
    def part(value: typing.Any) -> celtypes.IntType:
        if not isinstance(value, Version):
            raise TypeError(f"{name}() applies to a semantic version")
        return celtypes.IntType(getattr(value, name))

    return part


_FUNCTIONS: dict[str, collections.abc.Callable[..., typing.Any]] = {
    **api_cel.FUNCTIONS,
    "compareTo": lambda a, b: celtypes.IntType(_order(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_order(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_order(a, b) < 0),
    "add": lambda a, b: api_cel.CelQuantity(_milli(a) + _milli(b)),
    "sub": lambda a, b: api_cel.CelQuantity(_milli(a) - _milli(b)),
    "asApproximateFloat": lambda q: celtypes.DoubleType(_milli(q) / 1000),
    "semver": _semver,
    "isSemver": _is_semver,
    "major": _version_part("major"),
    "minor": _version_part("minor"),
    "patch": _version_part("patch"),
}


# The device variable ---------------------------------------------------------------------------

Attribute = int | bool | str | Version
"""One attribute's value, typed as the API declares it."""


class _Domains(celtypes.MapType):
    """Attributes or capacities by domain: an unknown domain is an empty map (upstream's
    ``newStringInterfaceMapWithDefault``), so a missing attribute fails only when read."""

    def __getitem__(self, key: typing.Any) -> typing.Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType({})


def _cel_value(value: Attribute) -> typing.Any:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    return value  # a Version


_Value = typing.TypeVar("_Value")


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, slash, ident = name.partition("/")
    return (domain, ident) if slash else (driver, name)


def _by_domain(
    values: collections.abc.Mapping[str, _Value],
    *,
    driver: str,
    wrap: collections.abc.Callable[[_Value], object],
) -> _Domains:
    grouped: dict[str, dict[celtypes.StringType, object]] = {}
    for name, value in values.items():
        domain, ident = _split(name, driver)
        grouped.setdefault(domain, {})[celtypes.StringType(ident)] = wrap(value)
    return _Domains(
        {celtypes.StringType(d): celtypes.MapType(inner) for d, inner in grouped.items()}
    )


@dataclasses.dataclass(frozen=True, eq=False)
class DeviceView:
    """A device as selectors see it (built once per device: :func:`device_view`)."""

    activation: collections.abc.Mapping[str, celtypes.MapType]  # {"device": ...}


def device_view(
    *,
    driver: str,
    attributes: collections.abc.Mapping[str, Attribute],
    capacity: collections.abc.Mapping[str, int],
    allow_multiple_allocations: bool = False,
) -> DeviceView:
    """The ``device`` variable of a device of ``driver`` (``capacity`` in milli-units)."""
    device = celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                allow_multiple_allocations
            ),
            celtypes.StringType("attributes"): _by_domain(
                attributes, driver=driver, wrap=_cel_value
            ),
            celtypes.StringType("capacity"): _by_domain(
                capacity, driver=driver, wrap=api_cel.CelQuantity
            ),
        }
    )
    return DeviceView({"device": device})


# Selectors ------------------------------------------------------------------------------------

_BIND = re.compile(r"\bcel\s*\.\s*bind\s*\(")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def _closing(text: str, start: int) -> list[int]:
    """The positions of the top-level commas and of the closing parenthesis of the call whose
    arguments start at ``start`` (string literals skipped)."""
    depth, marks, i = 0, [], start
    while i < len(text):
        char = text[i]
        if char in "'\"":
            literal = _STRING_LITERAL.match(text, i)
            if literal is None:
                raise SelectorError("compilation failed: unterminated string literal")
            i = literal.end()
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                marks.append(i)
                return marks
            depth -= 1
        elif char == "," and depth == 0:
            marks.append(i)
        i += 1
    raise SelectorError("compilation failed: cel.bind( is not closed")


def _expand_binds(text: str) -> str:
    """``cel.bind(x, value, body)`` as ``body`` with ``x`` replaced by ``(value)``: CEL is
    free of side effects, so the substitution means the same (the bindings extension only
    saves evaluating ``value`` twice)."""
    while (match := _BIND.search(text)) is not None:
        marks = _closing(text, match.end())
        if len(marks) != 3:
            raise SelectorError("compilation failed: cel.bind takes a name, a value and a body")
        start = match.end()
        name = text[start : marks[0]].strip()
        value = text[marks[0] + 1 : marks[1]].strip()
        body = text[marks[1] + 1 : marks[2]].strip()
        if _IDENTIFIER.fullmatch(name) is None:
            raise SelectorError(f"compilation failed: cel.bind needs a name, not {name!r}")
        pattern = re.compile(rf"(?<![.\w]){re.escape(name)}(?!\w)")
        pieces, last = [], 0
        for literal in _STRING_LITERAL.finditer(body):  # never rewrite inside a string
            pieces.append(pattern.sub(f"({value})", body[last : literal.start()]))
            pieces.append(literal.group())
            last = literal.end()
        pieces.append(pattern.sub(f"({value})", body[last:]))
        text = f"{text[: match.start()]}({''.join(pieces)}){text[marks[2] + 1 :]}"
    return text


@dataclasses.dataclass(frozen=True, eq=False)
class Selector:
    """A compiled selector; :meth:`matches` evaluates it on one device."""

    expression: str
    program: typing.Any

    def matches(self, device: DeviceView, /) -> bool:
        """Whether ``device`` is selected; :class:`SelectorError` when evaluation fails."""
        try:
            result = self.program.evaluate(device.activation)
        except celpy.evaluation.CELEvalError as exc:
            raise SelectorError(_describe(exc)) from None
        except (TypeError, ValueError, KeyError, ZeroDivisionError, AttributeError) as exc:
            raise SelectorError(str(exc)) from None
        if isinstance(result, celpy.evaluation.CELEvalError):
            raise SelectorError(_describe(result))
        if not isinstance(result, bool | celtypes.BoolType):
            raise SelectorError(f"the expression evaluated to {type(result).__name__}, not a bool")
        return bool(result)


# One environment for every selector, made at import: celpy raises the interpreter's recursion
# limit each time it makes one, and that had better happen once, before anything runs.
_ENVIRONMENT = celpy.Environment()


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str, /) -> Selector:
    """Compile (and cache) a selector; :class:`SelectorError` when it does not compile."""
    if not expression.strip():
        raise SelectorError("compilation failed: the expression is empty")
    if (problem := api_cel.call_form_error(expression)) is not None:
        raise SelectorError(f"compilation failed: {problem}")
    text = _expand_binds(expression)
    try:
        ast = _ENVIRONMENT.compile(text)
        program = _ENVIRONMENT.program(ast, functions=_FUNCTIONS)
    except celpy.celparser.CELParseError as exc:
        raise SelectorError(f"compilation failed: {_one_line(str(exc))}") from None
    return Selector(expression, program)


def _describe(exc: celpy.evaluation.CELEvalError) -> str:
    """celpy's error text, in the API server's words and on one line."""
    text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    text = text.replace("no such member in mapping:", "no such key:")
    return _one_line(text.split(" (in activation")[0])


def _one_line(text: str) -> str:
    return " ".join(text.split())
