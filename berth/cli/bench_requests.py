"""``berth bench requests``: the client CPU one API request costs Berth.

Every binding and every ``Scheduled`` Event Berth sends is one
:func:`berth.kube.transport.rest.request`; on the ``basic`` shape those two requests are most of
what a pod costs the scheduler's process besides reading its watch events (docs/performance.md,
"Where Berth's CPU goes"). This bench sends ``requests`` bindings, ``in_flight`` at a time as
the binder does, through a connection configured as ``berth run`` configures it
(:func:`berth.kube.transport.clients.connect_async`, a bearer token), to a local aiohttp server
on 127.0.0.1 that answers each with 201 and a Status.

The server runs in a process of its own (one event loop per process), and only the CPU time of
the client's thread is counted (``time.thread_time``): the number is what the request path costs
the sender, whatever the server does, and moves far less with the machine's load than a race
on the real control plane.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import os
import pathlib
import socket
import sys
import tempfile
import time
import typing

import aiohttp.web
import yaml

from berth.api import core
from berth.kube.transport import clients, rest
from berth.util import children, wakeups

__all__ = ["MachineLoad", "RequestsResult", "run"]

_WARM_UP = 200  # connections opened and code paths warmed before the clock starts
_ANSWER = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


async def _answer_forever() -> None:
    async def answer(request: aiohttp.web.Request) -> aiohttp.web.Response:
        await request.read()
        return aiohttp.web.json_response(_ANSWER, status=201)

    app = aiohttp.web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = aiohttp.web.AppRunner(app, access_log=None)
    await runner.setup()
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))  # a free port, chosen by the kernel
    await aiohttp.web.SockSite(runner, listening).start()
    print(f"port {listening.getsockname()[1]}", flush=True)
    await wakeups.first_set(asyncio.Event())  # never set: until the bench terminates us


def serve() -> None:
    """The bench's stand-in API server: answers every request 201 until terminated."""
    asyncio.run(_answer_forever())


@contextlib.contextmanager
def _server() -> collections.abc.Iterator[int]:
    """The stand-in API server in a process of its own, as an API server is: its port."""
    argv = [sys.executable, "-c", "from berth.cli import bench_requests; bench_requests.serve()"]
    with children.announcing(argv) as line:
        if not line.startswith("port "):
            raise RuntimeError(f"the bench's local server did not start: {line.strip()!r}")
        yield int(line.split()[1])


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


def _binding(index: int) -> core.Binding:
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


class MachineLoad(typing.TypedDict):
    """The one-minute load average before and after: a busy machine is said, not hidden."""

    load_before: float
    load_after: float


class RequestsResult(typing.TypedDict):
    """The JSON object ``berth bench requests`` prints."""

    bench: str
    requests: int
    in_flight: int
    client_cpu_us_per_request: float
    requests_per_second: float | None
    machine: MachineLoad


def run(*, requests: int = 20_000, in_flight: int = 64) -> RequestsResult:
    """Send the bindings and report the client's CPU per request (JSON-ready)."""
    load_before = os.getloadavg()[0]
    with _server() as port, tempfile.TemporaryDirectory(prefix="berth-bench-") as scratch:
        kubeconfig = pathlib.Path(scratch) / "kubeconfig"
        _kubeconfig(kubeconfig, port=port)
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
