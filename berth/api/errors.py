"""Errors raised by :mod:`berth.api` when input does not follow the API.

::

    ApiError
    ├── QuantityError        a resource quantity is malformed ("5parsecs", "1.2.3Gi")
    ├── DurationError        a duration is malformed or negative ("5parsecs", "-1h")
    └── ManifestError        a manifest document does not load (names document and field path)

Model validation errors are pydantic's ``ValidationError``; they carry field paths.
"""

from __future__ import annotations

__all__ = ["ApiError", "DurationError", "ManifestError", "QuantityError"]


class ApiError(ValueError):
    """Input that does not follow Berth's API."""


class QuantityError(ApiError):
    """A resource quantity that the API server would refuse."""


class DurationError(ApiError):
    """A duration that the API would refuse."""


class ManifestError(ApiError):
    """A manifest that does not load; the message names the source, the document and the path.

    ``problems`` lists each ``(field path, message)`` found in the failing document.
    """

    def __init__(self, message: str, *, problems: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems
