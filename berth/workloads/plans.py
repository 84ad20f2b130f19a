"""A pod's owners -> the group it belongs to: the rule that turns a walk into a plan.

:mod:`berth.kube.grouping.owner_groups` walks a pod's owners (each hop follows the ``controller``
ownerReference, else the first, as Kueue and KAI do) and hands the objects it read, and why the
walk ended, to :func:`plan`, which decides:

- an owner (or the pod) labelled ``scheduling.berth.io/group-by-owner: disabled``: each pod is a
  group of one (:attr:`Outcome.SINGLE`);
- an owner labelled ``scheduling.berth.io/pod-group: NAME``: its pods join that PodGroup, which
  the user writes (:attr:`Outcome.NAMED`);
- otherwise the highest owner whose kind sizes a gang (:mod:`.kinds`) gives the gang
  (:attr:`Outcome.GANG`): a PodGroup named after it (``job-train-1a2b3``), owned by it;
- no such owner: a group of one;
- and when the answer cannot be known — an owner that no longer exists (or was replaced: its
  UID differs), a known kind in a version Berth does not read, a spec it cannot read, an owner
  loop — the pod waits (:attr:`Outcome.HELD`) and ``problem`` says exactly what is wrong: no
  pod is placed against a gang that could not be sized.

The queue of the group: a ``scheduling.berth.io/queue`` label on an owner (the highest wins),
else the queue the workload's own spec names, else the pod's queue label, else the queue the
caller says the namespace defaults to. Pure: no I/O.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import hashlib

from berth.api import core, keys, objects
from berth.workloads import gangs, kinds

__all__ = [
    "MAX_NAME",
    "Chain",
    "End",
    "OwnerRef",
    "Outcome",
    "Plan",
    "group_name",
    "next_ref",
    "owner_ref",
    "plan",
]

MAX_NAME = 63
"""A derived group's name is a label value on its pods: at most 63 characters."""
DISABLED = "disabled"


@dataclasses.dataclass(frozen=True)
class OwnerRef:
    """An object one hop up: what an ownerReference (or an object's own metadata) says."""

    api_version: str
    kind: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind} {self.name}"


class End(enum.Enum):
    """Why the walk up a pod's owners ended."""

    TOP = "top"  # the last object read has no owner
    UNKNOWN_KIND = "unknown-kind"  # the next owner is of a kind Berth does not read
    FORBIDDEN = "forbidden"  # reading the next owner was refused (RBAC): stop below it
    MISSING = "missing"  # the next owner does not exist (or has another UID): deleted
    UNSUPPORTED_VERSION = "unsupported-version"  # a known kind in a version Berth cannot read
    LOOP = "loop"  # an owner seen before, or too many hops


@dataclasses.dataclass(frozen=True)
class Chain:
    """The owners read from the pod up (the pod excluded) and why the walk ended there."""

    owners: tuple[objects.ForeignObject, ...]
    end: End
    next: OwnerRef | None = None  # the owner the walk could not read (all but TOP)


class Outcome(enum.Enum):
    """What a pod's group is."""

    GANG = "gang"  # a PodGroup derived from the workload
    NAMED = "named"  # a PodGroup an owner names with the group label
    SINGLE = "single"  # a group of one
    HELD = "held"  # unknown: the pod waits; ``problem`` says why


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where a pod goes (see the module docstring)."""

    outcome: Outcome
    grouped_by: str  # "Kind/name" of the workload deciding, or "Pod/<name>"
    group: str | None = None  # GANG, NAMED: the PodGroup's name
    owner: OwnerRef | None = None  # GANG: the object the PodGroup belongs to
    gang: gangs.Gang | None = None  # GANG
    queue: str | None = None  # GANG, SINGLE: the queue
    problem: str | None = None  # HELD


def owner_ref(obj: objects.KubeObject, /) -> OwnerRef:
    """The reference to ``obj`` itself."""
    meta = obj.get("metadata", {})
    return OwnerRef(
        api_version=obj.get("apiVersion", ""),
        kind=obj.get("kind", ""),
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
    )


def next_ref(obj: objects.KubeObject, /) -> OwnerRef | None:
    """The owner to follow from ``obj``: its controller reference, else its first one."""
    refs = obj.get("metadata", {}).get("ownerReferences", [])
    usable = [r for r in refs if r.get("name")]
    if not usable:
        return None
    chosen = next((r for r in usable if r.get("controller") is True), usable[0])
    return OwnerRef(
        api_version=chosen.get("apiVersion", ""),
        kind=chosen.get("kind", ""),
        name=chosen.get("name", ""),
        uid=chosen.get("uid", ""),
    )


def group_name(owner: OwnerRef, /, *, replica: str | None = None) -> str:
    """The derived PodGroup's name: ``<kind>-<name>[-<replica>]-<5 hex of the UID>``.

    The UID part keeps a recreated workload of the same name from meeting its predecessor's
    group (garbage collection deletes that one, but not at once).
    """
    digest = hashlib.sha256(owner.uid.encode()).hexdigest()[:5]
    tail = (f"-{replica}" if replica is not None else "") + f"-{digest}"
    head = f"{owner.kind.lower()}-{owner.name}"[: MAX_NAME - len(tail)].rstrip("-.")
    return head + tail


def _labels(obj: objects.KubeObject) -> collections.abc.Mapping[str, str]:
    return obj.get("metadata", {}).get("labels", {})


def _held(pod: core.Pod, problem: str) -> Plan:
    return Plan(Outcome.HELD, grouped_by=f"Pod/{owner_ref(pod).name}", problem=problem)


def _ended_badly(chain: Chain) -> str | None:
    ref = chain.next
    if chain.end is End.MISSING:
        return f"its owner {ref} (uid {ref.uid if ref else '?'}) does not exist (deleted?)"
    if chain.end is End.UNSUPPORTED_VERSION and ref is not None:
        group, _ = kinds.split_api_version(ref.api_version)
        known = kinds.KINDS[(group, ref.kind)]
        return (
            f"its owner {ref} is of a version Berth cannot read "
            f"(it reads {ref.kind} as {known.api_versions})"
        )
    if chain.end is End.LOOP:
        return f"its owners form a loop or a chain too long to follow (at {ref})"
    return None


def plan(pod: core.Pod, chain: Chain, /, *, default_queue: str = keys.DEFAULT_QUEUE) -> Plan:
    """The group ``pod`` belongs to, given the owners read above it (see the module
    docstring); ``default_queue`` is the queue of the pod's namespace."""
    problem = _ended_badly(chain)
    if problem is not None:
        return _held(pod, problem)
    top_down = list(reversed(chain.owners))
    pod_ref = owner_ref(pod)
    queue: str | None = None
    for obj in (*top_down, pod):
        labels = _labels(obj)
        if labels.get(keys.GROUP_BY_OWNER_LABEL) == DISABLED:
            return Plan(
                Outcome.SINGLE,
                grouped_by=f"Pod/{pod_ref.name}",
                queue=_first(_queue_label(o) for o in (*top_down, pod)) or default_queue,
            )
        if obj is not pod and labels.get(keys.POD_GROUP_LABEL):
            ref = owner_ref(obj)
            return Plan(
                Outcome.NAMED,
                grouped_by=f"{ref.kind}/{ref.name}",
                group=str(labels[keys.POD_GROUP_LABEL]),
            )
        queue = queue or _queue_label(obj)
    top = next((o for o in top_down if _deriver(o) is not None), None)
    if top is None:
        return Plan(Outcome.SINGLE, grouped_by=f"Pod/{pod_ref.name}", queue=queue or default_queue)
    ref = owner_ref(top)
    derive = _deriver(top)
    assert derive is not None
    try:
        gang = derive(top, pod=pod)
    except gangs.OwnerSpecError as exc:
        return _held(pod, f"cannot read the spec of its owner {ref}: {exc}")
    owner_queue = _first(_queue_label(o) for o in top_down)
    return Plan(
        Outcome.GANG,
        grouped_by=f"{ref.kind}/{ref.name}",
        group=group_name(ref, replica=gang.replica),
        owner=ref,
        gang=gang,
        queue=owner_queue or gang.queue or _queue_label(pod) or default_queue,
    )


def _deriver(obj: objects.KubeObject) -> kinds.Deriver | None:
    found = kinds.kind_of(obj)
    return found.derive if found is not None else None


def _queue_label(obj: objects.KubeObject) -> str | None:
    value = _labels(obj).get(keys.QUEUE_LABEL)
    return str(value) if value else None


def _first(values: collections.abc.Iterable[str | None]) -> str | None:
    return next((v for v in values if v), None)
