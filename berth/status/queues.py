"""A Queue's status: the tree's validity, and what the queue holds, wants and deserves.

A Queue's status is computed here, purely, from the last cycle's per-queue summary (the
Proportion plugin publishes allocated, requested, fair share, children, pending and running
PodGroup counts and the problem that makes a queue unusable) and the scheduler's snapshot
(:mod:`berth.status.cycles` gathers both). When no summary exists for a queue (a profile
without a queue plugin) the snapshot alone gives the children, the counts and the resources
of placed and pending pods, and no fair share. The live operator's Kopf status handler
(:mod:`berth.controllers.statuses`) writes the status when it differs from the live object;
``berth sim`` (:mod:`berth.sim.cluster`) writes it into its own objects.

The tree is validated here too (a parent that does not exist, a cycle, a queue that is its
own ancestor): the ``Valid`` condition says what is wrong, and :func:`transition_events`
raises a Warning Event when a queue becomes invalid.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

from berth.api import custom_objects, queues, resources
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import snapshots
from berth.status import conditions, observations
from berth.util import suggestions

__all__ = [
    "CONDITION_VALID",
    "PodCounts",
    "Usage",
    "desired_status",
    "pods_by_queue",
    "resource_text",
    "transition_events",
    "tree_problem",
    "usage_by_queue",
]

KIND = queues.KIND
CONDITION_VALID = "Valid"


@dataclasses.dataclass(frozen=True)
class Usage:
    """A queue's use as the snapshot shows it (the fallback when no summary exists)."""

    allocated: resources.ResourceList
    requested: resources.ResourceList
    pending: int  # PodGroups with pods waiting and none placed
    running: int  # PodGroups with pods placed


@dataclasses.dataclass(frozen=True)
class PodCounts:
    """Pods of a queue and the queues below it (reservations' held room counts as a pod)."""

    pending: int = 0
    running: int = 0


# The resources ``kubectl get bq`` shows, and the short names it shows them by.
_MAIN_RESOURCES = (("cpu", "cpu"), ("memory", "mem"), ("nvidia.com/gpu", "gpu"))


def resource_text(amounts: collections.abc.Mapping[str, int] | None) -> str:
    """The main resources of ``amounts`` as short text: ``8 cpu, 32Gi mem, 4 gpu`` (``0``
    when it names none of them)."""
    if not amounts:
        return "0"
    api = resources.ResourceList(amounts).to_api()
    parts = [f"{api[name]} {short}" for name, short in _MAIN_RESOURCES if amounts.get(name)]
    return ", ".join(parts) if parts else "0"


def pods_by_queue(snapshot: snapshots.Snapshot) -> dict[str, PodCounts]:
    """Every queue's :class:`PodCounts`, its own pods charged to it and to its ancestors."""
    parents = {name: info.parent for name, info in snapshot.queues.items()}
    pending: collections.Counter[str] = collections.Counter()
    running: collections.Counter[str] = collections.Counter()
    for queue, used in snapshot.queue_usage.items():
        # Every pod requests one "pods" (1000 milli-units): the sums count the pods.
        waiting = used.requested.get(resources.PODS, 0) // 1000
        placed = used.allocated.get(resources.PODS, 0) // 1000
        for name in _chain(queue, parents=parents):
            pending[name] += waiting
            running[name] += placed
    return {name: PodCounts(pending[name], running[name]) for name in set(pending) | set(running)}


def tree_problem(name: str, *, parents: collections.abc.Mapping[str, str | None]) -> str | None:
    """Why queue ``name``'s place in the tree (queue -> parent) is invalid; None if it is fine."""
    seen = [name]
    current = parents.get(name)
    while current is not None:
        if current not in parents:
            return f"parent queue {current} does not exist{suggestions.suffix(current, parents)}"
        if current in seen:
            return "queue hierarchy has a cycle: " + " -> ".join([*seen, current])
        seen.append(current)
        current = parents.get(current)
    return None


def usage_by_queue(snapshot: snapshots.Snapshot) -> dict[str, Usage]:
    """Every queue's :class:`Usage`, charged to the queue and each of its ancestors. What a
    queue holds is what the cache charged it (``queue_usage``: only pods its
    ``namespaceSelector`` admits and Berth placed, as the queue plugins count it)."""
    parents = {name: info.parent for name, info in snapshot.queues.items()}
    allocated: dict[str, resources.ResourceList] = {}
    for queue, used in snapshot.queue_usage.items():
        for name in _chain(queue, parents=parents):
            allocated[name] = allocated.get(name, resources.ResourceList()) + used.allocated
    requested: dict[str, resources.ResourceList] = {}
    pending: collections.Counter[str] = collections.Counter()
    running: collections.Counter[str] = collections.Counter()
    for group in snapshot.pod_groups.values():
        chain = _chain(group.queue, parents=parents)
        members = snapshot.members(group.key)
        waiting = resources.ResourceList()
        for pod in members:
            if not pod.terminal and pod.node_name is None and not pod.deleting:
                waiting = waiting + pod.requests
        for name in chain:
            requested[name] = requested.get(name, resources.ResourceList()) + waiting
            if group.placed > 0:
                running[name] += 1
            elif group.pending + group.gated > 0:
                pending[name] += 1
    return {
        name: Usage(
            allocated=allocated.get(name, resources.ResourceList()),
            requested=requested.get(name, resources.ResourceList()),
            pending=pending[name],
            running=running[name],
        )
        for name in set(snapshot.queues) | set(allocated)
    }


def _chain(queue: str, *, parents: collections.abc.Mapping[str, str | None]) -> list[str]:
    chain: list[str] = []
    current: str | None = queue
    while current is not None and current not in chain:
        chain.append(current)
        current = parents.get(current)
    return chain


def desired_status(
    queue: observations.ObservedObject,
    *,
    snapshot: snapshots.Snapshot,
    summary: decisions.QueueStatusSummary | None,
    usage: collections.abc.Mapping[str, Usage],
    now: float,
    pods: collections.abc.Mapping[str, PodCounts] | None = None,
) -> custom_objects.QueueStatus:
    """The status ``queue`` should have (see the module docstring); ``pods`` is
    :func:`pods_by_queue` of the snapshot (computed when not given)."""
    parents: dict[str, str | None] = {name: info.parent for name, info in snapshot.queues.items()}
    parent = queue.spec.get("parent")
    parents[queue.name] = str(parent) if parent else None
    problem = tree_problem(queue.name, parents=parents)
    if summary is not None:
        problem = problem or summary.problem
        status: custom_objects.QueueStatus = {
            "allocated": _resources(summary.allocated),
            "requested": _resources(summary.requested),
            "fairShare": _resources(summary.fair_share),
            "children": list(summary.children),
            "pending": summary.pending,
            "running": summary.running,
        }
    else:
        used = usage.get(queue.name)
        children = sorted(name for name, p in parents.items() if p == queue.name)
        status = {
            "allocated": _resources(used.allocated if used else resources.ResourceList()),
            "requested": _resources(used.requested if used else resources.ResourceList()),
            "children": children,
            "pending": used.pending if used else 0,
            "running": used.running if used else 0,
        }
    info = snapshot.queues.get(queue.name)
    if problem is None and info is not None and info.invalid is not None:
        problem = info.invalid
    if problem:
        state, why = queues.QueueCondition.INVALID, problem
    elif queue.spec.get("state") == queues.QueueState.CLOSED:
        state, why = queues.QueueCondition.CLOSED, "spec.state is Closed: no new work is admitted"
    else:
        state, why = queues.QueueCondition.OPEN, None
    status["state"] = state.value
    if why is not None:
        status["stateReason"] = why
    counts = (pods if pods is not None else pods_by_queue(snapshot)).get(queue.name, PodCounts())
    status["pendingPods"] = counts.pending
    status["runningPods"] = counts.running
    status["summary"] = _summary(queue.spec, status)
    status["conditions"] = conditions.updated(
        queue.status,
        kind=CONDITION_VALID,
        value="False" if problem else "True",
        reason="Invalid" if problem else "Valid",
        message=problem or "the queue's place in the tree and its quota are valid",
        now=now,
    )
    return status


def transition_events(
    old: custom_objects.ObjectStatus, new: custom_objects.ObjectStatus
) -> list[tuple[str, str, str]]:
    """``(type, reason, message)`` of the Events a status change is worth: a queue becoming
    invalid, or valid again."""
    before = conditions.find(old, CONDITION_VALID)
    after = conditions.find(new, CONDITION_VALID)
    if after is None:
        return []
    if after.get("status") == "False" and (
        before is None or before.get("message") != after.get("message")
    ):
        return [("Warning", "InvalidQueue", str(after.get("message") or ""))]
    if after.get("status") == "True" and before is not None and before.get("status") == "False":
        return [("Normal", "Valid", str(after.get("message") or ""))]
    return []


def _summary(
    spec: collections.abc.Mapping[str, object], status: custom_objects.QueueStatus
) -> custom_objects.QueueSummary:
    def text(raw: typing.Any) -> str:
        try:
            return resource_text(resources.ResourceList.parse(raw))
        except Exception:  # the API validated it; an unreadable value shows as itself
            return str(raw)

    out: custom_objects.QueueSummary = {
        "guaranteed": text(spec.get("guaranteed")),
        "allocated": text(status.get("allocated")),
        "limit": text(spec.get("limit")) if spec.get("limit") else "none",
    }
    if "fairShare" in status:
        out["fairShare"] = text(status.get("fairShare"))
    return out


def _resources(amounts: resources.ResourceList) -> dict[str, str]:
    return {k: v for k, v in amounts.to_api().items() if amounts[k] != 0}
