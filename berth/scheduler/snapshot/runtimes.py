"""How long pods expect to run: the ``scheduling.berth.io/expected-runtime`` annotation.

EASY backfill (the starvation guard in the Proportion plugin) needs two times: when a
starving gang could start — once the pods on the nodes held for it have ended — and when a pod
that would use that held room ends. Both come from the pods' declared expected runtimes; a pod
without one (or with a malformed one) has no known end, and no guess is made for it.
"""

from __future__ import annotations

import typing

from berth.api import durations, errors, keys

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import pods

__all__ = ["expected_end", "expected_runtime"]


def expected_runtime(pod: pods.PodInfo, /) -> float | None:
    """Seconds ``pod`` declares it runs for; ``None`` when it declares none (or nonsense)."""
    text = pod.annotations.get(keys.EXPECTED_RUNTIME_ANNOTATION)
    if not text:
        return None
    try:
        return durations.parse_duration(text).ms / 1000
    except errors.ApiError:
        return None


def expected_end(pod: pods.PodInfo, /, *, now: float) -> float | None:
    """When ``pod`` ends if it runs as declared: from its start (placed pods), else from
    ``now``; ``None`` without a declared runtime."""
    runtime = expected_runtime(pod)
    if runtime is None:
        return None
    if pod.node_name is not None:
        started = pod.start_time if pod.start_time is not None else pod.creation_timestamp
        return started + runtime
    return now + runtime
