"""How long pods run: what they declare, else what finished pods of their queue ran.

EASY backfill (the starvation guard in the Proportion plugin) needs two times: when a
starving gang could start — once the pods on the nodes held for it have ended — and when a pod
that would use that held room ends. Both come from an :class:`Estimate`, from the first of
these that knows:

1. **declared**: the pod's ``scheduling.berth.io/expected-runtime`` annotation, else its
   queue's ``defaultExpectedRuntimeSeconds`` (a malformed annotation declares nothing);
2. **learned**: a quantile of the run times of the finished pods of its queue, else of the
   cluster (:mod:`.runstats`); for a running pod, of the run times longer than it has run
   already (a pod that ran two hours is no longer a pod of median run time).

A pod with neither has no known end, and no guess is made for it. An estimate says where it
came from, so a reason can say which one it used.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import typing

from berth.api import durations, errors, keys
from berth.scheduler.snapshot import runstats

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import pods
    from berth.scheduler.snapshot import queues as queues_

__all__ = ["Estimate", "Source", "estimate_end", "expected_end", "expected_runtime"]


class Source(enum.Enum):
    """Where an estimate of a pod's end came from."""

    DECLARED = "Declared"  # the pod's annotation, or its queue's default
    LEARNED = "Learned"  # run times of finished pods of its queue (or the cluster)
    UNKNOWN = "Unknown"  # nothing says: no guess is made


@dataclasses.dataclass(frozen=True)
class Estimate:
    """When a pod ends (seconds since the epoch; ``None``: unknown) and how that is known."""

    end: float | None
    source: Source
    scope: runstats.Scope | None = None  # learned (or outlived): whose run times
    samples: int = 0  # learned (or outlived): how many

    def describe(self) -> str:
        """``declared``, ``learned from 40 finished pods of queue vc-a``, or why nothing
        estimates the end."""
        if self.source is Source.LEARNED and self.scope is not None:
            return f"learned from {self.samples} finished pods of {self.scope.describe()}"
        if self.source is Source.UNKNOWN:
            if self.scope is not None:
                return (
                    f"no declared run time, and it has run longer than any of the "
                    f"{self.samples} finished pods of {self.scope.describe()}"
                )
            return "no declared run time, and too few pods finished to learn one"
        return "declared"


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


def estimate_end(
    pod: pods.PodInfo,
    /,
    *,
    now: float,
    queues: collections.abc.Mapping[str, queues_.QueueInfo],
    run_times: runstats.RunTimes,
    quantile: float,
) -> Estimate:
    """When ``pod`` ends (module docstring): a placed pod from its start, another from
    ``now``; ``quantile`` of the learned run times (a higher one is more cautious)."""
    declared = expected_end(pod, now=now, queues=queues)
    if declared is not None:
        return Estimate(end=declared, source=Source.DECLARED)
    samples = run_times.samples(pod)
    if samples is not None:
        placed = pod.node_name is not None
        start = (
            (pod.start_time if pod.start_time is not None else pod.creation_timestamp)
            if placed
            else now
        )
        runs = samples.quantile(quantile, older_than=max(0.0, now - start) if placed else 0.0)
        if runs is not None:
            return Estimate(
                end=start + runs, source=Source.LEARNED, scope=samples.scope, samples=len(samples)
            )
        # It outlived every run time seen: no guess.
        return Estimate(end=None, source=Source.UNKNOWN, scope=samples.scope, samples=len(samples))
    return Estimate(end=None, source=Source.UNKNOWN)
