"""Reading API objects as the API returns them: raw JSON dicts or ``berth.api`` models.

Owns the small helpers every info builder shares: turning a pydantic model into its wire dict
(so each builder parses one shape, a :mod:`berth.api` record), reading a record's nested
fields without trusting their shape (:func:`part`, :func:`parts`, from :mod:`berth.api.objects`),
timestamps, and memoised quantity parsing (a cluster repeats the same few quantity strings tens
of thousands of times; parsing each exactly is slow).
"""

from __future__ import annotations

import collections.abc
import datetime
import functools
import typing

from berth.api import errors, objects, quantities, resources
from berth.scheduler.snapshot import ids

__all__ = [
    "as_raw",
    "key_of",
    "milli",
    "name_of",
    "part",
    "parts",
    "parse_time",
    "range_problem",
]

# Re-exported: every info builder reads records through this module. They live in
# berth.api.objects so that the emulator, which may not import the scheduler, reads them alike.
part = objects.part
parts = objects.parts


def as_raw(obj: typing.Any) -> objects.KubeObject:
    """The wire dict of ``obj``: a mapping as is, a pydantic model through ``model_dump``. A
    caller that knows the kind reads it as that kind's record (``typing.cast(core.Pod, ...)``):
    a record promises the keys, and each parser checks the values it reads."""
    if isinstance(obj, collections.abc.Mapping):
        return typing.cast(objects.KubeObject, obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        dumped = dump(by_alias=True, exclude_none=True, mode="json")
        if isinstance(dumped, collections.abc.Mapping):
            return typing.cast(objects.KubeObject, dumped)
    raise TypeError(f"expected an API dict or a berth.api model, got {type(obj).__name__}")


def name_of(obj: typing.Any, /) -> str:
    """The name of ``obj`` (an API object, or the name itself)."""
    if isinstance(obj, str):
        return obj
    return str(part(as_raw(obj).get("metadata")).get("name") or "")


def key_of(obj: typing.Any, /) -> str:
    """The ``namespace/name`` key of ``obj`` (a namespaced API object, or the key itself)."""
    if isinstance(obj, str):
        return obj
    meta = part(as_raw(obj).get("metadata"))
    return ids.key_of(str(meta.get("namespace") or "default"), name=str(meta.get("name") or ""))


def parse_time(text: typing.Any) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch; ``None`` when absent or unreadable."""
    if isinstance(text, datetime.datetime):
        when = text
    elif isinstance(text, str) and text:
        try:
            when = datetime.datetime.fromisoformat(text)
        except ValueError:
            return None
    else:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()


@functools.lru_cache(maxsize=8192)
def _milli(text: str | int | float) -> int:
    return quantities.parse_bounded_milli(text)


def milli(text: typing.Any) -> int:
    """Milli-units of one quantity; raises ``berth.api.errors.QuantityError`` when malformed or
    past :data:`berth.api.quantities.MAX_MILLI` (the scheduler's int64 arithmetic)."""
    if isinstance(text, str | int | float) and not isinstance(text, bool):
        return _milli(text)
    return quantities.parse_bounded_milli(text)  # raises with the API's message


def range_problem(raw: collections.abc.Mapping[str, str], /, *, field: str) -> str | None:
    """Why the resource list ``raw`` at ``field`` (``spec.limit``) is out of Berth's range, as
    the API server says it (the CRDs' rule: the same field and message), or None when every
    quantity is in range. Malformed quantities are left to the caller's parser."""
    for name, text in raw.items():
        try:
            value = quantities.parse_milli(text)
        except errors.QuantityError:
            continue
        if value < 0 or value > quantities.MAX_MILLI:
            return f"{field}: {resources.RANGE_MESSAGE} ({name}: {text!r})"
    return None
