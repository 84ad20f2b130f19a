"""``berth bench e2e``: pods created through the API server until Berth bound them all.

:func:`measure` starts the API server emulator as a separate process (``berth emulator``, as
an API server is its own process: the two do not share one interpreter lock) with ``nodes``
simulated nodes, installs Berth's CRDs, runs the operator in this process (leader election on,
as in production), waits for its caches, then creates ``pods`` pods over HTTP (``concurrency``
clients) and waits until the operator's binder has had every binding confirmed. The clock runs
from the first create to the last confirmed binding: ``pods_per_second`` is created→bound
throughput, with per-pod latency percentiles (create sent → binding confirmed). Finally one
list checks that no pod was left unbound. One JSON object is printed; the target is 500 pods/s.

With ``backlog``, the cost of a cycle with nothing new in the live operator: after the pods are
bound, ``backlog`` pods too big for any node are created; once the operator has told why each
waits and the cluster is still, the operator's own ``berth_session_duration_seconds`` histogram
(read from its ``/metrics``) over ``idle_seconds`` gives the mean idle cycle (``idle_cycle_ms``)
and how many cycles ran (queueing hints skip a cycle that could only repeat the last one;
``BERTH_QUEUEING_HINTS=false`` measures without them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import typing

import aiohttp
import click

from berth.api import core, crds
from berth.kube.binder import binding
from berth.operator import main, scheduling, settings
from berth.scheduler.plugins import registry as plugin_registry
from berth.util import children, wakeups

__all__ = ["E2eResult", "IdleCycles", "command", "measure"]

logger = logging.getLogger(__name__)

_NAMESPACE = "default"
_NODE_SHAPE = "cpu=32,memory=128Gi,pods=110"


_SHAPES = (
    "basic",
    "anti-affinity",
    "spread",
    "preferred-affinity",
    "gang",
    "unschedulable-backlog",
    "dra",
)
"""``--shape`` with ``--real`` (:mod:`berth.cli.e2e_shapes`; named here so the CLI loads
without the real control plane's dependencies)."""

_TOO_BIG = "64"  # cpu: more than a node has


class IdleCycles(typing.TypedDict):
    """With ``backlog``: the live operator's cycles with nothing new to do."""

    backlog: int
    idle_seconds: float
    idle_cycles: int
    idle_cycle_ms: float | None  # None: no cycle ran


class E2eResult(typing.TypedDict):
    """The JSON object ``berth bench e2e`` prints (without ``--real``)."""

    nodes: int
    scenario: str
    pods: int
    bound: int
    unbound: int
    seconds: float
    pods_per_second: float
    creates_per_second: float
    p50_ms: float | None
    p99_ms: float | None
    bind_failures: int
    backlog: typing.NotRequired[int]
    idle_seconds: typing.NotRequired[float]
    idle_cycles: typing.NotRequired[int]
    idle_cycle_ms: typing.NotRequired[float | None]


def _pod(index: int, *, cpu: str = "100m", prefix: str = "e2e") -> core.Pod:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{prefix}-{index:06d}", "namespace": _NAMESPACE},
        "spec": {
            "schedulerName": settings.DEFAULT_SCHEDULER_NAME,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "c",
                    "image": "busybox:1.36",
                    "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}},
                }
            ],
        },
    }


@contextlib.contextmanager
def _emulator_process(
    directory: pathlib.Path, *, nodes: int
) -> typing.Iterator[tuple[str, pathlib.Path]]:
    kubeconfig = directory / "kubeconfig"
    argv = [
        sys.executable,
        "-c",
        "from berth.cli.main import main; main()",
        "emulator",
        "--kubeconfig",
        str(kubeconfig),
        "--nodes",
        f"{nodes}x {_NODE_SHAPE} name=node",
    ]
    with children.announcing(argv, stderr=subprocess.DEVNULL) as line:
        if "serving" not in line:
            raise click.ClickException(f"the emulator did not start: {line.strip()!r}")
        url = line.split("serving", 1)[1].split()[0]
        yield url, kubeconfig


async def _install_crds(session: aiohttp.ClientSession) -> None:
    for crd in crds.render_all().values():
        async with session.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd
        ) as response:
            if response.status not in (200, 201, 409):
                raise click.ClickException(f"installing CRDs: {response.status}")


async def _create_all(
    session: aiohttp.ClientSession,
    *,
    pods: int,
    concurrency: int,
    sent: dict[str, float],
    make: typing.Callable[[int], core.Pod] = _pod,
) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(pods):
        queue.put_nowait(index)

    async def worker() -> None:
        while not queue.empty():
            index = queue.get_nowait()
            body = make(index)
            sent[f"{_NAMESPACE}/{body['metadata']['name']}"] = time.perf_counter()
            async with session.post(f"/api/v1/namespaces/{_NAMESPACE}/pods", json=body) as r:
                if r.status != 201:
                    raise click.ClickException(f"creating a pod: {r.status} {await r.text()}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _sessions(session: aiohttp.ClientSession, port: int) -> tuple[float, float]:
    """The operator's session histogram: (sum of seconds, count)."""
    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
        text = await response.text()
    found = {"sum": 0.0, "count": 0.0}
    for line in text.splitlines():
        for part in found:
            if line.startswith(f"berth_session_duration_seconds_{part} "):
                found[part] = float(line.split()[1])
    return found["sum"], found["count"]


async def _still(parts: scheduling.Parts, *, cycles: int = 3) -> None:
    """Return once ``cycles`` cycles in a row saw the operator's cache unchanged: the waiting
    pods' conditions written and their echoes seen."""
    seen: list[int | None] = []
    last: object = None
    while len(seen) < cycles or len(set(seen[-cycles:])) > 1:
        await wakeups.sleep_or_stop(0.2)
        taken = parts.source.last
        if taken is None or taken is last:
            continue
        last = taken
        seen.append(taken.changes.seq if taken.changes is not None else None)


async def _idle_cycles(
    session: aiohttp.ClientSession,
    parts: scheduling.Parts,
    *,
    port: int,
    backlog: int,
    concurrency: int,
    idle_seconds: float,
    timeout: float,
) -> IdleCycles:
    """Create ``backlog`` pods no node fits, wait until each has its reason and the cluster
    is still, then read the idle cycles off the operator's metrics."""
    await _create_all(
        session,
        pods=backlog,
        concurrency=concurrency,
        sent={},
        make=lambda index: _pod(index, cpu=_TOO_BIG, prefix="waiting"),
    )

    waiting = [
        f"{_NAMESPACE}/{_pod(i, prefix='waiting')['metadata']['name']}" for i in range(backlog)
    ]

    def told() -> int:
        result = parts.sink.last_result
        return sum(1 for key in waiting if key in result.pod_why) if result else 0

    async with asyncio.timeout(timeout):
        while told() < backlog:
            await wakeups.sleep_or_stop(0.5)
        await _still(parts)
    before = await _sessions(session, port)
    await wakeups.sleep_or_stop(idle_seconds)  # the window the cycles are counted over
    after = await _sessions(session, port)
    cycles = after[1] - before[1]
    return {
        "backlog": backlog,
        "idle_seconds": idle_seconds,
        "idle_cycles": int(cycles),
        "idle_cycle_ms": round((after[0] - before[0]) / cycles * 1000, 2) if cycles else None,
    }


async def _measure(
    url: str,
    kubeconfig: pathlib.Path,
    *,
    nodes: int,
    pods: int,
    concurrency: int,
    timeout: float,
    backlog: int = 0,
    idle_seconds: float = 10.0,
) -> E2eResult:
    built: list[scheduling.Parts] = []
    serving: list[int] = []
    bound_at: dict[str, float] = {}
    all_bound = asyncio.Event()

    def on_bound(outcome: binding.BindOutcome) -> None:
        if outcome.bound and outcome.key not in bound_at:
            bound_at[outcome.key] = time.perf_counter()
            if len(bound_at) >= pods:
                all_bound.set()

    def on_parts(parts: scheduling.Parts) -> None:
        built.append(parts)

    config = settings.Settings(
        kubeconfig=kubeconfig,
        namespace=_NAMESPACE,
        http_host="127.0.0.1",
        # The bench reads its own operator's /metrics; the emulator reviews no tokens.
        http_authorization=False,
        http_port=0,
        log_level="warning",
        leader_election={"identity": "berth-bench"},
    )
    stop = asyncio.Event()
    async with aiohttp.ClientSession(
        base_url=url, connector=aiohttp.TCPConnector(limit=concurrency)
    ) as session:
        await _install_crds(session)
        operator = asyncio.create_task(
            main.run(
                config,
                stop=stop,
                leader_components=scheduling.with_registry(
                    plugin_registry.in_tree_registry(), on_parts=on_parts, on_bound=on_bound
                ),
                on_serving=serving.append,
            )
        )
        try:
            async with asyncio.timeout(60):
                while not built or not built[0].informers.synced.is_set():
                    if operator.done():
                        raise click.ClickException("the operator stopped before its caches synced")
                    await wakeups.sleep_or_stop(0.05)
            sent: dict[str, float] = {}
            started = time.perf_counter()
            await _create_all(session, pods=pods, concurrency=concurrency, sent=sent)
            created = time.perf_counter()
            await wakeups.first_set(all_bound, timeout=timeout)  # unbound ones are counted
            finished = time.perf_counter()
            params = {"fieldSelector": "spec.nodeName="}
            async with session.get(f"/api/v1/namespaces/{_NAMESPACE}/pods", params=params) as r:
                unbound = len((await r.json()).get("items") or [])
            idle = (
                await _idle_cycles(
                    session,
                    built[0],
                    port=serving[0],
                    backlog=backlog,
                    concurrency=concurrency,
                    idle_seconds=idle_seconds,
                    timeout=timeout,
                )
                if backlog
                else None
            )
        finally:
            stop.set()
            await operator
    latencies = sorted((bound_at[k] - sent[k]) * 1000 for k in bound_at if k in sent)
    seconds = finished - started
    sink = built[0].sink
    result: E2eResult = {
        "nodes": nodes,
        "scenario": "e2e",
        "pods": pods,
        "bound": len(bound_at),
        "unbound": unbound,
        "seconds": round(seconds, 3),
        "pods_per_second": round(len(bound_at) / seconds, 1) if seconds > 0 else 0.0,
        "creates_per_second": round(pods / (created - started), 1),
        "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
        "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 1) if latencies else None,
        "bind_failures": sink.bind_failures,
    }
    if idle is not None:
        result["backlog"] = idle["backlog"]
        result["idle_seconds"] = idle["idle_seconds"]
        result["idle_cycles"] = idle["idle_cycles"]
        result["idle_cycle_ms"] = idle["idle_cycle_ms"]
    return result


def measure(
    *,
    nodes: int = 1000,
    pods: int = 5000,
    concurrency: int = 32,
    timeout: float = 120.0,
    backlog: int = 0,
) -> E2eResult:
    """Run the benchmark (see the module docstring); the JSON-ready result."""
    with (
        tempfile.TemporaryDirectory(prefix="berth-e2e-") as directory,
        _emulator_process(pathlib.Path(directory), nodes=nodes) as (url, kubeconfig),
    ):
        return asyncio.run(
            _measure(
                url,
                kubeconfig,
                nodes=nodes,
                pods=pods,
                concurrency=concurrency,
                timeout=timeout,
                backlog=backlog,
            )
        )


@click.command("e2e")
@click.option("--nodes", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option(
    "--pods",
    type=click.IntRange(min=1),
    default=5000,
    show_default=True,
    help="Pods to create. With --real, when given: the measured pods of every shape, instead "
    "of its scheduler_perf count scaled to --nodes.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Concurrent HTTP clients creating pods.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=120.0,
    show_default=True,
    help="Seconds to wait for every pod to be bound (with --real, per race; 300 unless given).",
)
@click.option(
    "--backlog",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Then this many pods no node fits: the operator's idle cycle with them waiting.",
)
@click.option(
    "--real",
    is_flag=True,
    help="On a real control plane: Berth, kube-scheduler and a null scheduler side by side.",
)
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    type=click.Choice([*_SHAPES, "all"]),
    help="With --real: a shape to race (repeatable; 'all': every one). Default: basic.",
)
@click.option(
    "--standing",
    default="0,10000",
    show_default=True,
    help="With --real and unschedulable-backlog: the standing backlogs to stream past "
    "(comma-separated counts of pods no node fits).",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, writable=True, path_type=pathlib.Path),
    default=None,
    help="With --real: also draw the schedulers side by side, shape by shape, into this PNG.",
)
def command(
    nodes: int,
    pods: int,
    concurrency: int,
    timeout: float,
    backlog: int,
    real: bool,
    shapes: tuple[str, ...],
    standing: str,
    plot: pathlib.Path | None,
) -> None:
    """Pods created through the API server until the scheduler bound them all (JSON).

    Without --real, Berth's operator against the emulator. With --real, on a real control
    plane (kube-apiserver, etcd, KWOK nodes), Berth, kube-scheduler and a null scheduler (the
    ceiling: binds round-robin, checks nothing) race shape by shape, after kube-scheduler's
    scheduler_perf workloads; every rate is also a fraction of the null scheduler's.
    """
    source = click.get_current_context().get_parameter_source
    if not real:
        for name, given in (("--shape", shapes), ("--plot", plot)):
            if given:
                raise click.UsageError(f"{name} needs --real")
        click.echo(
            json.dumps(
                measure(
                    nodes=nodes,
                    pods=pods,
                    concurrency=concurrency,
                    timeout=timeout,
                    backlog=backlog,
                )
            )
        )
        return
    if backlog:
        raise click.UsageError("--backlog measures the emulator's operator only")
    chosen = list(_SHAPES) if "all" in shapes else list(dict.fromkeys(shapes or ("basic",)))
    try:
        levels = [int(part) for part in standing.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{standing!r}: write counts such as 0,10000,50000", param_hint="--standing"
        ) from None
    if not levels or min(levels) < 0:
        raise click.BadParameter(
            f"{standing!r}: at least one count, none negative", param_hint="--standing"
        )
    # berth.cli.e2e_real imports the real control plane only when asked for it.
    from berth.cli import e2e_real

    measured = e2e_real.measure(
        nodes=nodes,
        shapes=chosen,
        pods=pods if source("pods") is not click.core.ParameterSource.DEFAULT else None,
        standing=levels,
        concurrency=concurrency,
        timeout=timeout if source("timeout") is not click.core.ParameterSource.DEFAULT else 300.0,
    )
    if plot is not None:
        from berth.cli import e2e_plot

        e2e_plot.draw(measured, plot)
    click.echo(json.dumps(measured))
    if measured["errors"]:
        raise click.ClickException(
            "not everything finished: "
            + "; ".join(
                " ".join(str(e[k]) for k in ("shape", "scheduler", "phase", "error") if k in e)
                + (
                    f" (log: {e.get('log') or e.get('logs')})"
                    if e.get("log") or e.get("logs")
                    else ""
                )
                for e in measured["errors"]
            )
        )
