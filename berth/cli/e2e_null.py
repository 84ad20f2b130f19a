"""The null scheduler: binds each of its pods to the next node, round-robin, with no checks.

``berth bench e2e --real`` runs it beside kube-scheduler and Berth, as its own process, to
measure the ceiling: the rate at which the API server, etcd and KWOK on this machine let pods be
created, bound and started, whatever a scheduler decides. It lists the nodes once, watches the
unbound pods naming it (``spec.schedulerName``), and binds each as it appears to the next node
in name order, with at most ``--concurrency`` bindings in flight and no client rate limit (the
same client settings as Berth's binder: ``bind_concurrency`` 64, no rate limit). It checks
nothing: not capacity, not constraints, not gangs. A binding that fails is retried a few times,
then reported on stderr.

Run as ``python -m berth.cli.e2e_null --server URL --ca CA --cert CERT --key KEY --scheduler
NAME`` (without ``--ca``: plain HTTP); it prints one line when it watches, then runs until it
is terminated.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import signal
import ssl
import sys
import typing

import aiohttp

__all__ = ["main", "run"]

Object = dict[str, typing.Any]

_ATTEMPTS = 5


async def _nodes(session: aiohttp.ClientSession) -> list[str]:
    async with session.get("/api/v1/nodes") as response:
        listed = await response.json()
    return sorted(item["metadata"]["name"] for item in listed.get("items") or ())


async def run(
    server: str, context: ssl.SSLContext | None, *, scheduler: str, concurrency: int
) -> None:
    """Bind ``scheduler``'s pods until cancelled (see the module docstring); ``context``
    authenticates to an HTTPS ``server`` (None: plain HTTP, as the emulator serves)."""
    connector = aiohttp.TCPConnector(limit=concurrency + 2, ssl=context if context else True)
    async with aiohttp.ClientSession(base_url=server, connector=connector) as session:
        nodes = await _nodes(session)
        if not nodes:
            raise SystemExit("null scheduler: the cluster has no nodes")
        turn = itertools.cycle(nodes)
        pending: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        queued: set[tuple[str, str]] = set()
        selector = f"spec.schedulerName={scheduler},spec.nodeName="

        def offer(obj: Object) -> None:
            meta = obj.get("metadata") or {}
            key = (str(meta.get("namespace")), str(meta.get("name")))
            if key not in queued and not (obj.get("spec") or {}).get("nodeName"):
                queued.add(key)
                pending.put_nowait(key)

        async def relist() -> str:
            params = {"fieldSelector": selector}
            async with session.get("/api/v1/pods", params=params) as response:
                listed = await response.json()
            for item in listed.get("items") or ():
                offer(item)
            return str(listed["metadata"]["resourceVersion"])

        async def watch(version: str) -> None:
            while True:
                params = {
                    "watch": "1",
                    "fieldSelector": selector,
                    "resourceVersion": version,
                    "allowWatchBookmarks": "true",
                }
                async with session.get(
                    "/api/v1/pods", params=params, timeout=aiohttp.ClientTimeout()
                ) as response:
                    async for line in response.content:
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            version = await relist()
                            break
                        version = (obj.get("metadata") or {}).get("resourceVersion") or version
                        if event.get("type") == "ADDED":
                            offer(obj)

        async def bind() -> None:
            while True:
                namespace, name = await pending.get()
                node = next(turn)
                body = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name, "namespace": namespace},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                }
                path = f"/api/v1/namespaces/{namespace}/pods/{name}/binding"
                for attempt in range(_ATTEMPTS):
                    try:
                        async with session.post(path, json=body) as response:
                            # 201 bound; 409 bound already; 404 deleted: nothing more to do.
                            if response.status in (201, 409, 404):
                                break
                            reason = f"{response.status} {await response.text()}"
                    except aiohttp.ClientError as exc:
                        reason = str(exc)
                    if attempt == _ATTEMPTS - 1:
                        print(
                            f"null scheduler: binding {namespace}/{name}: {reason}", file=sys.stderr
                        )
                    await asyncio.sleep(0.05 * (attempt + 1))

        version = await relist()
        print(f"null scheduler: watching pods of {scheduler} on {len(nodes)} nodes", flush=True)
        await asyncio.gather(watch(version), *(bind() for _ in range(concurrency)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m berth.cli.e2e_null", description=__doc__)
    parser.add_argument("--server", required=True)
    parser.add_argument("--ca", help="the server's CA (HTTPS)")
    parser.add_argument("--cert", help="client certificate (HTTPS)")
    parser.add_argument("--key", help="its key")
    parser.add_argument("--scheduler", required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)
    context: ssl.SSLContext | None = None
    if args.ca:
        context = ssl.create_default_context(cafile=args.ca)
        if args.cert:
            context.load_cert_chain(args.cert, args.key)

    async def serve() -> None:
        task = asyncio.create_task(
            run(args.server, context, scheduler=args.scheduler, concurrency=args.concurrency)
        )
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
