"""A CPU-time sampler for ``berth run``, loaded by Python at start-up through ``PYTHONPATH``.

py-spy samples wall time: on a loaded machine a thread waiting for a core looks as busy as one
running, and the profile says where Berth waits as much as where it computes. This samples on
``SIGPROF`` (``ITIMER_PROF``: the process's CPU time), every 2 ms of it, and counts the main
thread's stack by the second since start; a sample that finds the event loop idle is charged
to the scheduling session running on its worker thread, if one is. Samples coalesce while the
main thread waits for the GIL, so the counts are shares, not seconds, and a worker thread's
CPU is undercounted (its signals coalesce until the main thread runs): for the sessions'
share, read py-spy's per-thread samples beside it.

    PYTHONPATH=hack/cpu-sample BERTH_CPU_SAMPLE=/tmp/berth.cpu \\
        berth bench e2e --real --shape basic --nodes 50 --pods 1000
    python hack/cpu-sample/report.py /tmp/berth.cpu

Only a process started as ``berth run`` samples (the bench's own process does not); the counts
are written every 3 s and at exit.
"""

from __future__ import annotations

import collections
import os
import pathlib
import pickle
import signal
import sys
import threading
import time
import types

_OUT = os.environ.get("BERTH_CPU_SAMPLE")
_INTERVAL = 0.002


def _stack(frame: types.FrameType | None, *, limit: int = 60) -> tuple[str, ...]:
    names: list[str] = []
    while frame is not None and len(names) < limit:
        code = frame.f_code
        where = code.co_filename.split("site-packages/")[-1].split("python3.11/")[-1]
        names.append(f"{code.co_name} ({where.split('/berth/', 1)[-1]})")
        frame = frame.f_back
    return tuple(reversed(names))


def _start(out: pathlib.Path) -> None:
    counts: collections.Counter[tuple[int, tuple[str, ...]]] = collections.Counter()
    started = time.monotonic()
    main = threading.main_thread().ident

    def sample(_signum: int, frame: types.FrameType | None) -> None:
        stack = _stack(frame)
        if stack and stack[-1].startswith("select "):
            for ident, other in sys._current_frames().items():
                worker = _stack(other) if ident != main else ()
                if any(name.startswith("run_session ") for name in worker):
                    stack = ("[session thread]", *worker)
                    break
        counts[(int(time.monotonic() - started), stack)] += 1

    def dump() -> None:
        partial = out.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(dict(counts)))
        partial.replace(out)

    def dumping() -> None:
        while True:
            time.sleep(3.0)
            dump()

    threading.Thread(target=dumping, name="cpu-sample", daemon=True).start()

    def finish() -> None:
        # Before the interpreter restores SIGPROF's default action, which ends the process.
        signal.setitimer(signal.ITIMER_PROF, 0.0)
        dump()

    import atexit

    atexit.register(finish)
    signal.signal(signal.SIGPROF, sample)
    signal.setitimer(signal.ITIMER_PROF, _INTERVAL, _INTERVAL)


if _OUT and sys.argv[1:2] == ["run"]:
    _start(pathlib.Path(_OUT))
