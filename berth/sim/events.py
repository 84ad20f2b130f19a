"""Virtual time and the simulator's event queue.

Virtual time is an ``int`` of milliseconds since the scenario started (durations in Berth are
exact to the millisecond, so no float ever decides an order). :data:`EPOCH` is the wall-clock
instant that time zero maps to, so the scheduler's ``Clock`` and the objects' timestamps look
like real ones.

The queue holds what will happen: a workload's jobs arriving, a pod finishing its run, a timed
``apply``/``delete`` from the scenario, a wake-up for something the scheduler decides by time
(a gang's timeout, a reservation's expiry). Events come out in ``(time, sequence)`` order,
where the sequence is the order they were pushed: the same pushes give the same pops, which is
what makes a simulation repeatable. The runner (:mod:`berth.sim.runner`) is the only user.
"""

from __future__ import annotations

import dataclasses
import heapq

from berth.api import objects

__all__ = [
    "EPOCH",
    "Arrival",
    "Completion",
    "Delete",
    "Apply",
    "Event",
    "EventQueue",
    "Wakeup",
    "seconds",
    "wall_time",
]

EPOCH = 1_767_225_600.0
"""2026-01-01T00:00:00Z: a fixed, readable wall time for the scenario's time zero."""


def seconds(ms: int) -> float:
    """Milliseconds of virtual time as the seconds the reports use."""
    return ms / 1000


def wall_time(ms: int) -> float:
    """The clock reading (seconds since the Unix epoch) at virtual time ``ms``."""
    return EPOCH + ms / 1000


@dataclasses.dataclass(frozen=True)
class Arrival:
    """Job number ``index`` of workload ``workload`` (its position in the scenario) arrives."""

    workload: int
    index: int


@dataclasses.dataclass(frozen=True)
class Completion:
    """The pod ``key`` (``namespace/name``) bound as ``uid`` has run its duration.

    A pod evicted and recreated meanwhile has a new uid, so a stale completion is ignored.
    """

    key: str
    uid: str


@dataclasses.dataclass(frozen=True)
class Apply:
    """Create or replace an object (a manifest as the API would store it)."""

    manifest: objects.KubeObject = dataclasses.field(hash=False)  # any of the scenario's kinds


@dataclasses.dataclass(frozen=True)
class Delete:
    """Delete an object by kind, namespace (``None`` for cluster-scoped kinds) and name."""

    kind: str
    namespace: str | None
    name: str


@dataclasses.dataclass(frozen=True)
class Wakeup:
    """Nothing changes, but the scheduler should look again (``reason`` says why, for a
    reader). ``periodic`` marks the scheduler's own period, as opposed to a deadline (a
    timeout, a TTL) the scheduler decides by."""

    reason: str
    periodic: bool = False


Event = Arrival | Completion | Apply | Delete | Wakeup


class EventQueue:
    """A priority queue of events ordered by ``(time, sequence)``."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Event]] = []
        self._sequence = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, at: int, event: Event) -> None:
        """Schedule ``event`` at virtual time ``at`` (milliseconds)."""
        if at < 0:
            raise ValueError(f"an event cannot happen before time zero (at {at} ms)")
        heapq.heappush(self._heap, (at, self._sequence, event))
        self._sequence += 1

    def next_time(self) -> int | None:
        """When the next event happens, or ``None`` when nothing is left."""
        return self._heap[0][0] if self._heap else None

    def pop_due(self) -> tuple[int, list[Event]]:
        """Remove and return every event of the earliest time, in push order, with that time."""
        if not self._heap:
            raise IndexError("pop from an empty event queue")
        at = self._heap[0][0]
        due: list[Event] = []
        while self._heap and self._heap[0][0] == at:
            due.append(heapq.heappop(self._heap)[2])
        return at, due
