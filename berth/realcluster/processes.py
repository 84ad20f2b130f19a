"""Local processes of a control plane: started in their own session, logged to a file, stopped.

Every process runs in a new session (its own process group), so stopping it stops whatever it
started. On Linux each is also told to die with the process that started it
(``PR_SET_PDEATHSIG``), so a test run or ``berth up`` that is killed outright leaves no
component behind. A component that exits early is reported by name with the tail of its log.
"""

from __future__ import annotations

import collections.abc
import contextlib
import ctypes
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

__all__ = ["ComponentFailed", "Process", "free_port", "wait_until"]

_TAIL_LINES = 20


class ComponentFailed(RuntimeError):
    """A component did not start or exited: the message names it and its log."""


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL this process when its parent dies (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def tail(path: pathlib.Path, lines: int = _TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class Process:
    """One component: its command line, its log file, and the running process."""

    def __init__(
        self,
        name: str,
        argv: collections.abc.Sequence[str],
        *,
        log: pathlib.Path,
        env: collections.abc.Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self.env = dict(os.environ if env is None else env)
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    def start(self) -> Process:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            out.write(f"$ {' '.join(self.argv)}\n".encode())
            out.flush()
            try:
                self._popen = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    start_new_session=True,
                    preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                )
            except OSError as exc:
                raise ComponentFailed(f"{self.name} could not start: {exc}") from None
        return self

    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def check(self) -> None:
        """Raise :class:`ComponentFailed` if the process has exited."""
        if self._popen is None:
            raise ComponentFailed(f"{self.name} was never started")
        code = self._popen.poll()
        if code is not None:
            raise ComponentFailed(
                f"{self.name} exited with code {code}; its log is {self.log}; last lines:\n"
                + tail(self.log)
            )

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the process (not its group): SIGSTOP/SIGCONT/SIGKILL in tests."""
        if self._popen is not None and self._popen.poll() is None:
            self._popen.send_signal(signum)

    def stop(self, *, grace: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL it after ``grace`` seconds; idempotent."""
        popen = self._popen
        if popen is None:
            return
        if popen.poll() is None:
            self._signal_group(popen.pid, signal.SIGCONT)  # a stopped process cannot terminate
            self._signal_group(popen.pid, signal.SIGTERM)
            try:
                popen.wait(grace)
            except subprocess.TimeoutExpired:
                self._signal_group(popen.pid, signal.SIGKILL)
                popen.wait(grace)
        # Whatever it started and left behind in its group goes too.
        self._signal_group(popen.pid, signal.SIGKILL)

    @staticmethod
    def _signal_group(pid: int, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)


def wait_until(
    what: str,
    ready: collections.abc.Callable[[], bool],
    *,
    timeout: float,
    watch: collections.abc.Sequence[Process] = (),
    interval: float = 0.2,
) -> None:
    """Poll ``ready`` until it is true; fail early if a watched process exits, or at ``timeout``.

    Polling is the only way to learn that another process is ready to serve; the loop is
    bounded by ``timeout`` and checks the processes it depends on every round.
    """
    deadline = time.monotonic() + timeout
    while True:
        for process in watch:
            process.check()
        if ready():
            return
        if time.monotonic() >= deadline:
            logs = f" (logs: {', '.join(str(p.log) for p in watch)})" if watch else ""
            raise ComponentFailed(f"{what} not ready after {timeout:.0f} s{logs}")
        time.sleep(interval)
