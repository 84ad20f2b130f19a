"""The scheduler core's benchmarks: ``basic``, ``gang`` and ``cycle`` (``berth bench ...``).

Each workload is a pure function building the cluster as API objects (dicts, as the API server
returns them), loaded into a :class:`~berth.scheduler.snapshot.cache.ClusterCache`; then one
session runs with the default profile and is timed. Loading the cache (parsing the objects) is
set-up and is not timed; the timed part is what a cycle costs: taking the snapshot, opening the
session, the actions, closing the session.

- ``basic``: kube-scheduler's SchedulingBasic — 5000 nodes (cpu 4, memory 32Gi, pods 110), 1000
  pods already running, 10 000 plain pods of cpu 100m / memory 500Mi to place.
- ``gang``: one PodGroup of 1000 pods (minMember 1000, cpu 1 / memory 2Gi each), 5000 nodes.
- ``cycle``: 5000 nodes, 40 000 running pods (8 per node) in 2000 running groups, 10 000
  pending pods in 500 groups of 20 (minMember 20) across 10 queues.

- ``anti-affinity``, ``preferred-affinity``, ``topology-spread``, ``host-ports``:
  kube-scheduler's scheduler_perf shapes for the constraint plugins (SchedulingPodAntiAffinity,
  SchedulingPreferredPodAffinity, TopologySpreading, and host ports): 5000 nodes, pods with
  the constraint already placed (1000; 5000 for preferred affinity), 1000 more to place.

- ``volumes``: 5000 nodes in 3 zones, each attaching at most 16 volumes of one CSI driver
  (CSINode), 1000 running pods with a bound volume of that driver, 1000 pods to place each
  with its own unbound claim of a ``WaitForFirstConsumer`` class the driver provisions
  (VolumeBinding, VolumeRestrictions, NodeVolumeLimits).
- ``backlog`` (:func:`run_backlog`): 1000 full nodes (cpu 8, four running pods of cpu 2 each)
  and 50 000 pending jobs of three shapes in 10 queues; after a first session parks them, one
  session with nothing changed, one after a single running pod ended and one after a single
  new job arrived (what each cycle of a stream costs beside the standing backlog), each timed
  (snapshot included): what a cycle costs when it follows change, not backlog.

``--nodes``/``--pods`` scale a workload; the other counts follow (running pods per node).

``p50_ms``/``p99_ms`` are per-pod placement attempt latencies (Filter + Score for one pod);
``pods_per_second`` is pods placed over the timed seconds; ``cpu_seconds`` is the CPU time the
process spent in them (what to compare on a loaded machine, where the wall-clock seconds also
count waiting for a core); ``rss_mb`` is the process's peak resident memory. ``disabled``
names plugins left out of the default profile (what a plugin costs: the same run with and
without it).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import resource
import sys
import time
import typing

from berth.api import core, custom_objects, keys, objects, storage
from berth.scheduler import loop
from berth.scheduler.framework import decisions
from berth.scheduler.plugins import registry
from berth.scheduler.snapshot import cache
from berth.util import clocks

__all__ = [
    "SCENARIOS",
    "BacklogResult",
    "BenchResult",
    "Workload",
    "anti_affinity",
    "backlog",
    "basic",
    "cycle",
    "default_plugins",
    "gang",
    "host_ports",
    "preferred_affinity",
    "run",
    "run_backlog",
    "topology_spread",
]

Obj = objects.KubeObject  # a Node, Pod, PodGroup, Queue or storage object, as the API holds it

EPOCH = 1_767_225_600.0  # a fixed start, so that runs are comparable
_CREATED = "2026-01-01T00:00:00Z"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Workload:
    """A benchmark's cluster: the objects to load, and how many pods it asks to place."""

    scenario: str
    nodes: int
    pods: int  # pending pods to place
    objects: tuple[Obj, ...]


class BacklogResult(typing.TypedDict):
    """The JSON object ``berth bench backlog`` prints."""

    scenario: str
    nodes: int
    pods: int
    first_cycle_ms: float
    placed_first: int
    no_change_ms: float
    one_change_ms: float
    placed_after_change: int
    one_arrival_ms: float
    parked: int
    rss_mb: float


_DIGITS = "digits"  # a float field's metadata: the decimals ``berth bench`` prints it with


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchResult:
    """One benchmark run, as ``berth bench`` prints it: :meth:`to_json` prints every field, so
    a field added here is printed too."""

    scenario: str
    nodes: int
    pods: int
    placed: int
    seconds: float = dataclasses.field(metadata={_DIGITS: 4})
    cpu_seconds: float = dataclasses.field(metadata={_DIGITS: 4})
    pods_per_second: float = dataclasses.field(metadata={_DIGITS: 1})
    p50_ms: float = dataclasses.field(metadata={_DIGITS: 4})
    p99_ms: float = dataclasses.field(metadata={_DIGITS: 4})
    rss_mb: float = dataclasses.field(metadata={_DIGITS: 1})
    errors: int
    disabled: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """The JSON object ``berth bench`` prints: the fields in order, floats rounded for
        reading (to their ``digits``), the tuple as a list."""
        shown: dict[str, object] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if _DIGITS in field.metadata:
                value = round(value, field.metadata[_DIGITS])
            elif isinstance(value, tuple):
                value = list(value)
            shown[field.name] = value
        return shown


# Objects -----------------------------------------------------------------------------------


def _node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "32Gi",
    pods: int = 110,
    labels: collections.abc.Mapping[str, str] | None = None,
) -> core.Node:
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            "creationTimestamp": _CREATED,
        },
        "spec": {},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def _pod(
    name: str,
    *,
    cpu: str,
    memory: str,
    node: str | None = None,
    labels: collections.abc.Mapping[str, str] | None = None,
    namespace: str = "bench",
    extra: core.PodSpec | None = None,
    ports: collections.abc.Sequence[core.ContainerPort] = (),
) -> core.Pod:
    container: core.Container = {
        "name": "main",
        "image": "pause",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }
    if ports:
        container["ports"] = list(ports)
    spec: core.PodSpec = {"schedulerName": keys.DEFAULT_SCHEDULER_NAME, "containers": [container]}
    spec.update(extra or {})
    if node is not None:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "labels": dict(labels or {}),
            "creationTimestamp": _CREATED,
        },
        "spec": spec,
        "status": {"phase": "Running" if node is not None else "Pending"},
    }


def _pod_group(name: str, *, min_member: int, queue: str | None = None) -> custom_objects.PodGroup:
    spec: custom_objects.PodGroupSpec = {"minMember": min_member}
    if queue is not None:
        spec["queue"] = queue
    return {
        "apiVersion": f"{keys.GROUP}/{keys.VERSION}",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"uid-bench-{name}",
            "creationTimestamp": _CREATED,
        },
        "spec": spec,
    }


def _queue(name: str) -> custom_objects.Queue:
    return {
        "apiVersion": f"{keys.GROUP}/{keys.VERSION}",
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": _CREATED},
        "spec": {"weight": 1},
    }


def _node_names(count: int) -> list[str]:
    return [f"node-{i:05d}" for i in range(count)]


# Workloads ---------------------------------------------------------------------------------


def basic(*, nodes: int = 5000, pods: int = 10_000) -> Workload:
    """kube-scheduler's SchedulingBasic: plain pods onto nodes with some already running
    (one per five nodes: 1000 on 5000)."""
    names = _node_names(nodes)
    running = max(1, nodes // 5)
    objects: list[Obj] = [_node(n) for n in names]
    objects += [
        _pod(f"running-{i:05d}", cpu="100m", memory="500Mi", node=names[i % nodes])
        for i in range(running)
    ]
    objects += [_pod(f"pod-{i:05d}", cpu="100m", memory="500Mi") for i in range(pods)]
    return Workload(scenario="basic", nodes=nodes, pods=pods, objects=tuple(objects))


def gang(*, nodes: int = 5000, pods: int = 1000) -> Workload:
    """One gang of ``pods`` pods (minMember = all of them)."""
    objects: list[Obj] = [_node(n) for n in _node_names(nodes)]
    objects.append(_pod_group("gang", min_member=pods))
    label = {f"{keys.GROUP}/pod-group": "gang"}
    objects += [_pod(f"gang-{i:04d}", cpu="1", memory="2Gi", labels=label) for i in range(pods)]
    return Workload(scenario="gang", nodes=nodes, pods=pods, objects=tuple(objects))


def cycle(
    *,
    nodes: int = 5000,
    pods: int = 10_000,
    group_size: int = 20,
    queues: int = 10,
    running_per_node: int = 8,
) -> Workload:
    """A busy cluster's full session: ``running_per_node`` pods per node in running groups,
    ``pods`` pending pods in groups of ``group_size`` (minMember = size) across ``queues``."""
    names = _node_names(nodes)
    objects: list[Obj] = [_node(n) for n in names]
    queue_names = [f"queue-{q:02d}" for q in range(queues)]
    objects += [_queue(q) for q in queue_names]
    running_groups = max(1, nodes * running_per_node // group_size)
    for g in range(running_groups):
        group = f"done-{g:05d}"
        objects.append(_pod_group(group, min_member=group_size, queue=queue_names[g % queues]))
        label = {f"{keys.GROUP}/pod-group": group}
        for i in range(group_size):
            objects.append(
                _pod(
                    f"{group}-{i:02d}",
                    cpu="250m",
                    memory="1Gi",
                    node=names[(g * group_size + i) % nodes],
                    labels=label,
                )
            )
    groups = max(1, pods // group_size)
    for g in range(groups):
        group = f"job-{g:04d}"
        objects.append(_pod_group(group, min_member=group_size, queue=queue_names[g % queues]))
        label = {f"{keys.GROUP}/pod-group": group}
        objects += [
            _pod(f"{group}-{i:02d}", cpu="500m", memory="1Gi", labels=label)
            for i in range(group_size)
        ]
    return Workload(scenario="cycle", nodes=nodes, pods=groups * group_size, objects=tuple(objects))


# kube-scheduler's scheduler_perf shapes for the constraint plugins: 5000 nodes, some pods
# already placed with the shape's constraint, then the pods to place (one session).

_HOSTNAME = "kubernetes.io/hostname"
_ZONE = "topology.kubernetes.io/zone"
_ZONES = 3
_COLOR = {"color": "green"}


def _term(key: str) -> core.PodAffinityTerm:
    return {"topologyKey": key, "labelSelector": {"matchLabels": dict(_COLOR)}}


def _constrained(
    scenario: str,
    *,
    nodes: int,
    pods: int,
    running: int,
    extra: core.PodSpec,
    ports: collections.abc.Sequence[core.ContainerPort] = (),
    zones: bool = False,
) -> Workload:
    names = _node_names(nodes)
    objects: list[Obj] = [
        _node(n, labels={_ZONE: f"zone-{i % _ZONES}"} if zones else None)
        for i, n in enumerate(names)
    ]
    objects += [
        _pod(
            f"init-{i:05d}",
            cpu="100m",
            memory="500Mi",
            node=names[i % nodes],
            labels=_COLOR,
            extra=extra,
            ports=ports,
        )
        for i in range(running)
    ]
    objects += [
        _pod(f"pod-{i:05d}", cpu="100m", memory="500Mi", labels=_COLOR, extra=extra, ports=ports)
        for i in range(pods)
    ]
    return Workload(scenario=scenario, nodes=nodes, pods=pods, objects=tuple(objects))


def anti_affinity(*, nodes: int = 5000, pods: int = 1000) -> Workload:
    """SchedulingPodAntiAffinity: pods repelling each other per node (required), 1000 already
    placed."""
    extra: core.PodSpec = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [_term(_HOSTNAME)]
            }
        }
    }
    return _constrained(
        "anti-affinity", nodes=nodes, pods=pods, running=min(1000, nodes // 5), extra=extra
    )


def preferred_affinity(*, nodes: int = 5000, pods: int = 1000) -> Workload:
    """SchedulingPreferredPodAffinity: pods preferring nodes with their kind, 5000 placed."""
    extra: core.PodSpec = {
        "affinity": {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": _term(_HOSTNAME)}
                ]
            }
        }
    }
    return _constrained("preferred-affinity", nodes=nodes, pods=pods, running=nodes, extra=extra)


def topology_spread(*, nodes: int = 5000, pods: int = 1000) -> Workload:
    """TopologySpreading: pods spread over 3 zones (maxSkew 5, DoNotSchedule), 1000 placed."""
    extra: core.PodSpec = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 5,
                "topologyKey": _ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": dict(_COLOR)},
            }
        ]
    }
    return _constrained(
        "topology-spread",
        nodes=nodes,
        pods=pods,
        running=min(1000, nodes // 5),
        extra=extra,
        zones=True,
    )


def host_ports(*, nodes: int = 5000, pods: int = 1000) -> Workload:
    """Host ports: every pod binds host port 8080 (one per node), 1000 placed."""
    return _constrained(
        "host-ports",
        nodes=nodes,
        pods=pods,
        running=min(1000, nodes // 5),
        extra={},
        ports=[{"containerPort": 8080, "hostPort": 8080}],
    )


_DRIVER = "ebs.csi.aws.com"


def _claim(name: str, *, volume: str | None) -> storage.PersistentVolumeClaim:
    spec: storage.PersistentVolumeClaimSpec = {
        "storageClassName": "zonal",
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "10Gi"}},
    }
    if volume is not None:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "bench", "uid": f"uid-claim-{name}"},
        "spec": spec,
        "status": {"phase": "Bound" if volume is not None else "Pending"},
    }


def volumes(*, nodes: int = 5000, pods: int = 1000) -> Workload:
    """Volumes: every pod has its own claim of a CSI driver nodes attach 16 of, 1000 placed."""
    names = _node_names(nodes)
    objects: list[Obj] = [
        _node(n, labels={_ZONE: f"zone-{i % _ZONES}"}) for i, n in enumerate(names)
    ]
    objects += [
        storage.CSINode(
            apiVersion="storage.k8s.io/v1",
            kind="CSINode",
            metadata={"name": n},
            spec={"drivers": [{"name": _DRIVER, "nodeID": n, "allocatable": {"count": 16}}]},
        )
        for n in names
    ]
    objects.append(
        storage.StorageClass(
            apiVersion="storage.k8s.io/v1",
            kind="StorageClass",
            metadata={"name": "zonal"},
            provisioner=_DRIVER,
            volumeBindingMode="WaitForFirstConsumer",
            allowedTopologies=[
                {
                    "matchLabelExpressions": [
                        {"key": _ZONE, "values": [f"zone-{z}" for z in range(_ZONES)]}
                    ]
                }
            ],
        )
    )
    for i in range(min(1000, nodes // 5)):
        volume = f"pv-{i:05d}"
        objects.append(
            storage.PersistentVolume(
                apiVersion="v1",
                kind="PersistentVolume",
                metadata={"name": volume},
                spec={
                    "storageClassName": "zonal",
                    "capacity": {"storage": "10Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "csi": {"driver": _DRIVER, "volumeHandle": volume},
                    "claimRef": {"namespace": "bench", "name": f"run-{i:05d}"},
                },
                status={"phase": "Bound"},
            )
        )
        objects.append(_claim(f"run-{i:05d}", volume=volume))
        mount: core.PodSpec = {
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": f"run-{i:05d}"}}]
        }
        objects.append(
            _pod(f"init-{i:05d}", cpu="100m", memory="500Mi", node=names[i % nodes], extra=mount)
        )
    for i in range(pods):
        objects.append(_claim(f"data-{i:05d}", volume=None))
        mount = {
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": f"data-{i:05d}"}}]
        }
        objects.append(_pod(f"pod-{i:05d}", cpu="100m", memory="500Mi", extra=mount))
    return Workload(scenario="volumes", nodes=nodes, pods=pods, objects=tuple(objects))


_BACKLOG_SHAPES = (("1", "4Gi"), ("2", "8Gi"), ("4", "16Gi"))


def backlog(*, nodes: int = 1000, pods: int = 50_000, queues: int = 10) -> Workload:
    """Full nodes (four running pods of cpu 2 on cpu 8) and ``pods`` pending jobs of one pod
    each, of three shapes, round-robin over ``queues`` queues."""
    names = _node_names(nodes)
    queue_names = [f"queue-{q:02d}" for q in range(queues)]
    objects: list[Obj] = [_node(n, cpu="8", memory="64Gi") for n in names]
    objects += [_queue(q) for q in queue_names]
    for i, name in enumerate(names):
        for j in range(4):
            label = {keys.QUEUE_LABEL: queue_names[(i * 4 + j) % queues]}
            objects.append(
                _pod(f"run-{i:05d}-{j}", cpu="2", memory="16Gi", node=name, labels=label)
            )
    for i in range(pods):
        cpu, memory = _BACKLOG_SHAPES[i % len(_BACKLOG_SHAPES)]
        label = {keys.QUEUE_LABEL: queue_names[i % queues]}
        objects.append(_pod(f"job-{i:05d}", cpu=cpu, memory=memory, labels=label))
    return Workload(scenario="backlog", nodes=nodes, pods=pods, objects=tuple(objects))


SCENARIOS: dict[str, collections.abc.Callable[..., Workload]] = {
    "basic": basic,
    "gang": gang,
    "cycle": cycle,
    "anti-affinity": anti_affinity,
    "preferred-affinity": preferred_affinity,
    "topology-spread": topology_spread,
    "host-ports": host_ports,
    "volumes": volumes,
}
"""Workload builders by scenario name."""


# Running -----------------------------------------------------------------------------------


def _percentile(sorted_values: collections.abc.Sequence[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def _rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kilobytes, macOS bytes.
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def load(workload: Workload) -> cache.ClusterCache:
    """A cache holding the workload's objects (the untimed set-up)."""
    loaded = cache.ClusterCache()
    adders = {
        "Node": loaded.add_node,
        "Pod": loaded.add_pod,
        "PodGroup": loaded.add_pod_group,
        "Queue": loaded.add_queue,
        "PersistentVolumeClaim": loaded.add_claim,
        "PersistentVolume": loaded.add_volume,
        "StorageClass": loaded.add_storage_class,
        "CSINode": loaded.add_csi_node,
    }
    for obj in workload.objects:
        adders[obj["kind"]](obj)
    return loaded


def default_plugins() -> tuple[str, ...]:
    """The plugins of the default profile, in order (what ``disabled`` may name)."""
    return tuple(p.name for p in registry.default_profile().plugins)


def run(
    workload: Workload, *, debug_top_n: int = 0, disabled: collections.abc.Sequence[str] = ()
) -> tuple[BenchResult, decisions.CycleResult]:
    """Run one timed session over ``workload`` with the default profile, without the plugins
    ``disabled`` names (each one of :func:`default_plugins`)."""
    unknown = sorted(set(disabled) - set(default_plugins()))
    if unknown:
        raise ValueError(f"not plugins of the default profile: {', '.join(unknown)}")
    loaded = load(workload)
    profile = registry.default_profile()
    if disabled:
        profile = profile.model_copy(update={"disabled": tuple(disabled)})
    scheduler = loop.Scheduler(
        profile,
        registry=registry.in_tree_registry(),
        clock=clocks.VirtualClock(EPOCH),
    )
    scheduler.debug_top_n = debug_top_n
    started, cpu_started = time.perf_counter(), time.process_time()
    snapshot = loaded.snapshot(EPOCH)
    result = scheduler.run_session(snapshot)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    placed = len(result.of_kind(decisions.BindPod))
    latencies = sorted(result.attempt_seconds)
    bench = BenchResult(
        scenario=workload.scenario,
        nodes=workload.nodes,
        pods=workload.pods,
        placed=placed,
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        pods_per_second=placed / seconds if seconds > 0 else 0.0,
        p50_ms=_percentile(latencies, 0.50) * 1000,
        p99_ms=_percentile(latencies, 0.99) * 1000,
        rss_mb=_rss_mb(),
        errors=len(result.errors),
        disabled=tuple(disabled),
    )
    return bench, result


def run_backlog(workload: Workload) -> BacklogResult:
    """Time the ``backlog`` cycles (see the module docstring); the JSON ``berth bench backlog``
    prints."""
    loaded = load(workload)
    scheduler = loop.Scheduler(
        registry.default_profile(),
        registry=registry.in_tree_registry(),
        clock=clocks.VirtualClock(EPOCH),
        hints=True,
    )

    def timed(now: float) -> tuple[float, decisions.CycleResult]:
        started = time.perf_counter()
        result = scheduler.run_session(loaded.snapshot(now))
        return time.perf_counter() - started, result

    first, opened = timed(EPOCH)
    quiet, _ = timed(EPOCH + 1)
    loaded.remove_pod("bench/run-00000-0")  # one running pod ends
    changed, after = timed(EPOCH + 2)
    cpu, memory = _BACKLOG_SHAPES[0]
    late = _pod("job-late", cpu=cpu, memory=memory, labels={keys.QUEUE_LABEL: "queue-00"})
    loaded.add_pod(late)  # one new job: only it wakes, and it waits with the rest
    arrived, _ = timed(EPOCH + 3)
    parked = len(scheduler.parking.parked) if scheduler.parking is not None else 0
    return {
        "scenario": workload.scenario,
        "nodes": workload.nodes,
        "pods": workload.pods,
        "first_cycle_ms": round(first * 1000, 1),
        "placed_first": len(opened.of_kind(decisions.BindPod)),
        "no_change_ms": round(quiet * 1000, 2),
        "one_change_ms": round(changed * 1000, 1),
        "placed_after_change": len(after.of_kind(decisions.BindPod)),
        "one_arrival_ms": round(arrived * 1000, 2),
        "parked": parked,
        "rss_mb": round(_rss_mb(), 1),
    }
