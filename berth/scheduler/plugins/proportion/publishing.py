"""What Proportion publishes at session close: every queue's ``allocated``, ``requested``,
``fairShare``, pending/running PodGroup counts, children and problem (the cycle result's
``queues``): a function of the books (:func:`publish`), which it only reads."""

from __future__ import annotations

import collections

import numpy as np

from berth.api import resources
from berth.scheduler.framework import decisions
from berth.scheduler.plugins.proportion import accounting
from berth.scheduler.snapshot import usage

__all__ = ["publish"]

IntArray = accounting.IntArray


def publish(books: accounting.Accounting) -> dict[str, decisions.QueueStatusSummary]:
    """Every queue's status after the session (module docstring)."""
    session = books.session
    snapshot = session.snapshot
    # Groups per queue as the snapshot had them (the cache counts them); only the groups
    # this session committed pods of or evicted from can have moved since.
    by_state = {state: collections.Counter[str]() for state in usage.GroupState}
    for name, used in snapshot.queue_usage.items():
        by_state[usage.GroupState.RUNNING][name] += used.running_groups
        by_state[usage.GroupState.PENDING][name] += used.pending_groups
    touched = set(books.evicted_from)
    touched.update(key for key, job in session.jobs.items() if job.committed)
    for key in touched:
        group = snapshot.pod_groups.get(key)
        if group is None:
            continue
        job = session.jobs.get(group.key)
        placed = group.placed - books.evicted_from.get(key, 0)
        placed += len(job.committed) if job is not None else 0
        before, after = usage.group_state(group), usage.group_state(group, placed=placed)
        if before is not after:
            if before is not None:
                by_state[before][group.queue] -= 1
            if after is not None:
                by_state[after][group.queue] += 1
    # A parent counts its subtree's groups.
    subtree = {state: collections.Counter[str]() for state in usage.GroupState}
    for state, by_leaf in by_state.items():
        for queue, count in by_leaf.items():
            for name in books.tree.path(queue) or (queue,):
                subtree[state][name] += count
    running_groups = subtree[usage.GroupState.RUNNING]
    pending_groups = subtree[usage.GroupState.PENDING]
    children: dict[str, list[str]] = {}
    for info in snapshot.queues.values():
        if info.parent is not None:
            children.setdefault(info.parent, []).append(info.name)
    out: dict[str, decisions.QueueStatusSummary] = {}
    empty = np.zeros(len(books.resources), dtype=np.int64)
    for name in sorted(snapshot.queues):
        i = books.index.get(name)
        if i is not None:
            allocated = books.allocated[i] - books.pipelined[i]
            requested = books.pending[i] + books.pipelined[i]
            fair = books.share[i]
        else:
            allocated = books.used_at_open.get(name, empty)
            requested = books.waiting_at_open.get(name, empty)
            fair = empty
        out[name] = decisions.QueueStatusSummary(
            allocated=_resource_list(books, allocated),
            requested=_resource_list(books, requested),
            fair_share=_resource_list(books, fair),
            pending=pending_groups[name],
            running=running_groups[name],
            children=tuple(sorted(children.get(name, ()))),
            problem=books.tree.problems.get(name),
        )
    return out


def _resource_list(books: accounting.Accounting, vec: IntArray) -> resources.ResourceList:
    return resources.ResourceList(
        {name: int(v) for name, v in zip(books.resources, vec.tolist(), strict=True) if v > 0}
    )
