"""``berth bench requests``: the client CPU one API request costs Berth.

Every binding and every ``Scheduled`` Event Berth sends is one
:func:`berth.kube.transport.rest.request`; on the ``basic`` shape those two requests are most of
what a pod costs the scheduler's process besides reading its watch events (docs/performance.md,
"Where Berth's CPU goes"). This bench sends ``requests`` bindings, ``in_flight`` at a time as
the binder does, through a connection configured as ``berth run`` configures it
(:func:`berth.kube.transport.clients.connect_async`, a bearer token), to a local aiohttp server
on 127.0.0.1 that answers each with 201 and a Status.

The server runs in a thread of its own with its own event loop, and only the CPU time of the
client's thread is counted (``time.thread_time``): the number is what the request path costs
the sender, whatever the server does, and moves far less with the machine's load than a race
on the real control plane.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import socket
import tempfile
import threading
import time
import typing

import aiohttp.web
import yaml

from berth.kube.transport import clients, rest

__all__ = ["run"]

_WARM_UP = 200  # connections opened and code paths warmed before the clock starts
_ANSWER = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


class _Server:
    """An aiohttp server answering every request 201, on a loop in a thread of its own."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._runner: aiohttp.web.AppRunner | None = None
        self.port = 0
        self._thread = threading.Thread(target=self._serve, name="bench-server", daemon=True)

    def __enter__(self) -> _Server:
        self._thread.start()
        if not self._ready.wait(timeout=30.0):
            raise RuntimeError("the bench's local server did not start within 30 s")
        return self

    def __exit__(self, *_: object) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30.0)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _start(self) -> None:
        async def answer(request: aiohttp.web.Request) -> aiohttp.web.Response:
            await request.read()
            return aiohttp.web.json_response(_ANSWER, status=201)

        app = aiohttp.web.Application()
        app.router.add_route("*", "/{tail:.*}", answer)
        self._runner = aiohttp.web.AppRunner(app, access_log=None)
        await self._runner.setup()
        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))  # a free port, chosen by the kernel
        self.port = int(listening.getsockname()[1])
        await aiohttp.web.SockSite(self._runner, listening).start()


def _kubeconfig(path: pathlib.Path, *, port: int) -> None:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "bench", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "bench", "user": {"token": "bench-token"}}],
                "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
                "current-context": "bench",
            }
        )
    )


def _binding(index: int) -> dict[str, typing.Any]:
    """The body the binder sends (berth.kube.binder)."""
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": f"pod-{index}", "namespace": "bench", "uid": f"uid-{index}"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": f"node-{index % 50}"},
    }


async def _send(kubeconfig: pathlib.Path, *, requests: int, in_flight: int) -> tuple[float, float]:
    """Client-thread CPU seconds and wall seconds for ``requests`` bindings."""
    async with clients.connect_async(kubeconfig=str(kubeconfig)) as connection:
        limit = asyncio.Semaphore(in_flight)

        async def bind(index: int) -> None:
            async with limit:
                await rest.request(
                    connection.api,
                    method="POST",
                    path=f"/api/v1/namespaces/bench/pods/pod-{index}/binding",
                    body=_binding(index),
                    timeout=30.0,
                )

        await asyncio.gather(*(bind(i) for i in range(_WARM_UP)))
        cpu, wall = time.thread_time(), time.perf_counter()
        await asyncio.gather(*(bind(i) for i in range(requests)))
        return time.thread_time() - cpu, time.perf_counter() - wall


def run(*, requests: int = 20_000, in_flight: int = 64) -> dict[str, typing.Any]:
    """Send the bindings and report the client's CPU per request (JSON-ready)."""
    load_before = os.getloadavg()[0]
    with _Server() as server, tempfile.TemporaryDirectory(prefix="berth-bench-") as scratch:
        kubeconfig = pathlib.Path(scratch) / "kubeconfig"
        _kubeconfig(kubeconfig, port=server.port)
        cpu, wall = asyncio.run(_send(kubeconfig, requests=requests, in_flight=in_flight))
    return {
        "bench": "requests",
        "requests": requests,
        "in_flight": in_flight,
        "client_cpu_us_per_request": round(cpu / requests * 1e6, 1),
        "requests_per_second": round(requests / wall, 1) if wall > 0 else None,
        "machine": {
            "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2),
        },
    }
