"""CEL validation rules (``x-kubernetes-validations``) declared next to the models they guard.

Each model that has a cross-field rule lists it in its ``model_config`` (``json_schema_extra``)
through :func:`rules`, so that the rendered CRDs (:mod:`berth.api.crds`) carry it and the
pydantic validator of the same rule sits a few lines away. Rules use standard CEL plus the
Kubernetes ``quantity()`` library only; :mod:`berth.api.cel` evaluates them in tests and in
the emulator. Rules never iterate over a list or map the schema leaves unbounded: the API
server refuses rules whose worst-case cost is too high.
"""

from __future__ import annotations

import typing

import pydantic.config

from berth.api import durations

__all__ = [
    "DURATION_FORM",
    "KEY",
    "QUANTITY_RANGE_MESSAGE",
    "Rule",
    "VALUES_FORBIDDEN",
    "VALUES_REQUIRED",
    "duration",
    "duration_range",
    "quantity_range",
    "rule",
    "rules",
    "values_fit_operator",
]

KEY: typing.Final = "x-kubernetes-validations"
"""The schema key that holds CEL rules."""


class Rule(typing.TypedDict, total=False):
    """One CEL rule, spelt as the CRD holds it."""

    rule: typing.Required[str]
    message: typing.Required[str]
    fieldPath: str
    reason: str


def rule(text: str, *, message: str, field_path: str | None = None) -> Rule:
    """A rule: ``text`` must be true of ``self``; ``message`` tells the user what to fix.

    ``field_path`` (``.spec.parent``) points the error at a field below the rule's object.
    """
    out = Rule(rule=text, message=message)
    if field_path is not None:
        out["fieldPath"] = field_path
    return out


QUANTITY_RANGE_MESSAGE = "resource quantities must be at least 0 and at most {max}"
"""What a resource list out of Berth's range is told (``{max}``: the largest quantity): the
API server's message (the CRDs' rule) and Berth's own (the models, the scheduler's "invalid")
say the same."""


def quantity_range(largest: str) -> Rule:
    """Every quantity of the resource list (``self``, a map) is at least 0 and at most
    ``largest``: what the scheduler's arithmetic can hold (a typo such as ``10Pi`` cpu, or a
    negative request, is refused at the door)."""
    return rule(
        "self.all(k, !quantity(string(self[k])).isLessThan(quantity('0')) && "
        f"!quantity(string(self[k])).isGreaterThan(quantity('{largest}')))",
        message=QUANTITY_RANGE_MESSAGE.format(max=largest),
    )


def duration(field: str) -> Rule:
    """``field`` (of ``self``), when set, is a duration in Go's syntax and not negative: the
    API server refuses ``-5s`` or ``forever`` saying how to write one."""
    pattern = durations.API_PATTERN.replace("\\.", "[.]")  # no escapes in the CEL string
    return rule(
        f"!has(self.{field}) || self.{field}.matches('{pattern}')",
        message=f"{field} {DURATION_FORM}",
        field_path=f".{field}",
    )


DURATION_FORM = (
    "must be a duration such as 30s, 2m or 1h30m: a number and a unit (ns, us, ms, s, m, h), "
    "never negative"
)
"""What :func:`duration` tells a field that is not a duration (after the field's name)."""


def duration_range() -> Rule:
    """The duration (``self``, a string its pattern admitted) is no longer than Go's
    ``time.Duration`` holds (``durations.MAX_TEXT``); on the field itself, so that a refusal
    names it.

    CEL's ``duration()`` cannot represent a longer one: the rule fails to evaluate, which the
    API server reports as a refusal of the field with the rule's message, as Berth says it
    (:data:`berth.api.durations.RANGE_MESSAGE`)."""
    return rule(
        f"self == '0' || duration(self) <= duration('{durations.MAX_TEXT}')",
        message=durations.RANGE_MESSAGE,
    )


def rules(*items: Rule) -> pydantic.config.JsonDict:
    """The ``json_schema_extra`` that puts ``items`` on a model's schema."""
    listed: list[pydantic.config.JsonValue] = []
    for item in items:
        # JSON as pydantic types it: the rule's keys, in the order rule() spells them.
        entry: pydantic.config.JsonDict = {"rule": item["rule"], "message": item["message"]}
        if "fieldPath" in item:
            entry["fieldPath"] = item["fieldPath"]
        if "reason" in item:
            entry["reason"] = item["reason"]
        listed.append(entry)
    return {KEY: listed}


VALUES_REQUIRED = "values must be non-empty when operator is In or NotIn"
VALUES_FORBIDDEN = "values must be empty when operator is Exists or DoesNotExist"


def values_fit_operator() -> tuple[Rule, Rule]:
    """A selector requirement's (``self``: key, operator, values) values fit its operator:
    some for In and NotIn, none for Exists and DoesNotExist (label and node selectors)."""
    return (
        rule(
            "!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",
            message=VALUES_REQUIRED,
        ),
        rule(
            "!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || "
            "size(self.values) == 0",
            message=VALUES_FORBIDDEN,
        ),
    )
