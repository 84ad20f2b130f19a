"""Fixtures for the operator tests.

- autouse ``clean_environment``: no ``BERTH_*``, ``POD_NAME``, ``POD_NAMESPACE`` or
  ``KUBECONFIG`` leaks in from the shell running the tests, so settings tests see only what they
  set and clients find only the kubeconfig a test gives them;
- ``api_server``: an API server emulator served from the *test's own* event loop (not the
  threaded ``emulator`` fixture of :mod:`berth.emulator.testing`): under ``looptime`` the loop
  jumps to its next timer whenever it waits for nothing it can see, so a server answering from
  another thread would look like one that never answers; in the same loop every exchange
  completes before virtual time moves;
- ``connection``: a ``kubernetes_asyncio`` connection to ``api_server`` (through
  :func:`berth.kube.transport.clients.connect_async`);
- ``wall_clock``: a :class:`~berth.util.clocks.Clock` that follows the event loop's (virtual)
  time from a fixed epoch, for the timestamps written into Leases;
- :class:`Recorder`: a leader-only component journaling its start and stop.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import os
import pathlib

import pytest

from berth.emulator import server
from berth.kube.transport import clients

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z, as tests/conftest.py's virtual clock


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("BERTH_") or name in ("POD_NAME", "POD_NAMESPACE", "KUBECONFIG"):
            monkeypatch.delenv(name)


@dataclasses.dataclass(frozen=True)
class ApiServer:
    """An emulator running in the test's loop, and its kubeconfig."""

    emulator: server.Emulator
    kubeconfig: pathlib.Path


@pytest.fixture
async def api_server(tmp_path: pathlib.Path) -> collections.abc.AsyncIterator[ApiServer]:
    async with server.Emulator() as emulator:
        yield ApiServer(emulator, emulator.write_kubeconfig(tmp_path / "kubeconfig"))


@pytest.fixture
async def connection(
    api_server: ApiServer,
) -> collections.abc.AsyncIterator[clients.AsyncConnection]:
    async with clients.connect_async(kubeconfig=str(api_server.kubeconfig)) as connected:
        yield connected


class LoopClock:
    """Wall-clock time that moves with the event loop (virtual under looptime)."""

    def now(self) -> float:
        return EPOCH + asyncio.get_running_loop().time()


@pytest.fixture
def wall_clock() -> LoopClock:
    return LoopClock()


class Recorder:
    """A leader-only component recording its start and stop into a journal a test shares."""

    def __init__(
        self,
        name: str,
        journal: list[str],
        *,
        stop_delay: float = 0.0,
        fail_start: bool = False,
    ) -> None:
        self.name = name
        self._journal = journal
        self._stop_delay = stop_delay
        self._fail_start = fail_start

    async def start(self) -> None:
        self._journal.append(f"start {self.name}")
        if self._fail_start:
            raise RuntimeError(f"{self.name} cannot start")

    async def stop(self) -> None:
        await asyncio.sleep(self._stop_delay)
        self._journal.append(f"stop {self.name}")
