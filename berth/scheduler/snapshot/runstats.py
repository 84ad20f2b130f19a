"""Run times learned from finished pods: what a pod that declares none will probably run for.

Most pods do not say how long they run (the ``scheduling.berth.io/expected-runtime``
annotation, a queue's ``defaultExpectedRuntimeSeconds``), yet EASY backfill (the starvation
guard) must know when a node frees up and whether a pod ends before a starving gang is due.
The cache keeps what it saw: every pod it knew placed that then finished (phase
``Succeeded``, or ``Failed`` while not being deleted — an eviction or a deletion is no run
time) adds its run time, from ``status.startTime`` to its last container's ``finishedAt``
(else the time the change was seen).

The last :data:`MAX_SAMPLES` run times are kept per *scope*: per queue, and for the whole
cluster. :meth:`RunTimes.samples` answers with the narrowest scope that has at least
:data:`MIN_SAMPLES`, and names it, so a reason can say which estimate it used. Scopes stop at
the queue on purpose: jobs of one queue and shape are judged alike (equivalence classes,
:mod:`berth.scheduler.framework.equivalence`), so nothing finer may change a pod's answer.
Written by the cache's :class:`~berth.scheduler.snapshot.podstore.PodStore`; read through the
snapshot (:attr:`Snapshot.run_times`) by :mod:`berth.scheduler.snapshot.runtimes`.
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import types

import numpy as np
import numpy.typing as npt

from berth.scheduler.snapshot import pods

__all__ = [
    "EMPTY",
    "MAX_SAMPLES",
    "MIN_SAMPLES",
    "RunTimeStatistics",
    "RunTimes",
    "Samples",
    "Scope",
    "scopes_of",
]

MAX_SAMPLES = 512
"""Run times kept per scope (the newest): enough for stable quantiles, and what a queue's
work looked like lately rather than a month ago."""
MIN_SAMPLES = 20
"""Run times a scope needs before its estimates are used (else a wider scope answers)."""

FloatArray = npt.NDArray[np.float64]


@dataclasses.dataclass(frozen=True)
class Scope:
    """Whose run times: one queue's, or (``queue`` ``None``) the whole cluster's."""

    queue: str | None = None

    def describe(self) -> str:
        """``queue vc-a`` / ``the cluster``."""
        return f"queue {self.queue}" if self.queue is not None else "the cluster"


@dataclasses.dataclass(frozen=True, eq=False)
class Samples:
    """The run times (seconds, ascending) of one scope."""

    scope: Scope
    seconds: FloatArray  # read-only

    def __len__(self) -> int:
        return len(self.seconds)

    def quantile(self, fraction: float, /, *, older_than: float = 0.0) -> float | None:
        """The ``fraction`` quantile of the run times longer than ``older_than`` (a running
        pod's age: what it probably runs for in all, given it has run that long); ``None``
        when none is longer (it outlived everything seen)."""
        values = self.seconds
        if older_than > 0:
            values = values[int(np.searchsorted(values, older_than, side="right")) :]
        if not len(values):
            return None
        index = min(len(values) - 1, max(0, int(np.ceil(fraction * len(values))) - 1))
        return float(values[index])


def scopes_of(pod: pods.PodInfo, /) -> tuple[Scope, ...]:
    """The scopes a pod's run time counts in (and is estimated from), narrowest first."""
    if pod.queue is None:
        return (Scope(),)
    return (Scope(queue=pod.queue), Scope())


class RunTimes:
    """A snapshot's frozen view of the learned run times."""

    def __init__(self, by_scope: collections.abc.Mapping[Scope, FloatArray]) -> None:
        self._by_scope = types.MappingProxyType(dict(by_scope))

    def samples(self, pod: pods.PodInfo, /) -> Samples | None:
        """The narrowest scope of ``pod`` with at least :data:`MIN_SAMPLES` run times."""
        for scope in scopes_of(pod):
            found = self._by_scope.get(scope)
            if found is not None and len(found) >= MIN_SAMPLES:
                return Samples(scope=scope, seconds=found)
        return None

    def count(self, scope: Scope, /) -> int:
        """Run times known for ``scope``."""
        found = self._by_scope.get(scope)
        return 0 if found is None else len(found)


EMPTY = RunTimes({})
"""No run times known (a snapshot built by hand)."""


class RunTimeStatistics:
    """The cache's record of run times; :meth:`freeze` gives a snapshot its view."""

    def __init__(self, *, max_samples: int = MAX_SAMPLES) -> None:
        self._max = max_samples
        self._recent: dict[Scope, collections.deque[float]] = {}
        self._sorted: dict[Scope, FloatArray] = {}  # frozen arrays, rebuilt when changed
        self._changed: set[Scope] = set()
        self._view: RunTimes | None = EMPTY

    def finished(self, before: pods.PodInfo, after: pods.PodInfo, /, *, now: float | None) -> None:
        """Record ``after``'s run time if it is a natural end of the placed pod ``before``
        (module docstring); ``now`` is when the change was seen at the latest."""
        if (
            before.node_name is None
            or before.terminal
            or before.reserve
            or before.deleting
            or not after.terminal
            or after.deleting
        ):
            return
        started = after.start_time if after.start_time is not None else before.start_time
        ended = after.finish_time if after.finish_time is not None else now
        if started is None or ended is None or ended < started:
            return
        self.add(after, seconds=ended - started)

    def add(self, pod: pods.PodInfo, /, *, seconds: float) -> None:
        """Count one run time of ``seconds`` for ``pod``'s scopes."""
        for scope in scopes_of(pod):
            recent = self._recent.get(scope)
            if recent is None:
                recent = self._recent[scope] = collections.deque(maxlen=self._max)
            recent.append(float(seconds))
            self._changed.add(scope)
        self._view = None

    def freeze(self) -> RunTimes:
        """The view for a snapshot (the same object until a run time is added)."""
        if self._view is None:
            for scope in self._changed:
                array = np.sort(np.fromiter(self._recent[scope], dtype=np.float64))
                array.setflags(write=False)
                self._sorted[scope] = array
            self._changed.clear()
            self._view = RunTimes(self._sorted)
        return self._view
