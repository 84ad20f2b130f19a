"""The timelimit action: which running groups one session evicts for their maximum run time.

Each case is a cluster of one large node where every group's pods started at ``EPOCH``, looked
at an hour and a half later by the default profile; it checks exactly which pods are evicted
and when the session asks to be looked at again.

We test these aspects:
- a group is limited by its own ``maximumExecutionTimeSeconds``, else its queue's, else the
  nearest ancestor queue's; a group none of these limits runs on, whatever other queues say;
- a group marked as failed past its limit is evicted again if its pods were placed, in any
  queue;
- a group within its limit, or waiting (nothing placed), is left alone; the earliest deadline
  ahead (a group placed in the session counting from now) is when the session wants to look
  again;
- many groups in queues without a limit do not hide the few a limit acts on.
"""

from __future__ import annotations

import dataclasses

import pytest

from berth.api import keys
from berth.scheduler import loop
from berth.scheduler.framework import decisions
from berth.scheduler.plugins import registry
from berth.util import clocks
from tests.scheduler import builders as b

HOUR = 3600
NOW = b.EPOCH + 1.5 * HOUR


def _queue(name: str, *, limit: int | None = None, parent: str | None = None) -> b.Obj:
    obj = b.queue(name, parent=parent)
    if limit is not None:
        obj["spec"]["maximumExecutionTimeSeconds"] = limit
    return obj


def _running(name: str, *, queue: str | None = None, group: str | None = None) -> b.Obj:
    """A pod running on ``n1`` since ``EPOCH`` (in ``queue`` or as a member of ``group``)."""
    obj = b.pod(name, queue=queue, group=group, node="n1", cpu="1", memory="1Gi")
    obj["status"]["startTime"] = b.timestamp(b.EPOCH)
    return obj


def _group(name: str, *, queue: str, limit: int | None = None, failed: bool = False) -> b.Obj:
    obj = b.pod_group(name, queue=queue)
    if limit is not None:
        obj["spec"]["maximumExecutionTimeSeconds"] = limit
    if failed:
        obj["metadata"]["annotations"] = {
            keys.EXECUTION_TIME_EXCEEDED_ANNOTATION: "ran past its limit"
        }
    return obj


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    objects: list[b.Obj]
    evicted: list[str]  # pod names, sorted
    revisit_at: float | None = None


QUEUES = [
    _queue("hour", limit=HOUR),
    _queue("two-hours", limit=2 * HOUR),
    _queue("child", parent="hour"),
    _queue("grandchild", parent="child"),
    _queue("free"),
]

CASES = [
    Case("no limit anywhere", [_queue("free"), _running("a", queue="free")], []),
    Case(
        "a queue's limit",
        [*QUEUES, _running("a", queue="hour"), _running("b", queue="free")],
        ["a"],
    ),
    Case(
        "an ancestor's limit",
        [*QUEUES, _running("a", queue="grandchild"), _running("b", queue="child")],
        ["a", "b"],
    ),
    Case(
        "within the queue's limit",
        [*QUEUES, _running("a", queue="two-hours")],
        [],
        revisit_at=b.EPOCH + 2 * HOUR,
    ),
    Case(
        "a group's own limit in a queue without one",
        [*QUEUES, _group("g", queue="free", limit=HOUR), _running("g-0", group="g")],
        ["g-0"],
    ),
    Case(
        "a group's own limit beats its queue's",
        [*QUEUES, _group("g", queue="hour", limit=2 * HOUR), _running("g-0", group="g")],
        [],
        revisit_at=b.EPOCH + 2 * HOUR,
    ),
    Case(
        "a group marked failed and placed again",
        [*QUEUES, _group("g", queue="free", failed=True), _running("g-0", group="g")],
        ["g-0"],
    ),
    Case(
        "a waiting group with a limit, placed: its clock starts now",
        [
            *QUEUES,
            _group("g", queue="free", limit=60),
            b.pod("g-0", group="g", cpu="1", memory="1Gi"),
        ],
        [],
        revisit_at=NOW + 60,
    ),
    Case(
        "a queue that does not exist",
        [*QUEUES, _running("a", queue="nowhere")],
        [],
    ),
    Case(
        "the few limited among many unlimited",
        [
            *QUEUES,
            *[_running(f"free-{i:03d}", queue="free") for i in range(200)],
            *[b.pod(f"wait-{i:03d}", queue="hour", cpu="1", memory="1Gi") for i in range(200)],
            _running("a", queue="hour"),
            _running("b", queue="two-hours"),
            _group("g", queue="free", limit=HOUR),
            _running("g-0", group="g"),
            _running("g-1", group="g"),
        ],
        ["a", "g-0", "g-1"],
        revisit_at=b.EPOCH + 2 * HOUR,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_exactly_the_groups_past_their_limit_are_evicted(case: Case) -> None:
    node = b.node("n1", cpu="1000", memory="4000Gi", pods=1000)
    cache = b.cache_of(node, *case.objects)
    scheduler = loop.Scheduler(
        registry.default_profile(),
        registry=registry.in_tree_registry(),
        clock=clocks.VirtualClock(NOW),
    )
    result = scheduler.run_session(cache.snapshot(NOW))
    evicted = sorted(d.name for d in result.of_kind(decisions.EvictPod))
    assert evicted == case.evicted
    assert result.revisit_at == case.revisit_at
