"""When the next running pod passes its minimum runtime: kept across sessions, so a long
backlog's parked classes learn it without a walk over every running pod each cycle.

Fair-share reclaim may take a pod only once it ran its queue's minimum runtime (KAI-Scheduler's
``reclaimMinRuntime``); a parked class that may reclaim wakes when the next pod passes its own
(``class_revisit_at``). :class:`MinRuntime` keeps a heap of the times running pods pass their
minimum runtime, built when first asked; from then on the plugin shows it every session's
snapshot (:meth:`MinRuntime.observe`). Since the snapshot it saw last, only the groups the
cache names as changed can have new running pods, and only theirs are added; any other
snapshot (the first, one after snapshots it did not see, a changed world: queues' minimum
runtimes may have moved) rebuilds the heap from the pods on nodes. A pod that stopped running
leaves a stale entry, dropped when it reaches the top; until then it can only make the answer
earlier (a class head wakes once more), never later.
"""

from __future__ import annotations

import collections.abc
import heapq
import math

from berth.scheduler.snapshot import changes, pods, snapshots

__all__ = ["MinRuntime", "MinRuntimeOf"]

MinRuntimeOf = collections.abc.Callable[[pods.PodInfo], int]  # a pod's minimum runtime (s)


class MinRuntime:
    """When running pods pass their minimum runtime, across sessions; see the module
    docstring."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, str]] = []
        self._last: changes.Changes | None = None
        self._started = False

    @property
    def started(self) -> bool:
        """Whether it was asked once: from then on it should see every snapshot."""
        return self._started

    def observe(self, snapshot: snapshots.Snapshot, *, min_runtime: MinRuntimeOf) -> None:
        """Take in the pods that started running by ``snapshot`` (once per snapshot)."""
        now, last, current = snapshot.now, self._last, snapshot.changes
        if current is not None and current is last:
            return
        if (
            current is None
            or last is None
            or not current.follows(last)
            or not current.same_world(last)
        ):
            self._heap = [
                entry
                for info in snapshot.node_infos.values()
                for key in info.pods
                if (pod := snapshot.pods.get(key)) is not None
                and (entry := _entry(pod, min_runtime=min_runtime, now=now)) is not None
            ]
            heapq.heapify(self._heap)
        else:
            for group in current.groups:
                for pod in snapshot.members(group):
                    entry = _entry(pod, min_runtime=min_runtime, now=now)
                    if entry is not None:
                        heapq.heappush(self._heap, entry)
        self._last = current

    def next_after(self, snapshot: snapshots.Snapshot, *, min_runtime: MinRuntimeOf) -> float:
        """The first time after ``snapshot.now`` a running pod of a queue passes its minimum
        runtime and may be reclaimed (``inf``: none)."""
        self._started = True
        self.observe(snapshot, min_runtime=min_runtime)
        now, heap = snapshot.now, self._heap
        while heap:
            passes_at, key = heap[0]
            found = snapshot.pods.get(key)
            if passes_at > now and found is not None and _running(found):
                return passes_at
            heapq.heappop(heap)  # past its minimum runtime already, or the pod stopped running
        return math.inf


def _running(pod: pods.PodInfo) -> bool:
    return pod.node_name is not None and not pod.terminal and not pod.deleting


def _entry(pod: pods.PodInfo, *, min_runtime: MinRuntimeOf, now: float) -> tuple[float, str] | None:
    """When ``pod`` passes its minimum runtime, and its key, when it runs in a queue and has
    not passed it yet."""
    if pod.queue is None or not _running(pod):
        return None
    started = pod.start_time if pod.start_time is not None else pod.creation_timestamp
    passes_at = started + min_runtime(pod)
    return (passes_at, pod.key) if passes_at > now else None
