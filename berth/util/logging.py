"""Log set-up for Berth's processes: one handler on the root logger, levels by name or number.

``berth run`` calls :func:`configure` once at start; the operator's ``POST /debug/flags/v``
calls :func:`set_level` to change verbosity at run time. Library code never configures logging:
it only asks ``logging.getLogger(__name__)``.

Levels are Python's names (``debug``, ``info``, ``warning``, ``error``, ``critical``, any case)
or klog-style verbosity numbers, as kube-scheduler's ``-v`` and ``/debug/flags/v`` take them:
``0``..``3`` mean INFO and ``4`` or more mean DEBUG (klog's convention that ``-v=4`` is the
debugging level).
"""

from __future__ import annotations

import logging
import sys
import typing

__all__ = ["FORMAT", "LevelError", "configure", "parse_level", "set_level"]

FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"

_NAMES: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}

# klog: -v=4 is "debug level verbosity"; anything below is the normal INFO stream.
_KLOG_DEBUG = 4

# The handler this module installed, so that configuring twice replaces it instead of doubling
# every line.
_HANDLER_NAME = "berth"


class LevelError(ValueError):
    """A log level that is neither a known name nor a non-negative verbosity number."""


def parse_level(text: str | int) -> int:
    """The :mod:`logging` level of a level name or klog verbosity number."""
    if isinstance(text, int) or text.strip().isdigit():
        verbosity = int(text)
        if verbosity < 0:
            raise LevelError(f"log verbosity must not be negative, got {verbosity}")
        return logging.DEBUG if verbosity >= _KLOG_DEBUG else logging.INFO
    level = _NAMES.get(text.strip().lower())
    if level is None:
        known = ", ".join(sorted(_NAMES))
        raise LevelError(f"unknown log level {text!r}: use one of {known} or a number 0..10")
    return level


def configure(level: str | int = "info", *, stream: typing.TextIO | None = None) -> None:
    """Send every logger's records at ``level`` or above to ``stream`` (stderr by default)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    set_level(level)


def set_level(level: str | int) -> int:
    """Change the root logger's level at run time; returns the new numeric level."""
    numeric = parse_level(level)
    logging.getLogger().setLevel(numeric)
    # aiohttp logs one INFO line per HTTP request: probes every few seconds would drown the
    # scheduler's own lines, so access lines appear only when debugging.
    access = logging.NOTSET if numeric <= logging.DEBUG else logging.WARNING
    logging.getLogger("aiohttp.access").setLevel(access)
    return numeric
