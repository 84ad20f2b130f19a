"""The plugins' controllers (``ControllerProvider``) as a Kopf handler set, run only while
this replica leads.

A plugin's controllers (:class:`~berth.scheduler.framework.interfaces.Controller`: ``run(stop)``)
are what Koordinator's ``ControllerProvider`` starts when its replica wins leader election.
In Berth they are started and stopped by Kopf: :func:`register` adds a startup handler that
starts every registered controller and a cleanup handler that stops them, to the registry of
the embedded Kopf operator, which itself runs only while this replica holds the Lease
(:class:`berth.operator.embedding.KopfComponent`). Winning the Lease starts Kopf, and Kopf's
startup handlers start the controllers; losing it stops Kopf, whose cleanup handlers stop them
first. A per-object Kopf handler does not fit: a controller is a loop over whatever it
watches, not a reaction to one object.

The controllers run on the operator's event loop, not Kopf's: they share the scheduler
handle's objects and the fenced API client, which live there (``bind``), as Berth's status
handlers' writes do (docs/architecture.md, "Where Kopf stops").

:class:`PluginControllers` runs them between :meth:`~PluginControllers.start` and
:meth:`~PluginControllers.stop`: each ``run(stop)`` in a task of its own; on stop it sets their
shared stop flag, waits for them to return, and cancels the ones that do not within the
timeout. Each controller runs at most once per leadership term, as the ``Controller`` contract
promises; one that fails is logged with its plugin's name and stays stopped, without taking the
others or the scheduler down. It is also a leader-only
:class:`~berth.operator.components.Component` for a process that runs no Kopf.
"""

from __future__ import annotations

import asyncio
import collections.abc
import logging
import typing

import kopf

from berth.scheduler.framework import handles, interfaces
from berth.util import aiotasks

__all__ = ["PluginControllers", "register"]

_T = typing.TypeVar("_T")

logger = logging.getLogger(__name__)


class PluginControllers:
    """Runs the registered plugin controllers between :meth:`start` and :meth:`stop`."""

    name = "plugin controllers"

    def __init__(self, registry: handles.ControllerRegistry, *, stop_timeout: float) -> None:
        self._registry = registry
        self._stop_timeout = stop_timeout
        self._stop = asyncio.Event()
        self._tasks: dict[asyncio.Task[None], str] = {}  # task -> "Plugin/controller"
        self._home: asyncio.AbstractEventLoop | None = None

    def bind(self, home: asyncio.AbstractEventLoop) -> None:
        """Run the controllers on ``home`` (the operator's loop), whichever loop starts them."""
        self._home = home

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
        pending = {task for task in self._tasks if not task.done()}
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=self._stop_timeout)
        for task in late:
            logger.warning(
                "plugin controller %s did not stop in %ss: cancelling it",
                self._tasks[task],
                self._stop_timeout,
            )
            await aiotasks.cancel_and_wait(task, timeout=self._stop_timeout)

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

    async def at_home(self, call: collections.abc.Coroutine[typing.Any, typing.Any, _T]) -> _T:
        """Run ``call`` on the bound loop and wait for it here."""
        return await aiotasks.on_loop(self._home, call)


def register(registry: kopf.OperatorRegistry, *, controllers: PluginControllers) -> None:
    """Add the startup and cleanup handlers that run ``controllers`` while Kopf runs."""

    @kopf.on.startup(id="plugin-controllers-start", registry=registry)
    async def start_plugin_controllers(**_: typing.Any) -> None:
        await controllers.at_home(controllers.start())

    @kopf.on.cleanup(id="plugin-controllers-stop", registry=registry)
    async def stop_plugin_controllers(**_: typing.Any) -> None:
        await controllers.at_home(controllers.stop())
