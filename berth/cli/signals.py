"""Ctrl+C and SIGTERM as an asyncio stop request, for the commands that run the operator."""

from __future__ import annotations

import asyncio
import contextlib
import signal

__all__ = ["stop_on_signals"]


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM (where the loop can handle signals)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    return stop
