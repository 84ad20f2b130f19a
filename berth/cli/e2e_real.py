"""``berth bench e2e --real``: Berth against the real kube-scheduler on one real control plane.

:func:`measure` starts a real control plane (:mod:`berth.realcluster`) with ``nodes`` KWOK
nodes, installs Berth's chart and runs ``berth run`` as its own process (as kube-scheduler is),
then races the two schedulers one after the other on the same cluster: ``pods`` pods created
through the API server (``concurrency`` clients) naming kube-scheduler, then as many naming
Berth. kube-scheduler goes first, so Berth places its pods on a cluster already holding the
others. A watch on the API server times each pod from its create to the first event with a node:
``pods_per_second`` is created→bound throughput, with latency percentiles (``stream``). Then
the same again with the scheduler stopped (SIGSTOP) while its pods are created and the clock
started when it resumes (``backlog``): its placement rate, whatever the create rate on this
machine. Both run without leader election (a paused leader would lose its Lease). Neither is
throttled on the client side: Berth has no client rate limit (its binder sends at most
``bind_concurrency`` bindings at once) and kube-scheduler's ``clientConnection.qps`` is raised
from its default 50/s to :data:`KUBE_SCHEDULER_QPS`. One JSON object, with the ratio.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import ssl
import statistics
import sys
import tempfile
import time
import typing
import urllib.error
import urllib.request

import aiohttp
import click

from berth.api import keys
from berth.emulator import kubelets
from berth.realcluster import binaries, controlplane, install, processes

__all__ = ["KUBE_SCHEDULER_QPS", "measure"]

KUBE_SCHEDULER_QPS = 5000.0
_NODE_SHAPE = "cpu=32,memory=128Gi,pods=110"
_SCHEDULERS = (("kube_scheduler", "default-scheduler"), ("berth", keys.DEFAULT_SCHEDULER_NAME))

Object = dict[str, typing.Any]


def _pod(name: str, scheduler: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ],
        },
    }


def _client_ssl(plane: controlplane.ControlPlane) -> ssl.SSLContext:
    pair = plane.authority.client("bench", user="berth-bench", groups=["system:masters"])
    context = ssl.create_default_context(cafile=str(plane.authority.cert))
    context.load_cert_chain(str(pair.cert), str(pair.key))
    return context


async def _race_one(
    session: aiohttp.ClientSession,
    *,
    namespace: str,
    scheduler: str,
    pods: int,
    concurrency: int,
    timeout: float,
    paused: processes.Process | None = None,
) -> Object:
    """Create ``pods`` pods for ``scheduler`` and time them until bound (see the module
    docstring); with ``paused``, that scheduler is stopped while they are created and the clock
    starts when it resumes (a backlog, whatever the create rate)."""
    async with session.post(
        "/api/v1/namespaces", json={"metadata": {"name": namespace}}
    ) as response:
        if response.status != 201:
            raise click.ClickException(f"creating namespace {namespace}: {response.status}")
    async with asyncio.timeout(60):
        while True:  # pods may be created once the controllers made its ServiceAccount
            async with session.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default") as r:
                if r.status == 200:
                    break
            await asyncio.sleep(0.2)
    async with session.get(f"/api/v1/namespaces/{namespace}/pods") as response:
        version = (await response.json())["metadata"]["resourceVersion"]
    sent: dict[str, float] = {}
    bound: dict[str, float] = {}
    everything = asyncio.Event()

    def seen(obj: Object) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if name and (obj.get("spec") or {}).get("nodeName") and name not in bound:
            bound[name] = time.perf_counter()
            if len(bound) >= pods:
                everything.set()

    async def watch() -> None:
        # As an informer does: the API server may end a watch (a slow client on a busy machine
        # is cut off), so it is resumed from the last version seen, relisting when too old.
        resume = version
        while not everything.is_set():
            params = {"watch": "1", "resourceVersion": resume, "allowWatchBookmarks": "true"}
            async with session.get(
                f"/api/v1/namespaces/{namespace}/pods",
                params=params,
                timeout=aiohttp.ClientTimeout(),
            ) as response:
                async for line in response.content:
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        async with session.get(f"/api/v1/namespaces/{namespace}/pods") as r:
                            listed = await r.json()
                        for item in listed.get("items") or ():
                            seen(item)
                        resume = listed["metadata"]["resourceVersion"]
                        break
                    resume = (obj.get("metadata") or {}).get("resourceVersion") or resume
                    seen(obj)
                    if everything.is_set():
                        return

    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(pods):
        queue.put_nowait(index)

    async def create() -> None:
        while not queue.empty():
            name = f"p-{queue.get_nowait():06d}"
            sent[name] = time.perf_counter()
            async with session.post(
                f"/api/v1/namespaces/{namespace}/pods", json=_pod(name, scheduler)
            ) as response:
                if response.status != 201:
                    raise click.ClickException(f"creating a pod: {response.status}")

    watcher = asyncio.create_task(watch())
    if paused is not None:
        paused.signal(signal.SIGSTOP)
    started = time.perf_counter()
    try:
        await asyncio.gather(*(create() for _ in range(concurrency)))
    finally:
        created = time.perf_counter()
        if paused is not None:
            paused.signal(signal.SIGCONT)
    if paused is not None:
        started = created
        sent = dict.fromkeys(sent, created)
    try:
        async with asyncio.timeout(timeout):
            await asyncio.wait(
                [watcher, asyncio.create_task(everything.wait())],
                return_when=asyncio.FIRST_COMPLETED,
            )
    except TimeoutError:
        pass
    if watcher.done():
        watcher.result()  # a watch that failed says why
    finished = max(bound.values(), default=time.perf_counter())
    watcher.cancel()
    latencies = sorted((bound[k] - sent[k]) * 1000 for k in bound if k in sent)
    seconds = finished - started
    return {
        "bound": len(bound),
        "seconds": round(seconds, 3),
        "pods_per_second": round(len(bound) / seconds, 1) if seconds > 0 else 0.0,
        "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
        "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 1) if latencies else None,
    }


async def _race(
    plane: controlplane.ControlPlane,
    berth: processes.Process,
    *,
    pods: int,
    concurrency: int,
    timeout: float,
) -> Object:
    connector = aiohttp.TCPConnector(limit=concurrency + 4, ssl=_client_ssl(plane))
    schedulers = {
        "kube_scheduler": ("default-scheduler", plane.processes["kube-scheduler"]),
        "berth": (keys.DEFAULT_SCHEDULER_NAME, berth),
    }
    results: Object = {label: {} for label in schedulers}
    async with aiohttp.ClientSession(base_url=plane.url, connector=connector) as session:
        for shape in ("stream", "backlog"):
            for label, (name, process) in schedulers.items():
                results[label][shape] = await _race_one(
                    session,
                    namespace=f"{shape}-{label.replace('_', '-')}",
                    scheduler=name,
                    pods=pods,
                    concurrency=concurrency,
                    timeout=timeout,
                    paused=process if shape == "backlog" else None,
                )
    return results


def _berth_ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def measure(
    *, nodes: int = 1000, pods: int = 5000, concurrency: int = 32, timeout: float = 300.0
) -> Object:
    """Run the benchmark (see the module docstring); the JSON-ready result."""
    try:
        found = binaries.find()
    except binaries.BinariesMissing as missing:
        raise click.ClickException(str(missing)) from None
    with tempfile.TemporaryDirectory(prefix="berth-e2e-real-") as directory:
        plane = controlplane.ControlPlane(
            pathlib.Path(directory),
            pools=[kubelets.parse_pool(f"{nodes}x {_NODE_SHAPE} name=node")],
            binaries=found,
            scheduler_qps=KUBE_SCHEDULER_QPS,
        )
        berth: processes.Process | None = None
        try:
            plane.start()
            installation = asyncio.run(install.install(plane, mode="scheduler"))
            port = processes.free_port()
            env = {**os.environ, **installation.environment(http_port=port, identity="bench")}
            # As kube-scheduler here: one instance, no Lease (a paused leader would lose it).
            env["BERTH_LEADER_ELECTION__ENABLED"] = "false"
            berth = processes.Process(
                "berth",
                [
                    str(pathlib.Path(sys.executable).parent / "berth"),
                    "run",
                    "--log-level",
                    "warning",
                ],
                log=plane.log("berth"),
                env=env,
            ).start()
            processes.wait_until(
                "berth's caches", lambda: _berth_ready(port), timeout=120.0, watch=[berth]
            )
            raced = asyncio.run(
                _race(plane, berth, pods=pods, concurrency=concurrency, timeout=timeout)
            )
        except processes.ComponentFailed as failed:
            raise click.ClickException(str(failed)) from None
        finally:
            if berth is not None:
                berth.stop()
            plane.stop()
    kube, ours = raced["kube_scheduler"], raced["berth"]

    def ratio(shape: str) -> float | None:
        theirs = kube[shape]["pods_per_second"]
        return round(ours[shape]["pods_per_second"] / theirs, 2) if theirs else None

    return {
        "scenario": "e2e-real",
        "kubernetes": binaries.KUBERNETES_VERSION,
        "nodes": nodes,
        "pods": pods,
        "kube_scheduler_qps": KUBE_SCHEDULER_QPS,
        "kube_scheduler": kube,
        "berth": ours,
        "ratio": {"stream": ratio("stream"), "backlog": ratio("backlog")},
    }
