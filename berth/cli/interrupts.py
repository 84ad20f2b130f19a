"""SIGTERM as an exception, so a benchmark stopped from outside still says what it measured.

``timeout`` and process managers stop a command with SIGTERM, whose default action ends the
process at once: a benchmark an hour into its run would print nothing. Inside
:func:`terminated_raises`, SIGTERM raises :class:`Terminated` in the main thread instead (as
Ctrl+C raises ``KeyboardInterrupt``), so the benchmark stops its processes in its ``finally``
blocks and returns its partial report, which says it was stopped.
"""

from __future__ import annotations

import collections.abc
import contextlib
import signal
import threading
import types

__all__ = ["Terminated", "terminated_raises"]


class Terminated(Exception):
    """The process was sent SIGTERM."""


def _raise(signum: int, frame: types.FrameType | None) -> None:
    raise Terminated(f"stopped by signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def terminated_raises() -> collections.abc.Iterator[None]:
    """Within this block, SIGTERM raises :class:`Terminated` (main thread only; elsewhere a
    no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
