"""Ctrl+C and SIGTERM as an asyncio stop request, for the commands that run the operator."""

from __future__ import annotations

import asyncio

from berth.util import signals

__all__ = ["stop_on_signals"]


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM (where the loop can handle signals); the handlers are
    the process's (:mod:`berth.util.signals`), so an embedded Kopf cannot take them."""
    stop = asyncio.Event()
    signals.on_stop(stop.set)
    return stop
