"""What Proportion publishes at session close: every queue's ``allocated``, ``requested``,
``fairShare``, pending/running PodGroup counts, children and problem (the cycle result's
``queues``)."""

from __future__ import annotations

import collections

import numpy as np

from berth.api import resources
from berth.scheduler.framework import decisions
from berth.scheduler.plugins.proportion import accounting
from berth.scheduler.snapshot import usage

__all__ = ["Publishing"]

IntArray = accounting.IntArray


class Publishing(accounting.Accounting):
    """The queue statuses from the books."""

    def publish(self) -> dict[str, decisions.QueueStatusSummary]:
        """Every queue's status after the session (module docstring)."""
        session = self.session
        snapshot = session.snapshot
        # Groups per queue as the snapshot had them (the cache counts them); only the groups
        # this session committed pods of or evicted from can have moved since.
        by_state = {state: collections.Counter[str]() for state in usage.GroupState}
        for name, used in snapshot.queue_usage.items():
            by_state[usage.GroupState.RUNNING][name] += used.running_groups
            by_state[usage.GroupState.PENDING][name] += used.pending_groups
        touched = set(self.evicted_from)
        touched.update(key for key, job in session.jobs.items() if job.committed)
        for key in touched:
            group = snapshot.pod_groups.get(key)
            if group is None:
                continue
            job = session.jobs.get(group.key)
            placed = group.placed - self.evicted_from.get(key, 0)
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
                for name in self.tree.path(queue) or (queue,):
                    subtree[state][name] += count
        running_groups = subtree[usage.GroupState.RUNNING]
        pending_groups = subtree[usage.GroupState.PENDING]
        children: dict[str, list[str]] = {}
        for info in snapshot.queues.values():
            if info.parent is not None:
                children.setdefault(info.parent, []).append(info.name)
        out: dict[str, decisions.QueueStatusSummary] = {}
        empty = np.zeros(len(self.resources), dtype=np.int64)
        for name in sorted(snapshot.queues):
            i = self.index.get(name)
            if i is not None:
                allocated = self.allocated[i] - self.pipelined[i]
                requested = self.pending[i] + self.pipelined[i]
                fair = self.share[i]
            else:
                allocated = self.used_at_open.get(name, empty)
                requested = self.waiting_at_open.get(name, empty)
                fair = empty
            out[name] = decisions.QueueStatusSummary(
                allocated=self._resource_list(allocated),
                requested=self._resource_list(requested),
                fair_share=self._resource_list(fair),
                pending=pending_groups[name],
                running=running_groups[name],
                children=tuple(sorted(children.get(name, ()))),
                problem=self.tree.problems.get(name),
            )
        return out

    def _resource_list(self, vec: IntArray) -> resources.ResourceList:
        return resources.ResourceList(
            {name: int(v) for name, v in zip(self.resources, vec.tolist(), strict=True) if v > 0}
        )
