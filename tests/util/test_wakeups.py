"""The wait/wake toolkit (``berth.util.wakeups``), in virtual time (looptime).

We test these aspects:

- ``first_set``: returns at once when a flag is set already, when the first of several is set,
  or at its timeout (saying whether one was set), and leaves no waiter task behind;
- ``sleep_or_stop``: sleeps its time, is cut short by the stop, and says which; without a
  stop it sleeps its time and only a cancellation ends it sooner;
- ``run_until``: work that ends ends it; a stop cancels the work; the work's failure is raised;
  no task is left behind either way;
- ``Wakeup``: a wake before the sleep is not lost, many wakes count as one and are consumed by
  the sleep, ``clear`` drops one, a stop or a timeout ends the sleep unwoken;
- ``Wakeups``: a wait watching some keys is woken by any of them and by no other, several waits
  on one key are all woken, and a key nobody watches any more is forgotten.
"""

from __future__ import annotations

import asyncio

import looptime
import pytest

from berth.util import wakeups

pytestmark = pytest.mark.looptime


def _other_tasks() -> set[asyncio.Task[object]]:
    return asyncio.all_tasks() - {asyncio.current_task()}


async def test_first_set_returns_when_the_first_flag_is_set(
    looptime: looptime.LoopTimeProxy,
) -> None:
    a, b = asyncio.Event(), asyncio.Event()
    asyncio.get_running_loop().call_later(3, b.set)
    assert await wakeups.first_set(a, b, timeout=10)
    assert looptime == 3 and b.is_set() and not a.is_set()
    assert not _other_tasks()  # the waiters it started are gone


async def test_first_set_times_out_unset_and_returns_at_once_when_set(
    looptime: looptime.LoopTimeProxy,
) -> None:
    flag = asyncio.Event()
    assert not await wakeups.first_set(flag, timeout=5)
    assert looptime == 5
    assert not await wakeups.first_set(flag, timeout=0)
    flag.set()
    assert await wakeups.first_set(flag, timeout=5)
    assert looptime == 5
    assert not _other_tasks()


async def test_sleep_or_stop_sleeps_or_is_cut_short(looptime: looptime.LoopTimeProxy) -> None:
    stop = asyncio.Event()
    assert not await wakeups.sleep_or_stop(2, stop=stop)
    assert looptime == 2
    asyncio.get_running_loop().call_later(1, stop.set)
    assert await wakeups.sleep_or_stop(60, stop=stop)
    assert looptime == 3


async def test_sleep_or_stop_without_a_stop_is_a_plain_delay(
    looptime: looptime.LoopTimeProxy,
) -> None:
    assert not await wakeups.sleep_or_stop(4)
    assert looptime == 4
    sleeper = asyncio.create_task(wakeups.sleep_or_stop(60))
    asyncio.get_running_loop().call_later(1, sleeper.cancel)  # only cancelling cuts it short
    with pytest.raises(asyncio.CancelledError):
        await sleeper
    assert looptime == 5
    assert not await wakeups.sleep_or_stop(-1)  # a delay already due does not sleep
    assert looptime == 5


async def test_run_until_ends_with_the_work_or_cancels_it_at_the_stop(
    looptime: looptime.LoopTimeProxy,
) -> None:
    stop = asyncio.Event()
    cancelled: list[str] = []

    async def work(seconds: float) -> None:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cancelled.append("work")
            raise

    assert not await wakeups.run_until(work(3), stop=stop, name="short")
    assert looptime == 3 and not cancelled
    asyncio.get_running_loop().call_later(2, stop.set)
    assert await wakeups.run_until(work(100), stop=stop, name="long")
    assert looptime == 5 and cancelled == ["work"]
    assert not _other_tasks()


async def test_run_until_raises_the_failure_of_the_work() -> None:
    async def failing() -> None:
        raise ValueError("watch broke")

    with pytest.raises(ValueError, match="watch broke"):
        await wakeups.run_until(failing(), stop=asyncio.Event(), name="failing")
    assert not _other_tasks()


async def test_a_wake_before_the_sleep_is_kept_and_many_count_as_one(
    looptime: looptime.LoopTimeProxy,
) -> None:
    wakeup = wakeups.Wakeup()
    wakeup.wake()
    wakeup.wake()
    assert wakeup.woken
    assert await wakeup.sleep(timeout=10)  # at once: the wake came first
    assert looptime == 0 and not wakeup.woken
    assert not await wakeup.sleep(timeout=10)  # consumed: the second wake was the same one
    assert looptime == 10


async def test_clear_drops_a_wake_and_a_later_one_still_wakes(
    looptime: looptime.LoopTimeProxy,
) -> None:
    wakeup = wakeups.Wakeup()
    wakeup.wake()
    wakeup.clear()
    asyncio.get_running_loop().call_later(4, wakeup.wake)
    assert await wakeup.sleep(timeout=10)
    assert looptime == 4


async def test_a_stop_ends_the_sleep_unwoken(looptime: looptime.LoopTimeProxy) -> None:
    wakeup, stop = wakeups.Wakeup(), asyncio.Event()
    asyncio.get_running_loop().call_later(2, stop.set)
    assert not await wakeup.sleep(stop=stop)
    assert looptime == 2
    assert not _other_tasks()


async def test_waits_are_woken_by_the_keys_they_watch_only(
    looptime: looptime.LoopTimeProxy,
) -> None:
    registry: wakeups.Wakeups[str] = wakeups.Wakeups()
    woken: list[str] = []

    async def wait(name: str, keys: list[str]) -> None:
        with registry.watching(keys) as wakeup:
            if await wakeup.sleep(timeout=100):
                woken.append(name)

    waits = [
        asyncio.create_task(wait("first", ["pod-a", "claim-b"])),
        asyncio.create_task(wait("second", ["claim-b"])),
        asyncio.create_task(wait("third", ["pod-c"])),
    ]
    await asyncio.sleep(1)
    assert registry.watched() == {"pod-a", "claim-b", "pod-c"}
    registry.wake("nobody-watches-this")
    registry.wake("claim-b")
    await asyncio.gather(*waits)
    assert sorted(woken) == ["first", "second"]  # "third" timed out
    assert looptime == 100  # the waits began at 0
    assert registry.watched() == frozenset()  # every wait's keys went with it
