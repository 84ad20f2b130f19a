"""What Berth asks of a Node's annotations: keep autoscalers from removing a node it holds.

A node holding a Berth Reservation has no pod on it (reserve pods live in Berth's memory), a
node nominated for a gang waits for its victims to leave, and in admission mode a pinned pod
is not bound yet: to Karpenter and Cluster Autoscaler each such node looks empty or
underused, so consolidation may delete the very node Berth is keeping. While the node holds
any of these (:class:`Hold`), it carries both autoscalers' node-level opt-outs:

- ``karpenter.sh/do-not-disrupt: "true"`` on the Node (Karpenter's ``StateNode`` reads the
  Node's annotations once it is registered; a pod-level annotation of that name exists too,
  but a reservation has no pod);
- ``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`` (Cluster Autoscaler's
  node annotation; its pod-level ``safe-to-evict`` has the same problem).

and no longer than that: a protected node that holds nothing is consolidated as any other.
Berth records which of those annotations it set in its own (:data:`PROTECTION_ANNOTATION`,
with the holds, for people) and removes only those, so an annotation a user set stays.

Pure: :func:`holds_in` gathers the holds from a snapshot and what the binder and admission
know (:func:`holds_by_node` from plain facts), :func:`annotations_patch` says what to change on
one Node (a merge patch of its annotations, or None) for the operator's node writer.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import json
import typing

from berth.api import keys

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import snapshots

__all__ = [
    "AUTOSCALER_ANNOTATIONS",
    "CLUSTER_AUTOSCALER_SCALE_DOWN_DISABLED",
    "KARPENTER_DO_NOT_DISRUPT",
    "PROTECTION_ANNOTATION",
    "Hold",
    "HoldKind",
    "annotations_patch",
    "holds_by_node",
    "holds_in",
]

KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
CLUSTER_AUTOSCALER_SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
AUTOSCALER_ANNOTATIONS = (KARPENTER_DO_NOT_DISRUPT, CLUSTER_AUTOSCALER_SCALE_DOWN_DISABLED)
"""What both autoscalers read as "leave this node", each set to ``"true"``."""

PROTECTION_ANNOTATION = f"{keys.GROUP}/scale-down-protection"
"""Berth's record on a node it protects: JSON ``{"set": [the annotations Berth added],
"holds": ["Reservation team/r", ...]}``; the holds are for people (``kubectl describe node``)."""

_TRUE = "true"


class HoldKind(enum.Enum):
    """Why Berth keeps a node (the value opens the hold's line in Berth's record)."""

    RESERVATION = "Reservation"  # an Available Reservation holds room there
    NOMINATED = "Nominated"  # a waiting gang (or pod) is nominated there, victims leaving
    PINNED = "Pinned"  # admission mode: a pod is pinned there and not bound yet


@dataclasses.dataclass(frozen=True)
class Hold:
    """One reason to keep a node: what holds it (``kind``, ``namespace/name``)."""

    kind: HoldKind
    name: str

    def __str__(self) -> str:
        return f"{self.kind.value} {self.name}"


def holds_by_node(
    *,
    reservations: collections.abc.Iterable[tuple[str, str | None, bool]] = (),
    nominated: collections.abc.Mapping[str, str] | None = None,
    pinned: collections.abc.Mapping[str, str] | None = None,
    groups: collections.abc.Mapping[str, str] | None = None,
) -> dict[str, tuple[Hold, ...]]:
    """Per node, what holds it (sorted; nodes holding nothing are absent).

    ``reservations``: ``(key, node, available)`` of each Reservation (one holds its node
    while Available); ``nominated``: pod key -> the node it is nominated to; ``pinned``: pod
    key -> the node admission pinned it to; ``groups``: pod key -> its PodGroup's key (a
    nomination is told as its gang's, so a gang nominated to one node is one hold there).
    """
    groups = groups or {}
    found: dict[str, set[Hold]] = {}
    for key, node, available in reservations:
        if available and node:
            found.setdefault(node, set()).add(Hold(HoldKind.RESERVATION, key))
    for pod, node in (nominated or {}).items():
        found.setdefault(node, set()).add(Hold(HoldKind.NOMINATED, groups.get(pod, pod)))
    for pod, node in (pinned or {}).items():
        found.setdefault(node, set()).add(Hold(HoldKind.PINNED, pod))
    return {node: tuple(sorted(holds, key=str)) for node, holds in sorted(found.items())}


def holds_in(
    snapshot: snapshots.Snapshot,
    *,
    nominated: collections.abc.Mapping[str, str] | None = None,
    pinned: collections.abc.Mapping[str, str] | None = None,
) -> dict[str, tuple[Hold, ...]]:
    """:func:`holds_by_node` for ``snapshot``'s Reservations and the nominations (the
    binder's last written ``nominatedNodeName`` per pod) and admission pins given; a
    nominated pod's hold is its PodGroup's (a pod's own group of one is the pod). A
    nomination holds only while its pod waits: once the pod is placed (or gone, or done) its
    node is held by the pod itself, which both autoscalers see."""
    waiting: dict[str, str] = {}
    groups: dict[str, str] = {}
    for key, node in (nominated or {}).items():
        pod = snapshot.pods.get(key)
        if pod is None or pod.node_name is not None or pod.terminal or pod.deleting:
            continue
        waiting[key] = node
        group = snapshot.group_of(pod)
        if group is not None and not group.implicit:
            groups[key] = str(group.key)
    nominated = waiting
    return holds_by_node(
        reservations=(
            (str(r.key), r.node_name, r.available and not r.terminal)
            for r in snapshot.reservations.values()
        ),
        nominated=nominated,
        pinned=pinned,
        groups=groups,
    )


def annotations_patch(
    annotations: collections.abc.Mapping[str, str], holds: collections.abc.Sequence[Hold]
) -> dict[str, str | None] | None:
    """The merge patch of a Node's ``metadata.annotations`` that makes it carry the
    autoscalers' opt-outs exactly while ``holds`` is not empty; None when it already does.

    An opt-out a user set (``"true"`` before Berth protected the node) is never Berth's: it
    is neither recorded nor removed. A record Berth cannot read is treated as empty, so only
    annotations it can prove it set are ever removed.
    """
    recorded = _recorded(annotations.get(PROTECTION_ANNOTATION))
    patch: dict[str, str | None] = {}
    if not holds:
        for name in recorded:
            if annotations.get(name) == _TRUE:
                patch[name] = None
        if PROTECTION_ANNOTATION in annotations:
            patch[PROTECTION_ANNOTATION] = None
        return patch or None
    ours = [
        name
        for name in AUTOSCALER_ANNOTATIONS
        if name in recorded or annotations.get(name) != _TRUE
    ]
    for name in ours:
        if annotations.get(name) != _TRUE:
            patch[name] = _TRUE
    record = json.dumps(
        {"set": sorted(ours), "holds": [str(hold) for hold in holds]}, separators=(",", ":")
    )
    if annotations.get(PROTECTION_ANNOTATION) != record:
        patch[PROTECTION_ANNOTATION] = record
    return patch or None


def _recorded(text: str | None) -> tuple[str, ...]:
    """The autoscaler annotations Berth's record says it set (only names it knows)."""
    if not text:
        return ()
    try:
        value = json.loads(text)
    except ValueError:
        return ()
    names = value.get("set") if isinstance(value, dict) else None
    if not isinstance(names, list):
        return ()
    return tuple(name for name in AUTOSCALER_ANNOTATIONS if name in names)
