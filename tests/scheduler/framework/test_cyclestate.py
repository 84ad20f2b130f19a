"""CycleState: the per-attempt store and its typed getter.

We test these aspects:
- write/read/delete round-trips, deleting a missing key is harmless;
- the typed getter returns the value, or an ERROR status for a missing key or a wrong type;
- clone copies every value (through ``clone``) and the skip sets.
"""

from __future__ import annotations

import dataclasses

import pytest

from berth.scheduler.framework import cyclestate, statuses

KEY = cyclestate.StateKey("Toy/prefilter")


@dataclasses.dataclass
class Counter:
    value: int

    def clone(self) -> Counter:
        return Counter(self.value)


@dataclasses.dataclass
class Other:
    def clone(self) -> Other:
        return Other()


def test_write_read_delete_round_trip() -> None:
    state = cyclestate.CycleState()
    state.write(KEY, Counter(1))
    assert KEY in state
    assert state.read(KEY) == Counter(1)
    state.delete(KEY)
    state.delete(KEY)
    assert KEY not in state
    with pytest.raises(KeyError):
        state.read(KEY)


def test_typed_getter_returns_the_value_of_the_right_type() -> None:
    state = cyclestate.CycleState()
    state.write(KEY, Counter(3))
    got = state.read_as(KEY, kind=Counter)
    assert isinstance(got, Counter)
    assert got.value == 3


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        (None, "no cycle state under 'Toy/prefilter'"),
        (Other(), "cycle state 'Toy/prefilter' is a Other, expected Counter"),
    ],
    ids=["missing", "wrong-type"],
)
def test_typed_getter_turns_mistakes_into_error_statuses(
    stored: Other | None, expected: str
) -> None:
    state = cyclestate.CycleState()
    if stored is not None:
        state.write(KEY, stored)
    got = state.read_as(KEY, kind=Counter)
    assert got == statuses.new(statuses.Code.ERROR, expected)


def test_clone_is_independent() -> None:
    state = cyclestate.CycleState()
    state.write(KEY, Counter(1))
    state.skip_filter_plugins.add("A")
    twin = state.clone()
    typed = twin.read_as(KEY, kind=Counter)
    assert isinstance(typed, Counter)
    typed.value = 2
    twin.skip_filter_plugins.add("B")
    assert state.read(KEY) == Counter(1)
    assert state.skip_filter_plugins == {"A"}
    assert twin.skip_filter_plugins == {"A", "B"}
