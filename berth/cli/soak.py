"""``berth bench soak``: churn for a long time and report the operator's memory over time.

Every cache and map in Berth must be pruned as objects leave (issue 20: the binder's set of
deleted pods once grew by ~100 bytes per pod, forever). :func:`measure` starts the API server
emulator as its own process (as ``berth bench e2e`` does), runs the operator in this process,
and for ``seconds`` creates ``rate`` pods a second that run ``lifetime`` seconds on the
simulated nodes and succeed; finished pods are deleted. Every ``interval`` seconds the
process's resident set size is sampled (``/proc/self/statm``). One JSON object is printed: the
samples, pods created and bound, and the RSS growth after ``warmup`` seconds (the number to keep
under 5 % over 30 minutes). The default warm-up, 300 s, outlasts the Event recorder's 100 s memory
and the first backlog peaks; docs/chaos.md names the two small bounded structures that fill later.

The emulator's memory is its own process's, so the RSS is the operator's (and the churn's small
client). ``c_heap_mb`` samples glibc's heap with the RSS: what it took from the system and what
of that is in use (:mod:`berth.util.allocator`); a heap that grows while its use does not is
fragmentation, not objects held. To find what grows, ``trace_top`` > 0 runs the soak under
:mod:`tracemalloc`: the Python heap is snapshotted when the warm-up ends and at the end, and
the report adds the heap's size at both and the source lines whose allocations grew most in
between (a growing line is a cache or map not pruned; RSS that grows while the heap does not is
the allocator's).
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import tempfile
import time
import tracemalloc
import typing

import aiohttp
import click

from berth.api import core
from berth.cli import e2e
from berth.kube.binder import binding
from berth.operator import main, scheduling, settings
from berth.scheduler.plugins import registry as plugin_registry
from berth.util import allocator, wakeups

__all__ = ["SoakResult", "TracedGrowth", "command", "measure", "rss_mb"]

_NAMESPACE = "default"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mb() -> float:
    """This process's resident set size now, in MiB (Linux)."""
    with open("/proc/self/statm") as statm:
        resident = int(statm.read().split()[1])
    return resident * _PAGE / 2**20


def _pod(index: int, *, lifetime: float) -> core.Pod:
    body = e2e._pod(index)
    body["metadata"]["name"] = f"soak-{index:07d}"
    body["metadata"]["annotations"] = {"sim.berth.io/duration": f"{lifetime:g}s"}
    return body


async def _churn(
    session: aiohttp.ClientSession,
    *,
    seconds: float,
    rate: float,
    lifetime: float,
    created: list[int],
) -> None:
    path = f"/api/v1/namespaces/{_NAMESPACE}/pods"
    started = time.monotonic()
    index = 0
    while time.monotonic() - started < seconds:
        due = int((time.monotonic() - started) * rate)
        # A driver that falls behind (a loaded machine, tracemalloc) stops on time all the same.
        while index < due and time.monotonic() - started < seconds:
            async with session.post(path, json=_pod(index, lifetime=lifetime)) as answer:
                if answer.status != 201:
                    raise click.ClickException(f"creating a pod: {answer.status}")
            index += 1
            created[0] = index
        await wakeups.sleep_or_stop(0.05)


async def _reap(session: aiohttp.ClientSession, *, stop: asyncio.Event) -> None:
    """Delete pods that finished, once a second: the churn's other half."""
    path = f"/api/v1/namespaces/{_NAMESPACE}/pods"
    while not stop.is_set():
        async with session.get(path) as answer:
            items = (await answer.json()).get("items") or []
        for pod in items:
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                name = pod["metadata"]["name"]
                async with session.delete(f"{path}/{name}", params={"gracePeriodSeconds": "0"}):
                    pass
        await wakeups.sleep_or_stop(1.0, stop=stop)


class TracedGrowth(typing.TypedDict):
    """A line whose Python allocations grew most between the warm-up's end and the end."""

    where: str
    kib: float
    blocks: int


class SoakResult(typing.TypedDict):
    """The JSON object ``berth bench soak`` prints."""

    nodes: int
    scenario: str
    seconds: float
    pods_created: int
    pods_bound: int
    bind_failures: int | None
    warmup_seconds: float
    rss_mb_start: float | None
    rss_mb_end: float | None
    rss_growth_pct_after_warmup: float | None
    rss_mb: list[tuple[float, float]]  # (seconds since the start, MiB)
    c_heap_mb: list[tuple[float, float, float]] | None  # (seconds, obtained, in use)
    # With --trace-top: the Python heap (tracemalloc), None when a snapshot is missing.
    traced_mb_warm: typing.NotRequired[float]
    traced_mb_end: typing.NotRequired[float]
    traced_growth: typing.NotRequired[list[TracedGrowth] | None]


async def _measure(
    url: str,
    kubeconfig: pathlib.Path,
    *,
    seconds: float,
    rate: float,
    lifetime: float,
    interval: float,
    warmup: float,
    nodes: int,
    trace_top: int = 0,
) -> SoakResult:
    built: list[scheduling.Parts] = []
    bound = [0]

    def on_bound(outcome: binding.BindOutcome) -> None:
        if outcome.bound:
            bound[0] += 1

    def on_parts(parts: scheduling.Parts) -> None:
        built.append(parts)

    config = settings.Settings(
        kubeconfig=kubeconfig,
        namespace=_NAMESPACE,
        http_host="127.0.0.1",
        http_port=0,
        log_level="warning",
        leader_election={"identity": "berth-soak"},
    )
    stop, reaped = asyncio.Event(), asyncio.Event()
    samples: list[tuple[float, float]] = []
    heaps: list[tuple[float, float, float]] = []
    created = [0]
    warm: tracemalloc.Snapshot | None = None
    end: tracemalloc.Snapshot | None = None
    async with aiohttp.ClientSession(base_url=url) as session:
        await e2e._install_crds(session)
        operator = asyncio.create_task(
            main.run(
                config,
                stop=stop,
                leader_components=scheduling.with_registry(
                    plugin_registry.in_tree_registry(), on_parts=on_parts, on_bound=on_bound
                ),
            )
        )
        reaper = asyncio.create_task(_reap(session, stop=reaped))
        try:
            async with asyncio.timeout(60):
                while not built or not built[0].informers.synced.is_set():
                    if operator.done():
                        raise click.ClickException("the operator stopped before its caches synced")
                    await wakeups.sleep_or_stop(0.05)
            started = time.monotonic()
            churning = asyncio.create_task(
                _churn(session, seconds=seconds, rate=rate, lifetime=lifetime, created=created)
            )
            churned = asyncio.Event()  # a sample is taken every interval until the churn ends
            churning.add_done_callback(lambda _: churned.set())
            while not churning.done():
                samples.append((round(time.monotonic() - started, 1), round(rss_mb(), 1)))
                _sample_heap(heaps, at=samples[-1][0])
                if trace_top and warm is None and samples[-1][0] >= warmup:
                    warm = tracemalloc.take_snapshot()
                await wakeups.first_set(churned, timeout=interval)
            await churning
            samples.append((round(time.monotonic() - started, 1), round(rss_mb(), 1)))
            _sample_heap(heaps, at=samples[-1][0])
            if trace_top:
                end = tracemalloc.take_snapshot()
        finally:
            reaped.set()
            await reaper
            stop.set()
            await operator
    after = [mb for at, mb in samples if at >= warmup]
    growth = (after[-1] - after[0]) / after[0] * 100 if len(after) >= 2 and after[0] else None
    result: SoakResult = {
        "nodes": nodes,
        "scenario": "soak",
        "seconds": seconds,
        "pods_created": created[0],
        "pods_bound": bound[0],
        "bind_failures": built[0].sink.bind_failures if built else None,
        "warmup_seconds": warmup,
        "rss_mb_start": samples[0][1] if samples else None,
        "rss_mb_end": samples[-1][1] if samples else None,
        "rss_growth_pct_after_warmup": round(growth, 2) if growth is not None else None,
        "rss_mb": samples,
        "c_heap_mb": heaps or None,
    }
    if trace_top:
        _traced(result, warm, end, top=trace_top)
    return result


def _sample_heap(into: list[tuple[float, float, float]], *, at: float) -> None:
    now = allocator.heap()
    if now is not None:
        into.append((at, round(now.obtained / 2**20, 1), round(now.in_use / 2**20, 1)))


def _traced(
    result: SoakResult,
    warm: tracemalloc.Snapshot | None,
    end: tracemalloc.Snapshot | None,
    *,
    top: int,
) -> None:
    """Add the Python heap at the end of the warm-up and at the end, and the lines that grew
    most, to ``result``."""
    if warm is None or end is None:
        result["traced_growth"] = None
        return
    ours = (tracemalloc.Filter(False, tracemalloc.__file__),)
    warm, end = warm.filter_traces(ours), end.filter_traces(ours)
    grew = [d for d in end.compare_to(warm, "lineno") if d.size_diff > 0][:top]
    result["traced_mb_warm"] = round(sum(s.size for s in warm.statistics("filename")) / 2**20, 1)
    result["traced_mb_end"] = round(sum(s.size for s in end.statistics("filename")) / 2**20, 1)
    result["traced_growth"] = [
        {
            "where": f"{d.traceback[0].filename}:{d.traceback[0].lineno}",
            "kib": round(d.size_diff / 1024, 1),
            "blocks": d.count_diff,
        }
        for d in grew
    ]


def measure(
    *,
    nodes: int = 50,
    seconds: float = 1800.0,
    rate: float = 20.0,
    lifetime: float = 5.0,
    interval: float = 10.0,
    warmup: float = 300.0,
    trace_top: int = 0,
) -> SoakResult:
    """Run the soak (see the module docstring); the JSON-ready result."""
    if trace_top:
        tracemalloc.start()
    with (
        tempfile.TemporaryDirectory(prefix="berth-soak-") as directory,
        e2e._emulator_process(pathlib.Path(directory), nodes=nodes) as (url, kubeconfig),
    ):
        result = asyncio.run(
            _measure(
                url,
                kubeconfig,
                seconds=seconds,
                rate=rate,
                lifetime=lifetime,
                interval=interval,
                warmup=warmup,
                nodes=nodes,
                trace_top=trace_top,
            )
        )
    if trace_top:
        tracemalloc.stop()
    return result


@click.command("soak")
@click.option("--nodes", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--seconds", type=click.FloatRange(min=1), default=1800.0, show_default=True)
@click.option(
    "--rate",
    type=click.FloatRange(min=0.1),
    default=20.0,
    show_default=True,
    help="Pods created per second.",
)
@click.option(
    "--lifetime",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Seconds each pod runs before it succeeds (and is deleted).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds between RSS samples.",
)
@click.option(
    "--warmup",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="Seconds before the growth is measured from.",
)
@click.option(
    "--trace-top",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Run under tracemalloc and report the N source lines whose allocations grew most "
    "after the warm-up (slower; for finding a leak).",
)
def command(
    nodes: int,
    seconds: float,
    rate: float,
    lifetime: float,
    interval: float,
    warmup: float,
    trace_top: int,
) -> None:
    """Churn pods for a long time; the operator's RSS over time and its growth (JSON)."""
    result = measure(
        nodes=nodes,
        seconds=seconds,
        rate=rate,
        lifetime=lifetime,
        interval=interval,
        warmup=warmup,
        trace_top=trace_top,
    )
    click.echo(json.dumps(result))
