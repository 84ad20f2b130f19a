"""Small asyncio helpers the operator's long-running parts share.

Time here is the event loop's (``asyncio`` sleeps and timeouts), never the wall clock, so that
tests run these helpers under ``looptime`` in virtual seconds.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import logging
import typing

__all__ = ["cancel_and_wait", "on_loop", "sleep_or_stop"]

_T = typing.TypeVar("_T")

logger = logging.getLogger(__name__)


async def sleep_or_stop(seconds: float, *, stop: asyncio.Event) -> bool:
    """Sleep ``seconds`` or until ``stop`` is set, whichever is first; True if stopped."""
    if stop.is_set():
        return True
    if seconds <= 0:
        return False
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
    return stop.is_set()


async def cancel_and_wait(task: asyncio.Task[object], *, timeout: float) -> bool:
    """Cancel ``task`` and wait up to ``timeout`` seconds for it to end; True if it ended.

    The task's own exception (other than the cancellation) is logged, not raised: the caller
    is shutting it down and has nothing better to do with it.
    """
    if not task.done():
        task.cancel()
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        logger.error("task %s did not stop within %ss of being cancelled", task.get_name(), timeout)
        return False
    if not task.cancelled() and task.exception() is not None:
        logger.error("task %s failed while stopping", task.get_name(), exc_info=task.exception())
    return True


async def on_loop(
    home: asyncio.AbstractEventLoop | None,
    call: collections.abc.Coroutine[typing.Any, typing.Any, _T],
) -> _T:
    """Run ``call`` on ``home`` (another thread's loop; None: this one) and wait for it here:
    Kopf's handlers run on Kopf's loop, the fenced API client and the scheduler on the
    operator's."""
    if home is None or home is asyncio.get_running_loop():
        return await call
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, home))
