"""Proportion's arguments, as a profile writes them."""

from __future__ import annotations

import typing

import pydantic

from berth.scheduler.framework import registries

__all__ = ["ProportionArgs"]


class ProportionArgs(registries.ArgsModel):
    """Arguments of Proportion."""

    starvation_threshold_seconds: int | None = pydantic.Field(default=300, ge=0)
    """Seconds a job may wait for room (counted from its group's creation) before the
    starvation guard holds freeing capacity for it. Five minutes by default: long enough for
    ordinary churn to place most work, short against jobs that run for hours. ``0`` or null
    turns the guard off."""
    drain_timeout_seconds: int | None = pydantic.Field(default=None, ge=1)
    """Seconds the starvation guard may keep holding room for one job (its second
    threshold, counted from the cycle the hold began): past it the room is given back, the
    job's reason says so, and it is not held for again until as long after. Null (the
    default) holds until the job starts; 0 or below is refused (a hold given back at once
    holds nothing), and so is a timeout while ``starvationThresholdSeconds`` turns the guard
    off. Off by default because on issue #33's trace every timeout tried (4, 8 and 12 hours)
    made the big gangs wait longer: the guard's holds there take longer than that to fill."""
    reservation_drain_seconds: int = pydantic.Field(default=3600, ge=0, le=7 * 24 * 3600)
    """Seconds before a Reservation's ``startAt`` the guard begins to drain a node for it:
    from then on, new work goes to that node only if expected to end by ``startAt``, and what
    frees there is kept for the reservation. An hour by default: the longer it is, the surer
    the node is empty in time and the more of it may idle meanwhile (what backfills it is
    bounded by run-time estimates). 0 drains nothing: the reservation takes what fits at
    ``startAt``. Works whether or not ``starvationThresholdSeconds`` turns the guard on for
    gangs."""
    reclaim_to_fair_share: bool = True
    """Whether a queue below its weighted fair share may evict work of ``reclaimable`` queues
    above theirs (reclaim toward a guarantee is always on)."""
    reclaim_min_runtime_seconds: int = pydantic.Field(default=60, ge=0, le=7 * 24 * 3600)
    """Seconds a pod must have run (since ``status.startTime``) before fair-share reclaim may
    evict it, unless its queue sets ``reclaimMinRuntimeSeconds``. A minute: a pod placed by
    one cycle is never taken back by the next ones while shares settle, and little work is
    lost against jobs that run for hours."""
    reclaim_evictions_per_cycle: int = pydantic.Field(default=32, ge=1, le=100_000)
    """Pods a cycle may evict for fair-share reclaim, counting every eviction the cycle made
    before (reclaim toward a guarantee is not limited). Rebalancing then takes a few cycles
    instead of one burst, and each cycle looks at the shares the last one left."""
    usage_half_life_seconds: int | None = pydantic.Field(default=None, ge=1)
    """Turns on usage-decayed fair share (:mod:`~berth.scheduler.plugins.proportion.decay`):
    the half-life, in seconds, of the usage that tilts the weights siblings split by, so a
    queue that used more recently gets less now. Null (the default) splits by the weights
    alone; 0 or below is refused (a history that forgets everything at once is no history)."""

    @pydantic.model_validator(mode="after")
    def _drains_need_a_guard(self) -> typing.Self:
        guard_off = not self.starvation_threshold_seconds
        chosen = "drain_timeout_seconds" in self.model_fields_set
        if guard_off and chosen and self.drain_timeout_seconds is not None:
            raise ValueError(
                "drainTimeoutSeconds is set but starvationThresholdSeconds turns the "
                "starvation guard off: nothing would drain"
            )
        return self
