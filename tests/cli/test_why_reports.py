"""``kubectl berth why``'s choice of the Event to cite (:func:`latest_failed_scheduling`).

We test these aspects:

- of two ``FailedScheduling`` Events in the same second, the one written last (higher
  resourceVersion) is cited, whatever their names;
- a later ``lastTimestamp`` wins over a higher resourceVersion; the repeat count is shown.
"""

from __future__ import annotations

import typing

from berth.cli import why_reports


def event(
    name: str, version: str, *, at: str, message: str, count: int = 1
) -> dict[str, typing.Any]:
    return {
        "metadata": {"name": name, "resourceVersion": version},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "FailedScheduling",
        "message": message,
        "lastTimestamp": at,
        "count": count,
    }


def test_the_event_written_last_in_a_second_is_cited() -> None:
    same = "2026-01-01T00:00:05Z"
    found = why_reports.latest_failed_scheduling(
        [
            event("p.zzz", "7", at=same, message="stale"),
            event("p.aaa", "12", at=same, message="current"),
        ],
        about={("Pod", "p")},
    )
    assert found == "2026-01-01T00:00:05Z on Pod p: current"


def test_a_later_timestamp_wins_and_the_count_is_shown() -> None:
    found = why_reports.latest_failed_scheduling(
        [
            event("p.a", "99", at="2026-01-01T00:00:05Z", message="old"),
            event("p.b", "3", at="2026-01-01T00:01:00Z", message="new", count=4),
        ],
        about={("Pod", "p")},
    )
    assert found == "2026-01-01T00:01:00Z on Pod p (x4): new"
