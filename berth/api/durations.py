"""Go-style durations (``24h``, ``90m``, ``1h30m``, ``1.5h``, ``300ms``, ``0``), exact.

A duration is held as an integer count of milliseconds. Parsing follows Go's
``time.ParseDuration`` grammar (the one Kubernetes users already write), without a sign: a
negative duration means nothing in Berth's API, so it is refused. Sub-millisecond remainders
round up, as quantities do, so a timeout is never shortened::

    <duration> ::= "0" | <segment>+
    <segment>  ::= <number> <unit>
    <number>   ::= <digits> | <digits>.<digits>? | .<digits>
    <unit>     ::= ns | us | ms | s | m | h

:class:`DurationField` keeps the text as the user wrote it on the wire. Used by the
Reservation model (``ttl``) and by anything that reads durations from annotations
(``sim.berth.io/duration``).
"""

from __future__ import annotations

import dataclasses
import fractions
import math
import re
import typing

import pydantic
import pydantic_core

from berth.api import errors

__all__ = [
    "API_PATTERN",
    "Duration",
    "DurationField",
    "MAX_LENGTH",
    "MAX_MS",
    "MAX_TEXT",
    "RANGE_MESSAGE",
    "format_duration",
    "parse_duration",
    "parse_ms",
]

# Milliseconds per unit, as fractions so that "1.5h" and "1us" stay exact until rounding.
_UNITS: dict[str, fractions.Fraction] = {
    "ns": fractions.Fraction(1, 1_000_000),
    "us": fractions.Fraction(1, 1_000),
    "ms": fractions.Fraction(1),
    "s": fractions.Fraction(1_000),
    "m": fractions.Fraction(60_000),
    "h": fractions.Fraction(3_600_000),
}
_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
# Longer units first so that "ms" is not read as "m" followed by garbage.
_UNIT = r"(?:ns|us|ms|s|m|h)"
_SEGMENT = re.compile(rf"({_NUMBER})({_UNIT})")
_WHOLE = re.compile(rf"0|(?:{_NUMBER}{_UNIT})+")
API_PATTERN = rf"^(0|({_NUMBER}{_UNIT})+)$".replace("(?:", "(")
"""The pattern rendered CRDs give duration strings (the parser's grammar, RE2-compatible)."""
# Longer than any sensible duration; keeps the API server's CEL cost estimate bounded.
MAX_LENGTH = 64
MAX_MS = (2**63 - 1) // 10**6
"""The longest duration, in milliseconds: Go's ``time.Duration`` (int64 nanoseconds, about 292
years), as ``metav1.Duration`` and kubectl parse it. Longer ones (``99999999999h``) cannot be
added to a timestamp: refused where they are parsed, so only their object is invalid."""
MAX_TEXT = "2562047h"
RANGE_MESSAGE = f"duration is out of range (at most {MAX_TEXT})"
"""What a longer duration is told, by the API server (the CRDs' rule, ``berth.api.rules.
duration_range``) and by Berth alike."""


@dataclasses.dataclass(frozen=True)
class Duration:
    """A parsed duration: ``ms`` milliseconds, remembering the ``text`` it was written as.

    Equality and order are by length of time only (``"90m" == "1h30m"``).
    """

    ms: int
    text: str = dataclasses.field(compare=False)

    @classmethod
    def parse(cls, text: str) -> Duration:
        """Parse Go's duration syntax; see :func:`parse_duration`."""
        return parse_duration(text)

    @classmethod
    def of(cls, ms: int) -> Duration:
        """The duration of ``ms`` milliseconds, written canonically (``Duration.of(1500)``)."""
        return Duration(ms, format_duration(ms))

    @property
    def seconds(self) -> float:
        """The length in seconds (the unit clocks speak)."""
        return self.ms / 1000

    def __bool__(self) -> bool:
        return self.ms != 0

    def __lt__(self, other: Duration) -> bool:
        return self.ms < other.ms

    def __le__(self, other: Duration) -> bool:
        return self.ms <= other.ms

    def __str__(self) -> str:
        return self.text


def parse_duration(text: str) -> Duration:
    """Parse ``text``; a malformed or negative one raises ``DurationError`` naming it."""
    if not isinstance(text, str):
        raise errors.DurationError(f"duration {text!r} must be a string such as '1h30m'")
    if text.startswith("-"):
        raise errors.DurationError(f"duration {text!r} must not be negative")
    if len(text) > MAX_LENGTH:
        raise errors.DurationError(f"duration {text!r} is longer than {MAX_LENGTH} characters")
    if not _WHOLE.fullmatch(text):
        raise errors.DurationError(
            f"duration {text!r} is malformed: use a number and a unit (ns, us, ms, s, m, h), "
            f"e.g. '90m', '1h30m', '1.5h', or '0'"
        )
    total = sum(
        (fractions.Fraction(number) * _UNITS[unit] for number, unit in _SEGMENT.findall(text)),
        start=fractions.Fraction(0),
    )
    if total > MAX_MS:
        raise errors.DurationError(f"{RANGE_MESSAGE}: {text!r}")
    return Duration(math.ceil(total), text)


def parse_ms(text: str) -> int:
    """The milliseconds of ``text``."""
    return parse_duration(text).ms


def format_duration(ms: int) -> str:
    """Write ``ms`` the way Go's ``Duration.String`` does (``1h30m0s``, ``1.5s``, ``300ms``)."""
    if ms < 0:
        raise errors.DurationError(f"duration of {ms} ms must not be negative")
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    second_text = f"{seconds}.{millis:03d}".rstrip("0") if millis else str(seconds)
    if hours:
        return f"{hours}h{minutes}m{second_text}s"
    if minutes:
        return f"{minutes}m{second_text}s"
    return f"{second_text}s"


def _validate(value: typing.Any) -> Duration:
    if isinstance(value, Duration):
        return value
    try:
        return parse_duration(value)
    except errors.DurationError as exc:
        raise pydantic_core.PydanticCustomError("duration", str(exc)) from None


DurationField = typing.Annotated[
    Duration,
    pydantic.PlainValidator(_validate),
    pydantic.PlainSerializer(str, return_type=str),
    pydantic.WithJsonSchema({"type": "string", "pattern": API_PATTERN, "maxLength": MAX_LENGTH}),
]
"""A pydantic field type for a duration (at most :data:`MAX_TEXT`: a model declaring one adds
``berth.api.rules.duration_range`` for the CRD); the wire keeps the text as written."""
