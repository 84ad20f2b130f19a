"""Gangs of Kubeflow training jobs: PyTorchJob, TFJob, XGBoostJob, PaddleJob, MPIJob.

``runPolicy.schedulingPolicy.minAvailable`` wins when set (the training operator's own
PodGroup uses it); otherwise a PyTorchJob with ``elasticPolicy.minReplicas`` needs that many
workers (plus its master), and every other job needs all its replicas: the sum over its replica
specs of ``replicas`` (default 1). An MPIJob counts its launcher and workers, but not the
launcher when ``launcherCreationPolicy: WaitForWorkersReady`` (the launcher is created once the
workers run). ``schedulingPolicy.queue`` and ``priorityClass`` carry over to the group.
"""

from __future__ import annotations

from berth.api import core, objects
from berth.workloads import fields, gangs

__all__ = ["mpijob", "replica_job"]

REPLICA_SPECS = {
    "PyTorchJob": "pytorchReplicaSpecs",
    "TFJob": "tfReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs",
    "PaddleJob": "paddleReplicaSpecs",
    "MPIJob": "mpiReplicaSpecs",
}
"""The field holding each kind's replica specs (replica type -> spec)."""


def _replicas(spec: fields.Fields, *, kind: str) -> dict[str, int]:
    field = REPLICA_SPECS[kind]
    specs = fields.mapping(spec, field, path="spec", required=True)
    if not specs:
        raise gangs.OwnerSpecError(f"spec.{field} is empty")
    out: dict[str, int] = {}
    for rtype, rspec in sorted(specs.items()):
        if not isinstance(rspec, dict):
            raise gangs.OwnerSpecError(f"spec.{field}.{rtype} is {rspec!r}, not an object")
        out[str(rtype)] = fields.integer(rspec, "replicas", path=f"spec.{field}.{rtype}", default=1)
    return out


def _policy(spec: fields.Fields) -> tuple[int | None, str | None, str | None]:
    run = fields.mapping(spec, "runPolicy", path="spec")
    policy = fields.mapping(run, "schedulingPolicy", path="spec.runPolicy")
    where = "spec.runPolicy.schedulingPolicy"
    return (
        fields.integer(policy, "minAvailable", path=where, minimum=1),
        fields.text(policy, "queue", path=where),
        fields.text(policy, "priorityClass", path=where),
    )


def _gang(kind: str, spec: fields.Fields, *, total: int, how: str) -> gangs.Gang:
    min_available, queue, priority = _policy(spec)
    if min_available is not None:
        total, how = min_available, f"schedulingPolicy.minAvailable {min_available}"
    return gangs.Gang(
        min_member=max(total, 1),
        why=how,
        queue=queue,
        priority_class_name=priority,
    )


def replica_job(owner: objects.ForeignObject, /, *, pod: core.Pod) -> gangs.Gang:
    """The gang of a PyTorchJob, TFJob, XGBoostJob or PaddleJob (``kubeflow.org/v1``)."""
    kind = str(owner.get("kind") or "")
    spec = fields.mapping(owner, "spec", path=kind, required=True)
    counts = _replicas(spec, kind=kind)
    total = sum(counts.values())
    how = " + ".join(f"{rtype} {n}" for rtype, n in counts.items())
    elastic = fields.mapping(spec, "elasticPolicy", path="spec") if kind == "PyTorchJob" else {}
    minimum = fields.integer(elastic, "minReplicas", path="spec.elasticPolicy", minimum=1)
    if minimum is not None:
        masters = counts.get("Master", 0)
        total, how = masters + minimum, f"elasticPolicy.minReplicas {minimum} + Master {masters}"
    return _gang(kind, spec, total=total, how=how)


def mpijob(owner: objects.ForeignObject, /, *, pod: core.Pod) -> gangs.Gang:
    """The gang of an MPIJob (``kubeflow.org/v2beta1``): launcher and workers."""
    spec = fields.mapping(owner, "spec", path="MPIJob", required=True)
    counts = _replicas(spec, kind="MPIJob")
    workers = counts.get("Worker", 0)
    launchers = counts.get("Launcher", 0)
    policy = fields.text(spec, "launcherCreationPolicy", path="spec")
    if policy == "WaitForWorkersReady":
        total, how = workers, f"Worker {workers} (the launcher starts once they run)"
    else:
        total, how = workers + launchers, f"Launcher {launchers} + Worker {workers}"
    return _gang("MPIJob", spec, total=total, how=how)
