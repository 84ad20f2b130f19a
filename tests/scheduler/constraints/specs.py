"""Builders for pod constraint fields (wire form), shared by the constraint tests."""

from __future__ import annotations

import collections.abc
import typing

Obj = dict[str, typing.Any]
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def labels(**values: str) -> Obj:
    """A label selector with ``matchLabels``."""
    return {"matchLabels": dict(values)}


def term(
    key: str,
    selector: Obj | None,
    *,
    namespaces: collections.abc.Iterable[str] | None = None,
    namespace_selector: Obj | None = None,
) -> Obj:
    """A pod affinity term."""
    out: Obj = {"topologyKey": key}
    if selector is not None:
        out["labelSelector"] = selector
    if namespaces is not None:
        out["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        out["namespaceSelector"] = namespace_selector
    return out


def affinity(
    *,
    required: collections.abc.Iterable[Obj] = (),
    preferred: collections.abc.Iterable[tuple[int, Obj]] = (),
    anti: collections.abc.Iterable[Obj] = (),
    anti_preferred: collections.abc.Iterable[tuple[int, Obj]] = (),
) -> Obj:
    """``spec`` fields with ``affinity.podAffinity``/``podAntiAffinity``."""
    out: Obj = {}
    for kind, hard, soft in (
        ("podAffinity", list(required), list(preferred)),
        ("podAntiAffinity", list(anti), list(anti_preferred)),
    ):
        part: Obj = {}
        if hard:
            part["requiredDuringSchedulingIgnoredDuringExecution"] = hard
        if soft:
            part["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in soft
            ]
        if part:
            out[kind] = part
    return {"affinity": out}


def spread(
    max_skew: int,
    key: str,
    selector: Obj | None,
    *,
    hard: bool = True,
    min_domains: int | None = None,
    match_label_keys: collections.abc.Iterable[str] | None = None,
    node_affinity_policy: str | None = None,
    node_taints_policy: str | None = None,
) -> Obj:
    """One topology spread constraint."""
    out: Obj = {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
    }
    if selector is not None:
        out["labelSelector"] = selector
    if min_domains is not None:
        out["minDomains"] = min_domains
    if match_label_keys is not None:
        out["matchLabelKeys"] = list(match_label_keys)
    if node_affinity_policy is not None:
        out["nodeAffinityPolicy"] = node_affinity_policy
    if node_taints_policy is not None:
        out["nodeTaintsPolicy"] = node_taints_policy
    return out


def spreading(*constraints: Obj) -> Obj:
    """``spec`` fields with ``topologySpreadConstraints``."""
    return {"topologySpreadConstraints": list(constraints)}


def ports(*entries: tuple[int, str, str], host_network: bool = False) -> Obj:
    """``spec`` fields: one container binding ``(hostPort, protocol, hostIP)`` entries."""
    listed = []
    for port, protocol, ip in entries:
        entry: Obj = {"containerPort": port, "protocol": protocol}
        if not host_network:
            entry["hostPort"] = port
        if ip:
            entry["hostIP"] = ip
        listed.append(entry)
    out: Obj = {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": "100m"}},
                "ports": listed,
            }
        ]
    }
    if host_network:
        out["hostNetwork"] = True
    return out


# Volumes ----------------------------------------------------------------------------------


def claims(*names: str) -> Obj:
    """A pod spec mounting the PersistentVolumeClaims ``names`` (volume ``v<i>`` each)."""
    return {
        "volumes": [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": name}}
            for i, name in enumerate(names)
        ]
    }


def claim(
    name: str,
    *,
    storage_class: str | None = "local",
    volume: str | None = None,
    size: str = "1Gi",
    modes: collections.abc.Iterable[str] = ("ReadWriteOnce",),
    namespace: str = "default",
    annotations: collections.abc.Mapping[str, str] | None = None,
) -> Obj:
    """A PersistentVolumeClaim; bound to ``volume`` when given."""
    spec: Obj = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume is not None:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
        "spec": spec,
        "status": {"phase": "Bound" if volume is not None else "Pending"},
    }


def hostname_affinity(*nodes: str) -> Obj:
    """A PersistentVolume's ``nodeAffinity`` admitting ``nodes``."""
    return {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": list(nodes)}]}
            ]
        }
    }


def volume(
    name: str,
    *,
    storage_class: str = "local",
    size: str = "10Gi",
    nodes: collections.abc.Iterable[str] | None = None,
    claim: str | None = None,
    driver: str | None = None,
    modes: collections.abc.Iterable[str] = ("ReadWriteOnce", "ReadWriteOncePod"),
) -> Obj:
    """A PersistentVolume (on ``nodes`` only when given; bound to ``claim`` ``ns/name``)."""
    spec: Obj = {
        "storageClassName": storage_class,
        "capacity": {"storage": size},
        "accessModes": list(modes),
    }
    if nodes is not None:
        spec["nodeAffinity"] = hostname_affinity(*nodes)
    if driver is not None:
        spec["csi"] = {"driver": driver, "volumeHandle": f"handle-{name}"}
    if claim is not None:
        namespace, _, claim_name = claim.rpartition("/")
        spec["claimRef"] = {"namespace": namespace or "default", "name": claim_name}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"phase": "Bound" if claim is not None else "Available"},
    }


def storage_class(
    name: str,
    *,
    provisioner: str = "kubernetes.io/no-provisioner",
    wait: bool = True,
    zones: collections.abc.Iterable[str] | None = None,
) -> Obj:
    """A StorageClass (``WaitForFirstConsumer`` unless ``wait`` is False; ``zones``: allowed)."""
    out: Obj = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer" if wait else "Immediate",
    }
    if zones is not None:
        out["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": ZONE, "values": list(zones)}]}
        ]
    return out


def csi_node(node: str, **limits: int) -> Obj:
    """A CSINode: per driver (``_`` in the keyword stands for ``.``) its attach limit."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {
            "drivers": [
                {"name": d.replace("_", "."), "nodeID": node, "allocatable": {"count": n}}
                for d, n in limits.items()
            ]
        },
    }
