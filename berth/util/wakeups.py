"""Waiting and waking: the one toolkit every long-running part of Berth sleeps and wakes with.

Kopf's ``aiokits`` is the model: a few primitives over :class:`asyncio.Event`, each owning the
bookkeeping a hand-written loop gets wrong (waiter tasks left pending, a wake-up lost between
a check and a wait):

- :func:`first_set` — wait until any of several flags is set (a wake-up, a stop), or a timeout;
- :func:`sleep_or_stop` — sleep, cut short by a stop (without one: a plain delay);
- :func:`run_until` — run some work until a stop, cancelling it then (a watch may be silent
  for minutes: it is cancelled rather than polled for the stop);
- :class:`Wakeup` — a wake-up call for one sleeper: any number of :meth:`Wakeup.wake` calls
  before it looks count as one, and :meth:`Wakeup.sleep` consumes it;
- :class:`Wakeups` — wake-up calls by key, for waits that watch some objects and are woken
  when one of those changes (a preemptor waiting for its victims, a binding for its claims).

Time is the event loop's (``asyncio`` timeouts), never the wall clock, so that tests run these
under ``looptime`` in virtual seconds. Runs on one event loop; nothing here is thread-safe.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import typing

__all__ = ["Wakeup", "Wakeups", "first_set", "run_until", "sleep_or_stop"]

_K = typing.TypeVar("_K", bound=collections.abc.Hashable)


async def first_set(*flags: asyncio.Event, timeout: float | None = None) -> bool:
    """Wait until any of ``flags`` is set, or ``timeout`` seconds pass (``None``: no limit);
    whether one is set. The waiters it starts never outlive it."""
    if any(flag.is_set() for flag in flags):
        return True
    if timeout is not None and timeout <= 0:
        return False
    if len(flags) == 1:  # no waiter task: woken as soon as the flag's own waiters are
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await flags[0].wait()
        return flags[0].is_set()
    waiters = [asyncio.ensure_future(flag.wait()) for flag in flags]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
    return any(flag.is_set() for flag in flags)


async def sleep_or_stop(seconds: float, *, stop: asyncio.Event | None = None) -> bool:
    """Sleep ``seconds`` or until ``stop`` is set, whichever is first; True if stopped.

    Without ``stop`` it is a plain delay (a retry's backoff, an injected latency, a period)
    that only cancelling its task cuts short."""
    if stop is None:
        await asyncio.sleep(max(0.0, seconds))
        return False
    if stop.is_set():
        return True
    if seconds <= 0:
        return False
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
    return stop.is_set()


async def run_until(
    work: collections.abc.Coroutine[typing.Any, typing.Any, None],
    /,
    *,
    stop: asyncio.Event,
    name: str,
) -> bool:
    """Run ``work`` (as a task called ``name``) until it ends or ``stop`` is set, cancelling it
    then; True if stopped. Its exception is raised; neither it nor the waiter outlives this."""
    task = asyncio.create_task(work, name=name)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in (task, stopping):
            waiter.cancel()
        await asyncio.gather(task, stopping, return_exceptions=True)
    if not task.cancelled() and task.exception() is not None:
        raise typing.cast(BaseException, task.exception())
    return stop.is_set()


class Wakeup:
    """A wake-up call for one sleeper (a pass that runs again when kicked).

    :meth:`wake` never blocks and may be called any number of times: until the sleeper
    looks, they count as one. A wake-up that came before :meth:`sleep` is not lost: the sleep
    returns at once and consumes it; :meth:`clear` drops one the caller's next pass covers."""

    def __init__(self) -> None:
        self._flag = asyncio.Event()

    def wake(self) -> None:
        """Wake the sleeper (now, or at its next :meth:`sleep`)."""
        self._flag.set()

    @property
    def woken(self) -> bool:
        """Whether a wake-up is waiting to be consumed."""
        return self._flag.is_set()

    def clear(self) -> None:
        """Drop a waiting wake-up (the pass about to run covers what it was for)."""
        self._flag.clear()

    async def sleep(
        self, *, stop: asyncio.Event | None = None, timeout: float | None = None
    ) -> bool:
        """Sleep until woken, ``stop`` is set or ``timeout`` seconds pass; whether woken (the
        wake-up is consumed)."""
        flags = (self._flag,) if stop is None else (self._flag, stop)
        await first_set(*flags, timeout=timeout)
        woken = self._flag.is_set()
        self._flag.clear()
        return woken


class Wakeups(typing.Generic[_K]):
    """Wake-up calls by key: a wait :meth:`watching` some keys is woken by :meth:`wake` of any
    of them. Keys nobody watches cost nothing; a wait's keys go when it ends."""

    def __init__(self) -> None:
        self._by_key: dict[_K, set[Wakeup]] = {}

    def wake(self, key: _K, /) -> None:
        """``key`` changed: wake every wait watching it."""
        for wakeup in self._by_key.get(key, ()):
            wakeup.wake()

    def watched(self) -> frozenset[_K]:
        """The keys some wait watches now."""
        return frozenset(self._by_key)

    @contextlib.contextmanager
    def watching(self, keys: collections.abc.Iterable[_K], /) -> collections.abc.Iterator[Wakeup]:
        """A :class:`Wakeup` woken whenever one of ``keys`` is, while the block runs."""
        wakeup = Wakeup()
        watched = set(keys)
        for key in watched:
            self._by_key.setdefault(key, set()).add(wakeup)
        try:
            yield wakeup
        finally:
            for key in watched:
                waiting = self._by_key.get(key)
                if waiting is not None:
                    waiting.discard(wakeup)
                    if not waiting:
                        del self._by_key[key]
