"""Minimal workload objects as their operators create them, and their pods, for the tests.

Each builder returns the owner as the API server holds it (apiVersion, kind, metadata with a
UID, the spec fields the operator's CRD defines); :func:`pod_of` makes a pod owned by an object
the way its controller does (a ``controller: true`` ownerReference).
"""

from __future__ import annotations

import pathlib
import typing

Obj = dict[str, typing.Any]
ROOT = pathlib.Path(__file__).resolve().parents[2]


def obj(
    api_version: str, kind: str, name: str, spec: Obj, *, uid: str = "", **meta: typing.Any
) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid or f"uid-{kind}-{name}",
            **meta,
        },
        "spec": spec,
    }


def ref(owner: Obj) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owned(child: Obj, owner: Obj) -> Obj:
    """``child`` with ``owner`` as its controller."""
    return {**child, "metadata": {**child["metadata"], "ownerReferences": [ref(owner)]}}


def pod_of(owner: Obj | None, name: str, *, labels: dict[str, str] | None = None) -> Obj:
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-pod-{name}",
            "labels": labels or {},
        },
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    return owned(pod, owner) if owner is not None else pod


def template(replicas: int | None = None) -> Obj:
    spec: Obj = {"template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return spec


def job(
    name: str, *, parallelism: int | None = 4, completions: int | None = 4, **extra: typing.Any
) -> Obj:
    spec: Obj = {"template": template()["template"], **extra}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return obj("batch/v1", "Job", name, spec)


def jobset(name: str, rjobs: list[Obj], **extra: typing.Any) -> Obj:
    return obj("jobset.x-k8s.io/v1alpha2", "JobSet", name, {"replicatedJobs": rjobs, **extra})


def rjob(name: str, *, replicas: int = 1, parallelism: int = 1, **extra: typing.Any) -> Obj:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
                "template": template()["template"],
            }
        },
        **extra,
    }


def kubeflow(kind: str, name: str, replicas: dict[str, int | None], **extra: typing.Any) -> Obj:
    field = {
        "PyTorchJob": "pytorchReplicaSpecs",
        "TFJob": "tfReplicaSpecs",
        "XGBoostJob": "xgbReplicaSpecs",
        "PaddleJob": "paddleReplicaSpecs",
        "MPIJob": "mpiReplicaSpecs",
    }[kind]
    version = "kubeflow.org/v2beta1" if kind == "MPIJob" else "kubeflow.org/v1"
    return obj(version, kind, name, {field: {k: template(v) for k, v in replicas.items()}, **extra})


def ray_spec(*groups: Obj, autoscaling: bool = False) -> Obj:
    spec: Obj = {
        "headGroupSpec": {"rayStartParams": {}, **template()},
        "workerGroupSpecs": list(groups),
    }
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
    return spec


def worker_group(
    name: str,
    *,
    replicas: int | None = None,
    low: int | None = None,
    high: int | None = None,
    hosts: int | None = None,
    **extra: typing.Any,
) -> Obj:
    group: Obj = {"groupName": name, "rayStartParams": {}, **template(), **extra}
    for key, value in (
        ("replicas", replicas),
        ("minReplicas", low),
        ("maxReplicas", high),
        ("numOfHosts", hosts),
    ):
        if value is not None:
            group[key] = value
    return group
