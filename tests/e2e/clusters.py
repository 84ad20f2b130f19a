"""The e2e tests' handle on the cluster: the real kubectl with bounded waits (see conftest)."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import subprocess
import typing

import pytest

from berth.emulator import testing

__all__ = ["EXAMPLES", "REPO", "WAIT", "Kube"]

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
WAIT = "180s"
"""The bound of every wait: an image pull on a cold kind node takes a while."""


@dataclasses.dataclass(frozen=True)
class Kube:
    """The real kubectl against the e2e cluster."""

    context: str | None
    env: dict[str, str]

    def __call__(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 240.0
    ) -> subprocess.CompletedProcess[str]:
        """``kubectl ARGS`` (``input`` on stdin); ``check`` fails the test on a non-zero exit,
        with its output."""
        # After the arguments: kubectl refuses flags placed before a plugin's name, and
        # Berth's plugins take --context as kubectl does.
        context = ["--context", self.context] if self.context is not None else []
        result = subprocess.run(
            [testing.kubectl_binary(), *args, *context],
            input=input,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            pytest.fail(
                f"kubectl {' '.join(args)} exited {result.returncode}\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
            )
        return result

    def json(self, *args: str) -> dict[str, typing.Any]:
        """``kubectl ARGS -o json``, decoded."""
        decoded = json.loads(self(*args, "-o", "json").stdout)
        assert isinstance(decoded, dict)
        return decoded

    def wait(self, what: str, *, jsonpath: str, value: str, namespace: str | None = None) -> None:
        """Wait (bounded by :data:`WAIT`) until ``jsonpath`` of ``what`` equals ``value``."""
        scope = ["-n", namespace] if namespace is not None else []
        self("wait", *scope, what, f"--for=jsonpath={jsonpath}={value}", f"--timeout={WAIT}")
