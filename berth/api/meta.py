"""What every Berth API object shares: the model base, ObjectMeta, Condition, timestamps.

:class:`ApiModel` fixes the wire rules once (docs/architecture.md, R12): snake_case attributes,
exact camelCase wire names, attribute docstrings as field descriptions (they become the
``kubectl explain`` text of the rendered CRDs), unknown keys refused with their path, instances
immutable, and one way out, :meth:`ApiModel.to_api`. Models that must keep keys Berth does not
know (metadata, pod templates) derive from :class:`OpenApiModel` instead.

Used by :mod:`berth.api.queues`, :mod:`berth.api.podgroups`, :mod:`berth.api.reservations`
and :mod:`berth.api.pods`.
"""

from __future__ import annotations

import datetime
import enum
import typing

import pydantic
import pydantic.alias_generators
import pydantic_core

__all__ = [
    "ApiModel",
    "Condition",
    "ConditionStatus",
    "ObjectMeta",
    "OpenApiModel",
    "OwnerReference",
    "TimestampField",
    "format_timestamp",
    "parse_timestamp",
]


class ApiModel(pydantic.BaseModel):
    """Base of every API model: camelCase on the wire, unknown keys are errors."""

    model_config = pydantic.ConfigDict(
        alias_generator=pydantic.alias_generators.to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        extra="forbid",
        frozen=True,
    )

    # Untyped: pydantic's model_dump (JSON mode), each model's own fields; a caller that
    # knows the kind casts it to that kind's record (custom_objects.Queue...).
    def to_api(self) -> dict[str, typing.Any]:
        """The object as the API server holds it: camelCase keys, no unset optionals, JSON."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class OpenApiModel(ApiModel):
    """An API model that keeps keys it does not declare (and writes them back unchanged)."""

    model_config = pydantic.ConfigDict(extra="allow")


# Timestamps -------------------------------------------------------------------------------


def parse_timestamp(text: str) -> datetime.datetime:
    """Parse an RFC 3339 timestamp (``2026-01-01T00:00:00Z``); it must name its offset."""
    try:
        value = datetime.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValueError(
            f"timestamp {text!r} is not RFC 3339 (e.g. 2026-01-01T00:00:00Z)"
        ) from None
    if value.tzinfo is None:
        raise ValueError(f"timestamp {text!r} must name its offset (e.g. a trailing Z)")
    return value.astimezone(datetime.UTC)


def format_timestamp(value: datetime.datetime) -> str:
    """Write ``value`` in UTC as Kubernetes does: seconds, a trailing ``Z`` (microseconds kept)."""
    utc = value.astimezone(datetime.UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


def _validate_timestamp(value: typing.Any) -> datetime.datetime:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise pydantic_core.PydanticCustomError(
                "timestamp", "a timestamp must be timezone-aware"
            )
        return value.astimezone(datetime.UTC)
    if not isinstance(value, str):
        raise pydantic_core.PydanticCustomError(
            "timestamp", "a timestamp must be an RFC 3339 string, got {value!r}", {"value": value}
        )
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise pydantic_core.PydanticCustomError("timestamp", str(exc)) from None


TimestampField = typing.Annotated[
    datetime.datetime,
    pydantic.PlainValidator(_validate_timestamp),
    pydantic.PlainSerializer(format_timestamp, return_type=str),
    pydantic.WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""An aware UTC ``datetime`` that is an RFC 3339 string on the wire."""


# Metadata ---------------------------------------------------------------------------------


class OwnerReference(OpenApiModel):
    """An object this one belongs to; it is garbage-collected when its owner goes away."""

    api_version: str
    """API version of the owner, e.g. ``batch/v1``."""
    kind: str
    """Kind of the owner, e.g. ``Job``."""
    name: str
    """Name of the owner."""
    uid: str
    """UID of the owner."""
    controller: bool | None = None
    """True when the owner is the managing controller."""
    block_owner_deletion: bool | None = None
    """True when the owner cannot be deleted before this object is."""


class ObjectMeta(OpenApiModel):
    """Standard Kubernetes object metadata; keys Berth does not use are kept as they are."""

    name: str | None = None
    """Name of the object, unique within its namespace (or the cluster)."""
    generate_name: str | None = None
    """Prefix the API server uses to generate a name when none is given."""
    namespace: str | None = None
    """Namespace of the object; empty for cluster-scoped objects."""
    labels: dict[str, str] | None = None
    """Labels: identifying key/value pairs that selectors match."""
    annotations: dict[str, str] | None = None
    """Annotations: non-identifying key/value pairs for tools and controllers."""
    uid: str | None = None
    """Unique id the API server gives the object."""
    resource_version: str | None = None
    """Opaque version of the object, for optimistic concurrency."""
    generation: int | None = None
    """Sequence number of the desired state (spec) changes."""
    creation_timestamp: TimestampField | None = None
    """When the object was created."""
    deletion_timestamp: TimestampField | None = None
    """When the object was asked to be deleted (it waits for its finalizers)."""
    finalizers: list[str] | None = None
    """Controllers that must finish before the object is removed."""
    owner_references: list[OwnerReference] | None = None
    """Objects this one belongs to."""


# Conditions -------------------------------------------------------------------------------


class ConditionStatus(enum.StrEnum):
    """Whether a condition holds."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ApiModel):
    """One aspect of an object's state, with the reason it is so (``metav1.Condition``)."""

    type: str
    """Kind of condition in CamelCase, e.g. ``Scheduled``."""
    status: ConditionStatus
    """Whether the condition holds: True, False or Unknown."""
    reason: str | None = None
    """Machine-readable CamelCase reason for the last transition, e.g. ``QueueOverLimit``."""
    message: str | None = None
    """Human-readable explanation of the condition."""
    last_transition_time: TimestampField | None = None
    """When the status last changed."""
    observed_generation: int | None = pydantic.Field(default=None, ge=0)
    """The metadata.generation this condition was computed from."""
