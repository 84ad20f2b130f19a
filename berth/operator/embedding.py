"""The embedded Kopf operator as a leader-only component, on its own thread and event loop.

:class:`KopfComponent` runs ``kopf.operator(registry=..., settings=..., stop_flag=...,
ready_flag=..., memo=...)`` (docs/architecture.md: embedded, not ``kopf run``) while this replica
leads. It gets a thread and an event loop of its own, as Kopf's documentation advises for
embedding, for two reasons that bite in a shared loop: Kopf installs SIGINT/SIGTERM handlers
on the main thread's loop (they would take ``berth run``'s graceful shutdown away), and when it
stops it cancels every task the loop started after it (binding requests, HTTP handlers, the
scheduling loop). Kopf's handlers therefore hand data over through thread-safe objects
(:mod:`berth.controllers.observed`, :mod:`berth.kube.events`) and send their writes to the
operator's loop, whose API client is fenced (:mod:`berth.controllers.statuses`).

``start`` returns once Kopf reports ready (its startup handlers ran) and raises if Kopf died
first or did not get ready within ``start_timeout``; ``stop`` sets its stop flag and waits up
to ``stop_timeout`` for the thread to end. Kopf ending while it should run is a failure: the
``on_exit`` callback is told, and the process steps down.
"""

from __future__ import annotations

import asyncio
import collections.abc
import logging
import threading
import time
import typing

import kopf

from berth.operator import components

__all__ = ["KopfComponent"]

logger = logging.getLogger(__name__)


class _KopfNoise(logging.Filter):
    """Drops two kinds of Kopf lines that say nothing in Berth: the warning that OS signals are
    ignored off the main thread (the point of running it there: ``berth run`` handles them),
    and one INFO line per handled event (the watching handlers run on every watch event of
    every PodGroup: each would log one). Failures are still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "OS signals are ignored" in message:
            return False
        routine = message.startswith("Handler '") and message.endswith(" succeeded.")
        return not (routine and record.levelno == logging.INFO)


_NOISE = _KopfNoise()
_NOISY_LOGGERS = ("kopf._core.reactor.running", "kopf.objects")


class KopfComponent:
    """Kopf on a thread of its own, between :meth:`start` and :meth:`stop`."""

    name = "kopf"

    def __init__(
        self,
        *,
        name: str = "kopf",
        registry: collections.abc.Callable[[], kopf.OperatorRegistry],
        settings: collections.abc.Callable[[], kopf.OperatorSettings],
        memo: object | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        on_exit: components.ExitCallback | None = None,
    ) -> None:
        self.name = name
        self._registry = registry
        self._settings = settings
        self._memo = memo
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self.on_exit = on_exit
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._ended = threading.Event()
        self._thread: threading.Thread | None = None
        self._done: asyncio.Future[BaseException | None] | None = None
        self._watcher: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    async def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the Kopf component was started twice")
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        for name in _NOISY_LOGGERS:
            logging.getLogger(name).addFilter(_NOISE)
        registry, settings = self._registry(), self._settings()
        self._thread = threading.Thread(
            target=self._main, args=(loop, registry, settings), name=self.name, daemon=True
        )
        self._thread.start()
        ready = asyncio.ensure_future(asyncio.to_thread(self._await_ready, self._start_timeout))
        waiters: set[asyncio.Future[typing.Any]] = {ready, self._done}
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if self._done.done():
            ready.cancel()
            error = self._done.result()
            raise RuntimeError(f"Kopf ended while starting: {error!r}") from error
        if not ready.result():
            raise TimeoutError(f"Kopf did not get ready within {self._start_timeout}s")
        self._watcher = asyncio.create_task(self._watch(self._done), name="kopf: watcher")
        logger.info("Kopf is running (%s)", self.name)

    def _await_ready(self, timeout: float) -> bool:
        """Block (in a worker thread) until Kopf is ready, has ended, or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        while not self._ended.is_set() and time.monotonic() < deadline:
            if self._ready.wait(0.05):
                return True
        return self._ready.is_set()

    async def stop(self) -> None:
        self._stop.set()
        done = self._done
        if done is not None and not done.done():
            try:
                await asyncio.wait_for(asyncio.shield(done), self._stop_timeout)
            except TimeoutError:
                logger.warning(
                    "Kopf did not stop within %ss; abandoning its thread", self._stop_timeout
                )
        if done is not None and done.done() and self._thread is not None:
            # It has reported its end; the thread itself is a moment from finishing.
            await asyncio.to_thread(self._thread.join, self._stop_timeout)
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)

    def _main(
        self,
        loop: asyncio.AbstractEventLoop,
        registry: kopf.OperatorRegistry,
        settings: kopf.OperatorSettings,
    ) -> None:
        error: BaseException | None = None
        try:
            asyncio.run(
                kopf.operator(
                    registry=registry,
                    settings=settings,
                    clusterwide=True,
                    standalone=True,
                    stop_flag=self._stop,
                    ready_flag=self._ready,
                    memo=self._memo,
                )
            )
        except BaseException as exc:  # reported to the owner's loop, never lost
            error = exc
        self._ended.set()
        if not loop.is_closed():
            loop.call_soon_threadsafe(_resolve, self._done, error)

    async def _watch(self, done: asyncio.Future[BaseException | None]) -> None:
        error = await done
        if self._stop.is_set():
            return
        if error is not None:
            logger.error("Kopf failed: %r", error)
        else:
            logger.error("Kopf ended while it should be running")
        if self.on_exit is not None:
            self.on_exit(self.name, error)


def _resolve(
    future: asyncio.Future[BaseException | None] | None, error: BaseException | None
) -> None:
    if future is not None and not future.done():
        future.set_result(error)
