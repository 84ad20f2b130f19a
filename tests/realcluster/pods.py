"""Manifests the real-cluster tests create: pods, PodGroups and Queues of Berth's shapes."""

from __future__ import annotations

import typing

from berth.api import keys

Obj = dict[str, typing.Any]


def pod(
    name: str,
    *,
    cpu: str = "500m",
    memory: str = "256Mi",
    group: str | None = None,
    queue: str | None = None,
    labels: dict[str, str] | None = None,
    duration: str | None = None,
    scheduler: str | None = keys.DEFAULT_SCHEDULER_NAME,
    extra_spec: Obj | None = None,
) -> Obj:
    """A one-container pod; Berth's unless ``scheduler`` is None (the default scheduler)."""
    metadata: Obj = {"name": name, "labels": dict(labels or {})}
    if group is not None:
        metadata["labels"][keys.POD_GROUP_LABEL] = group
    if queue is not None:
        metadata["labels"][keys.QUEUE_LABEL] = queue
    if duration is not None:
        metadata["annotations"] = {keys.SIM_DURATION_ANNOTATION: duration}
    spec: Obj = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
        **(extra_spec or {}),
    }
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def pod_group(name: str, *, min_member: int, queue: str) -> Obj:
    return {
        "apiVersion": keys.API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "queue": queue},
    }


def queue(name: str, **spec: typing.Any) -> Obj:
    return {
        "apiVersion": keys.API_VERSION,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def gang(name: str, size: int, *, queue: str, cpu: str, **options: typing.Any) -> list[Obj]:
    """A PodGroup of ``size`` and its ``size`` member pods ``NAME-0`` ..."""
    members = [pod(f"{name}-{i}", cpu=cpu, group=name, **options) for i in range(size)]
    return [pod_group(name, min_member=size, queue=queue), *members]
