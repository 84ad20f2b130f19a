"""The plugins' controllers (``ControllerProvider``), run only while this replica leads.

A plugin's controllers (:class:`~berth.scheduler.framework.interfaces.Controller`: ``run(stop)``)
are what Koordinator's ``ControllerProvider`` starts when its replica wins leader election. In
Berth, :class:`PluginControllers` is a leader-only :class:`~berth.operator.components.Component`
the composition root (:mod:`berth.operator.scheduling`) builds with the others: winning the
Lease starts it, losing it stops it. The controllers run as tasks on the operator's one event
loop, beside the scheduler whose handle they share and the fenced API client they write with.
A per-object Kopf handler does not fit: a controller is a loop over whatever it watches, not a
reaction to one object.

:class:`PluginControllers` runs them between :meth:`~PluginControllers.start` and
:meth:`~PluginControllers.stop`: each ``run(stop)`` in a task of its own; on stop it sets their
shared stop flag, waits for them to return, and cancels the ones that do not within the
timeout. Each controller runs at most once per leadership term, as the ``Controller`` contract
promises; one that fails is logged with its plugin's name and stays stopped, without taking the
others or the scheduler down.
"""

from __future__ import annotations

import asyncio
import logging
import typing

from berth.scheduler.framework import handles, interfaces
from berth.util import aiotasks

__all__ = ["PluginControllers"]

logger = logging.getLogger(__name__)


class PluginControllers:
    """Runs the registered plugin controllers between :meth:`start` and :meth:`stop`."""

    name = "plugin controllers"

    def __init__(self, registry: handles.ControllerRegistry, *, stop_timeout: float) -> None:
        self._registry = registry
        self._stop_timeout = stop_timeout
        self._stop = asyncio.Event()
        self._tasks: dict[asyncio.Task[None], str] = {}  # task -> "Plugin/controller"

    @property
    def running(self) -> list[str]:
        """``Plugin/controller`` names of the controllers whose ``run`` has not returned."""
        return sorted(label for task, label in self._tasks.items() if not task.done())

    async def start(self) -> None:
        if self._tasks or self._stop.is_set():
            raise RuntimeError("plugin controllers run at most once per leadership term")
        for plugin, controller in self._registry.controllers():
            label = f"{plugin}/{controller.name}"
            task = asyncio.create_task(self._run(label, controller), name=f"controller:{label}")
            self._tasks[task] = label
        if self._tasks:
            logger.info(
                "started %d plugin controller(s): %s", len(self._tasks), ", ".join(self.running)
            )

    async def stop(self) -> None:
        self._stop.set()
        await aiotasks.end_within(self._tasks, timeout=self._stop_timeout, late=self._late)

    def _late(self, task: asyncio.Task[typing.Any]) -> None:
        logger.warning(
            "plugin controller %s did not stop in %ss: cancelling it",
            self._tasks[task],
            self._stop_timeout,
        )

    async def _run(self, label: str, controller: interfaces.Controller) -> None:
        try:
            await controller.run(self._stop)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception(
                "plugin controller %s failed; it stays stopped until the next term", label
            )
            return
        if not self._stop.is_set():
            logger.warning("plugin controller %s returned before it was asked to stop", label)
