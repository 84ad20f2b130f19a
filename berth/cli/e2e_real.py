"""``berth bench e2e --real``: Berth, kube-scheduler and a null scheduler on one real plane.

:func:`measure` starts a real control plane (:mod:`berth.realcluster`) with ``nodes`` KWOK nodes
(:func:`berth.cli.e2e_shapes.pools`), installs Berth's chart and runs ``berth run`` as its own
process (as kube-scheduler is), and the null scheduler (:mod:`berth.cli.e2e_null`: binds
round-robin, checks nothing) as a third. Then, for each shape asked (:mod:`berth.cli.
e2e_shapes`, after scheduler_perf's workloads), each scheduler in turn — null, kube-scheduler,
Berth — races twice on the same cluster (:func:`berth.cli.e2e_race.phase`), each race in a
fresh namespace deleted after it, so every race starts from the same cluster:

- ``stream``: the pods created through the API server (``concurrency`` clients) while the
  scheduler runs, timed from the first create until each is seen bound;
- ``backlog``: the scheduler stopped (SIGSTOP) while its pods are created, the clock started
  when it resumes: its placement rate, whatever the create rate.

Each race reports pods/s, p50/p99 create-to-bound, the scheduler's own CPU seconds (``/proc``,
user + system over the clock's window) per 1000 pods bound and its mean cores, its peak RSS,
the mean cores of every other component (API server, etcd, KWOK, controller manager, this
process creating the pods) to show what bounds the rate, the API server's requests over the
window by verb and resource (:mod:`berth.cli.api_requests`), and the scheduler's own cycle
histogram (Berth's sessions, kube-scheduler's per-pod attempts). Every rate is also given as a
fraction of the null scheduler's in the same shape and phase: the share of what the API server,
etcd and KWOK allow on this machine that the scheduler reaches.

``unschedulable-backlog`` instead raises a standing backlog of pods no node fits (for each
level of ``standing``: 0, 10 000, 50 000 ...) and streams plain pods past it, reporting the
stream at each level, the scheduler's cycles while idle beside the backlog, and the rate as a
fraction of its own rate with none standing.

The schedulers run without leader election (a paused leader would lose its Lease) and without
a client rate limit: Berth has none (its binder sends at most ``bind_concurrency`` bindings at
once, and so does the null scheduler), kube-scheduler's ``clientConnection.qps`` is raised from
50/s to :data:`KUBE_SCHEDULER_QPS`. With the ``gang`` shape, the plane runs kube-scheduler's
alpha gang scheduling (``GenericWorkload``, ``GangScheduling``). With the ``dra`` shape, every
node has a fake driver's devices (a ResourceSlice each), and each of its races also reports
``claims_allocated``: the claims in the race's namespace allocated and reserved once every pod
was bound.

Faults: a component that dies ends the run, and so do SIGTERM and Ctrl+C; a race whose pods are
not all bound within ``timeout`` is marked ``timed_out`` and the run goes on. Either way the
JSON says what finished (``complete``, ``errors`` naming the component and its log, kept) and
every process is stopped.
"""

from __future__ import annotations

import asyncio
import collections.abc
import functools
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

from berth.api import keys
from berth.cli import e2e_race, e2e_shapes, interrupts, proc_usage
from berth.realcluster import binaries, controlplane, install, processes
from berth.util import wakeups

__all__ = [
    "CONTENDERS",
    "KUBE_SCHEDULER_QPS",
    "E2eRealReport",
    "IdleResult",
    "Level",
    "Phases",
    "RaceShape",
    "StandingShape",
    "measure",
]

KUBE_SCHEDULER_QPS = 5000.0
NULL_SCHEDULER = "berth-bench-null"
NOBODY = "berth-bench-nobody"  # the null scheduler's standing backlog names no live scheduler
CONTENDERS: tuple[e2e_shapes.ContenderLabel, ...] = ("null", "kube_scheduler", "berth")
_PHASES: tuple[typing.Literal["stream", "backlog"], ...] = ("stream", "backlog")
_IDLE_SECONDS = 10.0


def _client_ssl(plane: controlplane.ControlPlane) -> ssl.SSLContext:
    pair = plane.authority.client("bench", user="berth-bench", groups=["system:masters"])
    context = ssl.create_default_context(cafile=str(plane.authority.cert))
    context.load_cert_chain(str(pair.cert), str(pair.key))
    return context


def _histogram(text: str, name: str) -> tuple[float, float]:
    """(sum, count) of histogram ``name`` summed over its label sets."""
    found = {"sum": 0.0, "count": 0.0}
    for line in text.splitlines():
        for part in found:
            prefix = f"{name}_{part}"
            if line.startswith(prefix) and line[len(prefix)] in " {":
                found[part] += float(line.rsplit(" ", 1)[1])
    return found["sum"], found["count"]


def _metrics_reader(
    url: str, histogram: str
) -> collections.abc.Callable[[], collections.abc.Awaitable[tuple[float, float] | None]]:
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE

    async def read() -> tuple[float, float] | None:
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(url, ssl=insecure if url.startswith("https") else True) as response,
            ):
                if response.status != 200:
                    return None
                return _histogram(await response.text(), histogram)
        except aiohttp.ClientError:
            return None

    return read


def _berth_ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _start_null(plane: controlplane.ControlPlane) -> processes.Process:
    pair = plane.authority.client("null-scheduler", user="system:kube-scheduler")
    process = plane.spawn(
        "null-scheduler",
        [
            sys.executable,
            "-m",
            "berth.cli.e2e_null",
            f"--server={plane.url}",
            f"--ca={plane.authority.cert}",
            f"--cert={pair.cert}",
            f"--key={pair.key}",
            f"--scheduler={NULL_SCHEDULER}",
        ],
    )
    processes.wait_until(
        "the null scheduler",
        lambda: "watching pods" in processes.tail(process.log),
        timeout=60.0,
        watch=[process],
    )
    return process


def _start_berth(plane: controlplane.ControlPlane) -> tuple[processes.Process, int]:
    installation = asyncio.run(install.install(plane, mode="scheduler"))
    port = processes.free_port()
    env = {**os.environ, **installation.environment(http_port=port, identity="bench")}
    # As kube-scheduler here: one instance, no Lease (a paused leader would lose it).
    env["BERTH_LEADER_ELECTION__ENABLED"] = "false"
    berth = plane.spawn(
        "berth",
        [str(pathlib.Path(sys.executable).parent / "berth"), "run", "--log-level", "warning"],
        env=env,
    )
    processes.wait_until("berth's caches", lambda: _berth_ready(port), timeout=180.0, watch=[berth])
    return berth, port


def _marked(tracker: e2e_race.Tracker, count: int) -> bool:
    return len(tracker.unschedulable) >= count


def _contenders(
    plane: controlplane.ControlPlane,
) -> dict[e2e_shapes.ContenderLabel, e2e_race.Contender]:
    """Start the null scheduler and Berth beside the plane's kube-scheduler."""
    null = _start_null(plane)
    berth, port = _start_berth(plane)
    return {
        "null": e2e_race.Contender("null", NULL_SCHEDULER, null),
        "kube_scheduler": e2e_race.Contender(
            "kube_scheduler",
            "default-scheduler",
            plane.processes["kube-scheduler"],
            _metrics_reader(
                f"https://127.0.0.1:{plane.ports.scheduler}/metrics",
                "scheduler_scheduling_attempt_duration_seconds",
            ),
            "attempt",
        ),
        "berth": e2e_race.Contender(
            "berth",
            keys.DEFAULT_SCHEDULER_NAME,
            berth,
            _metrics_reader(f"http://127.0.0.1:{port}/metrics", "berth_session_duration_seconds"),
            "cycle",
        ),
    }


class IdleResult(e2e_race.Cycles):
    """A contender beside a standing backlog with nothing else happening."""

    seconds: float
    scheduler_cores: float | None


class Phases(typing.TypedDict, total=False):
    """A contender's races on one shape, by phase."""

    stream: e2e_race.PhaseResult
    backlog: e2e_race.PhaseResult


class Level(typing.TypedDict):
    """A contender beside one standing unschedulable backlog."""

    standing: int
    marked_unschedulable: int
    seconds_to_mark: float
    not_all_marked: typing.NotRequired[bool]
    idle: typing.NotRequired[IdleResult]  # written once the marking is measured
    stream: typing.NotRequired[e2e_race.PhaseResult]


class RaceShape(typing.TypedDict):
    """A shape's races, by contender (see the module docstring)."""

    mirrors: str
    init: int
    pods: int
    null: typing.NotRequired[Phases]
    kube_scheduler: typing.NotRequired[Phases]
    berth: typing.NotRequired[Phases]
    ratio_berth_to_kube_scheduler: typing.NotRequired[dict[str, float]]  # by phase


class StandingShape(typing.TypedDict):
    """The unschedulable-backlog shape: by contender, by standing backlog (its size, a string
    as JSON keys are)."""

    mirrors: str
    init: int
    pods: int
    standing: typing.NotRequired[list[int]]
    null: typing.NotRequired[dict[str, Level]]
    kube_scheduler: typing.NotRequired[dict[str, Level]]
    berth: typing.NotRequired[dict[str, Level]]


class RunError(typing.TypedDict):
    """What failed: the whole run (``error``, ``logs``), or one race (and where)."""

    error: str
    logs: typing.NotRequired[str]
    shape: typing.NotRequired[str]
    scheduler: typing.NotRequired[str]
    phase: typing.NotRequired[str]
    log: typing.NotRequired[str]


class E2eRealReport(typing.TypedDict):
    """The JSON object ``berth bench e2e --real`` prints (see the module docstring)."""

    scenario: str
    kubernetes: str
    nodes: int
    machine: proc_usage.Machine
    kube_scheduler_qps: float
    feature_gates: dict[str, bool]
    shapes: dict[str, RaceShape | StandingShape]
    errors: list[RunError]
    complete: bool
    seconds: typing.NotRequired[float]
    logs: typing.NotRequired[str]  # when not complete


def _fractions(shape: RaceShape) -> None:
    """Each contender's rate as a fraction of the null scheduler's, phase by phase."""
    null = shape.get("null") or Phases()
    for label in CONTENDERS[1:]:
        phases = shape.get(label) or Phases()
        for phase_name in _PHASES:
            result, ceiling = phases.get(phase_name), null.get(phase_name)
            if result is not None and ceiling is not None and ceiling["pods_per_second"]:
                rate = result["pods_per_second"] / ceiling["pods_per_second"]
                result["fraction_of_null"] = round(rate, 2)
    ours, theirs = shape.get("berth") or Phases(), shape.get("kube_scheduler") or Phases()
    ratio: dict[str, float] = {}
    for phase_name in _PHASES:
        a, b = ours.get(phase_name), theirs.get(phase_name)
        if a is not None and b is not None and b["pods_per_second"]:
            ratio[phase_name] = round(a["pods_per_second"] / b["pods_per_second"], 2)
    if ratio:
        shape["ratio_berth_to_kube_scheduler"] = ratio


class _Bench:
    """The run's state: the plane, the contenders, what was measured so far."""

    def __init__(
        self,
        plane: controlplane.ControlPlane,
        contenders: dict[e2e_shapes.ContenderLabel, e2e_race.Contender],
        *,
        nodes: int,
        pods: int | None,
        standing: collections.abc.Sequence[int],
        concurrency: int,
        timeout: float,
        report: E2eRealReport,
    ) -> None:
        self.plane = plane
        self.contenders = contenders
        self.nodes = nodes
        self.pods = pods
        self.standing = sorted(set(standing))
        self.concurrency = concurrency
        self.timeout = timeout
        self.report = report
        self.node_names = [n for pool in e2e_shapes.pools(nodes) for n in pool.names()]

    def _race(self, session: aiohttp.ClientSession) -> e2e_race.Race:
        return e2e_race.Race(
            session=session,
            processes=dict(self.plane.processes),
            concurrency=self.concurrency,
            timeout=self.timeout,
            bench_pid=os.getpid(),
        )

    async def run(self, shapes: collections.abc.Sequence[str]) -> None:
        connector = aiohttp.TCPConnector(limit=self.concurrency + 8, ssl=_client_ssl(self.plane))
        async with aiohttp.ClientSession(base_url=self.plane.url, connector=connector) as session:
            race = self._race(session)
            for name in shapes:
                shape = e2e_shapes.SHAPES[name]
                init, measured = shape.counts(self.nodes, self.pods)
                if name == e2e_shapes.UNSCHEDULABLE:
                    standing: StandingShape = {
                        "mirrors": shape.mirrors,
                        "init": init,
                        "pods": measured,
                    }
                    self.report["shapes"][name] = standing
                    await self._unschedulable(race, shape, standing, init=init, measured=measured)
                    continue
                entry: RaceShape = {"mirrors": shape.mirrors, "init": init, "pods": measured}
                self.report["shapes"][name] = entry
                try:
                    await self._shape(race, shape, entry, init=init, measured=measured)
                finally:
                    _fractions(entry)  # of what finished, also when the run ends here

    def _timed_out(
        self,
        shape: str,
        label: e2e_shapes.ContenderLabel,
        phase: str,
        result: e2e_race.PhaseResult,
    ) -> None:
        if result.get("timed_out"):
            process = self.contenders[label].process
            self.report["errors"].append(
                {
                    "shape": shape,
                    "scheduler": label,
                    "phase": phase,
                    "error": f"{result['bound']} of {result['pods']} pods bound after "
                    f"{self.timeout:.0f} s",
                    "log": str(process.log),
                }
            )

    async def _shape(
        self,
        race: e2e_race.Race,
        shape: e2e_shapes.Shape,
        entry: RaceShape,
        *,
        init: int,
        measured: int,
    ) -> None:
        for label, contender in self.contenders.items():
            phases: Phases = {}
            entry[label] = phases
            for phase_name in _PHASES:
                namespace = f"{shape.name}-{label.replace('_', '-')}-{phase_name}"
                result = await e2e_race.phase(
                    race,
                    contender,
                    namespace=namespace,
                    init=e2e_shapes.init_pods(shape, init, nodes=self.node_names),
                    before=[
                        *e2e_shapes.gang_objects(shape, measured, contender=contender.label),
                        *e2e_shapes.claim_objects(shape),
                    ],
                    pods=e2e_shapes.measured_pods(
                        shape, measured, contender=contender.label, scheduler=contender.scheduler
                    ),
                    paused=phase_name == "backlog",
                )
                if shape.claims:
                    result["claims_allocated"] = await e2e_race.allocated_claims(race, namespace)
                phases[phase_name] = result
                self._timed_out(shape.name, label, phase_name, result)
                await e2e_race.delete_namespace(race, namespace, timeout=self.timeout)

    async def _unschedulable(
        self,
        race: e2e_race.Race,
        shape: e2e_shapes.Shape,
        entry: StandingShape,
        *,
        init: int,
        measured: int,
    ) -> None:
        entry["standing"] = self.standing
        for label, contender in self.contenders.items():
            levels: dict[str, Level] = {}
            entry[label] = levels
            backlog = f"standing-{label.replace('_', '-')}"
            await e2e_race.create_namespace(race, backlog)
            tracker = await e2e_race.Tracker(race.session, backlog).start()
            scheduler = NOBODY if label == "null" else contender.scheduler
            created = 0
            try:
                for level in self.standing:
                    marking = time.perf_counter()
                    await e2e_race.create(
                        race.session,
                        backlog,
                        e2e_shapes.standing_pods(created, level, scheduler=scheduler),
                        concurrency=race.concurrency,
                    )
                    created = level
                    marked = True
                    if label != "null":
                        # Until the scheduler has looked at every one and said it cannot fit.
                        marked = await tracker.wait(
                            functools.partial(_marked, tracker, created),
                            timeout=self.timeout + created / 50,
                            race=race,
                        )
                    level_entry: Level = {
                        "standing": level,
                        "marked_unschedulable": len(tracker.unschedulable),
                        "seconds_to_mark": round(time.perf_counter() - marking, 1),
                    }
                    if not marked:
                        level_entry["not_all_marked"] = True
                    level_entry["idle"] = await self._idle(race, contender)
                    namespace = f"unsched-{label.replace('_', '-')}-{level}"
                    result = await e2e_race.phase(
                        race,
                        contender,
                        namespace=namespace,
                        init=e2e_shapes.init_pods(shape, init, nodes=self.node_names),
                        before=[],
                        pods=e2e_shapes.measured_pods(
                            shape,
                            measured,
                            contender=contender.label,
                            scheduler=contender.scheduler,
                        ),
                        paused=False,
                    )
                    level_entry["stream"] = result
                    self._timed_out(shape.name, label, f"stream with {level} standing", result)
                    levels[str(level)] = level_entry
                    await e2e_race.delete_namespace(race, namespace, timeout=self.timeout)
            finally:
                await tracker.stop()
            await e2e_race.delete_namespace(race, backlog, timeout=self.timeout + created / 20)
            first_level = levels.get(str(self.standing[0]))
            base = first_level.get("stream") if first_level is not None else None
            for level_entry in levels.values():
                rate = level_entry["stream"]["pods_per_second"]
                first = base["pods_per_second"] if base is not None else None
                if first:
                    level_entry["stream"]["fraction_of_first_level"] = round(rate / first, 2)

    async def _idle(self, race: e2e_race.Race, contender: e2e_race.Contender) -> IdleResult:
        """The contender beside the standing backlog with nothing else happening."""
        await e2e_race.settle(race)
        pid = contender.process.pid
        assert pid is not None
        before = await contender.cycles() if contender.cycles else None
        window = proc_usage.Window({"own": pid}).start()
        await wakeups.sleep_or_stop(_IDLE_SECONDS)  # the window the cycles are counted over
        after = await contender.cycles() if contender.cycles else None
        wall, used = window.read()
        idle: IdleResult = {
            "seconds": round(wall, 1),
            "scheduler_cores": round(used["own"] / wall, 3) if used["own"] is not None else None,
        }
        if before is not None and after is not None:
            idle = {**idle, **e2e_race.cycles(contender.cycle_unit, before, after)}
        return idle


def measure(
    *,
    nodes: int = 1000,
    shapes: collections.abc.Sequence[str] = ("basic",),
    pods: int | None = None,
    standing: collections.abc.Sequence[int] = (0, 10_000),
    concurrency: int = 32,
    timeout: float = 300.0,
) -> E2eRealReport:
    """Run the benchmark (see the module docstring); the JSON-ready result, partial when
    something failed (``complete`` false, ``errors`` saying what)."""
    unknown = [s for s in shapes if s not in e2e_shapes.SHAPES]
    if unknown:
        raise click.UsageError(
            f"--shape: no shape {', '.join(unknown)} (known: {', '.join(e2e_shapes.SHAPES)})"
        )
    try:
        found = binaries.find()
    except binaries.BinariesMissing as missing:
        raise click.ClickException(str(missing)) from None
    gangs = "gang" in shapes
    report: E2eRealReport = {
        "scenario": "e2e-real",
        "kubernetes": binaries.KUBERNETES_VERSION,
        "nodes": nodes,
        "machine": {"cpus": os.cpu_count(), "load_before": proc_usage.load_average()},
        "kube_scheduler_qps": KUBE_SCHEDULER_QPS,
        "feature_gates": e2e_shapes.GANG_FEATURE_GATES if gangs else {},
        "shapes": {},
        "errors": [],
        "complete": False,
    }
    started = time.monotonic()
    # Not a TemporaryDirectory: after a failure the logs the errors name are kept.
    directory = pathlib.Path(tempfile.mkdtemp(prefix="berth-e2e-real-"))
    plane = controlplane.ControlPlane(
        directory,
        pools=e2e_shapes.pools(nodes, devices=e2e_shapes.DRA in shapes),
        binaries=found,
        scheduler_qps=KUBE_SCHEDULER_QPS,
        feature_gates=e2e_shapes.GANG_FEATURE_GATES if gangs else None,
        runtime_config=e2e_shapes.GANG_RUNTIME_CONFIG if gangs else (),
    )
    try:
        with interrupts.terminated_raises():
            _run(
                plane,
                report,
                shapes=shapes,
                nodes=nodes,
                pods=pods,
                standing=standing,
                concurrency=concurrency,
                timeout=timeout,
            )
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


def _run(
    plane: controlplane.ControlPlane,
    report: E2eRealReport,
    *,
    shapes: collections.abc.Sequence[str],
    nodes: int,
    pods: int | None,
    standing: collections.abc.Sequence[int],
    concurrency: int,
    timeout: float,
) -> None:
    """Start the plane and the contenders, race every shape into ``report``."""
    plane.start()
    bench = _Bench(
        plane,
        _contenders(plane),
        nodes=nodes,
        pods=pods,
        standing=standing,
        concurrency=concurrency,
        timeout=timeout,
        report=report,
    )
    asyncio.run(bench.run(shapes))
    report["complete"] = not report["errors"]
