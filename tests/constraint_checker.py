"""An independent checker of placements: which required constraints a set of bindings breaks.

Written apart from Berth's plugins (it imports nothing from ``berth``): it reads nodes and pods
as the API returns them (dicts) and replays bindings in the order they happened, checking each
against the pods already there, with kube-scheduler's documented semantics. Used by the
property tests of the constraint plugins, and meant for the differential test against the real
kube-scheduler (the same function over what each scheduler bound).

:func:`violations` checks, for every binding in order:

- the node exists, takes pods (not cordoned, taints tolerated), matches ``nodeSelector`` and
  required node affinity, and has room for the pod's cpu, memory and pod count;
- host ports: no pod on the node binds a conflicting one (same protocol and port; same IP or
  either ``0.0.0.0``);
- terms name pods in their ``namespaces``, in namespaces their ``namespaceSelector`` matches
  (the Namespace objects given; ``{}`` matches all), else in their owner's namespace;
- required pod anti-affinity, both ways: no pod in the binding's domain is named by its terms,
  and it is named by no term of a pod in that pod's domain;
- required pod affinity: each term names a pod in the binding's domain (the pod itself counts
  when it matches all its own terms: the first of a self-affine group);
- hard topology spread: ``pods in the domain + 1 - the minimum over eligible domains`` (0 when
  fewer than ``minDomains``) is at most ``maxSkew``; eligible nodes have every constraint key,
  match the pod's node affinity (``nodeAffinityPolicy``) and, with ``nodeTaintsPolicy: Honor``,
  have no untolerated taint;
- volumes (the PersistentVolumeClaims, PersistentVolumes and CSINodes given as ``storage``):
  a claim's volume (bound, or the one it was bound to since) must admit the node by its
  required node affinity; a ``ReadWriteOncePod`` claim is used by one placed pod at most; a
  pod attaching CSI volumes not yet attached to the node brings the distinct volumes of their
  driver there to the CSINode's ``allocatable.count`` at most (kube-scheduler's
  NodeVolumeLimits judges only the drivers of a pod's new volumes: a pod adding none passes
  on a node already over the limit).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

Obj = collections.abc.Mapping[str, typing.Any]

__all__ = ["Violation", "violations"]

_UNITS = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "m": 1,
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Violation:
    """One broken rule: the pod (``namespace/name``), its node, and what broke."""

    pod: str
    node: str
    rule: str
    detail: str


def _milli(text: typing.Any) -> int:
    """A quantity in milli-units (enough of the format for tests: plain, m, k/M/G, Ki/Mi/Gi)."""
    value = str(text)
    for suffix, factor in _UNITS.items():
        if value.endswith(suffix):
            number = float(value[: -len(suffix)])
            return round(number) if suffix == "m" else round(number * factor * 1000)
    return round(float(value) * 1000)


def _key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _labels(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _namespace(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "default")


def _requirement(req: Obj, value: str | None) -> bool:
    op, values = req.get("operator"), [str(v) for v in req.get("values") or []]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False


def _selects(selector: Obj | None, labels: collections.abc.Mapping[str, str]) -> bool:
    """A label selector on labels: ``None`` selects nothing, ``{}`` everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(
        _requirement(r, labels.get(r["key"])) for r in selector.get("matchExpressions") or []
    )


def _with_keys(
    selector: Obj | None, pod: Obj, keys: typing.Any, *, negate: bool = False
) -> Obj | None:
    """``selector`` with ``matchLabelKeys`` (or ``mismatchLabelKeys``) of ``pod`` merged in."""
    if selector is None or not keys:
        return selector
    own = _labels(pod)
    extra = [
        {"key": k, "operator": "NotIn" if negate else "In", "values": [own[k]]}
        for k in keys
        if k in own
    ]
    return {**selector, "matchExpressions": [*(selector.get("matchExpressions") or []), *extra]}


def _node_matches(pod: Obj, node: Obj) -> bool:
    """nodeSelector and required node affinity."""
    spec, labels = pod.get("spec") or {}, _labels(node)
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is None:
        return True
    name = (node.get("metadata") or {}).get("name")
    for term in required.get("nodeSelectorTerms") or []:
        exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not exprs and not fields:
            continue
        if all(_requirement(r, labels.get(r["key"])) for r in exprs) and all(
            _requirement(r, name) for r in fields
        ):
            return True
    return False


def _untolerated(pod: Obj, node: Obj) -> list[str]:
    """The node's NoSchedule/NoExecute taints (a cordon counts) the pod does not tolerate."""
    taints = list((node.get("spec") or {}).get("taints") or [])
    if (node.get("spec") or {}).get("unschedulable"):
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    out = []
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            out.append(f"{taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}")
    return out


def _tolerates(toleration: Obj, taint: Obj) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if not toleration.get("key"):
        return toleration.get("operator") == "Exists"
    if toleration["key"] != taint.get("key"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return str(toleration.get("value", "")) == str(taint.get("value", ""))


def _requests(pod: Obj) -> dict[str, int]:
    spec = pod.get("spec") or {}
    total: dict[str, int] = {"pods": 1000}
    for container in spec.get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = total.get(name, 0) + _milli(value)
    return total


def _host_ports(pod: Obj) -> list[tuple[str, str, int]]:
    spec = pod.get("spec") or {}
    out = []
    containers = list(spec.get("containers") or []) + [
        c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"
    ]
    for container in containers:
        for port in container.get("ports") or []:
            number = port.get("hostPort") or (
                port.get("containerPort") if spec.get("hostNetwork") else None
            )
            if number:
                out.append((port.get("protocol") or "TCP", port.get("hostIP") or "0.0.0.0", number))
    return out


def _term_names(
    term: Obj, owner: Obj, other: Obj, namespaces: collections.abc.Mapping[str, Obj]
) -> bool:
    """Whether a pod affinity ``term`` of ``owner`` names ``other`` (``namespaces``: the
    Namespace objects by name, for a ``namespaceSelector``)."""
    listed = set(term.get("namespaces") or [])
    ns_selector = term.get("namespaceSelector")
    if ns_selector is None and not listed:
        listed = {_namespace(owner)}
    where = _namespace(other)
    if where not in listed:
        if ns_selector is None:
            return False
        if not _selects(ns_selector, _labels(namespaces.get(where) or {})):
            return False
    selector = _with_keys(term.get("labelSelector"), owner, term.get("matchLabelKeys"))
    selector = _with_keys(selector, owner, term.get("mismatchLabelKeys"), negate=True)
    return _selects(selector, _labels(other))


def _terms(pod: Obj, kind: str) -> list[Obj]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def _same_domain(a: Obj, b: Obj, key: str) -> bool:
    la, lb = _labels(a), _labels(b)
    return key in la and key in lb and la[key] == lb[key]


def violations(
    nodes: collections.abc.Iterable[Obj],
    *,
    running: collections.abc.Iterable[Obj],
    bindings: collections.abc.Iterable[tuple[Obj, str]],
    namespaces: collections.abc.Iterable[Obj] = (),
    storage: collections.abc.Iterable[Obj] = (),
) -> list[Violation]:
    """Every required constraint the ``bindings`` (pod, node name), in order, break, given
    the pods ``running`` (bound) before them, the Namespace objects (for a
    ``namespaceSelector``) and the storage objects (claims, volumes, CSINodes, as they are
    after the bindings); empty when the placement is sound."""
    volumes = _Storage(storage)
    by_namespace = {str(n["metadata"]["name"]): n for n in namespaces}
    by_name = {str(n["metadata"]["name"]): n for n in nodes}
    placed: list[tuple[Obj, str]] = [
        (p, str(p["spec"]["nodeName"]))
        for p in running
        if (p.get("spec") or {}).get("nodeName")
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    found: list[Violation] = []
    for pod, node_name in bindings:
        key = _key(pod)

        def broke(rule: str, detail: str, *, pod_key: str = key, node: str = node_name) -> None:
            found.append(Violation(pod=pod_key, node=node, rule=rule, detail=detail))

        node = by_name.get(node_name)
        if node is None:
            broke("node", "no such node")
            placed.append((pod, node_name))
            continue
        _check_node(pod, node, placed, node_name, broke)
        _check_ports(pod, placed, node_name, broke)
        _check_pod_affinity(pod, node, placed, by_name, by_namespace, broke)
        _check_spread(pod, node, placed, by_name, broke)
        _check_volumes(pod, node, placed, node_name, volumes, broke)
        placed.append((pod, node_name))
    return found


class _Storage:
    """Claims by ``namespace/name``, volumes by name, attach limits by node and driver."""

    def __init__(self, objects: collections.abc.Iterable[Obj]) -> None:
        self.claims: dict[str, Obj] = {}
        self.volumes: dict[str, Obj] = {}
        self.limits: dict[str, dict[str, int]] = {}
        for obj in objects:
            kind, meta = obj.get("kind"), obj.get("metadata") or {}
            if kind == "PersistentVolumeClaim":
                self.claims[f"{meta.get('namespace') or 'default'}/{meta['name']}"] = obj
            elif kind == "PersistentVolume":
                self.volumes[str(meta["name"])] = obj
            elif kind == "CSINode":
                drivers = (obj.get("spec") or {}).get("drivers") or []
                self.limits[str(meta["name"])] = {
                    str(d["name"]): int(d["allocatable"]["count"])
                    for d in drivers
                    if (d.get("allocatable") or {}).get("count") is not None
                }

    def claim_keys(self, pod: Obj) -> list[str]:
        return [
            f"{_namespace(pod)}/{v['persistentVolumeClaim']['claimName']}"
            for v in (pod.get("spec") or {}).get("volumes") or []
            if v.get("persistentVolumeClaim")
        ]

    def volume_of(self, claim: str) -> Obj | None:
        """The claim's volume: by ``spec.volumeName``, else the one whose claimRef names it."""
        found = self.claims.get(claim)
        name = ((found or {}).get("spec") or {}).get("volumeName")
        if name:
            return self.volumes.get(str(name))
        for volume in self.volumes.values():
            ref = (volume.get("spec") or {}).get("claimRef") or {}
            if f"{ref.get('namespace') or 'default'}/{ref.get('name')}" == claim:
                return volume
        return None

    def csi_volumes(self, pod: Obj) -> set[tuple[str, str]]:
        """The (driver, volume handle) of each CSI volume the pod's claims attach."""
        found: set[tuple[str, str]] = set()
        for claim in self.claim_keys(pod):
            csi = ((self.volume_of(claim) or {}).get("spec") or {}).get("csi") or {}
            if csi.get("driver"):
                found.add((str(csi["driver"]), str(csi.get("volumeHandle"))))
        return found


def _check_volumes(
    pod: Obj,
    node: Obj,
    placed: list[tuple[Obj, str]],
    name: str,
    storage: _Storage,
    broke: Broke,
) -> None:
    mine = storage.claim_keys(pod)
    if not mine:
        return
    attached: dict[str, set[str]] = {}
    for other, where in placed:
        if where == name:
            for driver, handle in storage.csi_volumes(other):
                attached.setdefault(driver, set()).add(handle)
    added: dict[str, set[str]] = {}
    for driver, handle in storage.csi_volumes(pod):
        if handle not in attached.get(driver, set()):
            added.setdefault(driver, set()).add(handle)
    for claim in mine:
        found = storage.claims.get(claim)
        volume = storage.volume_of(claim)
        if volume is not None:
            required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required")
            as_pod = {"spec": {"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": required}}}}  # fmt: skip
            if required is not None and not _node_matches(as_pod, node):
                broke("volume node affinity", f"{claim}'s volume does not admit the node")
        modes = ((found or {}).get("spec") or {}).get("accessModes") or []
        if "ReadWriteOncePod" in modes:
            users = [_key(o) for o, _ in placed if claim in storage.claim_keys(o)]
            if users:
                broke("ReadWriteOncePod", f"{claim} already used by {', '.join(users)}")
    # Only the drivers the pod attaches new volumes of: a node already over a driver's limit
    # (it was lowered, or another scheduler placed there) still takes a pod adding none.
    for driver, handles in added.items():
        limit = storage.limits.get(name, {}).get(driver)
        total = len(attached.get(driver, set())) + len(handles)
        if limit is not None and total > limit:
            broke("volume limits", f"{total} {driver} volumes > {limit}")


Broke = collections.abc.Callable[..., None]


def _check_node(
    pod: Obj, node: Obj, placed: list[tuple[Obj, str]], name: str, broke: Broke
) -> None:
    if not _node_matches(pod, node):
        broke("node affinity", "node does not match nodeSelector/required node affinity")
    for taint in _untolerated(pod, node):
        broke("taints", f"untolerated taint {taint}")
    allocatable = {
        k: _milli(v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()
    }
    used: dict[str, int] = {}
    for other, where in [*placed, (pod, name)]:
        if where == name:
            for resource, value in _requests(other).items():
                used[resource] = used.get(resource, 0) + value
    for resource, value in used.items():
        if value > allocatable.get(resource, 0) and value > 0:
            broke("resources", f"{resource} {value} > allocatable {allocatable.get(resource, 0)}")


def _check_ports(pod: Obj, placed: list[tuple[Obj, str]], name: str, broke: Broke) -> None:
    mine = _host_ports(pod)
    for other, where in placed:
        if where != name:
            continue
        for protocol, ip, port in _host_ports(other):
            for my_protocol, my_ip, my_port in mine:
                if (protocol, port) == (my_protocol, my_port) and (
                    ip == my_ip or "0.0.0.0" in (ip, my_ip)
                ):
                    broke("host ports", f"{my_protocol}/{my_port} also bound by {_key(other)}")


def _check_pod_affinity(
    pod: Obj,
    node: Obj,
    placed: list[tuple[Obj, str]],
    by_name: collections.abc.Mapping[str, Obj],
    by_namespace: collections.abc.Mapping[str, Obj],
    broke: Broke,
) -> None:
    def names(term: Obj, owner: Obj, other: Obj) -> bool:
        return _term_names(term, owner, other, by_namespace)

    here = [(o, by_name[w]) for o, w in placed if w in by_name]
    for term in _terms(pod, "podAntiAffinity"):
        key = term["topologyKey"]
        for other, other_node in here:
            if _same_domain(node, other_node, key) and names(term, pod, other):
                broke("pod anti-affinity", f"{_key(other)} is in the same {key} domain")
    # Symmetric: placed pods whose anti-affinity names this pod.
    for other, other_node in here:
        for term in _terms(other, "podAntiAffinity"):
            key = term["topologyKey"]
            if _same_domain(node, other_node, key) and names(term, other, pod):
                broke("existing pod anti-affinity", f"{_key(other)} excludes it from {key}")
    affinity = _terms(pod, "podAffinity")
    self_affine = all(names(t, pod, pod) for t in affinity)
    for term in affinity:
        key = term["topologyKey"]
        if key not in _labels(node):
            broke("pod affinity", f"node lacks topologyKey {key}")
            continue
        near = any(_same_domain(node, n, key) and names(term, pod, o) for o, n in here)
        if not near and not self_affine:
            broke("pod affinity", f"no pod named by the term in its {key} domain")


def _check_spread(
    pod: Obj,
    node: Obj,
    placed: list[tuple[Obj, str]],
    by_name: collections.abc.Mapping[str, Obj],
    broke: Broke,
) -> None:
    constraints = [
        c
        for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []
        if c.get("whenUnsatisfiable") == "DoNotSchedule"
    ]
    if not constraints:
        return
    keys = {c["topologyKey"] for c in constraints}
    namespace = _namespace(pod)
    for c in constraints:
        key = c["topologyKey"]
        if key not in _labels(node):
            broke("topology spread", f"node lacks topologyKey {key}")
            continue
        selector = _with_keys(c.get("labelSelector"), pod, c.get("matchLabelKeys"))
        eligible = [
            n
            for n in by_name.values()
            if keys <= set(_labels(n))
            and (c.get("nodeAffinityPolicy", "Honor") == "Ignore" or _node_matches(pod, n))
            and (c.get("nodeTaintsPolicy", "Ignore") == "Ignore" or not _untolerated(pod, n))
        ]
        counts = {_labels(n)[key]: 0 for n in eligible}
        eligible_names = {str(n["metadata"]["name"]) for n in eligible}
        for other, where in placed:
            if where not in eligible_names or _namespace(other) != namespace:
                continue
            if (other.get("metadata") or {}).get("deletionTimestamp"):
                continue
            if _selects(selector, _labels(other)):
                counts[_labels(by_name[where])[key]] += 1
        if not counts:
            continue
        lowest = min(counts.values())
        if c.get("minDomains") and len(counts) < c["minDomains"]:
            lowest = 0
        here = counts.get(_labels(node)[key], 0)
        self_match = 1 if _selects(selector, _labels(pod)) else 0
        if here + self_match - lowest > c["maxSkew"]:
            broke(
                "topology spread",
                f"{key}={_labels(node)[key]}: {here}+{self_match}-{lowest} > {c['maxSkew']}",
            )
