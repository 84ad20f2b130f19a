"""Admission mode's per-pod state machine (``kube.admission.admission_states``), without I/O.

We test these aspects:

- the transition table, every (state, event) pair, against the table a user would write down
  from docs/admission.md: pinning ends only by Berth's own requests, a bind elsewhere or the
  pod's end; an ungated pod is rejected when bound elsewhere, reported unschedulable or late;
- hypothesis: over any sequence of events an allocation is ungated only after an ``UNGATED``
  event from pinning, ends at most once, and never ends ``BOUND`` but by ``BOUND_THERE``;
- what an observed pod means for its allocation (:func:`observed`) and what a pod without one
  is (:func:`classify`), from wire objects.
"""

from __future__ import annotations

import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from berth.api import keys
from berth.kube.admission import admission_states as states

S = states.AllocationState
E = states.Event
PINNING, UNGATED = S.PINNING, S.UNGATED
BOUND, DROPPED, REJECTED = states.Ending.BOUND, states.Ending.DROPPED, states.Ending.REJECTED

EXPECTED: dict[tuple[states.AllocationState, states.Event], object] = {
    (PINNING, E.PINNED): PINNING,
    (PINNING, E.PIN_FAILED): DROPPED,
    (PINNING, E.UNGATED): UNGATED,
    (PINNING, E.UNGATE_FAILED): DROPPED,
    (PINNING, E.VICTIMS_STAYED): DROPPED,
    (PINNING, E.BOUND_THERE): BOUND,
    (PINNING, E.BOUND_ELSEWHERE): REJECTED,
    (PINNING, E.UNSCHEDULABLE): PINNING,
    (PINNING, E.BIND_TIMEOUT): PINNING,
    (PINNING, E.FINISHED): DROPPED,
    (PINNING, E.RECREATED): DROPPED,
    (PINNING, E.GONE): DROPPED,
    (PINNING, E.BIND_FAILED): PINNING,
    (UNGATED, E.PINNED): UNGATED,
    (UNGATED, E.PIN_FAILED): UNGATED,
    (UNGATED, E.UNGATED): UNGATED,
    (UNGATED, E.UNGATE_FAILED): UNGATED,
    (UNGATED, E.VICTIMS_STAYED): UNGATED,
    (UNGATED, E.BOUND_THERE): BOUND,
    (UNGATED, E.BOUND_ELSEWHERE): REJECTED,
    (UNGATED, E.UNSCHEDULABLE): REJECTED,
    (UNGATED, E.BIND_TIMEOUT): REJECTED,
    (UNGATED, E.FINISHED): DROPPED,
    (UNGATED, E.RECREATED): DROPPED,
    (UNGATED, E.GONE): DROPPED,
    (UNGATED, E.BIND_FAILED): DROPPED,
}


def test_the_table_covers_every_pair_as_documented() -> None:
    assert set(EXPECTED) == {(s, e) for s in S for e in E}
    for (state, event), want in EXPECTED.items():
        moved = states.advance(state, event)
        got = moved.state if moved.state is not None else moved.ending
        assert got is want, (state, event)


def test_a_transition_is_a_state_or_an_ending_never_both() -> None:
    with pytest.raises(ValueError):
        states.Transition(state=PINNING, ending=BOUND)
    with pytest.raises(ValueError):
        states.Transition()


@given(
    start=st.sampled_from(list(S)),
    events=st.lists(st.sampled_from(list(E)), max_size=30),
)
def test_any_event_sequence_keeps_the_invariants(
    start: states.AllocationState, events: list[states.Event]
) -> None:
    state: states.AllocationState | None = start
    endings = 0
    for event in events:
        if state is None:
            break  # an ended allocation is gone: nothing more happens to it
        moved = states.advance(state, event)
        if moved.state is UNGATED and state is PINNING:
            assert event is E.UNGATED
        if moved.ending is not None:
            endings += 1
            if moved.ending is BOUND:
                assert event is E.BOUND_THERE
            if moved.ending is REJECTED and state is PINNING:
                assert event is E.BOUND_ELSEWHERE  # nothing else rejects a gated pod
        if event in (E.BOUND_THERE, E.GONE, E.FINISHED, E.RECREATED):
            assert moved.ending is not None  # these always end it
        state = moved.state
    assert endings <= 1


def pod(
    *,
    node: str | None = None,
    gates: tuple[str, ...] = (keys.ADMISSION_GATE,),
    labels: dict[str, str] | None = None,
    admitted: str | None = None,
    phase: str = "Pending",
    uid: str = "u1",
    unschedulable: str | None = None,
) -> dict[str, typing.Any]:
    annotations = {keys.ADMITTED_NODE_ANNOTATION: admitted} if admitted else {}
    status: dict[str, typing.Any] = {"phase": phase}
    if unschedulable is not None:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable,
            }
        ]
    spec: dict[str, typing.Any] = {
        "schedulingGates": [{"name": g} for g in gates],
        "containers": [{"name": "c", "image": "busybox"}],
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": uid,
            "labels": {keys.QUEUE_LABEL: "q"} if labels is None else labels,
            "annotations": annotations,
        },
        "spec": spec,
        "status": status,
    }


def seen(**kwargs: typing.Any) -> states.Observation:
    return states.Observation.of(pod(**kwargs))


@pytest.mark.parametrize(
    ("kwargs", "state", "event"),
    [
        ({"node": "n1", "gates": ()}, UNGATED, E.BOUND_THERE),
        ({"node": "n2", "gates": ()}, UNGATED, E.BOUND_ELSEWHERE),
        ({"gates": (), "phase": "Failed"}, UNGATED, E.FINISHED),
        ({"gates": (), "uid": "u2"}, UNGATED, E.RECREATED),
        ({"gates": (), "unschedulable": "0/3 nodes"}, UNGATED, E.UNSCHEDULABLE),
        ({"unschedulable": "0/3 nodes"}, PINNING, None),  # still gated: not tried yet
        ({"gates": ()}, UNGATED, None),  # waiting for its scheduler
    ],
    ids=["bound-there", "elsewhere", "finished", "recreated", "unschedulable", "gated", "wait"],
)
def test_an_observation_means_one_event_for_the_allocation(
    kwargs: dict[str, typing.Any], state: states.AllocationState, event: states.Event | None
) -> None:
    assert states.observed(seen(**kwargs), node="n1", uid="u1", state=state) is event


@pytest.mark.parametrize(
    ("kwargs", "was_held", "recreating", "holding"),
    [
        ({}, False, False, states.Holding.HELD),
        ({"labels": {}}, False, False, states.Holding.NOT_BERTHS),
        ({"gates": (), "admitted": "n1"}, False, False, states.Holding.ADOPT),
        ({"gates": (), "admitted": "n1"}, False, True, states.Holding.NONE),
        ({"gates": ("other",)}, True, False, states.Holding.BYPASSED),
        ({"gates": ()}, True, True, states.Holding.NONE),  # Berth is recreating it
        ({"gates": (), "phase": "Succeeded"}, True, False, states.Holding.NONE),
        ({"gates": ()}, False, False, states.Holding.NONE),
    ],
    ids=["held", "not-berths", "adopt", "adopt-recreating", "bypassed", "recreating", "done", "no"],
)
def test_a_pod_without_an_allocation_is_classified(
    kwargs: dict[str, typing.Any], was_held: bool, recreating: bool, holding: states.Holding
) -> None:
    assert states.classify(seen(**kwargs), was_held=was_held, recreating=recreating) is holding


OPTED_OUT = {keys.QUEUE_LABEL: "q", keys.ADMISSION_LABEL: "disabled"}


@pytest.mark.parametrize(
    ("kwargs", "was_held", "opted_in", "admitted", "holding"),
    [
        ({"gates": (), "admitted": "n1"}, True, False, False, states.Holding.FORGED),
        ({"gates": (), "admitted": "n1", "node": "n1"}, True, False, False, states.Holding.FORGED),
        ({"gates": (), "admitted": "n1"}, True, False, True, states.Holding.ADOPT),
        (
            {"gates": (), "admitted": "n1", "labels": OPTED_OUT},
            False,
            False,
            False,
            states.Holding.FORGED,
        ),
        (
            {"gates": (), "admitted": "n1", "node": "n1", "labels": OPTED_OUT},
            False,
            False,
            False,
            states.Holding.FORGED,
        ),
        (
            {"gates": (), "admitted": "n1", "labels": OPTED_OUT},
            False,
            True,
            False,
            states.Holding.ADOPT,
        ),
        (
            {"gates": (), "admitted": "n1", "node": "n1", "labels": OPTED_OUT},
            False,
            False,
            True,
            states.Holding.NONE,
        ),
    ],
    ids=[
        "gate-removed-with-marker",
        "gate-removed-with-marker-bound",
        "berth-pinned-it",
        "opted-out-with-marker",
        "opted-out-with-marker-bound",
        "opted-out-in-a-namespace-requiring-admission",
        "opted-out-after-berth-admitted-it",
    ],
)
def test_a_marker_berth_did_not_write_is_forged(
    kwargs: dict[str, typing.Any],
    was_held: bool,
    opted_in: bool,
    admitted: bool,
    holding: states.Holding,
) -> None:
    found = states.classify(
        seen(**kwargs), was_held=was_held, recreating=False, opted_in=opted_in, admitted=admitted
    )
    assert found is holding
