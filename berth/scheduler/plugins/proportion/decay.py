"""Usage-decayed fair share: what each queue used lately, decayed by a half-life, tilts the
weights its level splits by, so a queue that used more recently gets less now (KAI's
time-based fair share, Kueue's ``usageHalfLifeTime``). Off unless the profile sets
Proportion ``usageHalfLifeSeconds``.

**Usage** (:class:`UsageHistory`). A queue's usage is the integral of its *dominant share*
of the cluster (the largest fraction of any resource its placed pods hold, ``pods`` aside)
over time, each second weighing ``2 ** (-age / halfLife)``: in seconds of the whole
cluster. A parent's usage is its subtree's. Between two cycles a queue is taken to hold
what it held when the earlier one closed, so the integral is exact for what the scheduler
saw, whatever the cycle period. The plugin keeps the history from cycle to cycle (the
sessions' books are dropped, R8) and reads the clock through each session's snapshot, so
the simulator's virtual clock drives it as the real one does.

**Tilt** (:func:`tilt`). At each level of the tree, among the siblings asking for something,
a queue's *usage ratio* is its part of their summed usage over its part of their summed
weight (1: it used exactly its weighted part). Its weight for the split becomes
``weight * 2 / (1 + ratio)``: unchanged at 1, at most double for a queue that used nothing,
and shrinking towards zero (never reaching it: the split stays work-conserving) for one that
used far more than its part. As the others use their larger shares, the ratios return to 1
and the split to the weights: the history decays. Guarantees are promises and are not tilted.

**A new leader** (:func:`rebuilt`). The history lives in the memory of the replica that
schedules; a replica's first cycle rebuilds it from what runs: every placed pod's requests
since its ``status.startTime``, decayed as above, summed per queue and its ancestors. What
finished before is forgotten (it would weigh the less, the longer ago it ran), and nothing
is written to the API server for it (publishing the usage would cost a status write per
queue per cycle). For a queue whose dominant resource does not change this is the same
integral; otherwise it can only be smaller (the largest of the per-resource integrals stands
in for the integral of the largest).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import math

import numpy as np
import numpy.typing as npt

__all__ = ["UsageHistory", "decayed_seconds", "rebuilt", "tilt"]


def decayed_seconds(seconds: float, *, half_life: float) -> float:
    """The integral over the last ``seconds`` of ``2 ** (-age / half_life)``: how much holding
    the whole cluster that long weighs now."""
    if seconds <= 0:
        return 0.0
    return half_life / math.log(2.0) * (1.0 - math.pow(2.0, -seconds / half_life))


def rebuilt(
    running: collections.abc.Iterable[tuple[collections.abc.Sequence[str], float, npt.ArrayLike]],
    *,
    capacity: npt.ArrayLike,
    now: float,
    half_life: float,
) -> dict[str, float]:
    """Usage rebuilt from what runs (module docstring): ``running`` holds, per placed pod, the
    queues it counts in (its own and its ancestors), when it started and its requests over
    ``capacity``'s columns (columns that must not count are 0 in ``capacity``)."""
    scale = np.asarray(capacity, dtype=np.float64)
    counted = scale > 0
    if not counted.any():
        return {}
    sums: dict[str, npt.NDArray[np.float64]] = {}
    for queues, started, requests in running:
        weight = decayed_seconds(now - started, half_life=half_life)
        if weight <= 0:
            continue
        part = np.asarray(requests, dtype=np.float64)[counted] / scale[counted] * weight
        for name in queues:
            found = sums.get(name)
            sums[name] = part if found is None else found + part
    return {name: float(v.max()) for name, v in sorted(sums.items()) if v.max() > 0}


@dataclasses.dataclass
class UsageHistory:
    """Every queue's decayed usage, as of the last cycle (see the module docstring)."""

    half_life: float  # seconds, > 0
    usage: dict[str, float] = dataclasses.field(default_factory=dict)  # cluster-seconds
    holding: dict[str, float] = dataclasses.field(default_factory=dict)  # dominant share now
    as_of: float | None = None  # when ``usage`` was last brought up to date

    def advance(self, now: float) -> dict[str, float]:
        """Bring the usage up to ``now``: decay what was, add what each queue held since the
        last cycle; return it (queue -> cluster-seconds)."""
        if self.as_of is not None and now > self.as_of:
            keep = math.pow(2.0, -(now - self.as_of) / self.half_life)
            # A constant holding h over the interval, each second decayed by its age at now.
            gained = decayed_seconds(now - self.as_of, half_life=self.half_life)
            for name in set(self.usage) | set(self.holding):
                value = self.usage.get(name, 0.0) * keep + self.holding.get(name, 0.0) * gained
                if value > 0.0:
                    self.usage[name] = value
                else:
                    self.usage.pop(name, None)
        if self.as_of is None or now > self.as_of:
            self.as_of = now
        return dict(self.usage)

    def seed(self, usage: collections.abc.Mapping[str, float], *, now: float) -> None:
        """Start the history at ``now`` from ``usage`` (a new leader's first cycle)."""
        self.usage = {name: value for name, value in usage.items() if value > 0.0}
        self.as_of = now

    def hold(self, holding: collections.abc.Mapping[str, float]) -> None:
        """What each queue holds as a cycle closes (dominant shares): it counts until the
        next cycle."""
        self.holding = {name: share for name, share in holding.items() if share > 0.0}


def tilt(
    weights: collections.abc.Sequence[float],
    usage: collections.abc.Sequence[float],
    *,
    active: collections.abc.Sequence[bool],
) -> list[float]:
    """Siblings' weights tilted by their usage (module docstring); only the ``active`` ones
    (asking for something) compare, the others keep their weight."""
    total_weight = sum(w for w, a in zip(weights, active, strict=True) if a)
    total_usage = sum(u for u, a in zip(usage, active, strict=True) if a)
    if total_weight <= 0 or total_usage <= 0:
        return list(weights)
    out: list[float] = []
    for weight, used, asking in zip(weights, usage, active, strict=True):
        if not asking or weight <= 0:
            out.append(weight)
            continue
        ratio = (used / total_usage) / (weight / total_weight)
        out.append(weight * 2.0 / (1.0 + ratio))
    return out
