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
