"""Gang timeouts that act (``scheduleTimeoutSeconds``; issue 16, "Must show" 4).

A gang of eight one-GPU pods waits on the seven GPUs a running pod leaves of eight (a gang
asking more than the cluster has is never tried: ClusterTooSmall); its quorum exists ``age``
seconds before the cycle.

We test these aspects:
- ``Requeue`` (the default) alternates attempts and back-offs — the timeout, then a back-off
  starting at the timeout and doubling, capped by ``maxTimeoutBackoffSeconds`` — and says
  so, exactly, while it backs off; between back-offs it waits with its usual reason;
- a requeued group goes to the back of its queue: a younger group that fits goes first;
- a group backing off holds nothing: the starvation guard does not hold room for it;
- ``Fail`` marks the reason the controller turns into ``Failed`` (tests/controllers).
"""

from __future__ import annotations

import pytest

from berth.scheduler.framework import decisions, profiles
from berth.scheduler.plugins import gang as gang_plugin
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import queue

NODES = [b.node(f"n{i}", cpu="8", memory="64Gi", gpu=2) for i in range(4)]  # 8 GPUs
WAITING = (
    "gang needs minMember 8, only 7 could be placed; 0/4 nodes fit: 4 Insufficient nvidia.com/gpu"
)
BACKING_OFF = "schedule timeout of 60s exceeded (attempt {}): backing off {}s, retrying in {}s "
BACK = "at the back of its queue"


def stuck(age: int, *, policy: str | None = None, timeout: int = 60) -> list[runs.Obj]:
    group = b.pod_group("stuck", min_member=8, timeout=timeout, created=runs.t(-age))
    if policy is not None:
        group["spec"]["onScheduleTimeout"] = policy
    busy = b.pod("busy", gpu=1, node="n0", created=runs.t(-900))
    members = [b.pod(f"s{i}", group="stuck", gpu=1, created=runs.t(-age)) for i in range(8)]
    return [busy, group, *members]


def no_guard(**gang: int) -> profiles.Profile:
    return runs.profile_with({"Gang": dict(gang), "Proportion": {"starvationThresholdSeconds": 0}})


@pytest.mark.parametrize(
    ("age", "max_backoff", "reason"),
    [
        (30, None, WAITING),
        (90, None, BACKING_OFF.format(1, 60, 30) + BACK),
        (150, None, WAITING),
        (200, None, BACKING_OFF.format(2, 120, 100) + BACK),
        (200, 100, BACKING_OFF.format(2, 100, 80) + BACK),
        (330, None, WAITING),  # attempt 3: from 300 s
    ],
    ids=["first-attempt", "first-backoff", "second-attempt", "second-backoff", "capped", "third"],
)
def test_requeue_alternates_attempts_and_backoffs(
    age: int, max_backoff: int | None, reason: str
) -> None:
    args = {} if max_backoff is None else {"maxTimeoutBackoffSeconds": max_backoff}
    run = runs.Run(*NODES, *stuck(age), profile=no_guard(**args))
    outcome = run.cycle()
    assert outcome.bound == {}
    assert outcome.group_reasons["stuck"] == reason
    assert reason.startswith(gang_plugin.TIMEOUT_PREFIX) == ("backing off" in reason)


def test_the_attempts_follow_the_clock() -> None:
    run = runs.Run(*NODES, *stuck(0), profile=no_guard())
    seen = []
    for _ in range(8):
        seen.append("backing off" in run.cycle().group_reasons["stuck"])
        run.clock.advance(30)
    # 0-60 s trying, 60-120 backing off, 120-180 trying, then 180-300 backing off.
    assert seen == [False, False, False, True, False, False, False, True]


@pytest.mark.parametrize("order", ["PriorityFIFO", "FIFO"])
def test_a_requeued_group_goes_to_the_back_of_its_queue(order: str) -> None:
    # "old" (3 GPUs, created long ago) is on its second attempt since 120 s; "young" (created
    # 60 s ago) asks the same. Only one fits: the younger, which was waiting first this time,
    # whether the queue orders by priority then age or by age alone.
    def gpu_gang(name: str, created: float, count: int) -> list[runs.Obj]:
        group = b.pod_group(name, min_member=count, queue="q", timeout=60, created=created)
        return [
            group,
            *[b.pod(f"{name}{i}", group=name, gpu=1, created=created) for i in range(count)],
        ]

    busy = [b.pod(f"busy{i}", gpu=1, node=f"n{i // 2}", created=runs.t(-500)) for i in range(5)]
    q = queue("q")
    q["spec"]["jobOrder"] = order
    run = runs.Run(
        *NODES,
        q,
        *busy,
        *gpu_gang("old", runs.t(-150), 3),
        *gpu_gang("young", runs.t(-60), 3),
        profile=no_guard(),
    )
    bound = set(run.cycle().bound)
    assert bound == {"young0", "young1", "young2"}


def test_a_group_backing_off_holds_nothing() -> None:
    # Four GPUs asked, three free while five busy pods run: old enough for the starvation
    # guard (5 minutes), a group that is trying gets nodes nominated and room held; backing
    # off (attempt 3's back-off runs from 360 s) it gets none.
    def cluster(age: int) -> runs.Run:
        group = b.pod_group("g", min_member=4, timeout=60, created=runs.t(-age))
        members = [b.pod(f"g{i}", group="g", gpu=1, created=runs.t(-age)) for i in range(4)]
        busy = [b.pod(f"busy{i}", gpu=1, node=f"n{i // 2}", created=runs.t(-900)) for i in range(5)]
        return runs.Run(*NODES, *busy, group, *members)

    trying = cluster(330).cycle()
    assert trying.result.of_kind(decisions.NominatePod)
    backing_off = cluster(400).cycle()
    assert "backing off" in backing_off.group_reasons["g"]
    assert not backing_off.result.of_kind(decisions.NominatePod)


def test_fail_keeps_the_reason_the_controller_marks_failed() -> None:
    run = runs.Run(*NODES, *stuck(90, policy="Fail"), profile=no_guard())
    reason = run.cycle().group_reasons["stuck"]
    assert reason == f"schedule timeout of 60s exceeded (waiting 90s): {WAITING}"
