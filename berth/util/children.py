"""Child processes a command starts for itself (a stand-in API server, a replica): started,
and stopped politely then firmly within a bound, however the command ends.

A command that starts a process owns it: :func:`stop` ends it (SIGCONT in case it is paused,
SIGTERM, then SIGKILL after ``grace`` seconds) and reaps it, and :func:`announcing` runs one
for a ``with`` block, yielding the first line it prints (where it serves) and stopping it when
the block ends, on failure too. The waits here are a process's, not an event loop's: they block
the calling thread, as the commands using them do between their event loops.
"""

from __future__ import annotations

import collections.abc
import contextlib
import signal
import subprocess
import typing

__all__ = ["announcing", "stop"]


def stop(process: subprocess.Popen[typing.Any], *, grace: float) -> int:
    """End ``process``: SIGCONT (a stopped process cannot act on SIGTERM), SIGTERM, and SIGKILL
    if it has not exited ``grace`` seconds later; its exit status. A process already gone is
    only reaped."""
    if process.poll() is None:
        process.send_signal(signal.SIGCONT)
        process.terminate()
        try:
            return process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()  # exited, or SIGKILLed: returns as soon as the kernel reaps it


@contextlib.contextmanager
def announcing(
    argv: collections.abc.Sequence[str],
    *,
    grace: float = 10.0,
    stderr: int | None = None,
) -> collections.abc.Iterator[str]:
    """Start ``argv`` with its standard output piped and yield the first line it prints (an
    empty string if it exited without one); it is stopped (:func:`stop`) when the block ends,
    however it ends. ``stderr`` is :mod:`subprocess`'s (``None``: this process's)."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        assert process.stdout is not None  # piped above
        yield process.stdout.readline()
    finally:
        stop(process, grace=grace)
        if process.stdout is not None:
            process.stdout.close()
