"""The binder's failure log: the first failure of a kind is a warning, repeats are debug.

A flapping API server must not flood the log with one line per pod, yet the first failure of
each kind must be seen. Each of the binder's writers keeps one, logging under its own name.
"""

from __future__ import annotations

import logging

__all__ = ["FailureLog"]


class FailureLog:
    """Failures logged under ``logger``: a warning for the first of each kind, then debug."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._seen: set[str] = set()  # kinds of failure already warned about

    def failed(self, kind: str, message: str) -> None:
        if kind in self._seen:
            self._logger.debug("%s", message)
        else:
            self._seen.add(kind)
            self._logger.warning("%s", message)
