"""The queue tree: which queues are usable, their quota as vectors, and why the others wait.

Pure: :func:`build_tree` takes queue infos and the node table's resource columns and returns
a :class:`QueueTree`; nothing here knows about sessions. A queue is *unusable*, and its work
waits with the reason kept in :attr:`QueueTree.problems`, when its quota is malformed, its
``limit`` is below its ``guaranteed`` for a resource, its parent does not exist, it is part of
a cycle, or an ancestor is unusable. Nothing else is affected: the usable queues form the tree.
A parent's effective guarantee is the larger of its own and the sum of its children's (a
parent promising its children more than it holds would break their promise), capped by its
limit. A Closed queue closes its whole subtree.

A child whose policies contradict an ancestor's is unusable too (:func:`conflict`), with a
reason naming both fields; the ancestor and the other queues are not affected:

- a ``limit`` or a ``guaranteed`` amount above the nearest ancestor's ``limit`` of that
  resource (a promise or a cap the ancestor can never let it reach);
- a ``jobOrder`` or ``preemptAcrossQueues`` other than the one the nearest ancestor setting
  it to something other than the default says (an ancestor's setting is meant for its
  subtree, and only leaves take work). The API server fills in the defaults, so an
  ancestor's default value cannot be told from a choice and binds nobody.

``reclaimable`` cannot contradict: a queue that is not reclaimable protects its whole
subtree whatever the children say (their ``true`` may be the default the API server filled).
"""

from __future__ import annotations

import collections.abc
import dataclasses

import numpy as np
import numpy.typing as npt

from berth.api import quantities, resources
from berth.scheduler.snapshot import queues
from berth.util import suggestions

__all__ = [
    "UNLIMITED",
    "conflict",
    "IntArray",
    "QueueNode",
    "QueueTree",
    "build_tree",
    "format_quantity",
]

IntArray = npt.NDArray[np.int64]

UNLIMITED = 2**61
"""A cap that is no cap: above any cluster's milli-units, and two of them still fit in int64."""


def format_quantity(name: str, milli: int) -> str:
    """``milli`` of resource ``name`` as the API writes it (``64``, ``500m``, ``32Gi``)."""
    return quantities.format_milli(int(milli), resources.format_for(name))


@dataclasses.dataclass(frozen=True, eq=False)
class QueueNode:
    """A usable queue: quota as vectors over the resource columns, and its place in the tree."""

    name: str
    parent: str | None  # None: a top-level queue
    children: tuple[str, ...]  # sorted by name
    guaranteed: IntArray  # effective: max(own, sum of children's), capped by limit
    limit: IntArray  # UNLIMITED where the queue names no limit
    weight: int
    priority: int
    reclaimable: bool
    closed_by: str | None  # the nearest queue, itself or an ancestor, that is Closed

    @property
    def open(self) -> bool:
        """Whether the queue admits new work: it and every ancestor are Open."""
        return self.closed_by is None

    @property
    def leaf(self) -> bool:
        """Only leaf queues take work."""
        return not self.children


@dataclasses.dataclass(frozen=True, eq=False)
class QueueTree:
    """The usable queues, the top-level ones, and why the others are unusable."""

    resources: tuple[str, ...]
    nodes: collections.abc.Mapping[str, QueueNode]
    roots: tuple[str, ...]  # sorted by name
    problems: collections.abc.Mapping[str, str]  # unusable queue -> why its work waits

    def path(self, name: str) -> tuple[str, ...]:
        """``name`` and its ancestors, nearest first (empty for an unusable queue)."""
        out: list[str] = []
        node = self.nodes.get(name)
        while node is not None:
            out.append(node.name)
            node = self.nodes.get(node.parent) if node.parent is not None else None
        return tuple(out)


def _vector(
    amounts: collections.abc.Mapping[str, int], *, column: collections.abc.Mapping[str, int]
) -> IntArray:
    vec = np.zeros(len(column), dtype=np.int64)
    for name, value in amounts.items():
        col = column.get(name)
        if col is not None:
            vec[col] = value
    return vec


def _own_problem(info: queues.QueueInfo, *, known: collections.abc.Collection[str]) -> str | None:
    if info.invalid is not None:
        return info.invalid
    if info.limit is not None:
        for name in sorted(info.guaranteed):
            if name in info.limit and info.limit[name] < info.guaranteed[name]:
                return (
                    f"limit is below guaranteed for {name} "
                    f"({format_quantity(name, info.limit[name])} < "
                    f"{format_quantity(name, info.guaranteed[name])})"
                )
    if info.parent is not None and info.parent not in known:
        return f"parent queue {info.parent} does not exist{suggestions.suffix(info.parent, known)}"
    return None


def _ancestors(
    info: queues.QueueInfo, *, by_name: collections.abc.Mapping[str, queues.QueueInfo]
) -> list[queues.QueueInfo]:
    """The existing ancestors of ``info``, nearest first (stopping at a cycle)."""
    out: list[queues.QueueInfo] = []
    seen = {info.name}
    parent = by_name.get(info.parent) if info.parent is not None else None
    while parent is not None and parent.name not in seen:
        out.append(parent)
        seen.add(parent.name)
        parent = by_name.get(parent.parent) if parent.parent is not None else None
    return out


def _above_limit(
    info: queues.QueueInfo, ancestors: collections.abc.Sequence[queues.QueueInfo]
) -> str | None:
    for field, amounts in (("limit", info.limit or {}), ("guaranteed", info.guaranteed)):
        for res in sorted(amounts):
            cap = next((a for a in ancestors if a.limit is not None and res in a.limit), None)
            if cap is not None and cap.limit is not None and amounts[res] > cap.limit[res]:
                return (
                    f"spec.{field}.{res} {format_quantity(res, amounts[res])} is above parent "
                    f"queue {cap.name}'s spec.limit.{res} {format_quantity(res, cap.limit[res])}"
                )
    return None


def conflict(
    info: queues.QueueInfo, *, by_name: collections.abc.Mapping[str, queues.QueueInfo]
) -> str | None:
    """Why ``info``'s policies contradict an ancestor's (module docstring), or None."""
    ancestors = _ancestors(info, by_name=by_name)
    if not ancestors:
        return None
    found = _above_limit(info, ancestors)
    if found is not None:
        return found
    for field, value, default in (
        ("jobOrder", lambda q: q.job_order, queues.PRIORITY_FIFO),
        ("preemptAcrossQueues", lambda q: str(q.preempt_across_queues).lower(), "false"),
    ):
        setter = next((a for a in ancestors if value(a) != default), None)
        if setter is not None and value(info) != value(setter):
            return (
                f"spec.{field} is {value(info)} but parent queue {setter.name} sets "
                f"spec.{field} {value(setter)} for its subtree"
            )
    return None


def _cycles(infos: collections.abc.Mapping[str, queues.QueueInfo]) -> dict[str, str]:
    """Every queue on a parent cycle -> the cycle, written from its smallest name."""
    out: dict[str, str] = {}
    done: set[str] = set()
    for start in sorted(infos):
        walk: list[str] = []
        seen: dict[str, int] = {}
        name: str | None = start
        while name is not None and name in infos and name not in done and name not in seen:
            seen[name] = len(walk)
            walk.append(name)
            name = infos[name].parent
        if name is not None and name in seen:
            cycle = walk[seen[name] :]
            first = cycle.index(min(cycle))
            ordered = cycle[first:] + cycle[:first]
            text = "queue hierarchy has a cycle: " + " -> ".join([*ordered, ordered[0]])
            for member in cycle:
                out[member] = text
        done.update(walk)
    return out


def build_tree(
    infos: collections.abc.Iterable[queues.QueueInfo], *, resource_names: tuple[str, ...]
) -> QueueTree:
    """The tree of ``infos`` over ``resource_names`` (quota of other resources is dropped: no
    node offers them); see the module docstring for what makes a queue unusable."""
    by_name: dict[str, queues.QueueInfo] = {
        info.name: info for info in sorted(infos, key=lambda i: i.name)
    }
    column = {name: col for col, name in enumerate(resource_names)}
    problems: dict[str, str] = {}
    for name, info in by_name.items():
        problem = _own_problem(info, known=by_name)
        if problem is not None:
            problems[name] = problem
    cycles = _cycles(by_name)
    for name, text in cycles.items():
        problems.setdefault(name, text)
    for name, info in by_name.items():
        if name not in problems:
            found = conflict(info, by_name=by_name)
            if found is not None:
                problems[name] = found
    # An unusable ancestor makes the whole subtree wait (the walk stops at cycles: they are
    # already marked, so every walk below ends at a marked queue or the root).
    for name in by_name:
        if name in problems:
            continue
        parent = by_name[name].parent
        while parent is not None and parent not in problems:
            parent = by_name[parent].parent
        if parent is not None:
            problems[name] = f"parent queue {by_name[name].parent} is invalid"
    usable = [name for name in by_name if name not in problems]
    children: dict[str | None, list[str]] = {}
    for name in usable:
        children.setdefault(by_name[name].parent, []).append(name)
    nodes: dict[str, QueueNode] = {}

    def build(name: str, *, closed_above: str | None) -> QueueNode:
        info = by_name[name]
        closed_by = closed_above if closed_above is not None else (None if info.open else name)
        kids = tuple(children.get(name, ()))
        built = [build(kid, closed_above=closed_by) for kid in kids]
        limit = np.full(len(resource_names), UNLIMITED, dtype=np.int64)
        if info.limit is not None:
            for res, value in info.limit.items():
                col = column.get(res)
                if col is not None:
                    limit[col] = value
        guaranteed = _vector(info.guaranteed, column=column)
        if built:
            guaranteed = np.maximum(guaranteed, np.sum([k.guaranteed for k in built], axis=0))
        node = QueueNode(
            name=name,
            parent=info.parent,
            children=kids,
            guaranteed=np.minimum(guaranteed, limit),
            limit=limit,
            weight=info.weight,
            priority=info.priority,
            reclaimable=info.reclaimable,
            closed_by=closed_by,
        )
        nodes[name] = node
        return node

    roots = tuple(children.get(None, ()))
    for root in roots:
        build(root, closed_above=None)
    return QueueTree(
        resources=resource_names,
        nodes={name: nodes[name] for name in sorted(nodes)},
        roots=roots,
        problems=dict(sorted(problems.items())),
    )
