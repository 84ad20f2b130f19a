"""What a local process costs, read from ``/proc``: CPU seconds and peak resident memory.

The benchmarks that race schedulers as separate processes charge each the CPU its own process
used (user + system, ``/proc/PID/stat``) over the measured window, and report its peak RSS
(``VmHWM`` of ``/proc/PID/status``, reset at the start of a window by writing ``5`` to
``/proc/PID/clear_refs``, so the peak is the window's). Linux only; elsewhere every reading is
``None`` and the reports say so. The reports also say what machine they ran on
(:class:`Machine`: its CPUs and load average before and after).
"""

from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import os
import pathlib
import time
import typing

__all__ = ["Machine", "Window", "cpu_seconds", "load_average", "peak_rss_mb", "reset_peak"]

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds process ``pid`` used so far (None: gone or not Linux)."""
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14, 15)


def reset_peak(pid: int) -> None:
    """Start ``pid``'s peak RSS afresh (best effort: a process of another user stays as it is)."""
    with contextlib.suppress(OSError):
        pathlib.Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_rss_mb(pid: int) -> float | None:
    """``pid``'s peak resident memory since it started or :func:`reset_peak` (MiB)."""
    try:
        lines = pathlib.Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


@dataclasses.dataclass
class Window:
    """CPU seconds of named processes between :meth:`start` and :meth:`stop`."""

    pids: collections.abc.Mapping[str, int]
    _started: dict[str, float | None] = dataclasses.field(default_factory=dict)
    _at: float = 0.0

    def start(self) -> Window:
        self._at = time.perf_counter()
        self._started = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        return self

    def read(self) -> tuple[float, dict[str, float | None]]:
        """(wall seconds, CPU seconds per process) since :meth:`start`."""
        wall = time.perf_counter() - self._at
        used: dict[str, float | None] = {}
        for name, pid in self.pids.items():
            now, then = cpu_seconds(pid), self._started.get(name)
            used[name] = round(now - then, 2) if now is not None and then is not None else None
        return wall, used

    def cores(self) -> dict[str, float | None]:
        """Each process's mean cores over the window so far."""
        wall, used = self.read()
        return {
            name: (round(seconds / wall, 2) if seconds is not None and wall > 0 else None)
            for name, seconds in used.items()
        }


class Machine(typing.TypedDict):
    """The machine a benchmark ran on: a busy one slows every system measured."""

    cpus: int | None
    load_before: list[float] | None
    load_after: typing.NotRequired[list[float] | None]


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
