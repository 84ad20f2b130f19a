"""The workload kinds Berth knows: where to read them, which versions, how to size their gang.

One table, :data:`KINDS`, keyed by ``(API group, kind)``. A kind with a deriver makes a gang
when it is the top owner Berth knows of a pod; a kind without one (a Pod, a StatefulSet, a
CronJob, a TrainJob...) is only read on the way up, for its owners and its labels. An owner of a
kind not in the table ends the walk: the gang is derived from the highest known owner below it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

from berth.api import core, objects
from berth.workloads import batch, gangs, kubeflow, lws, ray, spark

__all__ = ["KINDS", "Deriver", "Kind", "kind_of", "split_api_version"]


class Deriver(typing.Protocol):
    """``derive(owner, *, pod) -> Gang``: the gang of ``pod`` owned (at the top) by ``owner``."""

    def __call__(self, owner: objects.ForeignObject, /, *, pod: core.Pod) -> gangs.Gang: ...


@dataclasses.dataclass(frozen=True)
class Kind:
    """A kind Berth reads when walking a pod's owners."""

    group: str  # "" for the core group
    kind: str
    plural: str
    versions: frozenset[str]  # the versions Berth reads (their fields are what it derives from)
    derive: Deriver | None = None  # None: walked through, never the source of a gang
    namespaced: bool = True

    def path(self, *, version: str, namespace: str, name: str) -> str:
        """The object's REST path."""
        root = f"/apis/{self.group}/{version}" if self.group else f"/api/{version}"
        return f"{root}/namespaces/{namespace}/{self.plural}/{name}"

    @property
    def api_versions(self) -> str:
        """The versions Berth reads, as ``group/version`` (for messages)."""
        return ", ".join(f"{self.group}/{v}" if self.group else v for v in sorted(self.versions))


def _kind(
    group: str, kind: str, plural: str, *versions: str, derive: Deriver | None = None
) -> Kind:
    return Kind(group, kind, plural, frozenset(versions), derive)


KINDS: collections.abc.Mapping[tuple[str, str], Kind] = {
    (k.group, k.kind): k
    for k in (
        # Walked through only: their pods group by what owns them.
        _kind("", "Pod", "pods", "v1"),  # Spark executors, LeaderWorkerSet workers
        _kind("apps", "StatefulSet", "statefulsets", "v1"),
        _kind("apps", "ReplicaSet", "replicasets", "v1"),
        _kind("apps", "Deployment", "deployments", "v1"),
        _kind("batch", "CronJob", "cronjobs", "v1"),
        _kind("trainer.kubeflow.org", "TrainJob", "trainjobs", "v1alpha1"),
        _kind("ray.io", "RayService", "rayservices", "v1"),
        # Gangs.
        _kind("batch", "Job", "jobs", "v1", derive=batch.job),
        _kind("jobset.x-k8s.io", "JobSet", "jobsets", "v1alpha2", derive=batch.jobset),
        _kind("kubeflow.org", "PyTorchJob", "pytorchjobs", "v1", derive=kubeflow.replica_job),
        _kind("kubeflow.org", "TFJob", "tfjobs", "v1", derive=kubeflow.replica_job),
        _kind("kubeflow.org", "XGBoostJob", "xgboostjobs", "v1", derive=kubeflow.replica_job),
        _kind("kubeflow.org", "PaddleJob", "paddlejobs", "v1", derive=kubeflow.replica_job),
        _kind("kubeflow.org", "MPIJob", "mpijobs", "v2beta1", derive=kubeflow.mpijob),
        _kind("ray.io", "RayCluster", "rayclusters", "v1", derive=ray.raycluster),
        _kind("ray.io", "RayJob", "rayjobs", "v1", derive=ray.rayjob),
        _kind(
            "sparkoperator.k8s.io",
            "SparkApplication",
            "sparkapplications",
            "v1beta2",
            derive=spark.spark_application,
        ),
        _kind(
            "leaderworkerset.x-k8s.io",
            "LeaderWorkerSet",
            "leaderworkersets",
            "v1",
            derive=lws.leaderworkerset,
        ),
    )
}


def split_api_version(api_version: str, /) -> tuple[str, str]:
    """``("batch", "v1")`` for ``batch/v1``; ``("", "v1")`` for the core ``v1``."""
    group, _, version = api_version.rpartition("/")
    return group, version


def kind_of(obj: objects.KubeObject, /) -> Kind | None:
    """The table entry for ``obj`` (by its apiVersion's group and its kind), if Berth knows it."""
    group, _ = split_api_version(obj.get("apiVersion", ""))
    return KINDS.get((group, obj.get("kind", "")))
