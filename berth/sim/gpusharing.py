"""``berth bench gpu-sharing``: how many GPUs a placement policy gets allocated, FGD-style.

The experiment of Weng et al. ("Beware of Fragmentation", USENIX ATC '23: Fig. 9, and Fig.
11-13 for the other mixes), on a cluster and a workload generated here (nothing is
downloaded). All the numbers below are this module's choices, made to resemble what the paper
reports of Alibaba PAI's GPU-sharing cluster and trace (openb); the absolute results are
therefore not the paper's, the comparison between policies on the same arrivals is the point.

- **Cluster** (:data:`NODE_TYPES`, scaled by ``scale``): 110 GPU nodes, 540 GPUs, of five
  models, labelled as GPU feature discovery labels them (``nvidia.com/gpu.product``,
  ``nvidia.com/gpu.memory``): 8-GPU V100s (most of the GPUs), 4-GPU T4s, 2-GPU A10s and 1-GPU
  P100s, with uneven cpu per GPU (8 cores for a V100 of the 16 GB machines, 16 for the 32 GB
  ones), as heterogeneous as the paper's cluster (about five GPUs a node, no cpu-only nodes).
- **Workload** (:data:`MIXES`): tasks that never leave, arriving one at a time until their GPU
  requests add up to 130 % of the cluster's GPUs. The ``paper`` mix: 13 % cpu-only tasks; of
  the GPU tasks 43 % ask a share of one GPU (about 37 % of all tasks, KAI-Scheduler's
  ``gpu-fraction``; shares from 0.1 to 0.75, mostly at or below one half, one half the most
  common), 55 % one whole GPU, 2 % several (2, 4 or 8); one GPU task in ten accepts only one
  GPU model (required node affinity on ``nvidia.com/gpu.product``, models drawn by their share
  of the GPUs); cpu 2-16 cores per whole GPU, 1-8 for a share, 4-32 for a cpu-only task. The
  other mixes move one knob each, as the paper's Fig. 11-13 do: ``fractional`` (75 % of GPU
  tasks share a GPU), ``multi-gpu`` (30 % ask several), ``constrained`` (a third name a model).
- **Policies**, each on the same arrivals, one after the other in this one run: Berth's
  default profile (GpuSharing's fragmentation gradient descent, measuring fragments by what
  the arriving shapes cannot fill) and, each as its profile's only score over the default
  filters, the policies of FGD's published simulator: ``fgd`` (the paper's measure),
  ``best-fit``, ``packing`` and ``random``.
- **Reported** per mix and policy: the share of the cluster's GPUs allocated (fractions of a
  GPU count as such) once arrivals reach 100 % and 130 % of the GPUs, the tasks that found no
  room, and the CPU seconds the run took; with several seeds, the mean of each and the worst
  margin of Berth's default over best-fit.

Runs :class:`~berth.scheduler.loop.Scheduler` cycles on the simulator's in-memory cluster, one
arrival per cycle (the paper's simulator schedules tasks one by one and drops a task that
does not fit), so the scheduler cannot tell it from the operator. Deterministic for a seed.
"""

from __future__ import annotations

import dataclasses
import random
import time
import typing

from berth.api import core, keys, resources
from berth.scheduler import loop
from berth.scheduler.framework import profiles
from berth.scheduler.plugins import registry
from berth.scheduler.snapshot import gpushare
from berth.sim import cluster
from berth.util import clocks

__all__ = [
    "MIXES",
    "NODE_TYPES",
    "POLICIES",
    "GpuSharingResult",
    "Mix",
    "MixJson",
    "MixResult",
    "OutcomeJson",
    "arrivals",
    "measure",
    "nodes",
]

INFLATION = 1.3
"""Arrivals stop once their GPU requests reach this share of the cluster's GPUs."""
_EPOCH = 1_767_225_600.0
_NAMESPACE = "bench"
_MODEL = gpushare.PRODUCT_LABEL
_MEMORY = gpushare.MEMORY_LABEL


@dataclasses.dataclass(frozen=True)
class NodeType:
    """A kind of machine: GPU model and count, cpu cores, GPU memory (MiB), how many."""

    model: str
    gpus: int
    cpu: int
    gpu_memory: int
    count: int


NODE_TYPES = (
    NodeType("V100M16", 8, 64, 16160, 30),
    NodeType("V100M32", 8, 128, 32510, 20),
    NodeType("T4", 4, 96, 15109, 20),
    NodeType("A10", 2, 32, 22731, 20),
    NodeType("P100", 1, 32, 16280, 20),
)
"""The cluster at scale 1: 110 GPU nodes, 540 GPUs (about five a node, as the paper's 1213
GPU nodes hold 6212), of uneven cpu per GPU (8 to 32 cores)."""


@dataclasses.dataclass(frozen=True)
class Mix:
    """A task distribution: the share of cpu-only tasks, and of GPU tasks the shares asking a
    share of a GPU, several GPUs, and one GPU model."""

    name: str
    cpu_only: float
    shared: float
    multi: float
    constrained: float


MIXES = {
    "paper": Mix("paper", cpu_only=0.13, shared=0.43, multi=0.02, constrained=0.10),
    "fractional": Mix("fractional", cpu_only=0.13, shared=0.75, multi=0.02, constrained=0.10),
    "multi-gpu": Mix("multi-gpu", cpu_only=0.13, shared=0.43, multi=0.30, constrained=0.10),
    "constrained": Mix("constrained", cpu_only=0.13, shared=0.43, multi=0.02, constrained=0.33),
}
"""The mixes the bench knows (module docstring)."""

# Shares of one GPU (thousandths) and how often each is asked: most at or below half a GPU,
# half the most common; a quarter of them above half (they strand what is left).
_SHARES = ((100, 5), (200, 10), (250, 10), (300, 10), (400, 10), (500, 30), (600, 10), (750, 15))
_SEVERAL = ((2, 5), (4, 3), (8, 2))  # GPUs of a multi-GPU task, and how often
_CPU_PER_GPU = (2, 4, 8, 12, 16)  # cores per GPU of a whole-GPU task
_CPU_SHARED = (1, 2, 4, 8)  # cores of a task sharing a GPU
_CPU_ONLY = (4, 8, 16, 32)  # cores of a cpu-only task


def _profile_yaml(policy: str, *, extra: str = "") -> str:
    """A baseline: the default filters, and GpuSharing's ``policy`` as the only score."""
    return f"""\
schedulerName: {keys.DEFAULT_SCHEDULER_NAME}
actions: [allocate]
plugins:
  - name: Priority
  - name: NodeName
  - name: NodeUnschedulable
  - name: NodeAffinity
  - name: TaintToleration
  - name: NodeResourcesFit
  - name: GpuSharing
    args: {{policy: {policy}{extra}}}
  - name: DefaultBinder
"""


def _default_profile() -> profiles.Profile:
    return registry.default_profile()


POLICIES: dict[str, typing.Callable[[], profiles.Profile]] = {
    "berth-default": _default_profile,
    "fgd": lambda: profiles.load(
        _profile_yaml("FragmentationGradient", extra=", fragments: Fit"), source="fgd"
    ),
    "best-fit": lambda: profiles.load(_profile_yaml("BestFit"), source="best-fit"),
    "packing": lambda: profiles.load(_profile_yaml("Packing"), source="packing"),
    "random": lambda: profiles.load(_profile_yaml("Random"), source="random"),
}
"""Profiles compared, by name: Berth's default profile and FGD's simulator's policies."""


def nodes(*, scale: float = 1.0) -> list[core.Node]:
    """The cluster's Node objects (:data:`NODE_TYPES`, counts times ``scale``)."""
    out: list[core.Node] = []
    for kind in NODE_TYPES:
        prefix = kind.model.lower() if kind.model else "cpu"
        for index in range(max(round(kind.count * scale), 1)):
            name = f"{prefix}-{index:04d}"
            labels = {"kubernetes.io/hostname": name}
            allocatable = {"cpu": str(kind.cpu), "memory": "512Gi", "pods": "110"}
            if kind.gpus:
                allocatable[resources.GPU] = str(kind.gpus)
                labels[_MODEL] = kind.model
                labels[_MEMORY] = str(kind.gpu_memory)
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {},
                    "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
                }
            )
    return out


def _gpu_total(node_objs: list[core.Node]) -> int:
    """The cluster's GPUs in thousandths."""
    total = 0
    for obj in node_objs:
        text = obj["status"]["allocatable"].get(resources.GPU)
        total += int(text) * gpushare.WHOLE if text else 0
    return total


def _weighted(rng: random.Random, choices: tuple[tuple[int, int], ...]) -> int:
    return rng.choices([c for c, _ in choices], weights=[w for _, w in choices])[0]


@dataclasses.dataclass(frozen=True)
class Task:
    """One arrival: its pod and the GPU it asks (thousandths)."""

    pod: core.Pod
    gpu: int


def arrivals(mix: Mix, *, node_objs: list[core.Node], seed: int = 1) -> list[Task]:
    """Tasks of ``mix`` until they ask :data:`INFLATION` times the cluster's GPUs."""
    rng = random.Random(f"{seed}:{mix.name}")
    total = _gpu_total(node_objs)
    models: dict[str, int] = {}
    for obj in node_objs:
        model = obj["metadata"]["labels"].get(_MODEL)
        if model:
            models[model] = models.get(model, 0) + int(obj["status"]["allocatable"][resources.GPU])
    tasks: list[Task] = []
    asked = 0
    while asked < INFLATION * total:
        index = len(tasks)
        annotations: dict[str, str] = {}
        requests: dict[str, str] = {}
        affinity: core.Affinity | None = None
        gpu = 0
        if rng.random() < mix.cpu_only:
            requests["cpu"] = str(rng.choice(_CPU_ONLY))
        else:
            draw = rng.random()
            if draw < mix.shared:
                milli = _weighted(rng, _SHARES)
                annotations[gpushare.FRACTION_ANNOTATION] = f"{milli / gpushare.WHOLE:g}"
                requests["cpu"] = str(rng.choice(_CPU_SHARED))
                gpu = milli
            else:
                count = _weighted(rng, _SEVERAL) if draw < mix.shared + mix.multi else 1
                requests[resources.GPU] = str(count)
                requests["cpu"] = str(count * rng.choice(_CPU_PER_GPU))
                gpu = count * gpushare.WHOLE
            if rng.random() < mix.constrained:
                model = rng.choices(list(models), weights=list(models.values()))[0]
                affinity = _model_affinity(model)
        requests["memory"] = "4Gi"
        tasks.append(Task(pod=_pod(index, requests, annotations, affinity), gpu=gpu))
        asked += gpu
    return tasks


def _model_affinity(model: str) -> core.Affinity:
    expression = core.NodeSelectorRequirement(key=_MODEL, operator="In", values=[model])
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }


def _pod(
    index: int,
    requests: dict[str, str],
    annotations: dict[str, str],
    affinity: core.Affinity | None,
) -> core.Pod:
    spec: core.PodSpec = {
        "schedulerName": keys.DEFAULT_SCHEDULER_NAME,
        "containers": [{"name": "main", "image": "task", "resources": {"requests": requests}}],
    }
    if affinity is not None:
        spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"task-{index:06d}",
            "namespace": _NAMESPACE,
            # A queue, as the operator gives Berth's pods without one (admitPlainPods).
            "labels": {keys.QUEUE_LABEL: keys.DEFAULT_QUEUE},
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


class MixJson(typing.TypedDict):
    """A :class:`Mix` as the bench prints it."""

    name: str
    cpu_only: float
    shared: float
    multi: float
    constrained: float


class OutcomeJson(typing.TypedDict):
    allocatedAt100: float
    allocatedAt130: float
    waitingAt130: int
    cpuSeconds: float


class MixResult(typing.TypedDict):
    mix: MixJson
    tasks: int
    policies: dict[str, OutcomeJson]  # policy name -> its mean outcome
    berthOverBestFitAt130: typing.NotRequired[float]  # when both policies ran


class GpuSharingResult(typing.TypedDict):
    """The JSON object ``berth bench gpu-sharing`` prints."""

    scenario: str
    nodes: int
    gpus: int
    inflation: float
    seeds: list[int]
    mixes: dict[str, MixResult]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One policy's run over one mix's arrivals."""

    allocated_100: float
    allocated_130: float
    waiting: int
    cpu_seconds: float

    def to_json(self) -> OutcomeJson:
        return {
            "allocatedAt100": round(self.allocated_100, 4),
            "allocatedAt130": round(self.allocated_130, 4),
            "waitingAt130": self.waiting,
            "cpuSeconds": round(self.cpu_seconds, 2),
        }


def run(profile: profiles.Profile, *, node_objs: list[core.Node], tasks: list[Task]) -> Outcome:
    """Place ``tasks`` one per cycle on a fresh cluster of ``node_objs`` with ``profile``."""
    clock = clocks.VirtualClock(_EPOCH)
    sim = cluster.InMemoryCluster(clock=clock)
    for obj in node_objs:
        sim.put(obj)
    scheduler = loop.Scheduler(
        profile, registry=registry.in_tree_registry(), clock=clock, hints=True
    )
    total = _gpu_total(node_objs)
    gpu_of = {f"{_NAMESPACE}/{t.pod['metadata']['name']}": t.gpu for t in tasks}
    started = time.process_time()
    allocated = asked = 0
    at_100: float | None = None
    placed: set[str] = set()
    for task in tasks:
        clock.advance(1.0)
        sim.put(task.pod)
        result = scheduler.run_once(sim, sim)
        for key in result.bindings():
            if key not in placed:
                placed.add(key)
                allocated += gpu_of.get(key, 0)
        name = task.pod["metadata"]["name"]
        if f"{_NAMESPACE}/{name}" not in placed:
            # Nothing ever leaves, so a task that does not fit now never will: it is dropped,
            # as the paper's simulator drops it (and it costs no more attempts).
            sim.delete("Pod", namespace=_NAMESPACE, name=name)
        asked += task.gpu
        if at_100 is None and asked >= total:
            at_100 = allocated / total
    return Outcome(
        allocated_100=at_100 if at_100 is not None else allocated / total,
        allocated_130=allocated / total,
        waiting=len(tasks) - len(placed),
        cpu_seconds=time.process_time() - started,
    )


def measure(
    *,
    mixes: typing.Sequence[str] = tuple(MIXES),
    policies: typing.Sequence[str] = tuple(POLICIES),
    scale: float = 1.0,
    seeds: typing.Sequence[int] = (1,),
) -> GpuSharingResult:
    """The bench's JSON object: per mix, every policy's outcome on the same arrivals (the mean
    over ``seeds``), and how far Berth's default is above best-fit at worst."""
    node_objs = nodes(scale=scale)
    report: GpuSharingResult = {
        "scenario": "gpu-sharing",
        "nodes": len(node_objs),
        "gpus": _gpu_total(node_objs) // gpushare.WHOLE,
        "inflation": INFLATION,
        "seeds": list(seeds),
        "mixes": {},
    }
    for name in mixes:
        mix = MIXES[name]
        runs: dict[str, list[Outcome]] = {policy: [] for policy in policies}
        tasks = 0
        for seed in seeds:
            arrived = arrivals(mix, node_objs=node_objs, seed=seed)
            tasks += len(arrived)
            for policy in policies:
                runs[policy].append(run(POLICIES[policy](), node_objs=node_objs, tasks=arrived))
        entry: MixResult = {
            "mix": {
                "name": mix.name,
                "cpu_only": mix.cpu_only,
                "shared": mix.shared,
                "multi": mix.multi,
                "constrained": mix.constrained,
            },
            "tasks": round(tasks / len(seeds)),
            "policies": {policy: _mean(outcomes) for policy, outcomes in runs.items()},
        }
        if "berth-default" in runs and "best-fit" in runs:
            entry["berthOverBestFitAt130"] = round(
                min(
                    ours.allocated_130 - theirs.allocated_130
                    for ours, theirs in zip(runs["berth-default"], runs["best-fit"], strict=True)
                ),
                4,
            )
        report["mixes"][name] = entry
    return report


def _mean(outcomes: list[Outcome]) -> OutcomeJson:
    count = len(outcomes)
    return Outcome(
        allocated_100=sum(o.allocated_100 for o in outcomes) / count,
        allocated_130=sum(o.allocated_130 for o in outcomes) / count,
        waiting=round(sum(o.waiting for o in outcomes) / count),
        cpu_seconds=sum(o.cpu_seconds for o in outcomes),
    ).to_json()
