"""Gangs of Ray clusters: ``ray.io/v1`` RayCluster and RayJob.

A cluster's gang is its head plus, for every worker group not suspended, the workers it starts
with times ``numOfHosts`` (default 1): ``minReplicas`` when the cluster autoscales
(``enableInTreeAutoscaling``: the floor, not the desired count), otherwise ``replicas``
(default 1) clamped to ``[minReplicas, maxReplicas]``, as KubeRay sizes its own gangs. A
RayJob's gang is the cluster of its ``rayClusterSpec``; its submitter pod (``K8sJobMode``) joins
the group but is not counted: it starts only once the cluster is ready.
"""

from __future__ import annotations

from berth.api import core, objects
from berth.workloads import fields, gangs

__all__ = ["cluster_size", "raycluster", "rayjob"]


def cluster_size(spec: fields.Fields, /, *, path: str) -> tuple[int, str]:
    """Pods a RayCluster ``spec`` starts with (head included) and how that was computed."""
    autoscaling = spec.get("enableInTreeAutoscaling") is True
    fields.mapping(spec, "headGroupSpec", path=path, required=True)
    total, parts = 1, ["head 1"]
    for i, group in enumerate(fields.sequence(spec, "workerGroupSpecs", path=path)):
        where = f"{path}.workerGroupSpecs[{i}]"
        name = fields.text(group, "groupName", path=where) or str(i)
        if group.get("suspend") is True:
            continue
        low = fields.integer(group, "minReplicas", path=where, default=0)
        high = fields.integer(group, "maxReplicas", path=where, default=2**31 - 1)
        if high < low:
            raise gangs.OwnerSpecError(f"{where}.maxReplicas {high} is below minReplicas {low}")
        hosts = fields.integer(group, "numOfHosts", path=where, default=1, minimum=1)
        if autoscaling:
            count = low
        else:
            count = min(max(fields.integer(group, "replicas", path=where, default=1), low), high)
        total += count * hosts
        parts.append(f"{name} {count}" + (f"x{hosts} hosts" if hosts > 1 else ""))
    how = " + ".join(parts) + (" (autoscaling: minReplicas)" if autoscaling else "")
    return total, how


def raycluster(owner: objects.ForeignObject, /, *, pod: core.Pod) -> gangs.Gang:
    """The gang of a RayCluster."""
    spec = fields.mapping(owner, "spec", path="RayCluster", required=True)
    total, how = cluster_size(spec, path="spec")
    return gangs.Gang(min_member=total, why=how)


def rayjob(owner: objects.ForeignObject, /, *, pod: core.Pod) -> gangs.Gang:
    """The gang of a RayJob: its cluster (the submitter is not counted)."""
    spec = fields.mapping(owner, "spec", path="RayJob", required=True)
    cluster = fields.mapping(spec, "rayClusterSpec", path="spec")
    if not cluster:
        # A RayJob on an existing cluster (clusterSelector) owns only its submitter.
        return gangs.Gang(min_member=1, why="submitter only (runs on an existing cluster)")
    total, how = cluster_size(cluster, path="spec.rayClusterSpec")
    return gangs.Gang(min_member=total, why=f"{how} (submitter not counted)")
