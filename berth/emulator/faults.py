"""Fault injection: the next N requests matching a method and a path answer as told.

A :class:`Fault` matches requests by HTTP method (or ``*``) and a shell-style path pattern
(``/api/v1/namespaces/*/pods/*/binding``); each match uses up one of its ``times`` and then
answers with an error Status of ``status`` code, waits ``delay`` seconds before being served
normally, or drops the connection without an answer. :class:`Faults` is the thread-safe list the
server's middleware consults, so a test thread can arm faults while the server runs.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import threading

__all__ = ["Fault", "Faults"]

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclasses.dataclass(frozen=True)
class Fault:
    """What to do to matching requests: answer ``status``, ``delay`` first, or ``drop``."""

    method: str  # "GET", "POST", ..., or "*"
    path: str  # fnmatch pattern on the URL path (no query string)
    times: int = 1
    status: int | None = None
    delay: float = 0.0
    drop: bool = False
    message: str = "injected fault"
    after: bool = False
    """With ``status`` or ``drop``: the request is served first (it lands), then the answer is
    replaced (a lost answer: the client must not take the failure at its word)."""

    def matches(self, method: str, path: str) -> bool:
        return self.method in ("*", method.upper()) and fnmatch.fnmatchcase(path, self.path)

    @property
    def reason(self) -> str:
        return _REASONS.get(self.status or 500, "InternalError")


@dataclasses.dataclass
class _Armed:
    fault: Fault
    remaining: int


class Faults:
    """Armed faults, consumed first-armed first; safe to use from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: list[_Armed] = []
        self.fired: list[tuple[str, str, Fault]] = []

    def add(self, fault: Fault) -> None:
        if fault.times < 1:
            raise ValueError("a fault must fire at least once")
        if (fault.status is not None) + (fault.delay > 0) + fault.drop != 1:
            raise ValueError("a fault needs exactly one of status, delay or drop")
        with self._lock:
            self._armed.append(_Armed(fault, fault.times))

    def clear(self) -> None:
        with self._lock:
            self._armed.clear()

    def take(self, method: str, path: str) -> Fault | None:
        """The fault for this request, if one is armed (using up one of its times)."""
        with self._lock:
            for entry in self._armed:
                if entry.fault.matches(method, path):
                    entry.remaining -= 1
                    if entry.remaining <= 0:
                        self._armed.remove(entry)
                    self.fired.append((method, path, entry.fault))
                    return entry.fault
        return None

    @property
    def pending(self) -> int:
        with self._lock:
            return sum(entry.remaining for entry in self._armed)
