"""The emulator's throughput on this machine: creates/s, binds/s and watch events/s.

:func:`run` starts an emulator on its own thread and loop, opens ``watchers`` pod watches over
HTTP, then creates ``pods`` pods and binds each with ``pods/binding`` through a pool of
``concurrency`` HTTP clients (aiohttp, keep-alive), and waits until every watcher has seen every
event (each pod: ADDED, then MODIFIED by its binding). The result is one flat JSON-ready dict;
``berth bench emulator`` prints it. Client and server share the machine (and the interpreter),
so the numbers are what a test bed on this machine can sustain, not a server in isolation.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import typing

import aiohttp

from berth.emulator import server

__all__ = ["Result", "run"]


@dataclasses.dataclass(frozen=True)
class Result:
    """Throughput numbers of one run (rates per second of wall time)."""

    pods: int
    watchers: int
    concurrency: int
    creates_per_second: float
    binds_per_second: float
    watch_events: int
    watch_events_per_second: float
    seconds: float

    def to_json(self) -> dict[str, int | float]:
        return {
            k: round(v, 1) if isinstance(v, float) else v
            for k, v in dataclasses.asdict(self).items()
        }


async def _watch(
    session: aiohttp.ClientSession, *, rv: str, expected: int, seen: list[int]
) -> None:
    index = len(seen)
    seen.append(0)
    params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "600"}
    async with session.get("/api/v1/namespaces/bench/pods", params=params) as response:
        async for _line in response.content:
            seen[index] += 1
            if seen[index] >= expected:
                return


async def _pool(
    count: int, concurrency: int, step: typing.Callable[[int], typing.Awaitable[None]]
) -> float:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            await step(queue.get_nowait())

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def _measure(url: str, *, pods: int, watchers: int, concurrency: int) -> Result:
    connector = aiohttp.TCPConnector(limit=concurrency + watchers + 4)
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:
        async with session.post("/api/v1/namespaces", json={"metadata": {"name": "bench"}}) as made:
            rv = str((await made.json())["metadata"]["resourceVersion"])
        seen: list[int] = []
        watches = [
            asyncio.create_task(_watch(session, rv=rv, expected=2 * pods, seen=seen))
            for _ in range(watchers)
        ]

        async def create(i: int) -> None:
            body = {
                "metadata": {"name": f"p{i}"},
                "spec": {"containers": [{"name": "c", "image": "bench"}]},
            }
            async with session.post("/api/v1/namespaces/bench/pods", json=body) as response:
                if response.status != 201:
                    raise RuntimeError(
                        f"create answered {response.status}: {await response.text()}"
                    )

        async def bind(i: int) -> None:
            body = {"metadata": {"name": f"p{i}"}, "target": {"kind": "Node", "name": f"n{i % 16}"}}
            path = f"/api/v1/namespaces/bench/pods/p{i}/binding"
            async with session.post(path, json=body) as response:
                if response.status != 201:
                    raise RuntimeError(f"bind answered {response.status}: {await response.text()}")

        started = time.perf_counter()
        create_seconds = await _pool(pods, concurrency, create)
        bind_seconds = await _pool(pods, concurrency, bind)
        async with asyncio.timeout(600):  # a bound on the work, not a wait for a condition
            await asyncio.gather(*watches)
        elapsed = time.perf_counter() - started
    events = sum(seen)
    return Result(
        pods=pods,
        watchers=watchers,
        concurrency=concurrency,
        creates_per_second=pods / create_seconds,
        binds_per_second=pods / bind_seconds,
        watch_events=events,
        watch_events_per_second=events / elapsed,
        seconds=elapsed,
    )


def run(*, pods: int = 2000, watchers: int = 10, concurrency: int = 16) -> Result:
    """Start an emulator, measure it with real HTTP clients, stop it."""
    threaded = server.ThreadedEmulator(server.Emulator(history=4 * pods + 100)).start()
    try:
        return asyncio.run(
            _measure(threaded.emulator.url, pods=pods, watchers=watchers, concurrency=concurrency)
        )
    finally:
        threaded.stop()
