"""A loopback TCP proxy between Berth and its API server that misbehaves on command.

Berth's faults between it and the API server are the network's, so they are injected at the
byte level, below TLS and HTTP: the proxy listens on ``127.0.0.1`` and forwards every
connection to the real API server (its TLS passes through untouched, so nothing about the
client changes but the port in its kubeconfig). What it does to the bytes is its
:class:`Fault`, switched at any time and applied to the connections already open as to new
ones:

- ``NONE``: forward, each chunk no earlier than ``latency`` seconds after it arrived (order is
  kept; the latency may be changed at any time);
- ``STALL``: accept and read, but hold every byte in both directions; healing delivers what
  was held, late — a request sent before the stall may reach the server after it (what a slow
  network does). A connection whose client gives up during the stall is closed with its bytes
  dropped;
- ``DROP``: a black hole: bytes read are discarded, nothing answers. The connections open
  during it are reset when it heals (their streams have holes);
- ``RESET``: every open connection is reset (TCP RST) and so is each new one, at once: a
  partition that the client notices.

:class:`FaultProxy` runs on the caller's event loop; :class:`ThreadedProxy` runs one on its
own thread, for harnesses whose loop blocks (waiting for processes) and for the
``berth chaos proxy`` command. Counters (connections, resets, bytes forwarded and dropped) are
kept for the reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import logging
import socket
import struct
import threading
import typing

from berth.util import wakeups

__all__ = ["Counters", "CountersJson", "Fault", "FaultProxy", "ThreadedProxy"]

logger = logging.getLogger(__name__)

_CHUNK = 64 * 1024


class Fault(enum.Enum):
    """What the proxy does to the bytes (see the module docstring)."""

    NONE = "none"
    STALL = "stall"
    DROP = "drop"
    RESET = "reset"


class CountersJson(typing.TypedDict):
    connections: int
    resets: int
    forwarded_bytes: int
    dropped_bytes: int
    faults: int


@dataclasses.dataclass
class Counters:
    connections: int = 0
    resets: int = 0
    forwarded_bytes: int = 0
    dropped_bytes: int = 0
    faults: int = 0  # faults switched on (every set_fault to something but NONE)

    def as_dict(self) -> CountersJson:
        return {
            "connections": self.connections,
            "resets": self.resets,
            "forwarded_bytes": self.forwarded_bytes,
            "dropped_bytes": self.dropped_bytes,
            "faults": self.faults,
        }


class _Link:
    """One client connection and its upstream connection: two pumps through the fault."""

    def __init__(
        self,
        proxy: FaultProxy,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self._proxy = proxy
        self._client = client
        self._upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.damaged = False  # bytes were dropped: the stream cannot go on after healing

    async def run(self) -> None:
        proxy = self._proxy
        await proxy._flowing_or_dropping()
        if proxy.fault is Fault.RESET:
            self.reset()
            return
        try:
            self._upstream = await asyncio.open_connection(proxy.upstream_host, proxy.upstream_port)
        except OSError as exc:
            logger.info("proxy: upstream %s unreachable: %s", proxy.upstream, exc)
            self.reset()
            return
        self._tasks = [
            asyncio.create_task(self._pump(self._client[0], self._upstream[1])),
            asyncio.create_task(self._pump(self._upstream[0], self._client[1])),
        ]
        # One side closing ends the link: HTTP clients and servers close whole connections.
        one_closed = asyncio.Event()
        for pump in self._tasks:
            pump.add_done_callback(lambda _: one_closed.set())
        await wakeups.first_set(one_closed)
        self.close()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        proxy = self._proxy
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def deliver() -> None:
            while (item := await queue.get()) is not None:
                due, data = item
                while True:
                    await proxy._flowing_or_dropping()
                    delay = due - loop.time()
                    if delay <= 0 or proxy.fault is Fault.DROP:
                        break
                    await wakeups.sleep_or_stop(delay)
                if proxy.fault is Fault.DROP:
                    proxy.counters.dropped_bytes += len(data)
                    self.damaged = True
                    continue
                sink.write(data)
                await sink.drain()
                proxy.counters.forwarded_bytes += len(data)

        writer = asyncio.create_task(deliver())
        try:
            while data := await source.read(_CHUNK):
                queue.put_nowait((loop.time() + proxy.latency, data))
            if proxy.fault is Fault.NONE:
                # Deliver what is still delayed before passing the close on; held bytes of a
                # connection its side gave up on are dropped.
                queue.put_nowait(None)
                await writer
        except (ConnectionError, OSError):
            pass
        finally:
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
                await writer

    def reset(self) -> None:
        """Close both sides with TCP RST (SO_LINGER 0), dropping what is buffered."""
        self._proxy.counters.resets += 1
        for pair in (self._client, self._upstream):
            if pair is None:
                continue
            transport = pair[1].transport
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
        for task in self._tasks:
            task.cancel()

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for pair in (self._client, self._upstream):
            if pair is None:
                continue
            if self.damaged:
                pair[1].transport.abort()
            else:
                pair[1].close()


class FaultProxy:
    """The proxy on the running event loop; see the module docstring."""

    def __init__(self, upstream: str, *, host: str = "127.0.0.1", port: int = 0) -> None:
        upstream_host, _, upstream_port = upstream.rpartition(":")
        if not upstream_host or not upstream_port.isdigit():
            raise ValueError(f"upstream must be HOST:PORT, not {upstream!r}")
        self.upstream = upstream
        self.upstream_host = upstream_host.strip("[]")
        self.upstream_port = int(upstream_port)
        self._host = host
        self._port = port
        self.fault = Fault.NONE
        self.latency = 0.0
        self.counters = Counters()
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed: asyncio.Event | None = None
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        """The port it listens on (known once started)."""
        if self._server is None:
            raise RuntimeError("the proxy is not started")
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> FaultProxy:
        self._changed = asyncio.Event()
        self._server = await asyncio.start_server(self._accept, self._host, self._port)
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.reset()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def set_fault(self, fault: Fault) -> None:
        """Switch the fault, for the connections open and the ones to come."""
        before, self.fault = self.fault, fault
        if fault is not Fault.NONE and fault is not before:
            self.counters.faults += 1
        if fault is Fault.RESET:
            for link in list(self._links):
                link.reset()
        elif fault is Fault.NONE and before is Fault.DROP:
            for link in [link for link in self._links if link.damaged]:
                link.reset()
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()

    def set_latency(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("latency must not be negative")
        self.latency = seconds

    async def _flowing_or_dropping(self) -> None:
        """Return unless the bytes are held (STALL); then wait until they are not."""
        while self.fault is Fault.STALL and self._changed is not None:
            await wakeups.first_set(self._changed)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.counters.connections += 1
        link = _Link(self, (reader, writer))
        self._links.add(link)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await link.run()
        except (ConnectionError, OSError):
            link.close()
        finally:
            self._links.discard(link)
            if task is not None:
                self._tasks.discard(task)


class ThreadedProxy:
    """A :class:`FaultProxy` on a thread of its own, driven from any thread."""

    def __init__(self, upstream: str, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.proxy = FaultProxy(upstream, host=host, port=port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> ThreadedProxy:
        self._thread.start()
        self._call(self.proxy.start())
        return self

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._call(self.proxy.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> ThreadedProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self.proxy.port

    @property
    def counters(self) -> Counters:
        return dataclasses.replace(self.proxy.counters)

    def set_fault(self, fault: Fault) -> None:
        self._call_soon(self.proxy.set_fault, fault)

    def set_latency(self, seconds: float) -> None:
        self._call_soon(self.proxy.set_latency, seconds)

    def _call_soon(self, function: typing.Callable[[typing.Any], None], arg: typing.Any) -> None:
        async def call() -> None:
            function(arg)

        self._call(call())

    def _call(self, coroutine: typing.Coroutine[typing.Any, typing.Any, typing.Any]) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)
