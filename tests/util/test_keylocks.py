"""``berth.util.keylocks``: the writers of one key take turns, of different keys do not.

We test these aspects:

- two holders of one key never overlap, and the second runs after the first, in order;
- holders of different keys run together;
- holders of overlapping key sets, taken in opposite orders, both finish (no circular wait);
- a key's lock is forgotten once nobody holds or waits for it, also after a failure.
"""

from __future__ import annotations

import asyncio

import pytest

from berth.util import keylocks


async def test_holders_of_one_key_take_turns_in_order() -> None:
    locks = keylocks.KeyLocks()
    seen: list[str] = []
    inside = 0

    async def write(name: str) -> None:
        nonlocal inside
        async with locks.hold("default/p"):
            inside += 1
            assert inside == 1
            seen.append(f"{name} start")
            await asyncio.sleep(0.01)
            seen.append(f"{name} end")
            inside -= 1

    await asyncio.gather(write("older"), write("newer"), write("newest"))
    assert seen == [
        "older start",
        "older end",
        "newer start",
        "newer end",
        "newest start",
        "newest end",
    ]
    assert len(locks) == 0


async def test_holders_of_different_keys_run_together() -> None:
    locks = keylocks.KeyLocks()
    both = asyncio.Barrier(2)

    async def write(key: str) -> None:
        async with locks.hold(key):
            await asyncio.wait_for(both.wait(), 5)  # fails unless the other is inside too

    await asyncio.gather(write("default/a"), write("default/b"))
    assert len(locks) == 0


async def test_overlapping_keys_in_opposite_orders_both_finish() -> None:
    locks = keylocks.KeyLocks()
    done: list[str] = []

    async def write(name: str, *keys: str) -> None:
        async with locks.hold(*keys):
            await asyncio.sleep(0.01)
            done.append(name)

    await asyncio.wait_for(
        asyncio.gather(write("ab", "a", "b"), write("ba", "b", "a"), write("b", "b")), 5
    )
    assert sorted(done) == ["ab", "b", "ba"]
    assert len(locks) == 0


async def test_a_failed_holder_releases_and_forgets_its_key() -> None:
    locks = keylocks.KeyLocks()
    with pytest.raises(RuntimeError):
        async with locks.hold("default/p"):
            assert len(locks) == 1
            raise RuntimeError("the write failed")
    assert len(locks) == 0
    async with locks.hold("default/p"):  # not left locked
        pass
