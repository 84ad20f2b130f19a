"""Concise builders of API objects for scheduler tests, as the API server returns them (dicts).

Shared by the snapshot, plugin, framework and action tests. Every builder returns a fresh dict
with ``apiVersion``/``kind`` set, so :func:`cache_of` can load any mix of them::

    cache = cache_of(
        node("n1", cpu="8", gpu=2, labels={"zone": "a"}, taints=[taint("dedicated", "infer")]),
        pod_group("train", min_member=4, queue="research"),
        *[pod(f"train-{i}", group="train", cpu="1", gpu=1) for i in range(4)],
    )
    snap = cache.snapshot(EPOCH)

Times are seconds since the epoch (``created=EPOCH + 5``); ``EPOCH`` matches the
``virtual_clock`` fixture's start.
"""

from __future__ import annotations

import collections.abc
import datetime
import typing

from berth.scheduler.snapshot import cache as cache_module

Obj = dict[str, typing.Any]

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z, as in tests/conftest.py
SCHEDULER = "berth-scheduler"
GPU = "nvidia.com/gpu"


def timestamp(seconds: float) -> str:
    """RFC 3339 text of ``seconds`` since the epoch."""
    when = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S") + (
        f".{when.microsecond:06d}Z" if when.microsecond else "Z"
    )


def _meta(
    name: str,
    *,
    namespace: str | None,
    labels: collections.abc.Mapping[str, str] | None = None,
    annotations: collections.abc.Mapping[str, str] | None = None,
    created: float | None = None,
    uid: str | None = None,
) -> Obj:
    meta: Obj = {"name": name, "uid": uid or f"uid-{namespace or ''}-{name}"}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    meta["creationTimestamp"] = timestamp(EPOCH if created is None else created)
    return meta


# Nodes ------------------------------------------------------------------------------------


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> Obj:
    """A node taint."""
    out: Obj = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


def node(
    name: str,
    *,
    cpu: str | int = "4",
    memory: str = "32Gi",
    pods: int = 110,
    gpu: int | None = None,
    storage: str | None = None,
    extra: collections.abc.Mapping[str, str | int] | None = None,
    labels: collections.abc.Mapping[str, str] | None = None,
    taints: collections.abc.Iterable[Obj] = (),
    unschedulable: bool = False,
) -> Obj:
    """A Ready node offering ``cpu``/``memory``/``pods`` (and ``gpu``, ``extra``)."""
    allocatable: Obj = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    if gpu is not None:
        allocatable[GPU] = str(gpu)
    if storage is not None:
        allocatable["ephemeral-storage"] = storage
    allocatable.update({k: str(v) for k, v in (extra or {}).items()})
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    spec: Obj = {}
    taint_list = list(taints)
    if taint_list:
        spec["taints"] = taint_list
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(name, namespace=None, labels=all_labels),
        "spec": spec,
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


# Pods -------------------------------------------------------------------------------------


def container(
    name: str = "main",
    *,
    requests: collections.abc.Mapping[str, str | int] | None = None,
    limits: collections.abc.Mapping[str, str | int] | None = None,
    restart_policy: str | None = None,
) -> Obj:
    """A container with ``requests`` (and ``limits``); ``restart_policy="Always"`` makes an
    init container a sidecar."""
    res: Obj = {}
    if requests is not None:
        res["requests"] = dict(requests)
    if limits is not None:
        res["limits"] = dict(limits)
    out: Obj = {"name": name, "image": "busybox", "resources": res}
    if restart_policy is not None:
        out["restartPolicy"] = restart_policy
    return out


def toleration(
    key: str = "",
    value: str = "",
    *,
    operator: str | None = None,
    effect: str = "",
    seconds: int | None = None,
) -> Obj:
    """A toleration; the operator defaults to ``Exists`` without a value, else ``Equal``."""
    out: Obj = {"operator": operator or ("Equal" if value else "Exists")}
    if key:
        out["key"] = key
    if value:
        out["value"] = value
    if effect:
        out["effect"] = effect
    if seconds is not None:
        out["tolerationSeconds"] = seconds
    return out


def expr(key: str, operator: str, *values: str) -> Obj:
    """A node selector requirement: ``expr("zone", "In", "a", "b")``."""
    out: Obj = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def affinity(
    *,
    required: collections.abc.Iterable[collections.abc.Iterable[Obj]] | None = None,
    required_fields: collections.abc.Iterable[Obj] | None = None,
    preferred: collections.abc.Iterable[tuple[int, collections.abc.Iterable[Obj]]] = (),
) -> Obj:
    """``spec.affinity`` with node affinity: ``required`` is a list of terms (each a list of
    ``expr``), ``required_fields`` one more term of ``matchFields``, ``preferred`` a list of
    ``(weight, [expr, ...])``."""
    node_affinity: Obj = {}
    if required is not None or required_fields is not None:
        terms: list[Obj] = [{"matchExpressions": list(term)} for term in required or ()]
        if required_fields is not None:
            terms.append({"matchFields": list(required_fields)})
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": terms
        }
    pref = [
        {"weight": weight, "preference": {"matchExpressions": list(term)}}
        for weight, term in preferred
    ]
    if pref:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = pref
    return {"nodeAffinity": node_affinity}


def pod(
    name: str,
    *,
    namespace: str = "default",
    cpu: str | int | None = "100m",
    memory: str | None = "500Mi",
    gpu: int | None = None,
    requests: collections.abc.Mapping[str, str | int] | None = None,
    containers: collections.abc.Iterable[Obj] | None = None,
    init_containers: collections.abc.Iterable[Obj] | None = None,
    overhead: collections.abc.Mapping[str, str] | None = None,
    group: str | None = None,
    queue: str | None = None,
    reservation: str | None = None,
    node: str | None = None,
    phase: str | None = None,
    priority: int | None = None,
    priority_class: str | None = None,
    labels: collections.abc.Mapping[str, str] | None = None,
    annotations: collections.abc.Mapping[str, str] | None = None,
    node_selector: collections.abc.Mapping[str, str] | None = None,
    affinity: Obj | None = None,
    tolerations: collections.abc.Iterable[Obj] = (),
    gates: collections.abc.Iterable[str] = (),
    created: float | None = None,
    deleting: bool = False,
    scheduler: str = SCHEDULER,
    uid: str | None = None,
    spec: Obj | None = None,
) -> Obj:
    """A pod of one container requesting ``cpu``/``memory``/``gpu`` (or ``requests``), or of
    ``containers``; Berth's by default (``scheduler``); ``spec`` adds more spec fields."""
    all_labels = dict(labels or {})
    if group is not None:
        all_labels["scheduling.berth.io/pod-group"] = group
    if queue is not None:
        all_labels["scheduling.berth.io/queue"] = queue
    if reservation is not None:
        all_labels["scheduling.berth.io/reservation"] = reservation
    if containers is None:
        if requests is None:
            requests = {}
            if cpu is not None:
                requests["cpu"] = str(cpu)
            if memory is not None:
                requests["memory"] = memory
            if gpu is not None:
                requests[GPU] = str(gpu)
        containers = [container(requests=requests)]
    extra_spec = spec
    spec = {"schedulerName": scheduler, "containers": list(containers)}
    if extra_spec:
        spec.update(extra_spec)
    if init_containers is not None:
        spec["initContainers"] = list(init_containers)
    if overhead is not None:
        spec["overhead"] = dict(overhead)
    if node is not None:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    if affinity is not None:
        spec["affinity"] = affinity
    toleration_list = list(tolerations)
    if toleration_list:
        spec["tolerations"] = toleration_list
    gate_list = [{"name": g} for g in gates]
    if gate_list:
        spec["schedulingGates"] = gate_list
    meta = _meta(
        name,
        namespace=namespace,
        labels=all_labels,
        annotations=annotations,
        created=created,
        uid=uid,
    )
    if deleting:
        meta["deletionTimestamp"] = timestamp(EPOCH)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase or ("Running" if node is not None else "Pending")},
    }


# Berth's kinds and PriorityClasses ---------------------------------------------------------


def pod_group(
    name: str,
    *,
    namespace: str = "default",
    min_member: int = 1,
    queue: str | None = None,
    min_resources: collections.abc.Mapping[str, str | int] | None = None,
    priority_class: str | None = None,
    timeout: int | None = None,
    created: float | None = None,
) -> Obj:
    """A PodGroup (wire form)."""
    spec: Obj = {"minMember": min_member}
    if queue is not None:
        spec["queue"] = queue
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": _meta(name, namespace=namespace, created=created),
        "spec": spec,
    }


def gang(
    name: str,
    size: int,
    *,
    min_member: int | None = None,
    namespace: str = "default",
    queue: str | None = None,
    created: float | None = None,
    **pod_fields: typing.Any,
) -> list[Obj]:
    """A PodGroup of ``min_member`` (default ``size``) and its ``size`` pods ``name-<i>``."""
    objs = [
        pod_group(
            name,
            namespace=namespace,
            min_member=size if min_member is None else min_member,
            queue=queue,
            created=created,
        )
    ]
    objs += [
        pod(f"{name}-{i}", namespace=namespace, group=name, created=created, **pod_fields)
        for i in range(size)
    ]
    return objs


def queue(
    name: str,
    *,
    parent: str | None = None,
    guaranteed: collections.abc.Mapping[str, str | int] | None = None,
    limit: collections.abc.Mapping[str, str | int] | None = None,
    weight: int = 1,
    priority: int = 0,
    state: str | None = None,
) -> Obj:
    """A Queue (wire form)."""
    spec: Obj = {"weight": weight, "priority": priority}
    if parent is not None:
        spec["parent"] = parent
    if guaranteed is not None:
        spec["guaranteed"] = dict(guaranteed)
    if limit is not None:
        spec["limit"] = dict(limit)
    if state is not None:
        spec["state"] = state
    return {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "Queue",
        "metadata": _meta(name, namespace=None),
        "spec": spec,
    }


def priority_class(name: str, value: int, *, global_default: bool = False) -> Obj:
    """A ``scheduling.k8s.io/v1`` PriorityClass."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": _meta(name, namespace=None),
        "value": value,
        "globalDefault": global_default,
    }


def reservation(
    name: str,
    *,
    namespace: str = "default",
    cpu: str = "1",
    memory: str = "1Gi",
    owners: collections.abc.Iterable[Obj] | None = None,
    ttl: str | None = None,
) -> Obj:
    """A Reservation (wire form) holding ``cpu``/``memory`` for ``owners`` (default: any pod
    labelled ``app: <name>``)."""
    spec: Obj = {
        "template": {"spec": {"containers": [container(requests={"cpu": cpu, "memory": memory})]}},
        "owners": list(owners or [{"labelSelector": {"matchLabels": {"app": name}}}]),
    }
    if ttl is not None:
        spec["ttl"] = ttl
    return {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "Reservation",
        "metadata": _meta(name, namespace=namespace),
        "spec": spec,
    }


# Loading ----------------------------------------------------------------------------------

_ADDERS: dict[str, str] = {
    "Node": "add_node",
    "Pod": "add_pod",
    "PodGroup": "add_pod_group",
    "Queue": "add_queue",
    "Reservation": "add_reservation",
    "PriorityClass": "add_priority_class",
}


def load(cache: cache_module.ClusterCache, *objects: Obj) -> cache_module.ClusterCache:
    """Add every object to ``cache`` by its ``kind``, in order."""
    for obj in objects:
        getattr(cache, _ADDERS[obj["kind"]])(obj)
    return cache


def cache_of(*objects: Obj) -> cache_module.ClusterCache:
    """A fresh cache holding ``objects``."""
    return load(cache_module.ClusterCache(), *objects)
