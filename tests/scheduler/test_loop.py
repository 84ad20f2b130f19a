"""The scheduling loop: the Scheduler's cycle and the asynchronous driver.

We test these aspects:
- a bad profile is refused when the Scheduler is built, not mid-cycle;
- ``run_once`` takes a snapshot, runs the profile's actions, applies the result to the sink;
- an action that raises is logged, the session is still closed and its result applied;
- ``debug_top_n`` is settable at run time and never negative;
- ``run`` cycles at once, again when triggered, again after ``period`` (virtual time), and
  returns when stopped; the session can run in a worker thread;
- a session with a placement limit stops there (never inside a gang), tells the pods it did
  not try nothing, evicts nothing for them, and the loop runs the next session at once; work
  it did not try keeps the reason and place in line it had.
"""

from __future__ import annotations

import asyncio
import logging

import looptime
import pytest

from berth.scheduler import loop
from berth.scheduler.actions import allocate
from berth.scheduler.framework import decisions, errors, profiles, reasons, sessions
from berth.scheduler.plugins import registry
from berth.sim import cluster as sim_cluster
from berth.util import clocks
from tests.scheduler import builders as b


def scheduler(
    clock: clocks.Clock,
    *,
    actions: list[loop.interfaces.Action] | None = None,
    placement_limit: int | None = None,
) -> loop.Scheduler:
    return loop.Scheduler(
        registry.default_profile(),
        registry=registry.in_tree_registry(),
        clock=clock,
        actions=actions,
        placement_limit=placement_limit,
    )


def cluster_with(clock: clocks.Clock, *objects: b.Obj) -> sim_cluster.InMemoryCluster:
    cluster = sim_cluster.InMemoryCluster(clock=clock)
    for obj in objects:
        cluster.put(obj)
    return cluster


class Sink:
    """Applies results to a cluster (if any), records them, lets a test await the next one."""

    def __init__(self, cluster: sim_cluster.InMemoryCluster | None = None) -> None:
        self.cluster = cluster
        self.results: list[decisions.CycleResult] = []
        self.applied = asyncio.Event()

    def apply(self, result: decisions.CycleResult) -> None:
        if self.cluster is not None:
            self.cluster.apply(result)
        self.results.append(result)
        self.applied.set()

    async def next(self) -> decisions.CycleResult:
        await self.applied.wait()
        self.applied.clear()
        return self.results[-1]


def test_a_bad_profile_is_refused_when_the_scheduler_is_built() -> None:
    profile = profiles.Profile(plugins=(profiles.PluginConfig(name="Teleport"),))
    with pytest.raises(errors.ProfileError, match="unknown plugin 'Teleport'"):
        loop.Scheduler(profile, registry=registry.in_tree_registry(), clock=clocks.VirtualClock())


def test_run_once_places_pods_and_applies_the_result(virtual_clock: clocks.VirtualClock) -> None:
    cluster = cluster_with(virtual_clock, b.node("n1"), b.pod("p"))
    result = scheduler(virtual_clock).run_once(cluster, cluster)
    assert result.bindings() == {"default/p": "n1"}
    assert set(result.action_seconds) == {"timelimit", "allocate", "backfill", "reclaim", "preempt"}
    stored = cluster.get("Pod", namespace="default", name="p")
    assert stored is not None and stored["spec"]["nodeName"] == "n1"


class Broken:
    name = "broken"

    def execute(self, session: sessions.Session) -> None:
        raise RuntimeError("action bug")


def test_a_raising_action_is_logged_and_the_cycle_completes(
    virtual_clock: clocks.VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    sched = loop.Scheduler(
        profiles.Profile(
            actions=("broken", "allocate"),
            plugins=registry.default_profile().plugins,
        ),
        registry=registry.in_tree_registry(),
        clock=virtual_clock,
        actions=[Broken(), allocate.new()],
    )
    cluster = cluster_with(virtual_clock, b.node("n1"), b.pod("p"))
    with caplog.at_level(logging.ERROR, logger="berth.scheduler.loop"):
        result = sched.run_once(cluster, cluster)
    assert result.bindings() == {"default/p": "n1"}
    assert [r.getMessage() for r in caplog.records] == [
        f"action broken failed in session {result.session_id}"
    ]
    assert not sched.handle.in_session


def test_debug_top_n_is_settable_and_never_negative(virtual_clock: clocks.VirtualClock) -> None:
    sched = scheduler(virtual_clock)
    assert sched.debug_top_n == 0
    sched.debug_top_n = 3
    assert sched.framework.debug_top_n == 3
    sched.debug_top_n = -1
    assert sched.debug_top_n == 0


@pytest.mark.looptime
async def test_run_cycles_at_once_on_trigger_and_after_the_period(
    looptime: looptime.LoopTimeProxy,
) -> None:
    clock = clocks.VirtualClock(b.EPOCH)
    cluster = cluster_with(clock, b.node("n1"), b.pod("first"))
    sink = Sink(cluster)
    trigger, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        loop.run(
            scheduler(clock),
            source=cluster,
            sink=sink,
            stop=stop,
            trigger=trigger,
            period=30,
            in_thread=False,
        )
    )
    assert (await sink.next()).bindings() == {"default/first": "n1"}
    assert looptime == 0
    cluster.put(b.pod("second"))
    await asyncio.sleep(5)
    trigger.set()
    assert (await sink.next()).bindings() == {"default/second": "n1"}
    assert looptime == 5
    assert (await sink.next()).bindings() == {}  # nothing new, woken by the period
    assert looptime == 35
    stop.set()
    await asyncio.wait_for(task, timeout=1)
    assert looptime == 35
    assert len(sink.results) == 3


async def test_run_can_run_sessions_in_a_worker_thread() -> None:
    clock = clocks.VirtualClock(b.EPOCH)
    cluster = cluster_with(clock, b.node("n1"), b.pod("p"))
    sink = Sink()
    stop = asyncio.Event()
    task = asyncio.create_task(
        loop.run(scheduler(clock), source=cluster, sink=sink, stop=stop, period=3600)
    )
    assert (await asyncio.wait_for(sink.next(), timeout=10)).bindings() == {"default/p": "n1"}
    stop.set()
    await asyncio.wait_for(task, timeout=10)


class FailingSource:
    def __init__(self) -> None:
        self.calls = 0

    def snapshot(self) -> loop.snapshots.Snapshot:
        self.calls += 1
        raise RuntimeError("cache broken")


@pytest.mark.looptime
async def test_run_survives_a_failing_cycle(
    looptime: looptime.LoopTimeProxy, caplog: pytest.LogCaptureFixture
) -> None:
    source = FailingSource()
    stop = asyncio.Event()
    with caplog.at_level(logging.ERROR, logger="berth.scheduler.loop"):
        task = asyncio.create_task(
            loop.run(
                scheduler(clocks.VirtualClock()),
                source=source,
                sink=Sink(),
                stop=stop,
                period=10,
                in_thread=False,
            )
        )
        await asyncio.sleep(25)
        stop.set()
        await task
    assert source.calls == 3  # at 0, 10 and 20 seconds
    assert all("scheduling cycle failed" in r.getMessage() for r in caplog.records)


@pytest.mark.looptime
async def test_a_session_at_its_placement_limit_is_cut_short_and_the_next_runs_at_once(
    looptime: looptime.LoopTimeProxy,
) -> None:
    clock = clocks.VirtualClock(b.EPOCH)
    plain = [b.pod(f"p{i}", created=i) for i in range(3)]
    cluster = cluster_with(
        clock, b.node("n1", cpu="64"), b.queue("default"), *plain, *b.gang("g", 3, created=10)
    )
    sink = Sink(cluster)
    stop = asyncio.Event()
    task = asyncio.create_task(
        loop.run(
            scheduler(clock, placement_limit=2),
            source=cluster,
            sink=sink,
            stop=stop,
            period=30,
            in_thread=False,
        )
    )
    first = await sink.next()
    assert first.bindings() == {"default/p0": "n1", "default/p1": "n1"}
    assert first.cut_short
    # What it did not try is told nothing, and nothing is evicted or nominated for it.
    told = [d for d in first.decisions if not isinstance(d, decisions.BindPod)]
    assert {(d.key, d.reason.code) for d in told if isinstance(d, decisions.Unschedulable)} == {
        (f"default/{name}", reasons.ReasonCode.NOT_TRIED) for name in ("p2", "g-0", "g-1", "g-2")
    }
    assert all(isinstance(d, decisions.Unschedulable) for d in told)
    assert set(first.action_seconds) == {"timelimit", "allocate"}
    second = await sink.next()
    assert looptime == 0  # at once, not after the period
    # The limit falls between a plain pod and the gang: the gang is placed whole.
    assert second.bindings() == {
        "default/p2": "n1",
        "default/g-0": "n1",
        "default/g-1": "n1",
        "default/g-2": "n1",
    }
    assert not second.cut_short  # nothing was left untried
    third = await sink.next()
    assert looptime == 30 and third.bindings() == {}
    stop.set()
    await asyncio.wait_for(task, timeout=1)


def test_a_placement_limit_below_one_is_refused(virtual_clock: clocks.VirtualClock) -> None:
    with pytest.raises(ValueError, match="placement_limit must be at least 1"):
        scheduler(virtual_clock, placement_limit=0)


def test_work_a_cut_short_session_did_not_try_keeps_its_reason_and_place(
    virtual_clock: clocks.VirtualClock,
) -> None:
    cluster = cluster_with(
        virtual_clock, b.node("n1", cpu="4"), b.queue("default"), *b.gang("big", 2, cpu="8")
    )
    sched = scheduler(virtual_clock, placement_limit=2)
    waiting = sched.run_once(cluster, cluster)
    assert waiting.group_why["default/big"].code is reasons.ReasonCode.CLUSTER_TOO_SMALL
    assert dict(waiting.waiting) == {"default": ("default/big",)}
    for i in range(3):
        cluster.put(b.pod(f"p{i}", cpu="1", created=i))
    cut = sched.run_once(cluster, cluster)
    assert cut.cut_short and len(cut.bindings()) == 2
    # The gang was not tried: what its status shows stays as it was, not blank for a cycle.
    assert cut.group_why["default/big"] == waiting.group_why["default/big"]
    assert cut.pod_why["default/big-0"] == waiting.pod_why["default/big-0"]
    assert dict(cut.waiting) == {"default": ("default/big",)}
    assert cut.pod_why["default/p2"].code is reasons.ReasonCode.NOT_TRIED  # new: nothing to keep
    last = sched.run_once(cluster, cluster)
    assert not last.cut_short and last.bindings() == {"default/p2": "n1"}
    assert last.group_why["default/big"].code is reasons.ReasonCode.CLUSTER_TOO_SMALL
