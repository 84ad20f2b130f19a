"""SIGTERM raised as an exception inside a benchmark, so it can report what it measured.

We test these aspects:
- inside the block, SIGTERM raises ``Terminated`` naming the signal;
- after it, SIGTERM's previous handler is back.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from berth.cli import interrupts


def test_sigterm_raises_inside_and_the_old_handler_comes_back() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with pytest.raises(interrupts.Terminated, match="SIGTERM"), interrupts.terminated_raises():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # interrupted by the handler long before
        os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)
