"""Errors the emulator answers with: each one is a Kubernetes ``Status`` object and an HTTP code.

Every refusal the API server can give travels as :class:`StatusError` from wherever it is
detected (parsing, storage, validation, patching) up to :mod:`berth.emulator.handlers`, which
writes :meth:`StatusError.status` as the body. Nothing else may escape a handler: an unexpected
exception becomes a 500 ``InternalError`` Status, never a traceback page. ::

    StatusError                  one Status object (code, reason, message, details)

The constructors below mirror ``k8s.io/apimachinery/pkg/api/errors`` (``NewNotFound``, ...), and
their messages are the API server's, because clients match on reasons and people on messages.
"""

from __future__ import annotations

import dataclasses
import typing

from berth.api import objects

__all__ = [
    "Cause",
    "StatusError",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "forbidden",
    "internal",
    "invalid",
    "method_not_allowed",
    "not_acceptable",
    "not_found",
    "required",
    "resource_not_found",
    "success",
    "too_large",
    "too_many_requests",
    "unsupported_media_type",
]


@dataclasses.dataclass(frozen=True)
class Cause:
    """One field-level reason of an ``Invalid`` error (``details.causes[]``)."""

    field: str  # a dotted path such as "spec.weight" or "metadata.name"
    message: str
    reason: str = "FieldValueInvalid"

    def as_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


def required(field: str) -> Cause:
    """The cause of a missing field (``FieldValueRequired``)."""
    return Cause(field, "Required value", "FieldValueRequired")


class StatusError(Exception):
    """A refusal: the API server's ``Status`` object and its HTTP code."""

    def __init__(
        self,
        message: str,
        *,
        code: int,
        reason: str,
        details: objects.StatusDetails | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.details = details

    def status(self) -> objects.Status:
        """The ``Status`` object written as the response body."""
        body: objects.Status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(*, name: str, group: str, kind: str) -> objects.StatusDetails:
    details: objects.StatusDetails = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    return details


def _qualified(*, group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(name: str, *, group: str, plural: str) -> StatusError:
    """``pods "x" not found``: a named object that does not exist."""
    return StatusError(
        f'{_qualified(group=group, plural=plural)} "{name}" not found',
        code=404,
        reason="NotFound",
        details=_details(name=name, group=group, kind=plural),
    )


def resource_not_found() -> StatusError:
    """A path naming no resource the server serves (unknown group, version or kind)."""
    return StatusError(
        "the server could not find the requested resource",
        code=404,
        reason="NotFound",
        details={},
    )


def already_exists(name: str, *, group: str, plural: str) -> StatusError:
    return StatusError(
        f'{_qualified(group=group, plural=plural)} "{name}" already exists',
        code=409,
        reason="AlreadyExists",
        details=_details(name=name, group=group, kind=plural),
    )


def conflict(name: str, *, group: str, plural: str, why: str) -> StatusError:
    """Optimistic concurrency lost (stale resourceVersion), or an operation that cannot apply."""
    what = _qualified(group=group, plural=plural)
    return StatusError(
        f'Operation cannot be fulfilled on {what} "{name}": {why}',
        code=409,
        reason="Conflict",
        details=_details(name=name, group=group, kind=plural),
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(name: str, *, group: str, kind: str, causes: typing.Sequence[Cause]) -> StatusError:
    """422: the object breaks its schema or a rule; ``causes`` carry the field paths."""
    qualified = f"{kind}.{group}" if group else kind
    summary = "; ".join(f"{c.field}: {c.message}" if c.field else c.message for c in causes)
    if len(causes) > 1:
        summary = f"[{', '.join(f'{c.field}: {c.message}' for c in causes)}]"
    details = _details(name=name, group=group, kind=kind)
    details["causes"] = [c.as_dict() for c in causes]
    return StatusError(
        f'{qualified} "{name}" is invalid: {summary}', code=422, reason="Invalid", details=details
    )


def bad_request(message: str) -> StatusError:
    return StatusError(message, code=400, reason="BadRequest")


def forbidden(message: str, *, name: str = "", group: str = "", plural: str = "") -> StatusError:
    details = _details(name=name, group=group, kind=plural) if plural else None
    return StatusError(message, code=403, reason="Forbidden", details=details)


def expired(message: str) -> StatusError:
    """410 Gone: a watch or a continue token from a resourceVersion already compacted away."""
    return StatusError(message, code=410, reason="Expired")


def method_not_allowed(method: str, *, what: str) -> StatusError:
    return StatusError(
        f"the server does not allow this method on the requested resource ({method} {what})",
        code=405,
        reason="MethodNotAllowed",
        details={},
    )


def unsupported_media_type(content_type: str, *, accepted: typing.Sequence[str]) -> StatusError:
    return StatusError(
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
        code=415,
        reason="UnsupportedMediaType",
        details={"causes": [{"message": f"unsupported media type {content_type!r}"}]},
    )


def not_acceptable(accept: str) -> StatusError:
    return StatusError(
        f"only the following media types are accepted: application/json, application/yaml "
        f"(asked for {accept!r})",
        code=406,
        reason="NotAcceptable",
    )


def too_large(limit: int) -> StatusError:
    return StatusError(
        f"Request entity too large: limit is {limit}", code=413, reason="RequestEntityTooLarge"
    )


def too_many_requests(message: str, *, causes: typing.Sequence[Cause] = ()) -> StatusError:
    details: objects.StatusDetails | None = None
    if causes:
        details = {"causes": [c.as_dict() for c in causes]}
    return StatusError(message, code=429, reason="TooManyRequests", details=details)


def internal(message: str) -> StatusError:
    return StatusError(
        f"Internal error occurred: {message}", code=500, reason="InternalError", details={}
    )


def success(*, code: int = 200, details: objects.StatusDetails | None = None) -> objects.Status:
    """A ``Status`` of success, as answered by bindings and some deletes."""
    body: objects.Status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body
