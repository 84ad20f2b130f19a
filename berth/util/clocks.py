"""Clocks: the only way Berth reads time.

The scheduler, the simulator and the controllers take a :class:`Clock` so that tests and
``berth sim`` run on virtual time (:class:`VirtualClock`) while the operator runs on the wall
clock (:class:`SystemClock`). Times are seconds since the epoch as floats.
"""

from __future__ import annotations

import datetime
import time
import typing

__all__ = ["Clock", "SystemClock", "VirtualClock", "to_datetime"]


class Clock(typing.Protocol):
    """Something that tells the current time in seconds since the epoch."""

    def now(self) -> float: ...


class SystemClock:
    """The wall clock."""

    def now(self) -> float:
        return time.time()


class VirtualClock:
    """A clock that moves only when told to: the simulator's and the tests' time."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move forward by ``seconds``; time never goes backwards."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back in time (asked to advance {seconds}s)")
        self._now += seconds

    def set(self, when: float) -> None:
        """Jump to ``when``, which must not be in the past."""
        if when < self._now:
            raise ValueError(f"a clock cannot go back in time (from {self._now} to {when})")
        self._now = when


def to_datetime(when: float) -> datetime.datetime:
    """The UTC datetime of ``when`` (seconds since the epoch)."""
    return datetime.datetime.fromtimestamp(when, tz=datetime.UTC)
