"""How long pods expect to run: the ``scheduling.berth.io/expected-runtime`` annotation.

EASY backfill (the starvation guard in the Proportion plugin) needs two times: when a
starving gang could start — once the pods on the nodes held for it have ended — and when a pod
that would use that held room ends. Both come from the pods' declared expected runtimes, else
their queue's ``defaultExpectedRuntimeSeconds``; a pod with neither (or a malformed
annotation) has no known end, and no guess is made for it.
"""

from __future__ import annotations

import collections.abc
import typing

from berth.api import durations, errors, keys

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import pods
    from berth.scheduler.snapshot import queues as queues_

__all__ = ["expected_end", "expected_runtime"]


def expected_runtime(
    pod: pods.PodInfo, /, *, queues: collections.abc.Mapping[str, queues_.QueueInfo]
) -> float | None:
    """Seconds ``pod`` declares it runs for, else its queue's default; ``None`` when neither
    says (a malformed annotation says nothing: no guess is made)."""
    text = pod.annotations.get(keys.EXPECTED_RUNTIME_ANNOTATION)
    if text:
        try:
            return durations.parse_duration(text).ms / 1000
        except errors.ApiError:
            return None
    queue = queues.get(pod.queue) if pod.queue is not None else None
    if queue is not None and queue.expected_runtime_seconds is not None:
        return float(queue.expected_runtime_seconds)
    return None


def expected_end(
    pod: pods.PodInfo,
    /,
    *,
    now: float,
    queues: collections.abc.Mapping[str, queues_.QueueInfo],
) -> float | None:
    """When ``pod`` ends if it runs as expected: from its start (placed pods), else from
    ``now``; ``None`` without an expected runtime."""
    runtime = expected_runtime(pod, queues=queues)
    if runtime is None:
        return None
    if pod.node_name is not None:
        started = pod.start_time if pod.start_time is not None else pod.creation_timestamp
        return started + runtime
    return now + runtime
