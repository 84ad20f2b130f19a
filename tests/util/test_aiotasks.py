"""Ending tasks within a bound (``berth.util.aiotasks.end_within``), in virtual time.

We test these aspects:

- tasks that end when asked are waited for, and nothing is cancelled or reported late;
- a task that ignores the request is reported late, then cancelled after the grace, while the
  others end on their own; finished tasks cost nothing.
"""

from __future__ import annotations

import asyncio
import typing

import looptime
import pytest

from berth.util import aiotasks

pytestmark = pytest.mark.looptime


async def test_tasks_that_stop_when_asked_are_waited_for(
    looptime: looptime.LoopTimeProxy,
) -> None:
    stop = asyncio.Event()
    ended: list[str] = []

    async def obedient(name: str, grace: float) -> None:
        await stop.wait()
        await asyncio.sleep(grace)  # finishing its work
        ended.append(name)

    tasks = [asyncio.create_task(obedient(n, g)) for n, g in (("a", 1), ("b", 2))]
    late: list[asyncio.Task[typing.Any]] = []
    await asyncio.sleep(0)
    stop.set()
    await aiotasks.end_within(tasks, timeout=5, late=late.append)
    assert sorted(ended) == ["a", "b"] and not late
    assert looptime == 2 and not any(t.cancelled() for t in tasks)


async def test_a_task_ignoring_the_stop_is_reported_and_cancelled_after_the_grace(
    looptime: looptime.LoopTimeProxy,
) -> None:
    stop = asyncio.Event()

    async def obedient() -> None:
        await stop.wait()

    async def stubborn() -> None:
        await asyncio.sleep(3600)

    done = asyncio.create_task(asyncio.sleep(0), name="done")
    await done
    tasks = [
        done,
        asyncio.create_task(obedient(), name="obedient"),
        asyncio.create_task(stubborn(), name="stubborn"),
    ]
    late: list[str] = []
    await asyncio.sleep(0)
    stop.set()
    await aiotasks.end_within(tasks, timeout=5, late=lambda t: late.append(t.get_name()))
    assert late == ["stubborn"]
    assert tasks[2].cancelled() and not tasks[1].cancelled()
    assert looptime == 5  # the grace, then the cancellation ends it at once
