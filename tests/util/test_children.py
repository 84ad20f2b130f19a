"""Child processes started and stopped within a bound (``berth.util.children``).

We test these aspects:

- :func:`announcing` yields the first line the child prints and ends the child when the block
  ends, also when the block fails;
- :func:`stop` ends a child that ignores SIGTERM with SIGKILL after the grace, ends a paused
  (SIGSTOPped) child with SIGTERM, and only reaps a child that already exited.

Real processes: bounds are generous, and no test waits for longer than the child takes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from berth.util import children

_PRINT_PID_AND_WAIT = "import os, time; print(os.getpid(), flush=True); time.sleep(600)"
_IGNORE_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ignoring', flush=True); time.sleep(600)"
)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_announcing_yields_the_first_line_and_ends_the_child() -> None:
    with children.announcing([sys.executable, "-c", _PRINT_PID_AND_WAIT]) as line:
        pid = int(line)
        assert not _gone(pid)
    assert _gone(pid)  # stopped and reaped


def test_announcing_ends_the_child_when_the_block_fails() -> None:
    with (
        pytest.raises(RuntimeError, match="the command failed"),
        children.announcing([sys.executable, "-c", _PRINT_PID_AND_WAIT]) as line,
    ):
        pid = int(line)
        raise RuntimeError("the command failed")
    assert _gone(pid)


def test_announcing_a_child_that_says_nothing_yields_an_empty_line() -> None:
    with children.announcing([sys.executable, "-c", "pass"]) as line:
        assert line == ""


def test_a_child_ignoring_sigterm_is_killed_after_the_grace() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _IGNORE_TERM], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ignoring"  # its handler is in place
    assert children.stop(process, grace=0.5) == -signal.SIGKILL
    process.stdout.close()


def test_a_paused_child_is_resumed_and_terminated() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _PRINT_PID_AND_WAIT], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    process.stdout.readline()
    process.send_signal(signal.SIGSTOP)
    # Under load the SIGTERM may still take a while; the grace is the bound, not the time.
    assert children.stop(process, grace=60.0) == -signal.SIGTERM
    process.stdout.close()


def test_a_child_that_already_exited_is_only_reaped() -> None:
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait(60)
    assert children.stop(process, grace=0.5) == 3
