"""``berth bench peers --real``: the same batch workload to Kueue + kube-scheduler, then Berth.

:func:`measure` starts a real control plane (:mod:`berth.realcluster`) with ``nodes`` KWOK nodes
of 8 cpu / 32 GiB and runs the workload of :mod:`berth.cli.peers_workload` (Jobs of
parallelism 4 in four queues of the given weights, more than the cluster holds, run times
played by KWOK) twice on it, one system at a time, each in a namespace of its own:

1. **Kueue + kube-scheduler**: Kueue (:mod:`berth.realcluster.kueue`, built by
   ``hack/build-k8s --with kueue``) with fair sharing on; one ResourceFlavor; a Cohort holding
   the whole cluster's cpu and memory as its quota; one ClusterQueue per queue in that cohort,
   with no quota of its own (everything is borrowed from the cohort, so the weights decide) and
   ``fairSharing.weight``; a LocalQueue each; the Jobs labelled
   ``kueue.x-k8s.io/queue-name``. Kueue's webhook suspends them, Kueue admits them by quota,
   the Job controller creates their pods, kube-scheduler binds them. No preemption.
2. **Berth**: the chart installed in scheduler mode, ``berth run`` as a process; one Queue per
   queue with the same weight; the same Jobs labelled with their Queue and naming Berth's
   scheduler; Berth derives each Job's gang of 4. No reclaim happens (the run times are below
   the profile's 60 s ``reclaimMinRuntimeSeconds``). Berth runs with its default profile, or
   with the configuration file ``berth_config`` names (``berth run --config``: a platform
   team races its own profile), which the report records.

A watch on each namespace's pods notes when each pod is bound and when it ends. Per system:

- ``jobs_started_per_minute``: Jobs whose 4 pods are all bound, per minute, from the first
  create until the last Job started (the backlog's whole life);
- ``seconds_until_all_ran``: from the first create until the last Job completed;
- ``fair_share_error``: per queue and overall, the mean absolute difference between the share of
  the cluster's cpu the queue's running pods hold and its weighted fair share given what it
  asks for (:func:`~berth.cli.peers_workload.fair_shares`), sampled every second while the
  cluster is oversubscribed; ``idle_while_waiting``: the mean fraction of the cluster idle then;
- ``partial_gangs``: Jobs some of whose pods were bound more than 5 s before the last of them
  (pods holding room while their siblings cannot be placed), and the cpu-seconds so held;
- ``cpu_seconds``: of Kueue and kube-scheduler, or of Berth (``controller_and_scheduler``), and
  beside them the Job controller (kube-controller-manager) and the API server, which both
  systems use;
- for Kueue, ``workloads_admitted``: its Workloads that hold an admission at the end (every
  Job went through Kueue).

``series`` has every queue's share and fair share over time, which ``--plot`` draws.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import dataclasses
import json
import os
import pathlib
import shutil
import ssl
import sys
import tempfile
import time
import typing
import urllib.error
import urllib.request

import aiohttp
import click

from berth.api import core, keys
from berth.api import objects as api_objects
from berth.cli import e2e_race, interrupts, peers_workload, proc_usage
from berth.emulator import kubelets
from berth.realcluster import binaries, controlplane, install, kueue, processes
from berth.util import wakeups

__all__ = ["Comparison", "PeersReport", "RunError", "SystemResult", "measure"]

NODE_SHAPE = "cpu=8,memory=32Gi,pods=110"
_GRACE = 5.0  # seconds between a Job's first and last binding before it counts as partial
_SAMPLE = 1.0
QPS = 5000.0  # Kueue's client rate limit, raised from 50/s as kube-scheduler's is


class SystemResult(typing.TypedDict):
    """One system's run (:func:`_run_system`; see the module docstring)."""

    jobs: int
    jobs_started_per_minute: float | None
    seconds_until_all_started: float
    seconds_until_all_ran: float
    fair_share_error: dict[str, float | None]  # per queue, and "all"
    idle_while_waiting: float | None
    partial_gangs: int
    partial_gang_cpu_seconds: float
    cpu_seconds: dict[str, float | None]  # per component
    controller_and_scheduler_cpu_seconds: float
    series: dict[str, list[tuple[float, float, float]]]  # peers_workload.Timeline.series
    workloads_admitted: typing.NotRequired[int]  # Kueue's only


class Comparison(typing.TypedDict):
    """Berth against Kueue + kube-scheduler: a ratio, or [Berth's, theirs]."""

    jobs_started_per_minute: float | None
    fair_share_error: list[float | None]
    partial_gangs: list[int]
    controller_and_scheduler_cpu_seconds: list[float]


class RunError(typing.TypedDict):
    error: str
    logs: str  # the components' logs, kept


class PeersReport(typing.TypedDict):
    """The JSON object ``berth bench peers --real`` prints (see the module docstring)."""

    scenario: str
    kubernetes: str
    kueue: str
    nodes: int
    node: str
    jobs: int
    parallelism: int
    weights: dict[str, float]
    run_seconds: list[int]
    asked_cpu_seconds: int
    berth_config: str | None  # the file Berth ran with (``berth run --config``); None: defaults
    machine: proc_usage.Machine
    errors: list[RunError]
    complete: bool
    kueue_kube_scheduler: typing.NotRequired[SystemResult]
    berth: typing.NotRequired[SystemResult]
    berth_vs_kueue: typing.NotRequired[Comparison]
    seconds: typing.NotRequired[float]
    logs: typing.NotRequired[str]  # when not complete


# Kueue's kinds (kueue.x-k8s.io/v1beta2): the fields written here.


class ResourceQuota(typing.TypedDict):
    name: str
    nominalQuota: str


class FlavorQuotas(typing.TypedDict):
    name: str
    resources: list[ResourceQuota]


class ResourceGroup(typing.TypedDict):
    coveredResources: list[str]
    flavors: list[FlavorQuotas]


class KueueSpec(typing.TypedDict, total=False):
    """The spec of a Cohort, a ClusterQueue or a LocalQueue (a ResourceFlavor's is empty)."""

    resourceGroups: list[ResourceGroup]
    cohortName: str
    namespaceSelector: api_objects.LabelSelector
    fairSharing: dict[str, str]  # {weight}
    clusterQueue: str


class KueueObject(api_objects.KubeObject, total=False):
    spec: KueueSpec


@dataclasses.dataclass
class _Pod:
    job: str
    cpu: float
    bound: float | None = None
    ended: float | None = None


class _Watch:
    """A namespace's pods: when each was bound and ended, by Job (see the module docstring)."""

    def __init__(self, session: aiohttp.ClientSession, namespace: str, started: float) -> None:
        self.session = session
        self.namespace = namespace
        self.started = started
        self.pods: dict[str, _Pod] = {}
        self._task: asyncio.Task[None] | None = None
        self._stream: e2e_race.StreamEnd | None = None

    async def start(self) -> _Watch:
        async with self.session.get(f"/api/v1/namespaces/{self.namespace}/pods") as response:
            listed = await response.json()
        for item in listed.get("items") or ():
            self._seen(item)
        self._task = asyncio.create_task(self._watch(str(listed["metadata"]["resourceVersion"])))
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._stream is not None:
            await self._stream.closed()

    def check(self) -> None:
        if self._task is not None and self._task.done() and not self._task.cancelled():
            self._task.result()

    def _seen(self, obj: core.Pod) -> None:
        meta = obj.get("metadata") or {}
        job = (meta.get("labels") or {}).get("batch.kubernetes.io/job-name")
        if not job:
            return
        name = str(meta.get("name"))
        pod = self.pods.get(name)
        if pod is None:
            requests = obj["spec"]["containers"][0].get("resources", {}).get("requests", {})
            pod = self.pods[name] = _Pod(job, float(requests.get("cpu", 0)))
        now = time.perf_counter() - self.started
        if pod.bound is None and (obj.get("spec") or {}).get("nodeName"):
            pod.bound = now
        if pod.ended is None and (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            pod.ended = now

    async def _watch(self, version: str) -> None:
        while True:
            params = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true"}
            async with self.session.get(
                f"/api/v1/namespaces/{self.namespace}/pods",
                params=params,
                timeout=aiohttp.ClientTimeout(),
            ) as response:
                self._stream = e2e_race.StreamEnd(response)
                async for line in response.content:
                    event = json.loads(line)
                    obj: core.Pod = event.get("object") or core.Pod()
                    if event.get("type") == "ERROR":
                        async with self.session.get(
                            f"/api/v1/namespaces/{self.namespace}/pods"
                        ) as r:
                            listed = await r.json()
                        for item in listed.get("items") or ():
                            self._seen(item)
                        version = str(listed["metadata"]["resourceVersion"])
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    self._seen(obj)
                    if event.get("type") == "DELETED":
                        pod = self.pods.get(str((obj.get("metadata") or {}).get("name")))
                        if pod is not None and pod.ended is None:
                            pod.ended = time.perf_counter() - self.started

    def by_job(self) -> dict[str, list[_Pod]]:
        found: dict[str, list[_Pod]] = {}
        for pod in self.pods.values():
            found.setdefault(pod.job, []).append(pod)
        return found


def _completed(pods: list[_Pod]) -> bool:
    ended = [p for p in pods if p.ended is not None and p.bound is not None]
    return len(ended) >= peers_workload.PARALLELISM


async def _run_system(
    race: e2e_race.Race,
    *,
    system: typing.Literal["kueue", "berth"],
    namespace: str,
    specs: list[peers_workload.JobSpec],
    weights: dict[str, float],
    capacity: float,
    charged: collections.abc.Sequence[str],
    timeout: float,
) -> SystemResult:
    """Submit the Jobs, sample until every one completed, judge (see the module docstring)."""
    queue_of = {s.name: s.queue for s in specs}
    total = {s.name: float(s.total_cpu) for s in specs}
    timeline = peers_workload.Timeline(capacity, weights)
    window = proc_usage.Window(race.pids()).start()
    started = time.perf_counter()
    watch = await _Watch(race.session, namespace, started).start()
    try:
        await e2e_race.create(
            race.session,
            namespace,
            [peers_workload.manifest(s, system=system) for s in specs],
            concurrency=race.concurrency,
        )
        deadline = time.monotonic() + timeout
        while True:
            race.check()
            watch.check()
            jobs = watch.by_job()
            done = {name for name, pods in jobs.items() if _completed(pods)}
            held = dict.fromkeys(weights, 0.0)
            asked = dict.fromkeys(weights, 0.0)
            for name, spec_cpu in total.items():
                if name not in done:
                    asked[queue_of[name]] += spec_cpu
            for pod in watch.pods.values():
                if pod.bound is not None and pod.ended is None:
                    held[queue_of[pod.job]] += pod.cpu
            timeline.samples.append(
                peers_workload.Sample(time.perf_counter() - started, held, asked)
            )
            if len(done) == len(specs):
                break
            if time.monotonic() > deadline:
                raise processes.ComponentFailed(
                    f"{system}: {len(done)} of {len(specs)} Jobs completed after {timeout:.0f} s"
                )
            await wakeups.sleep_or_stop(_SAMPLE)
    finally:
        await watch.stop()
    wall, used = window.read()
    jobs = watch.by_job()
    starts: list[float] = []
    partial = 0
    held_partial = 0.0
    for pods in jobs.values():
        bound = sorted(p.bound for p in pods if p.bound is not None)
        if len(bound) < peers_workload.PARALLELISM:
            continue
        last = bound[peers_workload.PARALLELISM - 1]
        starts.append(last)
        if last - bound[0] > _GRACE:
            partial += 1
            held_partial += sum(
                (last - p.bound) * p.cpu for p in pods if p.bound is not None and p.bound < last
            )
    ended = max((p.ended for p in watch.pods.values() if p.ended is not None), default=wall)
    last_start = max(starts, default=0.0)
    errors = timeline.errors()
    return {
        "jobs": len(specs),
        "jobs_started_per_minute": round(len(starts) / last_start * 60, 1) if last_start else None,
        "seconds_until_all_started": round(last_start, 1),
        "seconds_until_all_ran": round(ended, 1),
        "fair_share_error": errors,
        "idle_while_waiting": timeline.idle_while_waiting(),
        "partial_gangs": partial,
        "partial_gang_cpu_seconds": round(held_partial, 1),
        "cpu_seconds": {
            name: used.get(name)
            for name in (*charged, "kube-controller-manager", "kube-apiserver", "etcd")
        },
        "controller_and_scheduler_cpu_seconds": round(
            sum(used.get(name) or 0.0 for name in charged), 2
        ),
        "series": timeline.series(),
    }


async def _kueue_objects(
    race: e2e_race.Race, *, namespace: str, weights: dict[str, float], nodes: int
) -> None:
    quota: list[ResourceQuota] = [
        {"name": "cpu", "nominalQuota": str(8 * nodes)},
        {"name": "memory", "nominalQuota": f"{32 * nodes}Gi"},
    ]
    zero: list[ResourceQuota] = [
        {"name": "cpu", "nominalQuota": "0"},
        {"name": "memory", "nominalQuota": "0"},
    ]

    def group(resources: list[ResourceQuota]) -> list[ResourceGroup]:
        return [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [{"name": "default", "resources": resources}],
            }
        ]

    api = "/apis/kueue.x-k8s.io/v1beta2"
    objects: list[tuple[str, KueueObject]] = [
        (f"{api}/resourceflavors", {"metadata": {"name": "default"}}),
        (
            f"{api}/cohorts",
            {"metadata": {"name": "bench"}, "spec": {"resourceGroups": group(quota)}},
        ),
    ]
    for queue, weight in weights.items():
        objects.append(
            (
                f"{api}/clusterqueues",
                {
                    "metadata": {"name": queue},
                    "spec": {
                        "cohortName": "bench",
                        "namespaceSelector": {},
                        "resourceGroups": group(zero),
                        "fairSharing": {"weight": str(weight)},
                    },
                },
            )
        )
        objects.append(
            (
                f"{api}/namespaces/{namespace}/localqueues",
                {"metadata": {"name": queue}, "spec": {"clusterQueue": queue}},
            )
        )
    kinds = {
        "resourceflavors": "ResourceFlavor",
        "cohorts": "Cohort",
        "clusterqueues": "ClusterQueue",
        "localqueues": "LocalQueue",
    }
    for path, body in objects:
        kind = kinds[path.rsplit("/", 1)[1]]
        body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, **body}
        async with race.session.post(path, json=body) as response:
            if response.status != 201:
                raise processes.ComponentFailed(
                    f"kueue: creating {kind} {body['metadata']['name']}: {response.status} "
                    f"{(await response.text())[:300]}"
                )


async def _admitted(race: e2e_race.Race, namespace: str) -> int:
    """How many of Kueue's Workloads in ``namespace`` were admitted (hold an admission)."""
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads"
    async with race.session.get(path) as response:
        listed = await response.json()
    return sum(1 for w in listed.get("items") or () if (w.get("status") or {}).get("admission"))


async def _berth_queues(race: e2e_race.Race, *, weights: dict[str, float]) -> None:
    for queue, weight in weights.items():
        body = {
            "apiVersion": keys.API_VERSION,
            "kind": "Queue",
            "metadata": {"name": queue},
            "spec": {"weight": int(weight)},
        }
        async with race.session.post(
            "/apis/scheduling.berth.io/v1alpha1/queues", json=body
        ) as response:
            if response.status != 201:
                raise processes.ComponentFailed(
                    f"berth: creating Queue {queue}: {response.status} {await response.text()}"
                )


def _berth_ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _client_ssl(plane: controlplane.ControlPlane) -> ssl.SSLContext:
    pair = plane.authority.client("bench", user="berth-bench", groups=["system:masters"])
    context = ssl.create_default_context(cafile=str(plane.authority.cert))
    context.load_cert_chain(str(pair.cert), str(pair.key))
    return context


async def _race(
    plane: controlplane.ControlPlane, concurrency: int
) -> tuple[aiohttp.ClientSession, e2e_race.Race]:
    connector = aiohttp.TCPConnector(limit=concurrency + 8, ssl=_client_ssl(plane))
    session = aiohttp.ClientSession(base_url=plane.url, connector=connector)
    race = e2e_race.Race(
        session=session,
        processes=dict(plane.processes),
        concurrency=concurrency,
        timeout=300.0,
        bench_pid=os.getpid(),
    )
    return session, race


def _kueue_phase(
    plane: controlplane.ControlPlane,
    specs: list[peers_workload.JobSpec],
    weights: dict[str, float],
    *,
    nodes: int,
    concurrency: int,
    timeout: float,
) -> SystemResult:
    manager = kueue.Kueue(plane, qps=QPS).start()
    try:

        async def run() -> SystemResult:
            session, race = await _race(plane, concurrency)
            async with session:
                await e2e_race.create_namespace(race, "peers-kueue")
                await _kueue_objects(race, namespace="peers-kueue", weights=weights, nodes=nodes)
                result = await _run_system(
                    race,
                    system="kueue",
                    namespace="peers-kueue",
                    specs=specs,
                    weights=weights,
                    capacity=8.0 * nodes,
                    charged=("kueue", "kube-scheduler"),
                    timeout=timeout,
                )
                result["workloads_admitted"] = await _admitted(race, "peers-kueue")
                await e2e_race.delete_namespace(race, "peers-kueue", timeout=300.0)
                return result

        return asyncio.run(run())
    finally:
        manager.stop()


def berth_command(config: pathlib.Path | None) -> list[str]:
    """``berth run`` as the bench starts it: this interpreter's, with ``config`` if given."""
    command = [str(pathlib.Path(sys.executable).parent / "berth"), "run", "--log-level", "warning"]
    if config is not None:
        command += ["--config", str(config.resolve())]
    return command


def _berth_phase(
    plane: controlplane.ControlPlane,
    specs: list[peers_workload.JobSpec],
    weights: dict[str, float],
    *,
    nodes: int,
    concurrency: int,
    timeout: float,
    config: pathlib.Path | None,
) -> SystemResult:
    installation = asyncio.run(install.install(plane, mode="scheduler"))
    port = processes.free_port()
    env = {**os.environ, **installation.environment(http_port=port, identity="bench")}
    env["BERTH_LEADER_ELECTION__ENABLED"] = "false"
    berth = plane.spawn("berth", berth_command(config), env=env)
    processes.wait_until("berth's caches", lambda: _berth_ready(port), timeout=180.0, watch=[berth])

    async def run() -> SystemResult:
        session, race = await _race(plane, concurrency)
        async with session:
            await e2e_race.create_namespace(race, "peers-berth")
            await _berth_queues(race, weights=weights)
            return await _run_system(
                race,
                system="berth",
                namespace="peers-berth",
                specs=specs,
                weights=weights,
                capacity=8.0 * nodes,
                charged=("berth",),
                timeout=timeout,
            )

    try:
        return asyncio.run(run())
    finally:
        plane.retire("berth")


def measure(
    *,
    nodes: int = 16,
    jobs: int = 240,
    weights: collections.abc.Sequence[float] = (1, 1, 2, 4),
    seconds: tuple[int, int] = (10, 30),
    seed: int = 1,
    concurrency: int = 16,
    timeout: float = 1800.0,
    berth_config: pathlib.Path | None = None,
) -> PeersReport:
    """Run the benchmark (see the module docstring); the JSON-ready result, partial when
    something failed (``complete`` false, ``errors`` saying what)."""
    try:
        found = binaries.find()
        binaries.extra("kueue")
    except binaries.BinariesMissing as missing:
        raise click.ClickException(str(missing)) from None
    queues = {f"q{i}": float(w) for i, w in enumerate(weights)}
    specs = peers_workload.jobs(jobs, list(queues), seed=seed, seconds=seconds)
    report: PeersReport = {
        "scenario": "peers-real",
        "kubernetes": binaries.KUBERNETES_VERSION,
        "kueue": binaries.EXTRAS["kueue"],
        "nodes": nodes,
        "node": NODE_SHAPE,
        "jobs": jobs,
        "parallelism": peers_workload.PARALLELISM,
        "weights": queues,
        "run_seconds": list(seconds),
        "asked_cpu_seconds": sum(s.total_cpu * s.seconds for s in specs),
        "berth_config": None if berth_config is None else str(berth_config),
        "machine": {"cpus": os.cpu_count(), "load_before": proc_usage.load_average()},
        "errors": [],
        "complete": False,
    }
    started = time.monotonic()
    directory = pathlib.Path(tempfile.mkdtemp(prefix="berth-peers-real-"))
    plane = controlplane.ControlPlane(
        directory,
        pools=[kubelets.parse_pool(f"{nodes}x {NODE_SHAPE} name=node")],
        binaries=found,
        scheduler_qps=QPS,
    )
    try:
        with interrupts.terminated_raises():  # SIGTERM: stop, and say what was measured
            plane.start()
            report["kueue_kube_scheduler"] = _kueue_phase(
                plane, specs, queues, nodes=nodes, concurrency=concurrency, timeout=timeout
            )
            report["berth"] = _berth_phase(
                plane,
                specs,
                queues,
                nodes=nodes,
                concurrency=concurrency,
                timeout=timeout,
                config=berth_config,
            )
            _compare(report)
            report["complete"] = True
    except (processes.ComponentFailed, interrupts.Terminated, KeyboardInterrupt) as failed:
        report["errors"].append(
            {"error": str(failed) or type(failed).__name__, "logs": str(directory / "logs")}
        )
    finally:
        plane.stop()
        report["seconds"] = round(time.monotonic() - started, 1)
        report["machine"]["load_after"] = proc_usage.load_average()
        if report["complete"]:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            report["logs"] = str(directory / "logs")
    return report


def _compare(report: PeersReport) -> None:
    theirs, ours = report["kueue_kube_scheduler"], report["berth"]
    a, b = ours["jobs_started_per_minute"], theirs["jobs_started_per_minute"]
    report["berth_vs_kueue"] = {
        "jobs_started_per_minute": round(a / b, 2) if a and b else None,
        "fair_share_error": [ours["fair_share_error"]["all"], theirs["fair_share_error"]["all"]],
        "partial_gangs": [ours["partial_gangs"], theirs["partial_gangs"]],
        "controller_and_scheduler_cpu_seconds": [
            ours["controller_and_scheduler_cpu_seconds"],
            theirs["controller_and_scheduler_cpu_seconds"],
        ],
    }
