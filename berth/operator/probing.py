"""Readiness: named conditions that must all hold for ``/readyz`` to answer 200.

Whoever can make the process unfit to serve registers a condition here and flips it: leadership
marks ``leader-election`` false while the API server cannot be reached or refuses the Lease calls,
the informers (leader only) register ``caches-synced`` false until their first lists are in.
A follower registers no cache condition, so it stays ready while it waits (docs/architecture.md).
:mod:`berth.operator.http` reads :meth:`Readiness.report` for every probe.

Liveness (``/healthz``) is not modelled here: it answers while the event loop runs, because
restarting a process that only lost the API server would not bring the API server back.
"""

from __future__ import annotations

import dataclasses
import logging

__all__ = ["Condition", "Readiness"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Condition:
    """One readiness condition as last reported."""

    name: str
    ready: bool
    reason: str  # why it is not ready; empty when it is


class Readiness:
    """The set of readiness conditions; ready when every one of them is."""

    def __init__(self) -> None:
        self._conditions: dict[str, Condition] = {}

    def set(self, name: str, *, ready: bool, reason: str = "") -> None:
        """Record a condition; a change of state is logged (once, not on every repeat).

        Losing readiness is a warning; a condition that starts out not ready (nothing has
        been checked yet) is only information.
        """
        previous = self._conditions.get(name)
        current = Condition(name=name, ready=ready, reason="" if ready else reason)
        self._conditions[name] = current
        if previous is not None and previous.ready == ready:
            return
        if ready:
            logger.info("readiness: %s is ready", name)
        elif previous is None:
            logger.info("readiness: %s is not ready yet: %s", name, reason or "no reason given")
        else:
            logger.warning("readiness: %s is not ready: %s", name, reason or "no reason given")

    def remove(self, name: str) -> None:
        """Forget a condition (its owner stopped and no longer has a say)."""
        self._conditions.pop(name, None)

    @property
    def ready(self) -> bool:
        return all(condition.ready for condition in self._conditions.values())

    def report(self) -> list[Condition]:
        """Every condition, sorted by name, for the probe's body."""
        return [self._conditions[name] for name in sorted(self._conditions)]
