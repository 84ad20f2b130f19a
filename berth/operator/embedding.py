"""An embedded Kopf operator as tasks on the operator's own event loop.

:class:`KopfOperator` runs Kopf (docs/architecture.md: embedded, not ``kopf run``) between
:meth:`~KopfOperator.start` and :meth:`~KopfOperator.stop`, as ``kopf.operator()`` would —
``kopf.spawn_tasks(...)`` then ``kopf.run_tasks(...)`` — in a task of the running loop, beside the
informers, the binder and the scheduling loop; no thread and no loop of its own. Kopf's embedding
guide advises a thread for two reasons, and both are answered here instead:

- **Signals.** On the main thread, ``spawn_tasks`` installs SIGINT/SIGTERM handlers that stop
  Kopf alone. Right after it returns, the process's own handlers are put back
  (:func:`berth.util.signals.reclaim`): Ctrl+C and SIGTERM stop ``berth run`` as a whole, which
  stops Kopf as one of its parts.
- **Tasks started after it.** When its root tasks end, ``run_tasks`` cancels every task of the
  loop it was not told to ignore — on a shared loop, the binder's requests, the HTTP handlers
  and the scheduling loop. Kopf runs inside a :class:`~berth.util.aiotasks.TaskScope` (the host
  task and every task created from it), and is told to ignore everything outside it: it cancels
  its own stragglers and nothing else.

Two more of Kopf's process-wide habits are turned off: its contextvars (the credentials vault,
the settings) are set inside the host task, so two Kopf operators on one loop (the admission
webhooks' and the leader's) never see each other's; and its "ultimate termination", which sends
SIGKILL to the thread — the process — when Kopf's tasks end without the stop flag, is disabled
(``settings.process.ultimate_exiting_timeout = None``): a Kopf that ends on its own is reported
through ``on_exit``, and the process steps down as for any failed leader-only part.

``start`` returns once Kopf is ready (its startup handlers ran), or at once if a ``prerequisite``
is still being waited for (the leader's Kopf waits for Berth's CRDs to be served, which may take
until somebody installs them: the readiness probe says so); it raises if Kopf ended first or did
not get ready within ``start_timeout``. ``stop`` sets Kopf's stop flag, waits up to
``stop_timeout`` for it to end (its cleanup handlers run), then cancels what is left.
"""

from __future__ import annotations

import asyncio
import collections.abc
import logging
import typing

import kopf

from berth.operator import components
from berth.util import aiotasks, signals, wakeups

__all__ = ["KopfOperator", "Prerequisite"]

logger = logging.getLogger(__name__)

Prerequisite = collections.abc.Callable[
    [asyncio.Event, collections.abc.Callable[[], None]], collections.abc.Awaitable[bool]
]
"""Awaited before Kopf starts, given the stop flag and a callback to call if it does not hold at
once (``start`` then returns without waiting for it); False: stopped while waiting."""


class _KopfNoise(logging.Filter):
    """Drops one INFO line per handled event (the indexing and watching handlers run on every
    watch event of every PodGroup: each would log one). Failures are still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        routine = message.startswith("Handler '") and message.endswith(" succeeded.")
        return not (routine and record.levelno == logging.INFO)


_NOISE = _KopfNoise()
_NOISY_LOGGERS = ("kopf._core.reactor.running", "kopf.objects")


class KopfOperator:
    """Kopf's tasks on the running loop, between :meth:`start` and :meth:`stop`."""

    def __init__(
        self,
        *,
        name: str = "kopf",
        registry: collections.abc.Callable[[], kopf.OperatorRegistry],
        settings: collections.abc.Callable[[], kopf.OperatorSettings],
        memo: object | None = None,
        prerequisite: Prerequisite | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        on_exit: components.ExitCallback | None = None,
    ) -> None:
        self.name = name
        self._registry = registry
        self._settings = settings
        self._memo = memo
        self._prerequisite = prerequisite
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self.on_exit = on_exit
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()
        self._waiting = asyncio.Event()  # the prerequisite does not hold yet
        self._scope = aiotasks.TaskScope(name)
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def tasks(self) -> list[asyncio.Task[object]]:
        """Kopf's tasks (and its handlers') not done yet: the host task and what it started."""
        return self._scope.tasks()

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError(f"{self.name} was started twice")
        for name in _NOISY_LOGGERS:
            logging.getLogger(name).addFilter(_NOISE)
        registry, settings = self._registry(), self._settings()
        # Kopf's end is the process's business (on_exit), never a SIGKILL of its own.
        settings.process.ultimate_exiting_timeout = None
        host = asyncio.create_task(self._main(registry, settings), name=f"kopf: {self.name}")
        self._task = host
        ended = asyncio.Event()  # Kopf's host task ended while starting (it failed)
        host.add_done_callback(lambda _: ended.set())
        await wakeups.first_set(self._ready, self._waiting, ended, timeout=self._start_timeout)
        if host.done():
            error = None if host.cancelled() else host.exception()
            raise RuntimeError(f"Kopf ({self.name}) ended while starting: {error!r}") from error
        if not (self._ready.is_set() or self._waiting.is_set()):
            await self.stop()
            raise TimeoutError(
                f"Kopf ({self.name}) did not get ready within {self._start_timeout}s"
            )
        host.add_done_callback(self._ended)
        if self._ready.is_set():
            logger.info("Kopf is running (%s)", self.name)

    async def _main(self, registry: kopf.OperatorRegistry, settings: kopf.OperatorSettings) -> None:
        with self._scope.entered():
            prerequisite = self._prerequisite
            if prerequisite is not None and not await prerequisite(self._stop, self._waiting.set):
                return
            root = await kopf.spawn_tasks(
                registry=registry,
                settings=settings,
                clusterwide=True,
                standalone=True,
                stop_flag=self._stop,
                ready_flag=self._ready,
                memo=self._memo,
            )
            # On the main thread, Kopf has just put its own SIGINT/SIGTERM handlers on the loop.
            signals.reclaim()
            await kopf.run_tasks(root, ignored=self._scope.outside())

    async def stop(self) -> None:
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        await aiotasks.end_within([task], timeout=self._stop_timeout, late=self._late)
        # What Kopf left behind (it cancels its stragglers itself; this is the safety net).
        for straggler in self._scope.tasks():
            await aiotasks.cancel_and_wait(straggler, timeout=self._stop_timeout)

    def _late(self, _: asyncio.Task[typing.Any]) -> None:
        logger.warning(
            "Kopf (%s) did not stop within %ss: cancelling it", self.name, self._stop_timeout
        )

    def _ended(self, task: asyncio.Task[None]) -> None:
        if self._stop.is_set():
            return
        error = None if task.cancelled() else task.exception()
        if error is not None:
            logger.error("Kopf (%s) failed: %r", self.name, error)
        else:
            logger.error("Kopf (%s) ended while it should be running", self.name)
        if self.on_exit is not None:
            self.on_exit(self.name, error)
