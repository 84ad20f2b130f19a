"""Structural defaulting: fill in a schema's ``default`` values the way the API server does.

For every property the schema declares with a ``default`` and the object lacks (or holds as
``null`` where the schema is not ``nullable``), the default is copied in; then defaulting
descends into every value present, defaulted ones included, so ``spec: {default: {}}`` brings
the defaults of the fields inside ``spec``. Used by the tests that check the models and the
rendered CRDs agree on defaults, and by the emulator when it stores custom objects.
"""

from __future__ import annotations

import collections.abc
import copy
import typing

from berth.api import schemas

__all__ = ["apply_defaults"]


def apply_defaults(schema: schemas.JSONSchemaProps, value: typing.Any) -> typing.Any:
    """A defaulted deep copy of ``value`` (``value`` itself is left unchanged)."""
    if isinstance(value, collections.abc.Mapping):
        out = {k: copy.deepcopy(v) for k, v in value.items()}
        properties = schema.get("properties") or {}
        for name, child in properties.items():
            if out.get(name, ...) is None and not child.get("nullable"):
                del out[name]
            if name not in out and "default" in child:
                out[name] = copy.deepcopy(child["default"])
            if name in out:
                out[name] = apply_defaults(child, out[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, collections.abc.Mapping):
            out = {k: v if k in properties else apply_defaults(extra, v) for k, v in out.items()}
        return out
    if isinstance(value, list) and isinstance(
        items := schema.get("items"), collections.abc.Mapping
    ):
        return [apply_defaults(items, item) for item in value]
    return copy.deepcopy(value)
