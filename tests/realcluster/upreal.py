"""``berth up --real`` started as a user starts it, for the tests that drive the whole command.

:func:`started` skips without the control plane's binaries, starts the command with its own
state directory, reads what it prints until it says a line the test names (its next steps),
and yields a :class:`Running` with a ``kubectl`` bound to the cluster. The command is always
killed if the test did not stop it, and a failing test gets the command's last lines.
"""

from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from berth.realcluster import binaries

BERTH = str(pathlib.Path(sys.executable).parent / "berth")


@dataclasses.dataclass
class Running:
    """A running ``berth up --real``: its process, what it printed, and a kubectl for it."""

    process: subprocess.Popen[str]
    printed: list[str]
    env: dict[str, str]
    kubectl_binary: str = "kubectl"
    cwd: pathlib.Path | None = None

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.kubectl_binary, *args], env=self.env, cwd=self.cwd, input=input,
            capture_output=True, text=True, check=check, timeout=150,
        )  # fmt: skip

    def out(self, *args: str, input: str | None = None) -> str:
        """``kubectl ARGS``'s standard output; a failing kubectl fails the test, saying why."""
        done = self.kubectl(*args, input=input, check=False)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr.strip()}"
        return done.stdout

    def until_says(self, *args: str, says: str, timeout: float = 120.0) -> str:
        """``kubectl ARGS`` asked again until its output holds ``says``: ``kubectl wait
        --for=jsonpath`` on a list's element fails at once while the list is still empty (the
        status not written yet) instead of waiting for it."""
        deadline = time.monotonic() + timeout
        while True:
            done = self.kubectl(*args, check=False)
            if done.returncode == 0 and says in done.stdout:
                return done.stdout
            assert time.monotonic() < deadline, (
                f"kubectl {' '.join(args)} did not say {says!r} in {timeout:.0f} s: "
                f"{(done.stdout or done.stderr).strip()}"
            )
            time.sleep(0.5)

    def follow(self) -> None:
        """Keep collecting what the command prints, in the background (for long tests)."""
        output = self.process.stdout
        assert output is not None
        threading.Thread(target=lambda: self.printed.extend(output), daemon=True).start()

    def stop(self) -> None:
        """Ctrl+C, as a user stops it: everything stops and the command exits 0."""
        self.process.send_signal(signal.SIGINT)
        assert self.process.wait(timeout=60) == 0, "".join(self.printed[-80:])


@contextlib.contextmanager
def started(
    state: pathlib.Path,
    *options: str,
    until: str,
    berth: str = BERTH,
    env: dict[str, str] | None = None,
    cwd: pathlib.Path | None = None,
    kubeconfig: pathlib.Path | None = None,
    kubectl: str = "kubectl",
) -> collections.abc.Iterator[Running]:
    """Run ``berth up --real OPTIONS`` until it prints ``until``.

    Its state directory is ``state`` (``BERTH_STATE_DIR``), unless ``env`` is given whole.

    ``kubeconfig`` is where the test's kubectl reads the cluster (the command's default, the
    administrator's kubeconfig in its state directory, unless ``--kubeconfig`` was given);
    ``berth``, ``env``, ``cwd`` and ``kubectl`` name another installation's commands.
    """
    try:
        binaries.find()
    except binaries.BinariesMissing as missing:
        pytest.skip(f"no real control plane: {missing}")
    if env is None:
        env = dict(os.environ, BERTH_STATE_DIR=str(state))
        env["PATH"] = str(pathlib.Path(berth).parent) + os.pathsep + env.get("PATH", "")
    config = kubeconfig or state / "real-cluster" / "admin.kubeconfig"
    process = subprocess.Popen(
        [berth, "up", "--real", *options, "--log-level", "warning"],
        env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    printed: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            printed.append(line)
            if until in line:
                break
        assert printed and until in printed[-1], "".join(printed)
        running = Running(process, printed, dict(env, KUBECONFIG=str(config)), kubectl, cwd)
        try:
            yield running
        except Exception as failed:
            said = "".join(printed[-80:])
            raise AssertionError(f"{failed}\n--- berth up --real said (last lines):\n{said}") from (
                failed
            )
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
