"""One lock per key, kept only while someone holds or waits for it.

Two writes of one object in flight together may land in either order, and the older one
landing last undoes the newer. :class:`KeyLocks` makes the writers of one key (a pod, a
Reservation) take turns while writes of different keys run together, and forgets a key's
lock as soon as nobody holds or waits for it, so it never grows with the objects written.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib

__all__ = ["KeyLocks"]


class KeyLocks:
    """Per-key :class:`asyncio.Lock`; :meth:`hold` takes several in one sorted order, so two
    holders of overlapping keys never wait for each other in a circle."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}  # key -> (lock, its users)

    def __len__(self) -> int:
        """Keys held or waited for now."""
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def hold(self, *keys: str) -> collections.abc.AsyncIterator[None]:
        """Hold the locks of ``keys`` for the block (waiting for each one's holder first)."""
        ordered = sorted(set(keys))
        for key in ordered:
            lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
            self._locks[key] = (lock, users + 1)
        taken: list[asyncio.Lock] = []
        try:
            for key in ordered:
                lock = self._locks[key][0]
                await lock.acquire()
                taken.append(lock)
            yield
        finally:
            for lock in taken:
                lock.release()
            for key in ordered:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)
