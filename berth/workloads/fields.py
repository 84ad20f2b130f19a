"""Reading a workload's spec field by field, with errors that name the field.

The derivers read owner objects as the API returns them (:class:`~berth.api.objects.ForeignObject`:
another project's ``spec``, whose values are ``object`` until checked here); a field of the
wrong type or out of range raises :class:`~berth.workloads.gangs.OwnerSpecError` with its path
(``spec.parallelism is "four", not an integer``) instead of a ``KeyError`` or ``TypeError``
deep in a deriver.
"""

from __future__ import annotations

import collections.abc
import typing

from berth.api import objects
from berth.workloads import gangs

__all__ = ["Fields", "integer", "mapping", "sequence", "text"]

Fields = objects.JSONObject
"""An object of another project's schema, not yet checked: what these readers take and give."""


def mapping(obj: Fields, key: str, /, *, path: str, required: bool = False) -> Fields:
    """The object at ``obj[key]``; empty when absent (unless ``required``)."""
    value = obj.get(key)
    if value is None:
        if required:
            raise gangs.OwnerSpecError(f"{path}.{key} is missing")
        return {}
    if not isinstance(value, collections.abc.Mapping):
        raise gangs.OwnerSpecError(f"{path}.{key} is {value!r}, not an object")
    return value


def sequence(obj: Fields, key: str, /, *, path: str, required: bool = False) -> list[Fields]:
    """The list of objects at ``obj[key]``; empty when absent (unless ``required``)."""
    value = obj.get(key)
    if value is None:
        if required:
            raise gangs.OwnerSpecError(f"{path}.{key} is missing")
        return []
    if not isinstance(value, list) or not all(
        isinstance(item, collections.abc.Mapping) for item in value
    ):
        raise gangs.OwnerSpecError(f"{path}.{key} is {value!r}, not a list of objects")
    return list(value)


@typing.overload
def integer(obj: Fields, key: str, /, *, path: str, default: int, minimum: int = 0) -> int: ...
@typing.overload
def integer(
    obj: Fields, key: str, /, *, path: str, default: None = None, minimum: int = 0
) -> int | None: ...
def integer(
    obj: Fields, key: str, /, *, path: str, default: int | None = None, minimum: int = 0
) -> int | None:
    """The integer at ``obj[key]`` (``default`` when absent), at least ``minimum``."""
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise gangs.OwnerSpecError(f"{path}.{key} is {value!r}, not an integer")
    if value < minimum:
        raise gangs.OwnerSpecError(f"{path}.{key} is {value}, less than {minimum}")
    return value


def text(obj: Fields, key: str, /, *, path: str) -> str | None:
    """The string at ``obj[key]``, or ``None`` when absent or empty."""
    value = obj.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise gangs.OwnerSpecError(f"{path}.{key} is {value!r}, not a string")
    return value
