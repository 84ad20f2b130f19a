"""CPU seconds and peak RSS read from /proc for the benchmarks' processes.

We test these aspects:
- a busy child's CPU seconds grow by about what it burned; a window reports them per process;
- peak RSS follows what a process touched, and starts afresh after a reset;
- a process that is gone reads as None, not as a number.

The child says on its stdout when it has done each step, and the test reads /proc only then:
on a loaded machine the child may take many seconds to burn its CPU or free its memory.
"""

from __future__ import annotations

import select
import subprocess
import sys
import time

import pytest

from berth.cli import proc_usage

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

# Waits for the child's "ready"/"go", burns 0.6 CPU-s, says "burned" and sleeps.
BUSY = """\
import sys, time
print("ready", flush=True)
sys.stdin.readline()
end = time.process_time() + 0.6
while time.process_time() < end:
    pass
print("burned", flush=True)
time.sleep(60)
"""

# Touches 200 MiB, says "grown", waits for "go", frees it, says "freed" and sleeps.
GROW = """\
import sys, time
b = bytearray(b"x" * (200 * 2**20))
print("grown", flush=True)
sys.stdin.readline()
del b
print("freed", flush=True)
time.sleep(60)
"""


def _said(child: subprocess.Popen[str], word: str) -> None:
    """Wait (bounded) until ``child`` prints ``word`` on a line of its own. A child says one
    line and then waits to be told to go on: ``select`` sees the pipe, not lines already
    read into the stream's buffer, so a second line sent at once would be waited for in vain
    (it was, once, on a loaded machine)."""
    assert child.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([child.stdout], [], [], deadline - time.monotonic())
        if not ready:
            break
        line = child.stdout.readline()
        if not line:
            pytest.fail(f"the child ended before saying {word!r} (exit {child.wait()})")
        if line.strip() == word:
            return
    pytest.fail(f"the child did not say {word!r} within 120 s")


def _start(source: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", source], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def test_a_window_charges_each_process_its_own_cpu() -> None:
    with _start(BUSY) as child:  # leaving closes its pipes and reaps it
        try:
            _said(child, "ready")
            window = proc_usage.Window({"busy": child.pid}).start()
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
            _said(child, "burned")
            wall, used = window.read()
            assert wall > 0
            busy = used["busy"]
            assert busy is not None and 0.5 <= busy <= 1.5
            cores = window.cores()["busy"]
            assert cores is not None and 0 < cores <= 1.05
        finally:
            child.kill()
    assert proc_usage.cpu_seconds(child.pid) is None


def test_peak_rss_follows_memory_touched_and_resets() -> None:
    with _start(GROW) as child:
        try:
            _said(child, "grown")
            peak = proc_usage.peak_rss_mb(child.pid)
            assert peak is not None and peak >= 200
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
            _said(child, "freed")
            proc_usage.reset_peak(child.pid)
            after = proc_usage.peak_rss_mb(child.pid)
            assert after is not None and after < 150
        finally:
            child.kill()
    assert proc_usage.peak_rss_mb(child.pid) is None
