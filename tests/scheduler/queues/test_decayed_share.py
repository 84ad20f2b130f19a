"""Usage-decayed fair share (Proportion ``usageHalfLifeSeconds``, issue 16).

We test these aspects:
- two queues of equal weight, one used the 8-cpu cluster alone for an hour: with a 10-minute
  half-life the historical user's share and allocation are below half when both compete,
  grow back as its history decays, and are exactly half once it has; with decay off the
  split is exactly half from the start;
- a new leader (a fresh plugin) rebuilds the history from what runs: the same share as the
  replica that kept it, when what ran is still running;
- the usage history's arithmetic: a constant holding over an interval, each second decayed
  by its age, and pure decay when nothing is held;
- the tilt: unchanged weights when the usage follows them, less for the heavier user, and
  never zero (the split stays work-conserving);
- a half-life of 0 or below is refused, naming the field.
"""

from __future__ import annotations

import itertools
import math
import typing

import pydantic
import pytest

from berth.scheduler import loop
from berth.scheduler.plugins import proportion, registry
from berth.scheduler.plugins.proportion import decay
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, queue, t

HALF = 8_000 // 2  # milli-cpu: half of the one 8-cpu node
STEP = 60.0  # seconds between cycles


def history_run(proportion_args: dict[str, typing.Any]) -> runs.Run:
    """qa fills the node alone for an hour (a cycle a minute); then qb submits as much."""
    # The starvation guard is on (its default threshold): the waiting pods of both queues
    # starve, and reclaim still acts for them before the guard holds room.
    args = dict(proportion_args)
    run = runs.Run(
        b.node("n1", cpu="8", memory="64Gi"),
        queue("qa"),
        queue("qb"),
        *[cpu_pod(f"qa{i:02d}", queue="qa", created=t(i / 1000)) for i in range(20)],
        profile=runs.profile_with({"Proportion": args}),
    )
    for _ in range(60):
        run.cycle()
        run.clock.advance(STEP)
    run.put(*[cpu_pod(f"qb{i:02d}", queue="qb", created=t(3600 + i / 1000)) for i in range(20)])
    return run


def cpu(outcome: runs.Outcome, name: str) -> tuple[int, int]:
    """The queue's (fair share, allocation) of cpu in milli-cpu."""
    status = outcome.queues[name]
    return status.fair_share.get("cpu", 0), status.allocated.get("cpu", 0)


def test_the_historical_user_gets_less_than_half_until_its_history_decays() -> None:
    run = history_run({"usageHalfLifeSeconds": 600})
    shares: list[int] = []
    held: list[int] = []
    for _ in range(120):  # two hours of competing
        outcome = run.cycle()
        share, allocated = cpu(outcome, "qa")
        shares.append(share)
        held.append(allocated)
        assert cpu(outcome, "qb")[0] == 8_000 - share
        run.clock.advance(STEP)
    assert shares[0] < HALF and held[0] < HALF  # an hour alone weighs against it
    assert shares[0] <= 2_000
    assert held[5] < HALF  # minutes later it still gets less than half
    # As qb's use of its larger share catches up, qa's share grows back (within a few
    # milli-cpu of rounding) ...
    assert all(later >= earlier - 5 for earlier, later in itertools.pairwise(shares))
    # ... and once the history has decayed, the split is the weights' again: exactly half.
    assert shares[-10:] == [HALF] * 10
    assert held[-10:] == [HALF] * 10


def test_without_decay_the_split_is_exactly_half_at_once() -> None:
    run = history_run({})
    first = run.cycle()
    assert cpu(first, "qa") == (HALF, HALF)
    assert cpu(first, "qb") == (HALF, HALF)


def test_the_history_integrates_what_each_queue_held() -> None:
    history = decay.UsageHistory(half_life=600.0)
    assert history.advance(1_000.0) == {}
    history.hold({"qa": 1.0, "qb": 0.25})
    usage = history.advance(1_600.0)  # one half-life holding that much
    assert usage["qa"] == pytest.approx(600 / math.log(2) * 0.5)
    assert usage["qb"] == pytest.approx(usage["qa"] / 4)
    history.hold({})
    later = history.advance(2_200.0)  # one more half-life holding nothing: halved
    assert later["qa"] == pytest.approx(usage["qa"] / 2)
    assert history.advance(2_200.0) == later  # the same instant adds nothing


def test_the_tilt_leaves_weighted_usage_alone_and_never_reaches_zero() -> None:
    active = [True, True]
    assert decay.tilt([3, 1], [30.0, 10.0], active=active) == pytest.approx([3, 1])
    tilted = decay.tilt([1, 1], [1.0, 0.0], active=active)
    assert tilted == pytest.approx([2 / 3, 2.0])  # the heavy user gets a quarter
    heavy = decay.tilt([1, 1], [1.0, 1e-12], active=active)
    assert 0 < heavy[0] < heavy[1]
    # A queue asking for nothing neither compares nor changes.
    assert decay.tilt([1, 1, 5], [1.0, 0.0, 9.0], active=[True, True, False])[2] == 5


@pytest.mark.parametrize("half_life", [0, -60])
def test_a_half_life_of_zero_or_below_is_refused(half_life: int) -> None:
    with pytest.raises(pydantic.ValidationError, match="usageHalfLifeSeconds"):
        proportion.ProportionArgs.model_validate({"usageHalfLifeSeconds": half_life})


def test_a_new_leader_rebuilds_the_history_from_what_runs() -> None:
    args = {"usageHalfLifeSeconds": 600}
    kept = history_run(args)
    failed_over = history_run(args)
    # A new replica takes over as qb arrives: its plugin has no history of its own.
    profile = runs.profile_with({"Proportion": args})
    failed_over.scheduler = loop.Scheduler(
        profile, registry=registry.in_tree_registry(), clock=failed_over.clock
    )
    share_kept, _ = cpu(kept.cycle(), "qa")
    share_rebuilt, _ = cpu(failed_over.cycle(), "qa")
    # qa's pods ran the whole hour: what runs tells the new leader as much as it had.
    assert share_rebuilt < HALF
    assert abs(share_rebuilt - share_kept) <= 50, (share_rebuilt, share_kept)
