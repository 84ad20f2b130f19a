"""Raw pods as Berth reads and rewrites them, purely: pins, gates, and pod request bodies.

Admission mode (:mod:`berth.kube.admission.admission`) pins a gated pod to the node Berth chose,
removes Berth's gate, and sends a rejected bare pod back gated; the webhook
(:mod:`berth.operator.webhooks`) decides whether a pod is Berth's at all. Both binders
(:mod:`berth.kube.binder.decisions`, admission) post the same Binding and Eviction bodies.
Everything here is a function of plain JSON dicts, without I/O; what goes over the wire is the
callers'.
"""

from __future__ import annotations

import copy
import typing

from berth.api import core, keys, objects, workload_refs
from berth.scheduler.snapshot import wire

__all__ = [
    "PIN_FIELD",
    "belongs",
    "binding",
    "controlled",
    "eviction",
    "gate_names",
    "path",
    "pin_affinity",
    "recreated_pod",
    "unpin_affinity",
    "unschedulable_message",
    "without_gate",
]

PIN_FIELD = "metadata.name"
"""The node field a pin matches (``matchFields``: the only field node affinity may use)."""

_GROUP_KEYS = (keys.POD_GROUP_LABEL, keys.INTEROP_POD_GROUP_LABEL, keys.QUEUE_LABEL)


def path(key: str) -> str:
    """The API path of the pod ``namespace/name`` (subresources are appended to it)."""
    namespace, _, name = key.partition("/")
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


# Reading -------------------------------------------------------------------------------------


def belongs(pod: core.Pod) -> bool:
    """The pod names a group or a queue, by any key Berth reads (labels, the interop
    annotation, Kubernetes' ``spec.schedulingGroup`` or ``spec.workloadRef``): it is Berth's
    to admit."""
    metadata = wire.part(pod.get("metadata"))
    labels = wire.part(metadata.get("labels"))
    if any(labels.get(k) for k in _GROUP_KEYS):
        return True
    if wire.part(metadata.get("annotations")).get(keys.INTEROP_POD_GROUP_ANNOTATION):
        return True
    spec = wire.part(pod.get("spec"))
    return bool(wire.part(spec.get("schedulingGroup")).get("podGroupName")) or (
        workload_refs.from_pod_spec(spec) is not None
    )


def gate_names(pod: core.Pod) -> tuple[str, ...]:
    """The names of the pod's scheduling gates, in order."""
    gates = wire.part(pod.get("spec")).get("schedulingGates")
    return tuple(
        str(g.get("name") or "")
        for g in (gates if isinstance(gates, list) else ())
        if isinstance(g, dict)
    )


def unschedulable_message(pod: core.Pod) -> str | None:
    """The message of a ``PodScheduled=False/Unschedulable`` condition, else None."""
    for condition in wire.part(pod.get("status")).get("conditions") or ():
        if (
            isinstance(condition, dict)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return str(condition.get("message") or "unschedulable")
    return None


def controlled(pod: core.Pod) -> bool:
    """A controller (Job, ReplicaSet, ...) owns the pod and recreates it when it is evicted."""
    return any(
        isinstance(ref, dict) and ref.get("controller")
        for ref in wire.part(pod.get("metadata")).get("ownerReferences") or ()
    )


# Rewriting -----------------------------------------------------------------------------------


def without_gate(pod: core.Pod) -> list[core.PodSchedulingGate] | None:
    """``spec.schedulingGates`` without Berth's admission gate (the others' kept, in order);
    None when none is left, which is how a merge patch removes the field."""
    gates = wire.part(pod.get("spec")).get("schedulingGates") or ()
    kept: list[core.PodSchedulingGate] = [
        g for g in gates if isinstance(g, dict) and g.get("name") != keys.ADMISSION_GATE
    ]
    return kept or None


def _pin(node: str) -> core.NodeSelectorRequirement:
    return {"key": PIN_FIELD, "operator": "In", "values": [node]}


def _terms(affinity: core.Affinity | None) -> list[core.NodeSelectorTerm] | None:
    """The required node selector terms of ``spec.affinity`` (a copy), None when there are none."""
    node_affinity = wire.part(wire.part(affinity).get("nodeAffinity"))
    required = wire.part(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = required.get("nodeSelectorTerms")
    if not isinstance(terms, list) or not terms:
        return None
    return [copy.deepcopy(t) if isinstance(t, dict) else {} for t in terms]


def _with_terms(
    affinity: core.Affinity | None, terms: list[core.NodeSelectorTerm] | None
) -> core.Affinity | None:
    """``affinity`` (a copy) with its required node selector terms replaced (or removed)."""
    out: core.Affinity = copy.deepcopy(affinity) if isinstance(affinity, dict) else {}
    node: core.NodeAffinity = {**wire.part(out.get("nodeAffinity"))}
    if terms:
        node["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    else:
        node.pop("requiredDuringSchedulingIgnoredDuringExecution", None)
    if node:
        out["nodeAffinity"] = node
    else:
        out.pop("nodeAffinity", None)
    return out or None


def pin_affinity(affinity: core.Affinity | None, /, *, node: str) -> core.Affinity:
    """``spec.affinity`` requiring ``node``: the pin ANDed into every existing term (so the
    pod's own affinity still holds), or one term of its own. Only additions, as Kubernetes
    allows on a gated pod."""
    terms: list[core.NodeSelectorTerm] = _terms(affinity) or [{}]
    for term in terms:
        given = term.get("matchFields")
        fields = list(given) if isinstance(given, list) else []
        if _pin(node) not in fields:
            fields.append(_pin(node))
        term["matchFields"] = fields
    pinned = _with_terms(affinity, terms)
    assert pinned is not None  # there is at least one term
    return pinned


def unpin_affinity(affinity: core.Affinity | None, /, *, node: str) -> core.Affinity | None:
    """``spec.affinity`` without the pin to ``node`` (what :func:`pin_affinity` added)."""
    terms = _terms(affinity)
    if terms is None:
        return copy.deepcopy(affinity) if isinstance(affinity, dict) and affinity else None
    kept: list[core.NodeSelectorTerm] = []
    for term in terms:
        fields = [f for f in term.get("matchFields") or () if f != _pin(node)]
        if fields:
            term["matchFields"] = fields
        else:
            term.pop("matchFields", None)
        if term:
            kept.append(term)
    return _with_terms(affinity, kept)


def recreated_pod(pod: core.Pod, *, node: str | None) -> core.Pod:
    """A bare pod as it was created, gated again: same name, labels and spec, no pin."""
    metadata = wire.part(pod.get("metadata"))
    annotations = {
        k: v
        for k, v in wire.part(metadata.get("annotations")).items()
        if k not in (keys.ADMITTED_NODE_ANNOTATION, keys.ADMITTED_AT_ANNOTATION)
    }
    new_meta: objects.ObjectMeta = {
        "name": str(metadata.get("name") or ""),
        "namespace": str(metadata.get("namespace") or ""),
    }
    if metadata.get("labels"):
        new_meta["labels"] = copy.deepcopy(metadata["labels"])
    if metadata.get("ownerReferences"):
        new_meta["ownerReferences"] = copy.deepcopy(metadata["ownerReferences"])
    if annotations:
        new_meta["annotations"] = annotations
    spec = typing.cast(core.PodSpec, copy.deepcopy(dict(wire.part(pod.get("spec")))))
    spec.pop("nodeName", None)
    if node is not None:
        affinity = unpin_affinity(spec.get("affinity"), node=node)
        if affinity is None:
            spec.pop("affinity", None)
        else:
            spec["affinity"] = affinity
    gates: list[core.PodSchedulingGate] = [
        g for g in spec.get("schedulingGates") or () if isinstance(g, dict)
    ]
    if not any(g.get("name") == keys.ADMISSION_GATE for g in gates):
        gates.append({"name": keys.ADMISSION_GATE})
    spec["schedulingGates"] = gates
    return {"apiVersion": "v1", "kind": "Pod", "metadata": new_meta, "spec": spec}


# Request bodies ------------------------------------------------------------------------------


def binding(
    key: str, *, uid: str, node: str, annotations: typing.Mapping[str, str] | None = None
) -> core.Binding:
    """The Binding that puts pod ``key`` on ``node``; its UID (when known) is the precondition.
    ``annotations`` are set on the pod by the API server in the same write (it copies a
    Binding's annotations onto the pod), so no separate patch of the pod is needed."""
    namespace, _, name = key.partition("/")
    metadata: objects.ObjectMeta = {"name": name, "namespace": namespace}
    if uid:
        metadata["uid"] = uid
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def eviction(key: str, *, uid: str) -> core.Eviction:
    """The Eviction of pod ``key``; its UID (when known) is the precondition."""
    namespace, _, name = key.partition("/")
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}} if uid else {},
    }
