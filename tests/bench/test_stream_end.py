"""A race's watch, stopped, leaves no connection open for the garbage collector to find.

The bench runs in-process in the real-cluster tier. Its pod watches stream over TLS, and a
TLS connection given up on closes only when the server answers the client's close_notify; an
event loop closed before that leaves the socket open, and the garbage collector then reports
an unclosed transport in whatever test it happens to run. Here the server never answers, the
worst case: stopping the tracker still closes its connection before the loop ends.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import gc
import json
import pathlib
import socket
import ssl
import threading
import warnings

import aiohttp
import pytest

from berth.cli import e2e_race
from berth.realcluster import pki


class _SilentTLSServer:
    """Answers a pod list, then streams one watch event and goes silent: it neither sends
    more nor answers a close_notify (nor reads), until the test ends."""

    def __init__(self, directory: pathlib.Path) -> None:
        authority = pki.Authority(directory)
        pair = authority.serving("api", hosts=["127.0.0.1"])
        self.ca = str(authority.cert)
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(str(pair.cert), str(pair.key))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self._listener.getsockname()[1]}"
        self._done = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []

    def start(self) -> _SilentTLSServer:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._done.set()
        self._listener.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.close()
        for thread in self._threads:
            thread.join(10)

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                raw, _ = self._listener.accept()
            except OSError:
                return
            conn = self._context.wrap_socket(raw, server_side=True)
            self._conns.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            reader = conn.makefile("rb")
            while not self._done.is_set():
                request = reader.readline()
                if not request:
                    return
                while reader.readline() not in (b"\r\n", b""):
                    pass
                if b"watch=1" not in request:
                    body = json.dumps({"items": [], "metadata": {"resourceVersion": "1"}})
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
                    )
                    continue
                event = (
                    json.dumps(
                        {
                            "type": "ADDED",
                            "object": {"metadata": {"name": "p0"}, "spec": {"nodeName": "n0"}},
                        }
                    ).encode()
                    + b"\n"
                )
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                    + f"{len(event):x}\r\n".encode()
                    + event
                    + b"\r\n"
                )
                self._done.wait()  # silent: no more events, no close_notify back
                return


@pytest.fixture
def silent_server(tmp_path: pathlib.Path) -> collections.abc.Iterator[_SilentTLSServer]:
    server = _SilentTLSServer(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


def test_a_stopped_tracker_closes_its_watch_before_the_loop_ends(
    silent_server: _SilentTLSServer,
) -> None:
    context = ssl.create_default_context(cafile=silent_server.ca)

    async def race() -> dict[str, float]:
        connector = aiohttp.TCPConnector(ssl=context)
        async with aiohttp.ClientSession(base_url=silent_server.url, connector=connector) as s:
            tracker = await e2e_race.Tracker(s, "bench").start()
            async with asyncio.timeout(30.0):
                while "p0" not in tracker.bound:
                    await tracker.changed.wait()
                    tracker.changed.clear()
            await tracker.stop()
            return tracker.bound

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bound = asyncio.run(race())
        gc.collect()
    assert list(bound) == ["p0"]
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == []
