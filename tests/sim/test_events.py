"""The event queue and virtual time.

We test these aspects:
- events come out by time, then in the order they were pushed;
- ``pop_due`` takes every event of the earliest instant and nothing later;
- events before time zero are refused; an empty queue says so;
- virtual milliseconds map to report seconds and to clock readings from the fixed epoch.
"""

from __future__ import annotations

import pytest

from berth.sim import events


def test_events_pop_by_time_then_push_order() -> None:
    queue = events.EventQueue()
    queue.push(500, events.Wakeup(reason="c"))
    queue.push(100, events.Wakeup(reason="a"))
    queue.push(500, events.Wakeup(reason="d"))
    queue.push(100, events.Wakeup(reason="b"))
    popped = []
    while queue:
        at, due = queue.pop_due()
        popped.append((at, [e.reason for e in due if isinstance(e, events.Wakeup)]))
    assert popped == [(100, ["a", "b"]), (500, ["c", "d"])]


def test_next_time_peeks_without_popping() -> None:
    queue = events.EventQueue()
    assert queue.next_time() is None
    queue.push(7, events.Arrival(workload=0, index=0))
    assert queue.next_time() == 7
    assert len(queue) == 1


def test_events_cannot_happen_before_time_zero() -> None:
    with pytest.raises(ValueError, match="before time zero"):
        events.EventQueue().push(-1, events.Wakeup(reason="x"))


def test_popping_an_empty_queue_is_an_error() -> None:
    with pytest.raises(IndexError):
        events.EventQueue().pop_due()


@pytest.mark.parametrize(
    ("ms", "seconds"), [(0, 0.0), (1, 0.001), (90_000, 90.0)], ids=["zero", "milli", "minutes"]
)
def test_milliseconds_become_report_seconds(ms: int, seconds: float) -> None:
    assert events.seconds(ms) == seconds
    assert events.wall_time(ms) == events.EPOCH + seconds
