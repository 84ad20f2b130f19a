"""A Reservation's owners worded as selectors people read (``status.ownerSelector``, the
dashboard): a pod by name, a controller's pods, a label selector in kubectl's form."""

from __future__ import annotations

import pytest

from berth.scheduler.snapshot import reservations, selectors
from berth.status import reservations as reservation_status

Owner = reservations.ReservationOwner


@pytest.mark.parametrize(
    ("owners", "worded"),
    [
        ((Owner(object_name="trainer"),), "pod/trainer"),
        ((Owner(controller_kind="Job", controller_name="train"),), "Job/train"),
        (
            (
                Owner(
                    match_labels=(("tier", "gpu"), ("app", "train")),
                    match_expressions=(
                        selectors.Requirement("zone", selectors.IN, ("b", "a")),
                        selectors.Requirement("spot", selectors.DOES_NOT_EXIST),
                        selectors.Requirement("team", selectors.EXISTS),
                    ),
                    selects=True,
                ),
            ),
            "app=train,!spot,team,tier=gpu,zone in (a,b)",
        ),
        ((Owner(selects=True),), "every pod"),
        (
            (Owner(object_name="a"), Owner(match_labels=(("app", "x"),), selects=True)),
            "pod/a; app=x",
        ),
    ],
    ids=["pod", "controller", "selector", "empty-selector", "several"],
)
def test_owners_are_worded_as_selectors(owners: tuple[Owner, ...], worded: str) -> None:
    assert reservation_status.owner_selector(owners) == worded
