"""The Queue hierarchy as ``kubectl berth queues`` shows it: a tree of spec and status.

:func:`build` turns the Queues the API server listed (JSON dicts) into :class:`QueueNode` trees
through ``spec.parent``: queues without a parent are roots, children sorted by name. The queue
named ``default`` exists implicitly (docs/architecture.md); without an object it is shown as such. A
queue whose parent does not exist, or that sits in a parent cycle, is shown as a root with
that problem rather than left out, and an object the API models cannot read is shown with
why. Values come from the objects as they are: the spec as written, the status as the queue
controller last wrote it (``-`` where it has written nothing yet). Each queue reads as ``kubectl
get bq`` does — its state (Open, Closed, Invalid with the reason), pods pending and running —
and has a bar per main resource (cpu, memory, GPUs): what it uses against its fair share, with
the guarantee named beside it.

:func:`tree` draws them with rich; :func:`to_json` is the same data for ``-o json``
and ``-o yaml`` (camelCase keys, children nested).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import pydantic
import rich.console
import rich.table
import rich.text
import rich.tree

from berth.api import custom_objects, keys, queues, resources
from berth.util import suggestions

__all__ = [
    "ConditionJson",
    "ConditionView",
    "QueueJson",
    "QueueNode",
    "QueueTreesJson",
    "build",
    "to_json",
    "tree",
]

_MISSING = "-"


@dataclasses.dataclass(frozen=True)
class ConditionView:
    """One status condition, as shown."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None

    def __str__(self) -> str:
        text = f"{self.type}={self.status}"
        if self.reason:
            text += f" ({self.reason})"
        return f"{text}: {self.message}" if self.message else text


@dataclasses.dataclass(frozen=True)
class QueueNode:
    """One queue and its children (see the module docstring)."""

    name: str
    weight: int = 1
    priority: int = 0
    state: str = queues.QueueState.OPEN.value
    reclaimable: bool = True
    guaranteed: collections.abc.Mapping[str, str] | None = None
    limit: collections.abc.Mapping[str, str] | None = None
    fair_share: collections.abc.Mapping[str, str] | None = None
    allocated: collections.abc.Mapping[str, str] | None = None
    requested: collections.abc.Mapping[str, str] | None = None
    pending: int | None = None  # PodGroups waiting (None: no status yet)
    running: int | None = None  # PodGroups running (None: no status yet)
    pending_pods: int | None = None  # pods waiting in it and below (None: no status yet)
    running_pods: int | None = None
    current_state: str | None = None  # Open, Closed or Invalid, as the controller wrote it
    state_reason: str | None = None  # why Closed or Invalid
    conditions: tuple[ConditionView, ...] = ()
    implicit: bool = False  # the default queue, with no Queue object
    problem: str | None = None  # why it is shown as a root, or could not be read
    children: tuple[QueueNode, ...] = ()


def _resources(value: resources.ResourceList | None) -> dict[str, str] | None:
    return value.to_api() if value is not None else None


def _node(obj: custom_objects.Queue) -> tuple[QueueNode, str | None]:
    """A childless node for one Queue object, and its parent's name."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    try:
        queue = queues.Queue.model_validate(obj)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raw_spec = obj.get("spec")
        raw_parent = raw_spec.get("parent") if isinstance(raw_spec, dict) else None
        parent = raw_parent if isinstance(raw_parent, str) else None
        return QueueNode(name, problem=f"cannot be read: {where}: {first['msg']}"), parent
    spec, status = queue.spec, queue.status
    node = QueueNode(
        name=name,
        weight=spec.weight,
        priority=spec.priority,
        state=spec.state.value,
        reclaimable=spec.reclaimable,
        guaranteed=_resources(spec.guaranteed),
        limit=_resources(spec.limit),
    )
    if status is not None:
        node = dataclasses.replace(
            node,
            fair_share=_resources(status.fair_share),
            allocated=_resources(status.allocated),
            requested=_resources(status.requested),
            pending=status.pending,
            running=status.running,
            pending_pods=status.pending_pods,
            running_pods=status.running_pods,
            current_state=status.state.value if status.state is not None else None,
            state_reason=status.state_reason,
            conditions=tuple(
                ConditionView(c.type, c.status.value, c.reason, c.message)
                for c in status.conditions or ()
            ),
        )
    return node, spec.parent


def build(
    objects: collections.abc.Iterable[custom_objects.Queue],
) -> list[QueueNode]:
    """The queue trees, roots sorted by name (see the module docstring)."""
    flat: dict[str, QueueNode] = {}
    parents: dict[str, str | None] = {}
    for obj in objects:
        node, parent = _node(obj)
        flat[node.name], parents[node.name] = node, parent
    if keys.DEFAULT_QUEUE not in flat:
        flat[keys.DEFAULT_QUEUE] = QueueNode(keys.DEFAULT_QUEUE, implicit=True)
        parents[keys.DEFAULT_QUEUE] = None
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    for name in sorted(flat):
        parent = parents[name]
        if parent is None:
            roots.append(name)
        elif parent not in flat:
            roots.append(name)
            flat[name] = dataclasses.replace(
                flat[name],
                problem=flat[name].problem
                or f"parent queue {parent} does not exist{suggestions.suffix(parent, flat)}",
            )
        else:
            children.setdefault(parent, []).append(name)
    placed: set[str] = set()

    def grow(name: str) -> QueueNode:
        placed.add(name)
        kids = tuple(grow(c) for c in children.get(name, ()) if c not in placed)
        return dataclasses.replace(flat[name], children=kids)

    trees = [grow(name) for name in roots]
    # Whatever no root reaches hangs in a parent cycle: shown, not hidden.
    for name in sorted(set(flat) - placed):
        if name not in placed:
            cycle = dataclasses.replace(
                flat[name], problem=f"in a parent cycle (parent {parents[name]})"
            )
            flat[name] = cycle
            trees.append(grow(name))
    return sorted(trees, key=lambda n: n.name)


def _amounts(value: collections.abc.Mapping[str, str] | None) -> str:
    if not value:
        return _MISSING
    return ", ".join(f"{name} {quantity}" for name, quantity in value.items())


def _heading(node: QueueNode) -> rich.text.Text:
    text = rich.text.Text()
    text.append(node.name, style="bold")
    if node.implicit:
        text.append("  implicit (no Queue object): weight 1 · priority 0 · Open", style="dim")
        return text
    state = node.current_state or node.state
    parts = [f"weight {node.weight}", f"priority {node.priority}", state]
    if not node.reclaimable:
        parts.append("not reclaimable")
    if node.pending_pods is not None and node.running_pods is not None:
        parts.append(f"pods {node.pending_pods} pending, {node.running_pods} running")
    if node.pending is not None and node.running is not None:
        parts.append(f"podgroups {node.pending} pending, {node.running} running")
    text.append("  " + " · ".join(parts))
    if node.state_reason and node.problem is None:
        style = "red" if state == queues.QueueCondition.INVALID else "yellow"
        text.append(f"  ({node.state_reason})", style=style)
    return text


_BAR_WIDTH = 20
_BAR_RESOURCES = ("cpu", "memory", "nvidia.com/gpu")


def _milli(value: collections.abc.Mapping[str, str] | None) -> resources.ResourceList:
    try:
        return resources.ResourceList.parse(value)
    except Exception:  # written by the controller; an unreadable value draws no bar
        return resources.ResourceList()


def _quantity(name: str, milli: int) -> str:
    return resources.ResourceList({name: milli}).to_api()[name] if milli else "0"


def _bars(node: QueueNode) -> list[tuple[str, rich.text.Text]]:
    """One bar per main resource the queue has anything of: allocated against fair share
    (the full width is the larger of fair share, guarantee and allocation)."""
    allocated, fair, guaranteed = (
        _milli(node.allocated),
        _milli(node.fair_share),
        _milli(node.guaranteed),
    )
    out: list[tuple[str, rich.text.Text]] = []
    for name in _BAR_RESOURCES:
        used, share, promised = allocated.get(name, 0), fair.get(name, 0), guaranteed.get(name, 0)
        scale = max(used, share, promised)
        if scale <= 0:
            continue
        filled = round(used * _BAR_WIDTH / scale)
        if used and not filled:
            filled = 1  # something runs: never draw it as nothing
        over = used > share
        bar = rich.text.Text()
        bar.append("█" * filled, style="red" if over else "green")
        bar.append("░" * (_BAR_WIDTH - filled), style="dim")
        bar.append(
            f"  {_quantity(name, used)} of fair share {_quantity(name, share)}"
            f" (guaranteed {_quantity(name, promised)})"
        )
        out.append((name, bar))
    return out


def _label(node: QueueNode) -> rich.console.RenderableType:
    heading = _heading(node)
    if node.problem is not None:
        heading.append(f"  ({node.problem})", style="yellow")
    if node.implicit:
        return heading
    grid = rich.table.Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column()
    for title, value in (
        ("guaranteed", node.guaranteed),
        ("limit", node.limit),
        ("fair share", node.fair_share),
        ("allocated", node.allocated),
        ("requested", node.requested),
    ):
        grid.add_row(title, _amounts(value))
    for name, bar in _bars(node):
        grid.add_row(name, bar)
    if node.conditions:
        grid.add_row("conditions", "; ".join(str(c) for c in node.conditions))
    return rich.console.Group(heading, grid)


def tree(trees: collections.abc.Sequence[QueueNode]) -> rich.tree.Tree:
    """The trees as one rich Tree under a ``queues`` root, for a console to print."""
    top = rich.tree.Tree(rich.text.Text("queues", style="bold"), guide_style="dim")

    def add(branch: rich.tree.Tree, node: QueueNode) -> None:
        sub = branch.add(_label(node))
        for child in node.children:
            add(sub, child)

    for root in trees:
        add(top, root)
    return top


class ConditionJson(typing.TypedDict):
    type: str
    status: str
    reason: typing.NotRequired[str]
    message: typing.NotRequired[str]


class _Implicit(typing.TypedDict):
    implicit: typing.NotRequired[bool]  # only when true: the default queue, with no object


class _Problem(typing.TypedDict):
    problem: typing.NotRequired[str]


class QueueJson(_Implicit, _Problem):
    """One queue of ``kubectl berth queues -o json|yaml``, with the queues below it."""

    name: str
    weight: int
    priority: int
    state: str
    reclaimable: bool
    guaranteed: dict[str, str]
    limit: dict[str, str]
    fairShare: dict[str, str] | None  # None: no status yet
    allocated: dict[str, str] | None
    requested: dict[str, str] | None
    pending: int | None
    running: int | None
    pendingPods: int | None
    runningPods: int | None
    currentState: str | None
    stateReason: str | None
    conditions: list[ConditionJson]
    children: list[QueueJson]


class QueueTreesJson(typing.TypedDict):
    queues: list[QueueJson]


def to_json(trees: collections.abc.Sequence[QueueNode]) -> QueueTreesJson:
    """The trees as JSON-able data: ``{"queues": [...]}`` with camelCase keys."""

    def condition(view: ConditionView) -> ConditionJson:
        out: ConditionJson = {"type": view.type, "status": view.status}
        if view.reason is not None:
            out["reason"] = view.reason
        if view.message is not None:
            out["message"] = view.message
        return out

    def one(node: QueueNode) -> QueueJson:
        implicit: _Implicit = {"implicit": True} if node.implicit else {}
        problem: _Problem = {"problem": node.problem} if node.problem is not None else {}
        return {
            "name": node.name,
            **implicit,
            "weight": node.weight,
            "priority": node.priority,
            "state": node.state,
            "reclaimable": node.reclaimable,
            "guaranteed": dict(node.guaranteed or {}),
            "limit": dict(node.limit or {}),
            "fairShare": dict(node.fair_share) if node.fair_share is not None else None,
            "allocated": dict(node.allocated) if node.allocated is not None else None,
            "requested": dict(node.requested) if node.requested is not None else None,
            "pending": node.pending,
            "running": node.running,
            "pendingPods": node.pending_pods,
            "runningPods": node.running_pods,
            "currentState": node.current_state,
            "stateReason": node.state_reason,
            "conditions": [condition(c) for c in node.conditions],
            **problem,
            "children": [one(c) for c in node.children],
        }

    return {"queues": [one(t) for t in trees]}
