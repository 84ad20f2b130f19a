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

from berth.api import durations

__all__ = ["KEY", "Rule", "duration", "non_negative", "rule", "rules"]

KEY = "x-kubernetes-validations"
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


def non_negative(field: str) -> Rule:
    """Every quantity of the resource list ``field`` (of ``self``) is at least zero."""
    return rule(
        f"!has(self.{field}) || self.{field}.all(k, "
        f"!quantity(string(self.{field}[k])).isLessThan(quantity('0')))",
        message=f"{field}: resource quantities must not be negative",
        field_path=f".{field}",
    )


def duration(field: str) -> Rule:
    """``field`` (of ``self``), when set, is a duration in Go's syntax and not negative: the
    API server refuses ``-5s`` or ``forever`` saying how to write one."""
    pattern = durations.API_PATTERN.replace("\\.", "[.]")  # no escapes in the CEL string
    return rule(
        f"!has(self.{field}) || self.{field}.matches('{pattern}')",
        message=(
            f"{field} must be a duration such as 30s, 2m or 1h30m: a number and a unit "
            "(ns, us, ms, s, m, h), never negative"
        ),
        field_path=f".{field}",
    )


def rules(*items: Rule) -> dict[str, typing.Any]:
    """The ``json_schema_extra`` that puts ``items`` on a model's schema."""
    return {KEY: list(items)}
