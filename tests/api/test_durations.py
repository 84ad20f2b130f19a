"""Durations: Go's syntax, exact milliseconds, canonical formatting, refusals, the field type.

We test these aspects:
- each accepted form parses to the exact number of milliseconds (sub-ms rounds up);
- formatting writes Go's ``Duration.String`` form and parses back to the same length;
- negative and malformed durations are refused with a message naming the value;
- ``DurationField`` keeps the text as written on the wire and compares by length.
"""

from __future__ import annotations

import pydantic
import pytest

from berth.api import durations, errors

H = 3_600_000


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("0", 0),
        ("0s", 0),
        ("24h", 24 * H),
        ("90m", 90 * 60_000),
        ("1h30m", 90 * 60_000),
        ("1.5h", 90 * 60_000),
        ("300ms", 300),
        ("1s", 1000),
        ("1.5s", 1500),
        (".5s", 500),
        ("2.s", 2000),
        ("1h1m1s1ms", H + 61_001),
        ("1us", 1),
        ("1ns", 1),
        ("1000000ns", 1),
        ("1000001ns", 2),
        ("2h45m", 2 * H + 45 * 60_000),
    ],
    ids=lambda v: str(v),
)
def test_parse_is_exact(text: str, ms: int) -> None:
    assert durations.parse_ms(text) == ms


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0s"),
        (300, "300ms"),
        (1000, "1s"),
        (1500, "1.5s"),
        (1001, "1.001s"),
        (60_000, "1m0s"),
        (90 * 60_000, "1h30m0s"),
        (24 * H, "24h0m0s"),
        (H + 61_500, "1h1m1.5s"),
    ],
    ids=lambda v: str(v),
)
def test_format_is_gos_and_parses_back(ms: int, text: str) -> None:
    assert durations.format_duration(ms) == text
    assert durations.parse_ms(text) == ms


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("-1h", "negative"),
        ("-0", "negative"),
        ("1", "malformed"),
        ("", "malformed"),
        ("h", "malformed"),
        ("1x", "malformed"),
        ("1.2.3h", "malformed"),
        (" 1h", "malformed"),
        ("1h\n", "malformed"),
        ("1 h", "malformed"),
        ("1H", "malformed"),
        ("+1h", "malformed"),
        ("1d", "malformed"),
        ("1" * 70 + "s", "longer than"),
    ],
    ids=[
        "negative",
        "negative-zero",
        "no-unit",
        "empty",
        "unit-only",
        "unknown-unit",
        "two-points",
        "leading-space",
        "trailing-newline",
        "inner-space",
        "upper-case-unit",
        "plus-sign",
        "days",
        "too-long",
    ],
)
def test_bad_durations_are_refused_naming_the_value(text: str, fragment: str) -> None:
    with pytest.raises(errors.DurationError) as info:
        durations.parse_duration(text)
    assert fragment in str(info.value)
    assert repr(text) in str(info.value)


def test_a_non_string_is_refused() -> None:
    with pytest.raises(errors.DurationError, match="must be a string"):
        durations.parse_duration(3600)  # type: ignore[arg-type]


def test_formatting_a_negative_length_is_refused() -> None:
    with pytest.raises(errors.DurationError, match="negative"):
        durations.format_duration(-1)


def test_durations_compare_by_length_not_text() -> None:
    assert durations.Duration.parse("90m") == durations.Duration.parse("1h30m")
    assert durations.Duration.parse("1s") < durations.Duration.parse("1001ms")
    assert not durations.Duration.parse("0")
    assert durations.Duration.of(1500) == durations.Duration(1500, "1.5s")
    assert durations.Duration.parse("1.5s").seconds == 1.5


class _Holder(pydantic.BaseModel):
    ttl: durations.DurationField


def test_field_keeps_the_text_as_written() -> None:
    holder = _Holder.model_validate({"ttl": "1.5h"})
    assert holder.ttl.ms == 90 * 60_000
    assert holder.model_dump(mode="json") == {"ttl": "1.5h"}


def test_field_refuses_a_bad_duration_with_its_path() -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        _Holder.model_validate({"ttl": "soon"})
    (error,) = info.value.errors()
    assert error["loc"] == ("ttl",)
    assert "'soon'" in error["msg"]


def test_field_schema_pattern_accepts_exactly_what_the_parser_does() -> None:
    import re

    pattern = re.compile(_Holder.model_json_schema()["properties"]["ttl"]["pattern"])
    for text in ("0", "24h", "1h30m", "1.5h", ".5s", "300ms", "1ns"):
        assert pattern.search(text), text
    for text in ("-1h", "1", "", "1x", "1.2.3h", "1d"):
        assert not pattern.search(text), text
