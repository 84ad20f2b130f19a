"""What the starvation guard (:mod:`.starvation`) holds and gives back: the room held for one
starving job (:class:`Hold`), what it keeps of its holds from cycle to cycle
(:class:`Memory`: each job's :class:`Holding`, and each hold that ran past
``drainTimeoutSeconds``, :class:`GivenBack`), the node orders choosing where room is held, EASY
backfill's quantiles and its test, and what a pod kept off held room is told."""

from __future__ import annotations

import dataclasses
import datetime

import numpy as np
import numpy.typing as npt

from berth.scheduler.framework import filtering, hooks, jobs
from berth.scheduler.plugins.proportion import accounting
from berth.scheduler.snapshot import nodetable, pods

__all__ = [
    "BACKFILL_QUANTILE",
    "SHADOW_QUANTILE",
    "UNKNOWN",
    "GivenBack",
    "Hold",
    "Holding",
    "Memory",
    "ends_before_start",
    "fits_now_scorer",
    "held_for",
    "on_time_scorer",
]

IntArray = accounting.IntArray
SHADOW_QUANTILE = 0.5
"""The quantile of learned run times a running pod on held nodes is expected to end at (its
median, given how long it has run): when the held job could start."""
BACKFILL_QUANTILE = 0.95
"""The quantile of learned run times a pod that would backfill held room is taken to run for:
cautious, as a pod running past the shadow time delays the gang, and run times are
heavy-tailed (on issue #33's log-normal trace, the 80th percentile let in pods that outran
it, and the big gangs waited longer than with no backfill at all)."""
_FITS_NOW_SCALE = 1_000_000


@dataclasses.dataclass(eq=False)
class Hold:
    """Room held for one starving job: amounts per row, and the node each pod waits on."""

    job: jobs.Job
    amounts: IntArray  # [rows, resources]: free now, kept for the job
    rows: npt.NDArray[np.bool_]
    targets: dict[str, str]  # pod key -> node it waits on
    shadow: float | object | None = dataclasses.field(default=None)  # see shadow()
    basis: str = ""  # what the shadow rests on, in words (worked out with it)
    booked: bool = False  # for a Reservation's startAt: the shadow is that time


@dataclasses.dataclass(frozen=True)
class GivenBack:
    """A hold that ran past ``drainTimeoutSeconds``: when it gave its room back, after how
    long, and on how many nodes."""

    at: float
    held_for: float
    nodes: int


@dataclasses.dataclass
class Holding:
    """One job held for, across cycles: when its hold began, on how many nodes it held last,
    and the earliest shadow time promised it while it is held (``None`` before one is worked
    out, and again after a session that held nothing for it: it starts afresh)."""

    since: float
    nodes: int
    shadow: float | None = None


@dataclasses.dataclass
class Memory:
    """What the starvation guard keeps from cycle to cycle, by job key: the jobs it holds
    for, and the holds given back past ``drainTimeoutSeconds`` (until they may be held for
    again). The plugin owns it and hands it to each session's guard."""

    holding: dict[str, Holding] = dataclasses.field(default_factory=dict)
    given_back: dict[str, GivenBack] = dataclasses.field(default_factory=dict)

    def forget_shadows(self, *, except_for: set[str]) -> None:
        """A shadow lasts while its job is held for: those of jobs not held this session go."""
        for key, holding in self.holding.items():
            if key not in except_for:
                holding.shadow = None


UNKNOWN = object()
"""A hold's shadow time before it was worked out (``None`` is a known "no time")."""


def ends_before_start(ends: float, shadow: float | None) -> bool:
    """A pod ending at ``ends`` cannot delay a job starting at ``shadow`` (EASY backfill)."""
    return shadow is not None and ends <= shadow


def fits_now_scorer(free: IntArray) -> hooks.NodeScorer:
    """A node order preferring the nodes where more of the pod fits in ``free`` today
    (scaled to dominate the Score plugins' 0..100 per plugin), so room is held where it
    frees soonest."""

    def score(
        pod: pods.PodInfo, nodes: nodetable.NodeTable, feasible: filtering.BoolArray
    ) -> IntArray:
        vec = nodes.vector(pod.requests)
        asked = vec > 0
        if not asked.any():
            return np.zeros(len(nodes), dtype=np.int64)
        part = np.minimum(free[:, asked] / vec[asked], 1.0).min(axis=1)
        return np.asarray(part * _FITS_NOW_SCALE, dtype=np.int64)

    return score


def on_time_scorer(on_time: npt.NDArray[np.bool_]) -> hooks.NodeScorer:
    """A node order putting first the nodes expected to empty by a booking's ``startAt``
    (above any :func:`fits_now_scorer` difference): a node draining for it then holds it on
    time, whatever is free there today."""
    bonus = np.where(on_time, 2 * _FITS_NOW_SCALE, 0).astype(np.int64)

    def score(
        pod: pods.PodInfo, nodes: nodetable.NodeTable, feasible: filtering.BoolArray
    ) -> IntArray:
        return bonus

    return score


def takeable_scorer(takeable: npt.NDArray[np.bool_]) -> hooks.NodeScorer:
    """A node order preferring the nodes whose pods could all be taken back for the job
    without touching another node (no member of a gang placed elsewhere runs there, above
    any :func:`fits_now_scorer` difference): past ``drainPreemptSeconds`` a hold is taken
    back node by node, and a gang goes whole or not at all."""
    bonus = np.where(takeable, _FITS_NOW_SCALE, 0).astype(np.int64)

    def score(
        pod: pods.PodInfo, nodes: nodetable.NodeTable, feasible: filtering.BoolArray
    ) -> IntArray:
        return bonus

    return score


def held_for(hold: Hold) -> str:
    """What a pod kept off held room is told: for whom it is held."""
    if hold.booked:
        reserve = next((p for p in hold.job.pending if p.reservation is not None), None)
        if reserve is not None and isinstance(hold.shadow, float):
            start = datetime.datetime.fromtimestamp(hold.shadow, tz=datetime.UTC)
            return (
                f"room held for reservation {reserve.reservation}, which starts at "
                f"{start:%Y-%m-%dT%H:%M:%SZ}"
            )
    return f"room held for starving pod group {hold.job.key}"
