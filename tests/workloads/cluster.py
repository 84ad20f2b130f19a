"""``berth up`` as a user runs it, driven with the real ``kubectl``: the harness of the
end-to-end workload tests.

:func:`berth_up` starts the console script on small simulated nodes and yields a
:class:`Kubectl` pointed at it; the process is stopped (SIGINT, then killed) whatever happens.
"""

from __future__ import annotations

import collections.abc
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import typing

from berth.emulator import testing

BERTH = str(pathlib.Path(sys.executable).parent / "berth")
ROOT = pathlib.Path(__file__).resolve().parents[2]
CRDS = ROOT / "examples" / "workloads" / "crds"

Obj = dict[str, typing.Any]


class Kubectl:
    """The real ``kubectl`` with the cluster's kubeconfig."""

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env

    def __call__(self, *args: str, input: str | None = None, check: bool = True) -> str:
        done = subprocess.run(
            [testing.kubectl_binary(), *args],
            env=self._env,
            input=input,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr}")
        return done.stdout

    def apply(self, *objects: Obj, namespace: str = "default") -> None:
        docs = "\n---\n".join(json.dumps(obj) for obj in objects)
        self("apply", "-n", namespace, "-f", "-", input=docs)

    def get(self, *args: str, namespace: str = "default") -> Obj:
        found: Obj = json.loads(self("get", "-n", namespace, *args, "-o", "json"))
        return found

    def items(self, *args: str, namespace: str = "default") -> list[Obj]:
        items: list[Obj] = self.get(*args, namespace=namespace)["items"]
        return items


def eventually(
    check: collections.abc.Callable[[], typing.Any], *, what: str, timeout: float = 20.0
) -> typing.Any:
    """``check()``'s first truthy result, polled for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@contextlib.contextmanager
def berth_up(
    tmp: pathlib.Path,
    *,
    nodes: str,
    extra: tuple[str, ...] = (),
    settings: dict[str, str] | None = None,
) -> typing.Iterator[Kubectl]:
    """``berth up --nodes NODES`` until the block ends; yields kubectl pointed at it.
    ``settings``: the operator's ``BERTH_*`` environment (none is inherited)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    env |= settings or {}
    env.pop("KUBECONFIG", None)
    env |= {"HOME": str(tmp), "KUBECACHEDIR": str(tmp / "cache")}
    kubeconfig = tmp / "up.kubeconfig"
    process = subprocess.Popen(
        [
            BERTH,
            "up",
            "--kubeconfig",
            str(kubeconfig),
            "--nodes",
            nodes,
            "--log-level",
            "warning",
            *extra,
        ],
        cwd=tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert "berth up: Kubernetes API at" in process.stdout.readline()
        yield Kubectl(env | {"KUBECONFIG": str(kubeconfig)})
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()
