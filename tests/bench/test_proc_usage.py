"""CPU seconds and peak RSS read from /proc for the benchmarks' processes.

We test these aspects:
- a busy child's CPU seconds grow by about what it burned; a window reports them per process;
- peak RSS follows what a process touched, and starts afresh after a reset;
- a process that is gone reads as None, not as a number.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from berth.cli import proc_usage

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

BUSY = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"


def test_a_window_charges_each_process_its_own_cpu() -> None:
    child = subprocess.Popen([sys.executable, "-c", BUSY + "time.sleep(30)"])
    try:
        window = proc_usage.Window({"busy": child.pid}).start()
        time.sleep(2.0)
        wall, used = window.read()
        assert wall >= 2.0
        busy = used["busy"]
        assert busy is not None and 0.3 <= busy <= 1.5
        cores = window.cores()["busy"]
        assert cores is not None and 0 < cores < 1
    finally:
        child.kill()
        child.wait()
    assert proc_usage.cpu_seconds(child.pid) is None


def test_peak_rss_follows_memory_touched_and_resets() -> None:
    grow = "b = bytearray(200 * 2**20)\ndel b\nimport time\ntime.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", grow])
    try:
        deadline = time.monotonic() + 20
        peak = 0.0
        while time.monotonic() < deadline and peak < 200:
            time.sleep(0.2)
            peak = proc_usage.peak_rss_mb(child.pid) or 0.0
        assert peak >= 200
        proc_usage.reset_peak(child.pid)
        after = proc_usage.peak_rss_mb(child.pid)
        assert after is not None and after < 150
    finally:
        child.kill()
        child.wait()
    assert proc_usage.peak_rss_mb(child.pid) is None
