"""Kubernetes resource quantities, exact.

A quantity is held as an integer count of *milli-units*, the way the scheduler compares them:
``"100m"`` is 100, ``"2"`` is 2000, ``"1Ki"`` is 1 024 000. Sub-milli values round up, as
Kubernetes' ``MilliValue()`` does (``"1n"`` is 1), so a request is never under-counted. Parsing
follows the API server's grammar::

    <quantity> ::= <sign>? <number> <suffix>
    <number>   ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>   ::= "" | n | u | m | k | M | G | T | P | E       (decimal SI)
                 | Ki | Mi | Gi | Ti | Pi | Ei                  (binary SI)
                 | (e|E) <sign>? <digits>                       (decimal exponent)

Used by :mod:`berth.api.resources` and everything that reads requests or capacity.
"""

from __future__ import annotations

import dataclasses
import enum
import fractions
import math
import re
import typing

import pydantic
import pydantic_core

from berth.api import errors

__all__ = [
    "API_PATTERN",
    "Format",
    "MAX_MILLI",
    "MAX_TEXT",
    "Quantity",
    "QuantityField",
    "SHAPE",
    "format_milli",
    "parse_bounded_milli",
    "parse_milli",
    "parse_quantity",
]


class Format(enum.Enum):
    """How a quantity was written, and so how it is written back."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


_DECIMAL_SI: dict[str, int] = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9,
                               "T": 12, "P": 15, "E": 18}  # fmt: skip
_BINARY_SI: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_PATTERN = re.compile(
    r"^(?P<sign>[+-])?(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>[numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]+)?$"
)
SHAPE = "write a number with an optional suffix, e.g. 500m, 4, 8Gi, 1e3"
"""How a quantity is written, in words (what a malformed one's message says)."""
API_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""The pattern the API server's OpenAPI schema gives quantities (used in rendered CRDs)."""
# The API server refuses exponents this large; so do we, before Fraction builds huge numbers.
_MAX_EXPONENT = 60
MAX_MILLI = 128 * 2**40 * 1000
"""The largest quantity Berth represents, in milli-units: ``128Ti`` (of memory; 140 trillion
cpus), just under 2^57. The scheduler holds quantities as ``int64`` milli-units; this
bound leaves room to add 64 of the largest values (a node's pods, a queue's usage) without
overflowing, so one object asking for ``10Pi`` (a typo the API server accepts) is refused
where it enters the scheduler (:func:`parse_bounded_milli`) — that object waits with a
reason — instead of breaking the arithmetic every other tenant's quota depends on. The API
models still parse any quantity exactly."""


@dataclasses.dataclass(frozen=True, order=True)
class Quantity:
    """An exact quantity: ``milli`` milli-units, remembering the format it was written in."""

    milli: int
    format: Format = dataclasses.field(default=Format.DECIMAL_SI, compare=False)

    @classmethod
    def parse(cls, text: str | int | float) -> Quantity:
        """Parse the API's string form (numbers are accepted as the JSON API does)."""
        return parse_quantity(text)

    def __str__(self) -> str:
        return format_milli(self.milli, self.format)

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.milli + other.milli, self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.milli - other.milli, self.format)

    @property
    def value(self) -> int:
        """The whole-unit value, rounded up (Kubernetes' ``Value()``)."""
        return -((-self.milli) // 1000)


def parse_quantity(text: str | int | float) -> Quantity:
    """Parse ``text`` into a :class:`Quantity`; a malformed one raises ``QuantityError``."""
    if isinstance(text, bool):
        raise errors.QuantityError(f"quantity {text!r} must be a string or a number")
    if isinstance(text, int):
        return Quantity(text * 1000)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise errors.QuantityError(f"quantity {text!r} is not a finite number")
        text = repr(text)
    if not isinstance(text, str):
        raise errors.QuantityError(f"quantity {text!r} must be a string or a number")
    match = _PATTERN.match(text.strip())
    if match is None or text != text.strip() or not text:
        raise errors.QuantityError(f"{text!r} is not a quantity: {SHAPE}")
    number = fractions.Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY_SI:
        value, fmt = number * (2 ** _BINARY_SI[suffix]), Format.BINARY_SI
    elif suffix in _DECIMAL_SI:
        value, fmt = number * fractions.Fraction(10) ** _DECIMAL_SI[suffix], Format.DECIMAL_SI
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise errors.QuantityError(f"quantity {text!r} has an exponent out of range")
        value, fmt = number * fractions.Fraction(10) ** exponent, Format.DECIMAL_EXPONENT
    if match["sign"] == "-":
        value = -value
    return Quantity(math.ceil(value * 1000), fmt)


MAX_TEXT = "128Ti"
""":data:`MAX_MILLI` as people write it."""


def parse_bounded_milli(text: str | int | float) -> int:
    """:func:`parse_milli`, refusing (``QuantityError``) a magnitude past :data:`MAX_MILLI`:
    how the scheduler reads every quantity that enters it."""
    milli = parse_quantity(text).milli
    if abs(milli) > MAX_MILLI:
        raise errors.QuantityError(
            f"quantity {text!r} is out of range (at most {MAX_TEXT} in magnitude)"
        )
    return milli


def parse_milli(text: str | int | float) -> int:
    """The milli-units of ``text``: the scheduler's form of a quantity."""
    return parse_quantity(text).milli


def format_milli(milli: int, fmt: Format = Format.DECIMAL_SI) -> str:
    """The canonical string of ``milli`` milli-units in ``fmt``, as the API server writes it.

    Whole values take the largest suffix that keeps them whole (``1536Mi``, ``2k``, ``1e3``);
    fractional ones are written in milli-units (``1500m``).
    """
    if milli == 0:
        return "0"
    if milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    sign, magnitude = ("-" if whole < 0 else ""), abs(whole)
    if fmt is Format.BINARY_SI:
        for suffix, power in reversed(_BINARY_SI.items()):
            if magnitude % (2**power) == 0:
                return f"{sign}{magnitude // 2**power}{suffix}"
        # Not a multiple of 1Ki: the API server writes such values in decimal SI.
    exponent = 0
    while magnitude % 1000 == 0 and exponent < 18:
        magnitude //= 1000
        exponent += 3
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{sign}{magnitude}e{exponent}" if exponent else f"{sign}{magnitude}"
    suffix = {v: k for k, v in _DECIMAL_SI.items()}[exponent]
    return f"{sign}{magnitude}{suffix}"


def _validate(value: typing.Any) -> Quantity:
    if isinstance(value, Quantity):
        return value
    try:
        return parse_quantity(value)
    except errors.QuantityError as exc:
        raise pydantic_core.PydanticCustomError("quantity", str(exc)) from None


QuantityField = typing.Annotated[
    Quantity,
    pydantic.PlainValidator(_validate),
    pydantic.PlainSerializer(str, return_type=str),
    pydantic.WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
            "pattern": API_PATTERN,
        }
    ),
]
"""A pydantic field type for one quantity, with the API server's JSON schema."""
