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
    drain_preempt_seconds: int | None = pydantic.Field(default=3 * 3600, ge=1)
    """Seconds the starvation guard lets room drain for a gang before it takes the rest
    back: past it (counted from the cycle its hold began, or from its starvation threshold
    for a gang its queue's share kept from being held), the gang may evict what still runs
    on the nodes held for it, whatever its queue, as reclaim does: pods of smaller jobs
    only, of lower or equal priority, never a ``reclaimable: false`` queue's. Without it a
    drain lasts as long as the longest pod left on the held nodes, and without run-time
    hints one pod with hours left keeps a whole gang waiting. Three hours by default: on
    issue #33's trace (docs/scheduler.md) the 32-GPU gangs then start within about that
    long, and a drain that long backfills enough that the 1-GPU jobs pay little for it
    (two hours made them wait several). Null turns it off (holds only drain); 0 or below
    is refused, and so is a value at or past ``drainTimeoutSeconds`` (the room would be
    given back first) or one set while ``starvationThresholdSeconds`` turns the guard off.
    Left at its default, a ``drainTimeoutSeconds`` at or below it turns it off (that
    profile bounds its holds by giving them back): :attr:`preempt_after`."""
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
        preempt = self.drain_preempt_seconds
        chosen = "drain_preempt_seconds" in self.model_fields_set
        if guard_off and chosen and preempt is not None:
            raise ValueError(
                "drainPreemptSeconds is set but starvationThresholdSeconds turns the "
                "starvation guard off: nothing would drain"
            )
        timeout = self.drain_timeout_seconds
        if chosen and preempt is not None and timeout is not None and preempt >= timeout:
            raise ValueError(
                f"drainPreemptSeconds ({preempt}) must be below "
                f"drainTimeoutSeconds ({timeout}): the room would be given back before "
                "the job took it"
            )
        return self

    @property
    def preempt_after(self) -> int | None:
        """``drainPreemptSeconds`` as it applies: off with the guard, and off when the
        profile left it at its default but gives holds back (``drainTimeoutSeconds``) no
        later than that."""
        preempt, timeout = self.drain_preempt_seconds, self.drain_timeout_seconds
        if not self.starvation_threshold_seconds or preempt is None:
            return None
        if timeout is not None and preempt >= timeout:
            return None  # left at its default (a chosen one past the timeout is refused)
        return preempt
