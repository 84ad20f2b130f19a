"""One ``berth run`` replica for the resilience tests, as a separate process.

``python -m tests.operator.replica`` runs :func:`berth.operator.main.run` exactly as
``berth run`` does (settings from ``BERTH_*`` variables, the real leader-only components,
SIGTERM/SIGINT stop gracefully), with one out-of-tree plugin merged into the in-tree registry
and enabled: ``ControllerProbe``, a ``ControllerProvider`` whose controller appends
``<identity> <wall time>`` to the file named by ``PROBE_FILE`` every 50 ms while it runs. The
tests read that file to check that plugin controllers ran only on the leader at any time.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import time

import berth.scheduler.framework as framework
from berth.operator import main as operator_main
from berth.operator import scheduling, settings
from berth.scheduler.plugins import registry as in_tree
from berth.util import aiotasks, signals
from berth.util import logging as berth_logging

PROBE = "ControllerProbe"


class _Beating:
    name = "beat"

    def __init__(self, path: pathlib.Path, identity: str) -> None:
        self._path = path
        self._identity = identity

    async def run(self, stop: asyncio.Event) -> None:
        with self._path.open("a", buffering=1) as out:
            while not stop.is_set():
                out.write(f"{self._identity} {time.time():.3f}\n")
                await aiotasks.sleep_or_stop(0.05, stop=stop)


class ControllerProbe(framework.ControllerProvider):
    """Provides one controller that leaves a heartbeat trail while it runs."""

    name = PROBE

    def __init__(self, path: pathlib.Path, identity: str) -> None:
        self._controller = _Beating(path, identity)

    def new_controllers(self) -> list[framework.Controller]:
        return [self._controller]


def _registry(identity: str) -> framework.Registry:
    path = pathlib.Path(os.environ["PROBE_FILE"])

    def new(args: framework.NoArgs, handle: framework.ExtendedHandle) -> ControllerProbe:
        return ControllerProbe(path, identity)

    registry = in_tree.in_tree_registry()
    registry.merge({PROBE: framework.PluginFactory(new=new)})
    return registry


async def _run(config: settings.Settings) -> operator_main.ExitCode:
    stop = asyncio.Event()
    signals.on_stop(stop.set)  # as berth run: the process's handlers, which Kopf leaves alone
    registry = _registry(config.leader_election.identity)
    return await operator_main.run(
        config, stop=stop, leader_components=scheduling.with_registry(registry)
    )


def main() -> None:
    config = settings.Settings()
    berth_logging.configure(config.log_level)
    raise SystemExit(int(asyncio.run(_run(config))))


if __name__ == "__main__":
    main()
