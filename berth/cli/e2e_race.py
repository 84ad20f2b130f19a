"""One measured race of ``berth bench e2e --real``: pods created for one scheduler and timed.

:class:`Tracker` watches one namespace's pods as an informer does (resuming from the last
version seen, relisting when the API server ends the watch) and notes when each pod was first
seen bound, which pods are marked ``PodScheduled=False`` (unschedulable) and which are still
``Pending``; stopped, it waits until its stream's connection is closed (:class:`StreamEnd`).
:func:`create` sends objects with a number of concurrent clients.
:func:`phase` runs one race in a fresh namespace (see its docstring) and returns its JSON.

Every wait is bounded and checks the processes it depends on: a component that dies ends the
race with :class:`~berth.realcluster.processes.ComponentFailed` naming it and its log.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import dataclasses
import json
import signal
import statistics
import time
import typing

import aiohttp

from berth.api import core
from berth.api import objects as api_objects
from berth.cli import api_requests, e2e_shapes, proc_usage
from berth.realcluster import processes
from berth.util import wakeups

__all__ = [
    "Contender",
    "CycleUnit",
    "Cycles",
    "PhaseResult",
    "Race",
    "StreamEnd",
    "Tracker",
    "allocated_claims",
    "create",
    "cycles",
    "delete_namespace",
    "phase",
]

_PATHS = {
    ("v1", "Pod"): "/api/v1/namespaces/{ns}/pods",
    ("scheduling.berth.io/v1alpha1", "PodGroup"): (
        "/apis/scheduling.berth.io/v1alpha1/namespaces/{ns}/podgroups"
    ),
    ("scheduling.k8s.io/v1alpha2", "PodGroup"): (
        "/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups"
    ),
    ("batch/v1", "Job"): "/apis/batch/v1/namespaces/{ns}/jobs",
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): (
        "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates"
    ),
}

MetricsReader = collections.abc.Callable[[], collections.abc.Awaitable[tuple[float, float] | None]]


CycleUnit = typing.Literal["cycle", "attempt"]


class Cycles(typing.TypedDict):
    """A contender's own histogram over a window, named after its unit: Berth's ``cycles``
    (sessions), kube-scheduler's ``attempts`` (one per pod tried)."""

    cycles: typing.NotRequired[int]
    cycle_ms: typing.NotRequired[float | None]  # mean; None when none ran
    attempts: typing.NotRequired[int]
    attempt_ms: typing.NotRequired[float | None]


class PhaseResult(Cycles):
    """One race (:func:`phase`), as the ``--real`` report holds it."""

    pods: int
    bound: int
    seconds: float
    pods_per_second: float
    p50_ms: float | None
    p99_ms: float | None
    first_bound_ms: float | None  # from the clock's start to the first pod bound
    cpu_seconds: float | None  # the contender's, over the window
    cpu_seconds_per_1000_pods: float | None
    scheduler_cores: float | None
    peak_rss_mb: float | None
    cores: dict[str, float | None]  # every other component's cores over the window
    settled_cores_before: float
    creates_per_second: typing.NotRequired[float]  # a stream race only
    timed_out: typing.NotRequired[bool]  # not every pod was bound in time
    # The API server's requests over the window, every client's, by verb and resource, and
    # their total per pod bound (berth.cli.api_requests; absent where it counts none):
    api_requests: typing.NotRequired[dict[str, int]]
    api_requests_per_pod: typing.NotRequired[float]
    # Added by berth.cli.e2e_real:
    claims_allocated: typing.NotRequired[int]
    fraction_of_null: typing.NotRequired[float]
    fraction_of_first_level: typing.NotRequired[float]


def cycles(unit: CycleUnit, before: tuple[float, float], after: tuple[float, float]) -> Cycles:
    """The histogram's count and mean (ms) between two readings (sum of seconds, count)."""
    count = after[1] - before[1]
    mean = round((after[0] - before[0]) / count * 1000, 2) if count else None
    if unit == "cycle":
        return {"cycles": int(count), "cycle_ms": mean}
    return {"attempts": int(count), "attempt_ms": mean}


@dataclasses.dataclass
class Contender:
    """A scheduler raced: its label in the JSON, the ``schedulerName`` its pods carry, its
    process, and how to read its own cycle histogram (sum of seconds, count)."""

    label: e2e_shapes.ContenderLabel
    scheduler: str
    process: processes.Process
    cycles: MetricsReader | None = None
    cycle_unit: CycleUnit = "cycle"  # Berth's session; kube-scheduler's per-pod "attempt"


@dataclasses.dataclass
class Race:
    """What one race needs from the cluster and the machine."""

    session: aiohttp.ClientSession
    processes: collections.abc.Mapping[str, processes.Process]  # every component, by name
    concurrency: int
    timeout: float
    bench_pid: int

    def check(self) -> None:
        for process in self.processes.values():
            process.check()

    def pids(self) -> dict[str, int]:
        found = {name: p.pid for name, p in self.processes.items() if p.pid is not None}
        return {**found, "bench": self.bench_pid}


class StreamEnd:
    """Closes the connection of a streaming response (a watch) given up on.

    Cancelling a stream releases its connection, and a TLS connection closes only after a round
    trip (close_notify both ways). An event loop closed before that (``asyncio.run`` returning
    right after the bench's last race) leaves the socket to the garbage collector, which reports
    an unclosed transport wherever it happens to run. :meth:`closed` waits for the close, and aborts
    the connection when the server does not answer in time.
    """

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        connection = response.connection
        protocol = connection.protocol if connection is not None else None
        self._closed = protocol.closed if protocol is not None else None
        self._transport = connection.transport if connection is not None else None

    async def closed(self, *, timeout: float = 5.0) -> None:
        """Return once the connection is closed (aborted after ``timeout`` seconds)."""
        closed = self._closed
        if closed is None:
            return  # closed before anyone asked
        ended = asyncio.Event()
        closed.add_done_callback(lambda _: ended.set())
        if not closed.done():
            await wakeups.first_set(ended, timeout=timeout)
        if not closed.done() and self._transport is not None:
            self._transport.abort()
            await wakeups.first_set(ended, timeout=timeout)
        if closed.done() and not closed.cancelled():
            closed.exception()  # retrieved: how a stream given up on ended is no news


class Tracker:
    """One namespace's pods, watched (see the module docstring)."""

    def __init__(self, session: aiohttp.ClientSession, namespace: str) -> None:
        self.session = session
        self.namespace = namespace
        self.bound: dict[str, float] = {}
        self.unschedulable: set[str] = set()
        self.changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stream: StreamEnd | None = None

    async def start(self) -> Tracker:
        version = await self._list()
        self._task = asyncio.create_task(self._watch(version))
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._stream is not None:
            await self._stream.closed()

    def check(self) -> None:
        """Raise what ended the watch, if it failed."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            self._task.result()

    def _seen(self, obj: core.Pod) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            return
        if (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
            self.bound[name] = time.perf_counter()
        for condition in (obj.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                self.unschedulable.add(name)
        self.changed.set()

    async def _list(self) -> str:
        async with self.session.get(f"/api/v1/namespaces/{self.namespace}/pods") as response:
            listed = await response.json()
        for item in listed.get("items") or ():
            self._seen(item)
        return str(listed["metadata"]["resourceVersion"])

    async def _watch(self, version: str) -> None:
        # As an informer does: the API server may end a watch (a slow client on a busy machine
        # is cut off), so it is resumed from the last version seen, relisting when too old.
        while True:
            params = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true"}
            async with self.session.get(
                f"/api/v1/namespaces/{self.namespace}/pods",
                params=params,
                timeout=aiohttp.ClientTimeout(),
            ) as response:
                self._stream = StreamEnd(response)
                async for line in response.content:
                    event = json.loads(line)
                    obj: core.Pod = event.get("object") or core.Pod()
                    if event.get("type") == "ERROR":
                        version = await self._list()
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if event.get("type") != "DELETED":
                        self._seen(obj)

    async def wait(
        self,
        done: collections.abc.Callable[[], bool],
        *,
        timeout: float,
        race: Race,
    ) -> bool:
        """Wait until ``done()``; False at ``timeout``. Raises if a component died."""
        deadline = time.monotonic() + timeout
        while not done():
            race.check()
            self.check()
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            await wakeups.first_set(self.changed, timeout=min(0.5, left))
        return True


async def create(
    session: aiohttp.ClientSession,
    namespace: str,
    objects: collections.abc.Sequence[api_objects.KubeObject],
    *,
    concurrency: int,
    sent: dict[str, float] | None = None,
) -> None:
    """Create ``objects`` in ``namespace`` with ``concurrency`` clients; ``sent`` gets each
    one's send time by name."""
    queue: asyncio.Queue[api_objects.KubeObject] = asyncio.Queue()
    for obj in objects:
        queue.put_nowait(obj)

    async def worker() -> None:
        while not queue.empty():
            obj = queue.get_nowait()
            path = _PATHS[(obj["apiVersion"], obj["kind"])].format(ns=namespace)
            if sent is not None:
                sent[obj["metadata"]["name"]] = time.perf_counter()
            async with session.post(path, json=obj) as response:
                if response.status != 201:
                    raise processes.ComponentFailed(
                        f"creating {obj['kind']} {namespace}/{obj['metadata']['name']}: "
                        f"{response.status} {(await response.text())[:300]}"
                    )

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def create_namespace(race: Race, namespace: str) -> None:
    async with race.session.post(
        "/api/v1/namespaces",
        json={"metadata": {"name": namespace, "labels": {"berth.io/bench": "e2e"}}},
    ) as response:
        if response.status != 201:
            raise processes.ComponentFailed(f"creating namespace {namespace}: {response.status}")
    deadline = time.monotonic() + 60
    while True:  # pods may be created once the controllers made its ServiceAccount
        async with race.session.get(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
        ) as response:
            if response.status == 200:
                return
        race.check()
        if time.monotonic() > deadline:
            raise processes.ComponentFailed(
                f"namespace {namespace} got no ServiceAccount in 60 s (kube-controller-manager)"
            )
        await wakeups.sleep_or_stop(0.2)


async def delete_namespace(race: Race, namespace: str, *, timeout: float) -> None:
    """Delete ``namespace`` and wait until it is gone (its pods with it)."""
    async with race.session.delete(f"/api/v1/namespaces/{namespace}") as response:
        if response.status not in (200, 202, 404):
            raise processes.ComponentFailed(f"deleting namespace {namespace}: {response.status}")
    deadline = time.monotonic() + timeout
    while True:
        async with race.session.get(f"/api/v1/namespaces/{namespace}") as response:
            if response.status == 404:
                return
        race.check()
        if time.monotonic() > deadline:
            raise processes.ComponentFailed(
                f"namespace {namespace} still there {timeout:.0f} s after its deletion"
            )
        await wakeups.sleep_or_stop(1.0)


async def allocated_claims(race: Race, namespace: str) -> int:
    """How many ResourceClaims in ``namespace`` are allocated and reserved for a pod."""
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    async with race.session.get(path) as response:
        if response.status != 200:
            raise processes.ComponentFailed(f"listing {path}: {response.status}")
        listed = await response.json()
    return sum(
        1
        for claim in listed.get("items") or ()
        if (claim.get("status") or {}).get("allocation")
        and (claim.get("status") or {}).get("reservedFor")
    )


async def _none_pending(race: Race, namespace: str) -> bool:
    params = {"fieldSelector": "status.phase=Pending", "limit": "1"}
    async with race.session.get(f"/api/v1/namespaces/{namespace}/pods", params=params) as r:
        return not (await r.json()).get("items")


async def settle(race: Race, *, below: float = 0.3, longest: float = 60.0) -> float:
    """Wait until every component together uses less than ``below`` cores for a second (what
    came before has been digested), at most ``longest`` seconds; the cores last seen."""
    deadline = time.monotonic() + longest
    while True:
        window = proc_usage.Window({k: v for k, v in race.pids().items() if k != "bench"}).start()
        await wakeups.sleep_or_stop(1.0)  # the window the cores are read over
        race.check()
        total = sum(c for c in window.cores().values() if c is not None)
        if total < below or time.monotonic() > deadline:
            return round(total, 2)


def _percentile(values: list[float], fraction: float) -> float | None:
    return round(values[int(fraction * (len(values) - 1))], 1) if values else None


async def phase(
    race: Race,
    contender: Contender,
    *,
    namespace: str,
    init: collections.abc.Sequence[core.Pod],
    before: collections.abc.Sequence[api_objects.KubeObject],
    pods: collections.abc.Sequence[core.Pod],
    paused: bool,
) -> PhaseResult:
    """One race in a fresh ``namespace``: the ``init`` pods (already bound) created and
    started, the ``before`` objects (gangs) created, the cluster left to settle; then
    ``pods`` created for ``contender`` with the clock running and timed until bound. With
    ``paused``, the contender is stopped (SIGSTOP) while they are created and the clock
    starts when it resumes: its placement rate, whatever the create rate (``backlog``).
    Otherwise the clock starts at the first create (``stream``). The contender's CPU, the
    other components' and the API server's requests (:mod:`~berth.cli.api_requests`) are
    read over the clock's window; the namespace is deleted after."""
    await create_namespace(race, namespace)
    tracker = await Tracker(race.session, namespace).start()
    try:
        await create(race.session, namespace, init, concurrency=race.concurrency)
        deadline = time.monotonic() + race.timeout
        while not await _none_pending(race, namespace):  # KWOK started them all
            race.check()
            if time.monotonic() > deadline:
                raise processes.ComponentFailed(
                    f"the {len(init)} init pods in {namespace} were not all started by KWOK "
                    f"after {race.timeout:.0f} s"
                )
            await wakeups.sleep_or_stop(0.5)
        await create(race.session, namespace, before, concurrency=race.concurrency)
        settled = await settle(race)
        names = {p["metadata"]["name"] for p in pods}
        pid = contender.process.pid
        assert pid is not None
        cycles_before = await contender.cycles() if contender.cycles else None
        proc_usage.reset_peak(pid)
        sent: dict[str, float] = {}
        window = proc_usage.Window(race.pids())
        requests_before: api_requests.Requests | None = None
        if paused:
            contender.process.signal(signal.SIGSTOP)
        else:
            requests_before = await api_requests.read(race.session)
            window.start()
        started = time.perf_counter()
        try:
            await create(race.session, namespace, pods, concurrency=race.concurrency, sent=sent)
        finally:
            created = time.perf_counter()
            if paused:
                try:  # counted from before it resumes: its first requests are in the window
                    requests_before = await api_requests.read(race.session)
                finally:
                    contender.process.signal(signal.SIGCONT)
        if paused:
            window.start()
            started = created
            sent = dict.fromkeys(sent, created)
        all_bound = await tracker.wait(
            lambda: names <= tracker.bound.keys(), timeout=race.timeout, race=race
        )
        bound = {k: v for k, v in tracker.bound.items() if k in names}
        finished = max(bound.values(), default=time.perf_counter())
        wall, used = window.read()
        requests_after = await api_requests.read(race.session)
        cycles_after = await contender.cycles() if contender.cycles else None
        peak = proc_usage.peak_rss_mb(pid)
    finally:
        await tracker.stop()
    seconds = finished - started
    latencies = sorted((bound[k] - sent[k]) * 1000 for k in bound if k in sent)
    own = used.get(contender.process.name)
    result: PhaseResult = {
        "pods": len(pods),
        "bound": len(bound),
        "seconds": round(seconds, 3),
        "pods_per_second": round(len(bound) / seconds, 1) if seconds > 0 else 0.0,
        "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
        "p99_ms": _percentile(latencies, 0.99),
        "first_bound_ms": (round((min(bound.values()) - started) * 1000, 1) if bound else None),
        "cpu_seconds": own,
        "cpu_seconds_per_1000_pods": (
            round(own / len(bound) * 1000, 2) if own is not None and bound else None
        ),
        "scheduler_cores": round(own / wall, 2) if own is not None and wall > 0 else None,
        "peak_rss_mb": peak,
        "cores": {
            name: (round(c / wall, 2) if c is not None and wall > 0 else None)
            for name, c in used.items()
            if name != contender.process.name
        },
        "settled_cores_before": settled,
    }
    if not paused:
        result["creates_per_second"] = round(len(pods) / (created - started), 1)
    if requests_before is not None and requests_after is not None:
        asked = requests_after - requests_before
        result["api_requests"] = dict(sorted(asked.items()))
        if bound:
            result["api_requests_per_pod"] = round(asked.total() / len(bound), 2)
    if cycles_before is not None and cycles_after is not None:
        result = {**result, **cycles(contender.cycle_unit, cycles_before, cycles_after)}
    if not all_bound:
        result["timed_out"] = True
    return result
