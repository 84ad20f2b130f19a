"""Workload generators: a scenario's ``workloads`` entries -> arrival times and jobs.

Each arrival of a :class:`~berth.sim.scenarios.Workload` is one *job*: ``replicas`` pods, and
a PodGroup when the job is a gang (``minMember > 1``) or names a queue. Objects come out as
API dicts, the way the API server would hold them before anything is scheduled (the in-memory
cluster adds uids and timestamps when it creates them, as the API server does):

- the PodGroup ``<workload>-<index>`` with ``minMember``, ``queue`` and ``priorityClassName``;
- pods ``<job>-<replica>`` with ``schedulerName: berth-scheduler``, the group label, the
  annotation ``sim.berth.io/duration`` (how long the pod runs once bound) beside the workload's
  annotations (a share of a GPU: ``gpu-fraction``), the workload's labels plus
  ``sim.berth.io/workload`` and ``sim.berth.io/job``, its requests, node selector, GPU models
  (a required node affinity on ``nvidia.com/gpu.product``), tolerations and priority.

Indices are zero-padded so that name order is arrival order. Poisson arrivals draw their gaps
from a generator seeded with the scenario's seed and the workload's name, so adding a workload
does not change the arrivals of the others. Used by :mod:`berth.sim.runner`.
"""

from __future__ import annotations

import dataclasses
import random
import typing

from berth.api import core, custom_objects, dra, keys, podgroups, resources
from berth.sim import scenarios

__all__ = [
    "GPU_MODEL_LABEL",
    "JOB_LABEL",
    "ROLE_LABEL",
    "WORKLOAD_LABEL",
    "Job",
    "arrival_times",
    "make_job",
]

WORKLOAD_LABEL = "sim.berth.io/workload"
"""Label of every generated pod and PodGroup: the workload (generator) it came from."""
JOB_LABEL = "sim.berth.io/job"
"""Label of every generated pod: the job (one arrival) it belongs to."""
ROLE_LABEL = "sim.berth.io/role"
"""Label of a generated pod of a role: the role (PodGroup sub-group) it belongs to."""
GPU_MODEL_LABEL = "nvidia.com/gpu.product"
"""The node label a workload's ``gpuModels`` select (GPU feature discovery's)."""


@dataclasses.dataclass(frozen=True)
class Job:
    """One arrival of a workload, as the objects to create."""

    workload: str
    namespace: str
    name: str
    queue: str | None  # the queue the job is accounted to; None for plain pods
    min_member: int
    duration_ms: int
    # The job's PodGroup and Pods, created as they are.
    pod_group: custom_objects.PodGroup | None = dataclasses.field(hash=False)
    pods: tuple[core.Pod, ...] = dataclasses.field(hash=False)


def arrival_times(workload: scenarios.Workload, *, seed: int) -> list[int]:
    """When each of the workload's jobs arrives, in milliseconds of virtual time."""
    start = workload.at.ms
    every = workload.every.ms if workload.every is not None else 0
    if workload.arrival == "fixed" or workload.count == 1:
        return [start + i * every for i in range(workload.count)]
    rng = random.Random(f"{seed}:{workload.namespace}/{workload.name}")
    times, now = [], start
    for _ in range(workload.count):
        times.append(now)
        now += round(rng.expovariate(1 / every))
    return times


def make_job(
    workload: scenarios.Workload,
    *,
    index: int,
    scheduler_name: str = keys.DEFAULT_SCHEDULER_NAME,
) -> Job:
    """The objects of job number ``index`` of ``workload``, for ``scheduler_name``."""
    job_name = f"{workload.name}-{index:0{len(str(workload.count - 1))}d}"
    queue = (workload.queue or keys.DEFAULT_QUEUE) if workload.is_group else None
    base_labels = {WORKLOAD_LABEL: workload.name}
    pod_group: custom_objects.PodGroup | None = None
    if queue is not None:  # workload.is_group
        group_spec: custom_objects.PodGroupSpec = {
            "minMember": workload.min_member,
            "queue": queue,
        }
        if workload.priority_class_name is not None:
            group_spec["priorityClassName"] = workload.priority_class_name
        if workload.topology is not None:
            group_spec["topology"] = _topology(workload.topology)
        if workload.roles:
            group_spec["subGroups"] = [_sub_group(role) for role in workload.roles]
        if workload.maximum_execution_time_seconds is not None:
            group_spec["maximumExecutionTimeSeconds"] = workload.maximum_execution_time_seconds
        if workload.on_maximum_execution_time is not None:
            group_spec["onMaximumExecutionTime"] = workload.on_maximum_execution_time.value
        pod_group = {
            "apiVersion": keys.API_VERSION,
            "kind": "PodGroup",
            "metadata": {"name": job_name, "namespace": workload.namespace, "labels": base_labels},
            "spec": group_spec,
            "status": {"phase": "Pending"},
        }
    width = len(str(workload.replicas - 1))
    roles = [role for role in workload.roles for _ in range(role.replicas)]
    pods = tuple(
        _pod(
            workload,
            job_name=job_name,
            name=f"{job_name}-{r:0{width}d}",
            grouped=pod_group,
            scheduler_name=scheduler_name,
            role=roles[r] if roles else None,
        )
        for r in range(workload.replicas)
    )
    return Job(
        workload=workload.name,
        namespace=workload.namespace,
        name=job_name,
        queue=queue,
        min_member=workload.min_member,
        duration_ms=workload.duration.ms,
        pod_group=pod_group,
        pods=pods,
    )


def _sub_group(role: scenarios.Role) -> custom_objects.SubGroup:
    """A role as a PodGroup's sub-group, selecting its pods by :data:`ROLE_LABEL`."""
    out: custom_objects.SubGroup = {
        "name": role.name,
        "minMember": role.min_member,
        "selector": {"matchLabels": {ROLE_LABEL: role.name}},
    }
    if role.topology is not None:
        out["topology"] = _topology(role.topology)
    return out


def _topology(topology: podgroups.TopologyConstraint) -> custom_objects.TopologyConstraint:
    # The model's wire form is the record's: ``required`` and ``preferred`` topology keys.
    return typing.cast(custom_objects.TopologyConstraint, topology.to_api())


def _pod(
    workload: scenarios.Workload,
    *,
    job_name: str,
    name: str,
    grouped: custom_objects.PodGroup | None,  # the job's PodGroup, if any
    scheduler_name: str,
    role: scenarios.Role | None = None,
) -> core.Pod:
    labels = {**workload.labels, WORKLOAD_LABEL: workload.name, JOB_LABEL: job_name}
    if grouped is not None:
        labels[keys.POD_GROUP_LABEL] = job_name
    requests = workload.requests
    if role is not None:
        labels[ROLE_LABEL] = role.name
        if role.requests is not None:
            requests = role.requests
    spec: core.PodSpec = {
        "schedulerName": scheduler_name,
        "containers": [
            {
                "name": "main",
                "image": "sim",
                "resources": {"requests": resources.ResourceList(requests).to_api()},
            }
        ],
    }
    if workload.node_selector:
        spec["nodeSelector"] = dict(workload.node_selector)
    if workload.gpu_models:
        spec["affinity"] = _gpu_models(workload.gpu_models)
    if workload.tolerations:
        # The models' wire forms are the records'.
        spec["tolerations"] = [
            typing.cast(core.Toleration, t.to_api()) for t in workload.tolerations
        ]
    if workload.priority is not None:
        spec["priority"] = workload.priority
    if workload.priority_class_name is not None:
        spec["priorityClassName"] = workload.priority_class_name
    if workload.resource_claims:
        spec["resourceClaims"] = [
            typing.cast(dra.PodResourceClaim, c.to_api()) for c in workload.resource_claims
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": workload.namespace,
            "labels": labels,
            "annotations": _annotations(workload),
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def _gpu_models(models: list[str]) -> core.Affinity:
    """A required node affinity on the GPU model label (``In`` the models)."""
    expression = core.NodeSelectorRequirement(
        key=GPU_MODEL_LABEL, operator="In", values=list(models)
    )
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }


def _annotations(workload: scenarios.Workload) -> dict[str, str]:
    out = {**workload.annotations, keys.SIM_DURATION_ANNOTATION: str(workload.duration)}
    if workload.expected_runtime is not None:
        out[keys.EXPECTED_RUNTIME_ANNOTATION] = str(workload.expected_runtime)
    return out
