"""The actions a session can run, in their default order (R6: one literal, no import magic).

``default_actions()`` is what the loop offers profiles; a profile's ``actions`` list picks from
these by name and sets the order each session runs them in.
"""

from __future__ import annotations

from berth.scheduler.actions import allocate, backfill, preempt, reclaim, timelimit
from berth.scheduler.framework import interfaces

__all__ = ["default_actions"]


def default_actions() -> tuple[interfaces.Action, ...]:
    """Every available action, in the default order."""
    return (
        # Requeue or fail what ran past its maximum execution time (its room is placed next).
        timelimit.new(),
        # Place pending work: plain pods, then gangs queue by queue.
        allocate.new(),
        # Nominate room for starving jobs as it frees.
        backfill.new(),
        # Give queues below their guarantee their capacity back from queues above their share.
        reclaim.new(),
        # Inside a queue, evict lower-priority work for higher-priority jobs.
        preempt.new(),
    )
