"""Status conditions as Berth writes them (:mod:`berth.status.conditions`), pure.

We test these aspects:
- ``timestamp`` writes a Kubernetes ``Time``: UTC, whole seconds, a trailing ``Z``;
- ``find`` returns the condition of a type, or None (no conditions, other types, junk entries);
- ``updated`` keeps ``lastTransitionTime`` while the condition's status stays, moves it when
  the status changes, keeps other writers' types, and sorts the list by type;
- ``replaced`` swaps in a whole condition of its type, copying the others;
- ``words_only`` tells a change of a condition's message (and its transition time) from one
  of its status, reason, type, another field or a condition added.
"""

from __future__ import annotations

import typing

import pytest

from berth.status import conditions

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
EARLIER = "2025-12-31T23:00:00Z"


def test_timestamp_is_whole_utc_seconds() -> None:
    assert conditions.timestamp(T0 + 61.9) == "2026-01-01T00:01:01Z"


@pytest.mark.parametrize(
    ("status", "found"),
    [
        ({}, None),
        ({"conditions": [{"type": "Ready", "status": "True"}]}, None),
        ({"conditions": ["junk", {"type": "Valid", "status": "True"}]}, "True"),
    ],
    ids=["no-conditions", "other-type", "junk-skipped"],
)
def test_find_returns_the_condition_of_a_type(
    status: dict[str, typing.Any], found: str | None
) -> None:
    condition = conditions.find(status, "Valid")
    assert (condition.get("status") if condition is not None else None) == found


@pytest.mark.parametrize(
    ("old_status", "new_status", "since"),
    [
        ("True", "True", EARLIER),
        ("True", "False", "2026-01-01T00:00:00Z"),
    ],
    ids=["same-status-keeps-time", "new-status-moves-time"],
)
def test_updated_moves_the_transition_time_only_with_the_status(
    old_status: str, new_status: str, since: str
) -> None:
    status = {
        "conditions": [
            {"type": "Zeta", "status": "True"},
            {
                "type": "Valid",
                "status": old_status,
                "message": "old",
                "lastTransitionTime": EARLIER,
            },
        ]
    }
    written = conditions.updated(
        status, kind="Valid", value=new_status, reason="R", message="new", now=T0
    )
    assert written == [
        {
            "type": "Valid",
            "status": new_status,
            "reason": "R",
            "message": "new",
            "lastTransitionTime": since,
        },
        {"type": "Zeta", "status": "True"},
    ]


def test_replaced_copies_the_other_types() -> None:
    other = {"type": "Other", "status": "True"}
    written = conditions.replaced({"conditions": [other]}, {"type": "Mine", "status": "False"})
    assert written == [{"type": "Mine", "status": "False"}, other]
    assert written[1] is not other


def _waiting(message: str, since: str = EARLIER, **more: object) -> dict[str, typing.Any]:
    condition = {"type": "Scheduled", "status": "False", "reason": "Starving"}
    condition |= {"message": message, "lastTransitionTime": since}
    return {"phase": "Inqueue", "conditions": [condition], **more}


@pytest.mark.parametrize(
    ("new", "only"),
    [
        (_waiting("waited 310s", since="2026-01-01T00:00:10Z"), True),
        (_waiting("waited 300s"), True),
        (_waiting("waited 300s", phase="Running"), False),
        (_waiting("waited 300s", queuePosition=2), False),
        ({**_waiting("waited 300s"), "conditions": []}, False),
        (
            {
                "phase": "Inqueue",
                "conditions": [{**_waiting("x")["conditions"][0], "reason": "QueueClosed"}],
            },
            False,
        ),
    ],
    ids=["new-words", "same", "new-phase", "new-field", "condition-gone", "new-reason"],
)
def test_words_only_is_a_change_of_messages_alone(new: dict[str, typing.Any], only: bool) -> None:
    assert conditions.words_only(_waiting("waited 300s"), new) is only
