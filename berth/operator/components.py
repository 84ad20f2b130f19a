"""Leader-only components: what runs only while this replica holds the Lease.

A :class:`Component` is started when leadership is won and stopped when it is released or lost
(:mod:`berth.operator.main` drives them through :class:`Supervisor`). The informers, the
embedded Kopf operator, the scheduling loop and the plugins' controllers are components, all on
the operator's one event loop; adding one is writing a class with ``name``, ``start()`` and
``stop()``, or wrapping a long-running coroutine function ``run(stop_flag)`` in a
:class:`TaskComponent`::

    components.TaskComponent("informers", informers.run)

A component that ends by itself while it should be running has failed: the supervisor is told
(through the ``on_exit`` callback) and the process steps down and exits non-zero, so that
Kubernetes restarts it and another replica leads meanwhile.
"""

from __future__ import annotations

import asyncio
import collections.abc
import logging
import typing

from berth.util import aiotasks

__all__ = ["Component", "ExitCallback", "Supervisor", "TaskComponent"]

logger = logging.getLogger(__name__)

ExitCallback = collections.abc.Callable[[str, BaseException | None], None]
"""Told ``(component name, exception or None)`` when a component ended on its own."""


class Component(typing.Protocol):
    """A part of the process that runs only while this replica leads."""

    name: str

    async def start(self) -> None:
        """Start, and return once started (long work goes into tasks). Called once."""
        ...

    async def stop(self) -> None:
        """Stop promptly and release what ``start`` took. Called once, even after failures."""
        ...


class TaskComponent:
    """A long-running ``run(stop_flag)`` coroutine function as a :class:`Component`.

    :meth:`stop` sets the flag and waits up to ``stop_timeout`` seconds for ``run`` to return,
    then cancels it. If ``run`` returns or raises before being asked to stop, ``on_exit`` is
    called: the component failed.
    """

    def __init__(
        self,
        name: str,
        run: collections.abc.Callable[[asyncio.Event], collections.abc.Awaitable[None]],
        *,
        stop_timeout: float = 5.0,
        on_exit: ExitCallback | None = None,
    ) -> None:
        self.name = name
        self._run = run
        self._stop_timeout = stop_timeout
        self.on_exit = on_exit
        self._flag = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError(f"component {self.name} was started twice")
        self._task = asyncio.create_task(self._main(), name=f"component:{self.name}")

    async def stop(self) -> None:
        self._flag.set()
        if self._task is not None:
            await aiotasks.end_within([self._task], timeout=self._stop_timeout, late=self._late)

    def _late(self, _: asyncio.Task[typing.Any]) -> None:
        logger.warning(
            "component %s did not stop in %ss: cancelling it", self.name, self._stop_timeout
        )

    async def _main(self) -> None:
        error: BaseException | None = None
        try:
            await self._run(self._flag)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = exc
            logger.exception("component %s failed", self.name)
        if not self._flag.is_set():
            if error is None:
                logger.error("component %s ended while it should be running", self.name)
            if self.on_exit is not None:
                self.on_exit(self.name, error)


class Supervisor:
    """Starts a list of components in order and stops them all, each within a timeout.

    Starting stops at the first component that fails to start: those already started are
    stopped again and the error propagates. Stopping runs every component's ``stop`` at once
    (leadership may have been lost: nothing waits for anything else) and logs failures.
    """

    def __init__(
        self,
        factory: collections.abc.Callable[[], collections.abc.Sequence[Component]],
        *,
        stop_timeout: float,
    ) -> None:
        self._factory = factory
        self._stop_timeout = stop_timeout
        self._started: list[Component] = []

    @property
    def running(self) -> list[str]:
        """Names of the components started and not yet stopped."""
        return [c.name for c in self._started]

    async def start(self) -> None:
        for component in self._factory():
            logger.info("starting %s", component.name)
            try:
                await component.start()
            except BaseException:
                logger.exception("%s failed to start", component.name)
                # It may have half-started: give it its stop too.
                self._started.append(component)
                await self.stop()
                raise
            self._started.append(component)

    async def stop(self) -> None:
        started, self._started = self._started, []
        if not started:
            return
        results = await asyncio.gather(
            *(self._stop_one(c) for c in reversed(started)), return_exceptions=True
        )
        for component, result in zip(reversed(started), results, strict=True):
            if isinstance(result, BaseException):
                logger.error("%s failed to stop: %r", component.name, result)

    async def _stop_one(self, component: Component) -> None:
        logger.info("stopping %s", component.name)
        try:
            async with asyncio.timeout(self._stop_timeout):
                await component.stop()
        except TimeoutError:
            logger.error(
                "%s did not stop within %ss; abandoning it", component.name, self._stop_timeout
            )
