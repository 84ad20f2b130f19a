"""A starving gang takes back the nodes held for it past ``drainPreemptSeconds``, cycle by cycle.

We test these aspects:
- a gang whose hold has drained for ``drainPreemptSeconds`` evicts what still runs on the
  nodes held for it (its own queue's smaller work too) and binds in the same cycle; each
  victim is told why; before then nothing is evicted and the gang's reason says when;
- it takes only smaller jobs and lower or equal priorities: a gang as big as itself, or a
  pod of higher priority, stays, and so does the rest of the cluster;
- ``drainPreemptSeconds: null`` only drains.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.framework import decisions
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, gang, queue, t

DRAIN = 3 * 3600  # Proportion's default drainPreemptSeconds


def busy(node: str, count: int, **fields: object) -> list[runs.Obj]:
    """``count`` one-cpu pods running on ``node`` for a while, declaring no run time."""
    return [
        cpu_pod(f"{node}-busy-{i}", queue="q", node=node, created=t(-900), **fields)
        for i in range(count)
    ]


def cluster(*extra: runs.Obj) -> list[runs.Obj]:
    """Three nodes of 4 cpu, each half busy; a gang of two 4-cpu pods fits nowhere."""
    return [
        *[b.node(n, cpu="4") for n in ("n1", "n2", "n3")],
        queue("q"),
        *busy("n1", 2),
        *busy("n2", 2),
        *busy("n3", 2),
        *gang("big", 2, queue="q", cpu="4", memory="1Gi", created=t(-400)),
        *extra,
    ]


def test_past_the_drain_the_gang_evicts_what_runs_on_its_nodes_and_binds() -> None:
    run = runs.Run(*cluster())
    first = run.cycle()
    assert first.evicted == set() and first.bound == {}
    assert "expected in 10700s (drainPreemptSeconds: " in first.group_reasons["big"]
    run.clock.advance(DRAIN)
    outcome = run.cycle()
    nodes = set(outcome.bound.values())
    assert set(outcome.bound) == {"big-0", "big-1"} and len(nodes) == 2
    assert outcome.evicted == {f"{n}-busy-{i}" for n in nodes for i in range(2)}
    (why,) = {d.reason for d in outcome.result.of_kind(decisions.EvictPod)}
    assert why == (
        "reclaimed by queue q for pod group default/big: the nodes held for it drained past "
        "drainPreemptSeconds"
    )


POOL = {"pool": "a"}


def pooled(*running: runs.Obj) -> list[runs.Obj]:
    """n1 and n2 (pool a) full with ``running``; n3 (pool b) idle, so the queue has room; the
    gang asks for pool a: the guard holds n1 and n2 for it."""
    return [
        b.node("n1", cpu="4", labels=POOL),
        b.node("n2", cpu="4", labels=POOL),
        b.node("n3", cpu="4", labels={"pool": "b"}),
        queue("q"),
        *running,
        *gang("big", 2, queue="q", cpu="4", memory="1Gi", node_selector=POOL, created=t(-400)),
    ]


def as_big() -> list[runs.Obj]:
    """Another gang of two 4-cpu pods, one on each of n1 and n2."""
    peer = gang("peer", 2, queue="q", cpu="4", memory="1Gi", created=t(-900))
    peer[1]["spec"]["nodeName"], peer[2]["spec"]["nodeName"] = "n1", "n2"
    return peer


def higher_priority() -> list[runs.Obj]:
    """Four one-cpu pods of a higher priority on each of n1 and n2."""
    return [
        b.priority_class("high", 1000),
        *busy("n1", 4, priority_class="high"),
        *busy("n2", 4, priority_class="high"),
    ]


@pytest.mark.parametrize("running", [as_big, higher_priority], ids=["as-big", "higher-priority"])
def test_what_it_may_not_take_stays(running: typing.Callable[[], list[runs.Obj]]) -> None:
    run = runs.Run(*pooled(*running()))
    first = run.cycle()
    assert "holding 2 nodes" in first.group_reasons["big"]
    run.clock.advance(DRAIN)
    outcome = run.cycle()
    assert outcome.evicted == set() and outcome.bound == {}


def test_with_drain_preempt_off_the_gang_only_drains() -> None:
    run = runs.Run(
        *cluster(),
        profile=runs.profile_with({"Proportion": {"drainPreemptSeconds": None}}),
    )
    run.cycle()
    run.clock.advance(DRAIN)
    outcome = run.cycle()
    assert outcome.evicted == set() and outcome.bound == {}
