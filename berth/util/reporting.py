"""Recurring errors logged once per object per window, not once per pass.

A controller or loop that retries every second would otherwise log the same failure of the same
bad object thousands of times an hour (issue 20: 17 000 lines in four minutes), burying
everything else. :class:`OncePerWindow` logs a key's error the first time, again only after
``window`` seconds (or when the error changes), and forgets keys it has not seen for a window
so that it stays bounded.
"""

from __future__ import annotations

import logging

__all__ = ["OncePerWindow"]


class OncePerWindow:
    """Logs ``(key, error)`` pairs at most once per ``window`` seconds each."""

    def __init__(self, logger: logging.Logger, *, what: str, window: float = 300.0) -> None:
        self._logger = logger
        self._what = what
        self._window = window
        self._last: dict[str, tuple[str, float]] = {}  # key -> (error text, when logged)

    def report(self, key: str, exc: BaseException, *, now: float) -> bool:
        """Log ``exc`` for ``key`` unless it was logged within the window; True if logged."""
        text = f"{type(exc).__name__}: {exc}"
        seen = self._last.get(key)
        if seen is not None and seen[0] == text and now - seen[1] < self._window:
            self._logger.debug("%s %s failed again: %s", self._what, key, text)
            return False
        if len(self._last) >= 4096:
            self._last = {k: v for k, v in self._last.items() if now - v[1] < self._window}
        self._last[key] = (text, now)
        self._logger.error(
            "%s %s failed (logged once per %gs): %s",
            self._what,
            key,
            self._window,
            text,
            exc_info=exc,
        )
        return True

    def forget(self, key: str) -> None:
        """``key``'s object is gone or healthy again."""
        self._last.pop(key, None)
