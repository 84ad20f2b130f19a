"""The whole operator in the test's loop against the threaded emulator, and kubectl beside it.

:func:`operator_on` installs Berth's CRDs with the real ``kubectl``, runs
:func:`berth.operator.main.run` (leader components included) until the block ends, and yields
the port of its HTTP server; :func:`kubectl` runs the real ``kubectl`` in a thread, so the
operator keeps going meanwhile.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import pathlib

from berth.emulator import testing
from berth.operator import main, scheduling, settings
from berth.util import clocks
from tests.kube import conftest

ROOT = pathlib.Path(__file__).resolve().parents[2]


async def kubectl(emulator: testing.RunningEmulator, *args: str, input: str | None = None) -> str:
    done = await asyncio.to_thread(emulator.kubectl, *args, input=input)
    return done.stdout


@contextlib.asynccontextmanager
async def operator_on(
    emulator: testing.RunningEmulator,
    *,
    clock: clocks.Clock | None = None,
    identity: str = "t",
    elect: bool = True,
) -> collections.abc.AsyncIterator[int]:
    """Run the operator (on ``clock``) until the block ends; yields its HTTP port. Without
    ``elect`` it leads from the start with no Lease (a test that jumps its clock further than
    the renew deadline would otherwise see it step down)."""
    await kubectl(emulator, "apply", "-f", str(ROOT / "crds"))
    config = settings.Settings(
        kubeconfig=emulator.kubeconfig,
        namespace="default",
        http_host="127.0.0.1",
        http_authorization=False,  # the emulator reviews no tokens
        http_port=0,
        leader_election={"identity": identity} if elect else {"enabled": False},
    )
    stop = asyncio.Event()
    ports: list[int] = []
    operator = asyncio.create_task(
        main.run(
            config,
            stop=stop,
            leader_components=scheduling.leader_components,
            on_serving=ports.append,
            clock=clock,
        )
    )
    try:
        await conftest.until(lambda: bool(ports) or operator.done(), timeout=60)
        assert not operator.done(), "the operator stopped"
        yield ports[0]
    finally:
        stop.set()
        await asyncio.wait_for(operator, 30)
