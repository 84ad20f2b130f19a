"""``ResourceList``: resource name -> exact quantity, with vector arithmetic.

The scheduler, the queue maths and the API models all speak this one type. Values are integer
milli-units (see :mod:`berth.api.quantities`); a resource that is absent counts as zero, so
``{"cpu": 1}`` + ``{"memory": 2}`` has both, and equality ignores explicit zeros.
"""

from __future__ import annotations

import collections.abc
import typing

import pydantic
import pydantic_core

from berth.api import errors, quantities, rules

__all__ = [
    "CPU",
    "EPHEMERAL_STORAGE",
    "GPU",
    "MAX_NAMES",
    "MAX_QUANTITY_LENGTH",
    "MEMORY",
    "PODS",
    "RANGE_MESSAGE",
    "ResourceList",
    "ResourceListField",
    "ResourceTotalsField",
    "format_for",
    "is_scalar",
]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
GPU = "nvidia.com/gpu"

_BYTE_RESOURCES = (MEMORY, EPHEMERAL_STORAGE)

# Bounds of a ResourceListField. No real list comes near them; they exist because the API
# server refuses CEL rules (in rendered CRDs) whose worst-case cost over an unbounded map or
# string is too high, and the model must accept exactly what the CRD accepts.
MAX_NAMES = 64
MAX_QUANTITY_LENGTH = 64


def format_for(name: str) -> quantities.Format:
    """The format a resource's quantities are written in: bytes in binary SI, else decimal."""
    if name in _BYTE_RESOURCES or name.startswith("hugepages-"):
        return quantities.Format.BINARY_SI
    return quantities.Format.DECIMAL_SI


def is_scalar(name: str) -> bool:
    """Whether ``name`` is a scalar resource in Kubernetes' sense (``IsScalarResourceName``):
    an extended or prefixed one (``nvidia.com/gpu``), hugepages, or attachable volumes."""
    return "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))


class ResourceList(collections.abc.Mapping[str, int]):
    """An immutable mapping of resource name to milli-units.

    Arithmetic is element-wise over the union of names. ``a.fits(b)`` says whether ``a`` fits
    within ``b`` for every resource ``a`` asks for (a positive request of a resource ``b`` does
    not name does not fit).
    """

    __slots__ = ("_hash", "_items")

    def __init__(self, items: collections.abc.Mapping[str, int] | None = None) -> None:
        self._items: dict[str, int] = {k: v for k, v in (items or {}).items() if v != 0}
        self._hash: int | None = None  # requests key the scheduler's caches: hashed once

    @classmethod
    def parse(cls, raw: collections.abc.Mapping[str, str | int | float] | None) -> ResourceList:
        """Parse the API's form (``{"cpu": "500m", "memory": "1Gi"}``)."""
        if raw is None:
            return cls()
        parsed: dict[str, int] = {}
        for name, text in raw.items():
            try:
                parsed[name] = quantities.parse_milli(text)
            except errors.QuantityError as exc:
                raise errors.QuantityError(f"{name}: {exc}") from None
        return cls(parsed)

    @classmethod
    def of(cls, **milli: int) -> ResourceList:
        """Build from keyword milli-units; handy in tests (``ResourceList.of(cpu=500)``)."""
        return cls(milli)

    def to_api(self) -> dict[str, str]:
        """The API's string form, names sorted, each in its resource's format."""
        return {
            k: quantities.format_milli(v, format_for(k)) for k, v in sorted(self._items.items())
        }

    # Mapping protocol -------------------------------------------------------------------
    def __getitem__(self, name: str) -> int:
        return self._items.get(name, 0)

    def __iter__(self) -> collections.abc.Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def items(self) -> collections.abc.ItemsView[str, int]:
        # The dict's own view (never mutated): the Mapping mixin's would look every value up
        # again, and sums over requests run at every pod change.
        return self._items.items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ResourceList):
            return self._items == other._items
        if isinstance(other, collections.abc.Mapping):
            return self._items == {k: v for k, v in other.items() if v != 0}
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._items.items()))
        return self._hash

    def __repr__(self) -> str:
        return f"ResourceList({self.to_api()!r})"

    # Arithmetic -------------------------------------------------------------------------
    def __add__(self, other: collections.abc.Mapping[str, int]) -> ResourceList:
        out = dict(self._items)
        for k, v in other.items():
            out[k] = out.get(k, 0) + v
        return ResourceList(out)

    def __sub__(self, other: collections.abc.Mapping[str, int]) -> ResourceList:
        out = dict(self._items)
        for k, v in other.items():
            out[k] = out.get(k, 0) - v
        return ResourceList(out)

    def __mul__(self, factor: int) -> ResourceList:
        return ResourceList({k: v * factor for k, v in self._items.items()})

    def fits(self, capacity: collections.abc.Mapping[str, int]) -> bool:
        """True when every resource of ``self`` is at most ``capacity``'s."""
        return all(v <= capacity.get(k, 0) for k, v in self._items.items())

    def exceeding(self, capacity: collections.abc.Mapping[str, int]) -> list[str]:
        """The names, sorted, of resources where ``self`` is above ``capacity``."""
        return sorted(k for k, v in self._items.items() if v > capacity.get(k, 0))

    def maximum(self, other: collections.abc.Mapping[str, int]) -> ResourceList:
        """Element-wise max (how init containers size a pod)."""
        names = set(self._items) | set(other)
        return ResourceList({k: max(self[k], other.get(k, 0)) for k in names})

    def minimum(self, other: collections.abc.Mapping[str, int]) -> ResourceList:
        """Element-wise min over the union of names (absent counts as zero)."""
        names = set(self._items) | set(other)
        return ResourceList({k: min(self[k], other.get(k, 0)) for k in names})

    def clamp_negative(self) -> ResourceList:
        """Negative values become zero."""
        return ResourceList({k: v for k, v in self._items.items() if v > 0})

    def is_negative(self) -> bool:
        """True when any value is below zero."""
        return any(v < 0 for v in self._items.values())

    def share_of(self, total: collections.abc.Mapping[str, int]) -> dict[str, float]:
        """Each resource as a fraction of ``total`` (resources ``total`` lacks are skipped)."""
        return {k: v / total[k] for k, v in self._items.items() if total.get(k, 0) > 0}

    def dominant_share(self, total: collections.abc.Mapping[str, int]) -> float:
        """The largest share of ``total`` over all resources (DRF's dominant share)."""
        return max(self.share_of(total).values(), default=0.0)


def _validate_spec(value: typing.Any) -> ResourceList:
    parsed = _parse_list(value)
    outside = sorted(k for k, v in parsed.items() if v < 0 or v > quantities.MAX_MILLI)
    if outside:
        raise pydantic_core.PydanticCustomError(
            "quantity_range", "{message}: {names}", {"message": RANGE_MESSAGE, "names": outside}
        )
    return parsed


def _validate(value: typing.Any) -> ResourceList:
    parsed = _parse_list(value)
    negative = [k for k, v in parsed.items() if v < 0]
    if negative:
        raise pydantic_core.PydanticCustomError(
            "negative_quantity", "quantities must be non-negative: {names}", {"names": negative}
        )
    return parsed


def _parse_list(value: typing.Any) -> ResourceList:
    if isinstance(value, ResourceList):
        return value
    if not isinstance(value, collections.abc.Mapping):
        raise pydantic_core.PydanticCustomError(
            "resource_list", "a resource list must be a mapping of name to quantity"
        )
    if len(value) > MAX_NAMES:
        raise pydantic_core.PydanticCustomError(
            "resource_list", "a resource list names at most {max} resources", {"max": MAX_NAMES}
        )
    too_long = sorted(k for k, v in value.items() if len(str(v)) > MAX_QUANTITY_LENGTH)
    if too_long:
        raise pydantic_core.PydanticCustomError(
            "quantity",
            "quantities are at most {max} characters long: {names}",
            {"max": MAX_QUANTITY_LENGTH, "names": too_long},
        )
    try:
        return ResourceList.parse(value)
    except errors.QuantityError as exc:
        raise pydantic_core.PydanticCustomError("quantity", str(exc)) from None


# A JSON schema fragment, as pydantic's WithJsonSchema takes it.
_MAP_SCHEMA: pydantic.config.JsonDict = {
    "type": "object",
    "maxProperties": MAX_NAMES,
    "additionalProperties": {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "pattern": quantities.API_PATTERN,
        "maxLength": MAX_QUANTITY_LENGTH,
    },
}
RANGE_MESSAGE = rules.QUANTITY_RANGE_MESSAGE.format(max=quantities.MAX_TEXT)
"""What a spec's resource list with a quantity below 0 or past ``128Ti`` is told, by the API
server (the CRDs) and by Berth alike."""

ResourceListField = typing.Annotated[
    ResourceList,
    pydantic.PlainValidator(_validate_spec),
    pydantic.PlainSerializer(lambda v: v.to_api(), return_type=dict[str, str]),
    pydantic.WithJsonSchema(
        {**_MAP_SCHEMA, rules.KEY: [rules.quantity_range(quantities.MAX_TEXT)]}
    ),
]
"""A pydantic field type for a ResourceList a user writes (a queue's quota, a group's minimum,
a template's requests): every quantity at least 0 and at most
:data:`~berth.api.quantities.MAX_MILLI` (``128Ti``), as the scheduler reads them — checked
here and, by the CRDs' rule, by the API server; serialized in the API's form."""

ResourceTotalsField = typing.Annotated[
    ResourceList,
    pydantic.PlainValidator(_validate),
    pydantic.PlainSerializer(lambda v: v.to_api(), return_type=dict[str, str]),
    pydantic.WithJsonSchema(_MAP_SCHEMA),
]
"""A pydantic field type for a non-negative ResourceList Berth writes into a status (a queue's
usage may add up past what one object may ask for)."""
