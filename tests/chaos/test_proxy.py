"""The fault proxy (``berth.chaos.proxy``) between a client and an echo server on loopback.

We test these aspects:

- with no fault, bytes go through both ways, and no earlier than the latency set;
- a stall holds the bytes of connections open and new, and healing delivers them in order;
- a drop loses the bytes, and the connections it damaged are reset when it heals;
- a reset resets every open connection and each new one, until healed;
- a bad upstream address is refused at once.
"""

from __future__ import annotations

import asyncio
import collections.abc
import time

import pytest

from berth.chaos import proxy as fault_proxy

pytestmark = pytest.mark.timeout(60)

QUIET = 0.3  # how long "nothing arrives" is watched for


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


@pytest.fixture
async def proxy() -> collections.abc.AsyncIterator[fault_proxy.FaultProxy]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    running = await fault_proxy.FaultProxy(f"127.0.0.1:{port}").start()
    try:
        yield running
    finally:
        await running.close()
        server.close()
        await server.wait_closed()


async def _connect(
    proxy: fault_proxy.FaultProxy,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def _roundtrip(
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter], data: bytes
) -> bytes:
    reader, writer = connection
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(len(data)), 10)


async def _silent(reader: asyncio.StreamReader) -> bool:
    try:
        await asyncio.wait_for(reader.read(1), QUIET)
    except TimeoutError:
        return True
    return False


async def _reset(reader: asyncio.StreamReader) -> bool:
    try:
        data = await asyncio.wait_for(reader.read(1), 10)
    except ConnectionResetError:
        return True
    return data == b""  # closed at once: the RST can surface as an end of stream


async def test_bytes_go_through_no_earlier_than_the_latency(
    proxy: fault_proxy.FaultProxy,
) -> None:
    connection = await _connect(proxy)
    assert await _roundtrip(connection, b"hello") == b"hello"
    proxy.set_latency(0.2)
    started = time.monotonic()
    assert await _roundtrip(connection, b"slow") == b"slow"
    assert time.monotonic() - started >= 0.4  # there and back
    assert proxy.counters.forwarded_bytes == 2 * len(b"helloslow")
    connection[1].close()


async def test_a_stall_holds_bytes_until_it_heals(proxy: fault_proxy.FaultProxy) -> None:
    before = await _connect(proxy)
    assert await _roundtrip(before, b"a") == b"a"
    proxy.set_fault(fault_proxy.Fault.STALL)
    during = await _connect(proxy)  # accepted while stalled
    for _, writer in (before, during):
        writer.write(b"held-1 held-2")
        await writer.drain()
    assert await _silent(before[0])
    assert await _silent(during[0])
    proxy.set_fault(fault_proxy.Fault.NONE)
    for reader, _ in (before, during):
        assert await asyncio.wait_for(reader.readexactly(13), 10) == b"held-1 held-2"
    assert proxy.counters.faults == 1
    for _, writer in (before, during):
        writer.close()


async def test_a_drop_loses_bytes_and_resets_what_it_damaged(
    proxy: fault_proxy.FaultProxy,
) -> None:
    damaged = await _connect(proxy)
    assert await _roundtrip(damaged, b"a") == b"a"
    proxy.set_fault(fault_proxy.Fault.DROP)
    damaged[1].write(b"lost")
    await damaged[1].drain()
    assert await _silent(damaged[0])
    proxy.set_fault(fault_proxy.Fault.NONE)
    assert await _reset(damaged[0])
    assert proxy.counters.dropped_bytes == len(b"lost")
    fresh = await _connect(proxy)
    assert await _roundtrip(fresh, b"again") == b"again"
    fresh[1].close()


async def test_a_reset_resets_open_and_new_connections_until_healed(
    proxy: fault_proxy.FaultProxy,
) -> None:
    open_one = await _connect(proxy)
    assert await _roundtrip(open_one, b"a") == b"a"
    proxy.set_fault(fault_proxy.Fault.RESET)
    assert await _reset(open_one[0])
    new_one = await _connect(proxy)
    assert await _reset(new_one[0])
    proxy.set_fault(fault_proxy.Fault.NONE)
    healed = await _connect(proxy)
    assert await _roundtrip(healed, b"back") == b"back"
    assert proxy.counters.resets >= 2
    healed[1].close()


def test_a_bad_upstream_is_refused() -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        fault_proxy.FaultProxy("localhost")
