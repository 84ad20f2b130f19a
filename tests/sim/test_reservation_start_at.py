"""Reservations booked for later (``spec.startAt``, issue #33) in ``berth sim``.

Four 8-GPU nodes kept full by a backlog of 1-GPU jobs that declare their run times (20 and 45
minutes, and 3 hours), arriving at about 130 % of the cluster. A Reservation of one whole node
starts 2 hours in (the simulated clock starts at 2026-01-01T00:00:00Z). With the default
profile the starvation guard drains a node for it from an hour before (``Proportion``'s
``reservationDrainSeconds``): the node chosen is one whose pods are expected to end by then,
and only work expected to end by then backfills it.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import reservations as api_reservations
from berth.sim import errors
from tests.sim import builders

START = 2 * 3600  # seconds of simulated time: 2026-01-01T02:00:00Z
DRAIN = 3600  # the default reservationDrainSeconds
GPUS = 32
HELD = 8  # the reservation's GPUs: one node
SHORTEST = 20 * 60  # the shortest declared run time waiting
SPEC = """\
seed: 1
until: %(until)s
nodes:
  - {count: 4, namePrefix: gpu-, allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}
objects:
  - apiVersion: scheduling.berth.io/v1alpha1
    kind: Reservation
    metadata: {name: tonight, namespace: ml}
    spec:
      startAt: "%(start)s"
      ttl: 1h
      owners: [{labelSelector: {matchLabels: {app: big}}}]
      template:
        spec:
          containers:
            - name: hold
              resources: {requests: {cpu: "8", memory: 8Gi, nvidia.com/gpu: "8"}}
workloads:
  - {name: fill, namespace: batch, every: 1s, count: 34, duration: 30m, expectedRuntime: 30m,
     requests: %(one)s}
  - {name: short, namespace: batch, every: 60s, arrival: poisson, count: 300, duration: 20m,
     expectedRuntime: 20m, requests: %(one)s}
  - {name: mid, namespace: batch, every: 2m, arrival: poisson, count: 200, duration: 45m,
     expectedRuntime: 45m, requests: %(one)s}
  - {name: long, namespace: batch, every: 10m, arrival: poisson, count: 30, duration: 3h,
     expectedRuntime: 3h, requests: %(one)s}
"""
ONE = '{cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}'


def _run(*, until: str, start: str = "2026-01-01T02:00:00Z") -> dict[str, typing.Any]:
    return builders.run(SPEC % {"until": until, "start": start, "one": ONE})


def _reservation(report: dict[str, typing.Any]) -> dict[str, typing.Any]:
    (found,) = report["reservations"]
    return found


def _idle_gpu_hours(report: dict[str, typing.Any], *, since: float, until: float) -> float:
    """GPU-hours no pod used in [since, until) (what a reservation holds is not a pod's)."""
    samples = [
        (float(s["t"]), float(s["resources"].get("nvidia.com/gpu", "0")))
        for s in report["cluster"]["allocated"]
    ]
    idle = 0.0
    for (at, used), (following, _) in zip(samples, [*samples[1:], (until, 0.0)], strict=True):
        lo, hi = max(at, since), min(following, until)
        if hi > lo:
            idle += (GPUS - used) * (hi - lo)
    return idle / 3600


def test_a_reservation_2_hours_ahead_holds_its_node_then_idling_only_what_the_drain_needs() -> None:
    report = _run(until="2h30m")
    held = _reservation(report)
    # Held from startAt on, on the node drained for it, to the second.
    assert held["phase"] == "Available"
    assert held["availableAt"] == START
    # Before the drain the cluster is full (the first seconds aside, while the backlog lands).
    assert _idle_gpu_hours(report, since=60, until=START - DRAIN) == 0
    # While draining, backfill with work expected to end in time leaves idle on the drained
    # node only what no waiting job could fill: each of its GPUs at most the shortest declared
    # run time. Holding the node from the drain's start with no backfill would idle 8 GPU-h.
    idle = _idle_gpu_hours(report, since=START - DRAIN, until=START)
    assert 0 < idle <= HELD * SHORTEST / 3600, idle
    # And no 3-hour job was placed where it would have outlived startAt: nothing waited past
    # it for the node (the reservation got it at startAt, above), and work kept flowing.
    assert report["summary"]["partialGangs"] == 0


def test_before_its_start_it_waits_saying_when_and_which_node_drains_for_it() -> None:
    waiting = _reservation(_run(until="50m"))
    assert waiting["phase"] == "Pending"
    assert waiting["reason"] == "NotStarted"
    assert waiting["message"] == "starts at 2026-01-01T02:00:00Z"
    draining = _reservation(_run(until="1h30m"))
    assert draining["phase"] == "Pending"
    assert draining["reason"] == "NotStarted"
    assert draining["message"].startswith("starts at 2026-01-01T02:00:00Z; draining gpu-")
    assert draining["message"].endswith(" for it meanwhile")


def test_its_ttl_counts_from_its_start() -> None:
    # ttl 1h from 2h: Available until 3h, then Expired.
    assert _reservation(_run(until="2h59m"))["phase"] == "Available"
    assert _reservation(_run(until="3h1m"))["phase"] == "Expired"


def test_a_start_already_past_at_creation_is_held_invalid_naming_the_field() -> None:
    # Created at the simulated clock's start: an API server's CEL has no clock to refuse it
    # with, so Berth holds it invalid and never places it.
    held = _reservation(_run(until="30m", start="2025-12-31T23:00:00Z"))
    assert held["phase"] == "Pending"
    assert held["availableAt"] is None
    assert held["reason"] == "Invalid"
    assert held["message"].startswith(f"spec.startAt: {api_reservations.STARTS_IN_THE_PAST}")


@pytest.mark.parametrize(
    ("start", "words"),
    [
        ("2026-01-01T09:00:00Z", api_reservations.STARTS_AFTER_EXPIRY),
        ("tonight", "is not RFC 3339"),
    ],
)
def test_a_scenario_with_a_bad_start_is_refused_naming_the_field(start: str, words: str) -> None:
    body = (SPEC % {"until": "1h", "start": start, "one": ONE}).replace(
        "ttl: 1h", 'expires: "2026-01-01T08:00:00Z"'
    )
    with pytest.raises(errors.ScenarioError) as refused:
        builders.scenario(body)
    assert "spec.objects[0].spec.startAt" in str(refused.value), str(refused.value)
    assert words in str(refused.value), str(refused.value)
