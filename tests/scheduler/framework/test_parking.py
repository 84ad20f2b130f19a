"""Parking (queueing hints) loses nothing: with hints, every cycle places what a cycle that
tries every job places, whatever happens between cycles — pods ending, nodes joining, new work
arriving — and a cycle with nothing new decides nothing."""

from __future__ import annotations

import typing

from hypothesis import example, given, settings
from hypothesis import strategies as st

from berth.api import keys
from berth.scheduler import loop
from berth.scheduler.framework import decisions
from berth.scheduler.plugins import proportion, registry
from berth.scheduler.snapshot import cache
from berth.sim import benchmarks
from berth.util import clocks
from tests.scheduler.constraints import specs

EPOCH = benchmarks.EPOCH
SHAPES = (("1", "2Gi"), ("2", "4Gi"), ("3", "4Gi"), ("4", "8Gi"))
QUEUES = ("qa", "qb", "qc")

Event = tuple[str, int]
events = st.lists(
    st.tuples(st.sampled_from(["end", "node", "job", "nothing"]), st.integers(0, 1000)),
    min_size=1,
    max_size=12,
)


class World:
    """One cache and scheduler; binds what the scheduler decides, like a sink."""

    def __init__(
        self,
        *,
        hints: bool,
        nodes: int,
        jobs: int,
        revisit_seconds: float = 300.0,
        evicting: bool = True,
        gangs: bool = False,
        queues: tuple[str, ...] = QUEUES,
    ) -> None:
        """``evicting``: the default profile's actions; else without reclaim and preempt.
        ``gangs``: some jobs are gangs of two or three pods, some with a smaller launcher.
        ``queues``: the queues jobs go to in turn."""
        self.gangs = gangs
        self.queues = queues
        self.cache = cache.ClusterCache()
        profile = registry.default_profile()
        if not evicting:
            profile = profile.model_copy(update={"actions": ("allocate", "backfill")})
        self.scheduler = loop.Scheduler(
            profile,
            registry=registry.in_tree_registry(),
            clock=clocks.VirtualClock(EPOCH),
            hints=hints,
            revisit_seconds=revisit_seconds,
        )
        for q in QUEUES:
            self.cache.add_queue(benchmarks._queue(q))
        self.nodes = 0
        for _ in range(nodes):
            self.add_node()
        self.jobs = 0
        for _ in range(jobs):
            self.add_job(self.jobs)
        self.running: list[str] = []

    def add_node(self) -> None:
        self.cache.add_node(benchmarks._node(f"node-{self.nodes:03d}", cpu="6", memory="16Gi"))
        self.nodes += 1

    def add_job(self, seed: int) -> None:
        cpu, memory = SHAPES[seed % len(SHAPES)]
        queue = self.queues[seed % len(self.queues)]
        name = f"job-{self.jobs:03d}"
        created = f"2026-01-01T00:{self.jobs // 60:02d}:{self.jobs % 60:02d}Z"
        # Later work may outrank earlier work: a line mixes parked jobs and fresh ones.
        priority = (seed // 7) % 3
        self.jobs += 1
        if not (self.gangs and seed % 4 == 3):
            label = {keys.QUEUE_LABEL: queue}
            self.cache.add_pod(_pod(name, cpu, memory, labels=label, at=created, priority=priority))
            return
        members = 2 + seed % 2
        group = benchmarks._pod_group(name, min_member=members, queue=queue)
        group["metadata"]["creationTimestamp"] = created
        self.cache.add_pod_group(group)
        label = {keys.POD_GROUP_LABEL: name}
        for i in range(members):
            # Every other gang has a launcher smaller than its workers.
            small = i == 0 and seed % 8 == 7
            shape = ("1", "1Gi") if small else (cpu, memory)
            pod = _pod(f"{name}-{i}", *shape, labels=label, at=created, priority=priority)
            self.cache.add_pod(pod)

    def cycle(self, now: float) -> decisions.CycleResult:
        result = self.scheduler.run_session(self.cache.snapshot(now))
        for decision in result.decisions:
            if isinstance(decision, decisions.EvictPod):  # the victim is gone, as in the API
                self.cache.remove_pod(decision.key)
                self.running.remove(decision.key)
        for key, node in sorted(result.bindings().items()):
            self.cache.assume_pod(key, node=node, started=now)
            self.running.append(key)
        return result

    def apply(self, event: Event) -> None:
        kind, seed = event
        if kind == "end" and self.running:
            self.cache.remove_pod(self.running.pop(seed % len(self.running)))
        elif kind == "node":
            self.add_node()
        elif kind == "job":
            self.add_job(seed)


def _pod(
    name: str, cpu: str, memory: str, *, labels: dict[str, str], at: str, priority: int
) -> dict[str, typing.Any]:
    pod = benchmarks._pod(name, cpu=cpu, memory=memory, labels=labels)
    pod["metadata"]["creationTimestamp"] = at
    pod["spec"]["priority"] = priority
    return pod


def _placements(result: decisions.CycleResult) -> dict[str, str]:
    return result.bindings()


@settings(max_examples=25, deadline=None)
@given(events=events, nodes=st.integers(1, 4), jobs=st.integers(1, 40))
def test_hints_place_what_trying_everything_places(
    events: list[Event], nodes: int, jobs: int
) -> None:
    # Without evictions: room a victim frees mid-session goes to a parked job one cycle later
    # (when the victim's end wakes it, as in kube-scheduler), which the tests below show.
    hinted = World(hints=True, nodes=nodes, jobs=jobs, evicting=False, gangs=True)
    plain = World(hints=False, nodes=nodes, jobs=jobs, evicting=False, gangs=True)
    now = EPOCH
    for event in [("nothing", 0), *events]:
        for world in (hinted, plain):
            world.apply(event)
        with_hints, without = hinted.cycle(now), plain.cycle(now)
        assert _placements(with_hints) == _placements(without), event
        # Same groups waiting (a parked group keeps the words of the reason it was parked with).
        assert set(with_hints.group_reasons) == set(without.group_reasons)
        # Parked or not, a group stands where job order puts it in its queue's line.
        assert dict(with_hints.waiting) == dict(without.waiting), event
        now += 1.0


@settings(max_examples=25, deadline=None)
@given(events=events, nodes=st.integers(1, 4), jobs=st.integers(20, 60))
# Found by this test: a job held for at session open whose queue's room this session's own
# placements took was parked as no longer starving, and the guard held for the next in line
# instead until its class woke; trying every job, it stayed among those held for.
@example(events=[("end", 0), ("end", 2), ("node", 0), ("end", 3)], nodes=2, jobs=42)
def test_hints_place_what_trying_everything_places_once_the_backlog_starves(
    events: list[Event], nodes: int, jobs: int
) -> None:
    # Ten minutes on, every job waited past the starvation threshold (five minutes): the
    # guard holds room for a few, the others of the queue's line park, and placements and
    # lines stay those of trying every job every cycle. One queue: a job parked
    # before its queue's share rose (another queue's pod ended) is looked at again only when
    # its class is (module docstring), starving or not.
    hinted = World(hints=True, nodes=nodes, jobs=jobs, evicting=False, gangs=True, queues=("qa",))
    plain = World(hints=False, nodes=nodes, jobs=jobs, evicting=False, gangs=True, queues=("qa",))
    now = EPOCH + 600
    for event in [("nothing", 0), *events]:
        for world in (hinted, plain):
            world.apply(event)
        with_hints, without = hinted.cycle(now), plain.cycle(now)
        assert _placements(with_hints) == _placements(without), event
        # Same groups waiting (a parked group keeps the reason it was parked with, as above).
        assert set(with_hints.group_reasons) == set(without.group_reasons), event
        assert dict(with_hints.waiting) == dict(without.waiting), event
        now += 1.0


def test_an_old_backlog_waits_parked_but_for_the_first_of_each_line() -> None:
    # 60 jobs of 4 cpu in three queues, ten minutes on: all starving (each queue has room in
    # its share), none fits (4 nodes of 6 cpu, each running 3 cpu of a fourth queue). The
    # guard holds room for at most MAX_HOLDERS jobs, and for no other than the first
    # MAX_HOLDERS of a queue's line: the rest park instead of being tried every cycle.
    world = World(hints=True, nodes=4, jobs=0, evicting=False)
    world.cache.add_queue(benchmarks._queue("qd"))
    for row in range(4):
        running = benchmarks._pod(f"running-{row}", cpu="3", memory="1Gi", node=f"node-{row:03d}")
        running["metadata"]["labels"] = {keys.QUEUE_LABEL: "qd"}
        world.cache.add_pod(running)
    for seed in range(3, 243, 4):  # SHAPES[3]: 4 cpu, in the three queues by turns
        world.add_job(seed)
    lot = typing.cast("loop.parking.Parking", world.scheduler.parking)
    first = world.cycle(EPOCH + 600)
    assert not first.bindings()
    lines = {q: list(first.waiting[q]) for q in QUEUES}
    tried = set(first.group_reasons) - set(lot.parked)
    for line in lines.values():
        assert tried & set(line) <= set(line[: proportion.MAX_HOLDERS])
    # qb's and qc's lines starve whole: their first MAX_HOLDERS are tried, the rest wait.
    for queue in ("qb", "qc"):
        line = lines[queue]
        assert set(line[: proportion.MAX_HOLDERS]) <= tried
        assert all(lot.parked[key].starving for key in line[proportion.MAX_HOLDERS :])
        assert "starving" in first.group_reasons[line[0]]
    # Nothing changed: the line stays parked (each keeping its reason); only the first are
    # tried again (room held for some is nominated afresh each cycle).
    parked = dict(lot.parked)
    again = world.cycle(EPOCH + 601)
    assert not again.bindings() and dict(lot.parked) == parked
    assert set(again.group_reasons) == set(first.group_reasons)
    # The first of qb's line leaves: the cycle that sees it gone tells the lot, and the next
    # in qb's line takes its place among those tried from the cycle after.
    line = lines["qb"]
    world.cache.remove_pod(line[0].replace("pod:", ""))
    world.cycle(EPOCH + 602)
    assert line[proportion.MAX_HOLDERS] in lot.parked
    world.cycle(EPOCH + 603)
    assert line[proportion.MAX_HOLDERS] not in lot.parked
    assert all(lot.parked[key].starving for key in line[proportion.MAX_HOLDERS + 1 :])


def _evicted(result: decisions.CycleResult) -> list[str]:
    return [d.key for d in result.decisions if isinstance(d, decisions.EvictPod)]


def test_room_a_pod_frees_beside_a_victim_wakes_a_parked_job_that_preempts() -> None:
    # One node of 6 cpu; the last pod to end frees 1 cpu, too little for job-013's 2 alone,
    # enough with the 1 cpu of job-004 (lower priority, same queue): it must wake and preempt.
    hinted = World(hints=True, nodes=1, jobs=14)
    plain = World(hints=False, nodes=1, jobs=14)
    now = EPOCH
    for event in [("nothing", 0), ("end", 0), ("end", 0), ("end", 2), ("job", 1), ("end", 0)]:
        for world in (hinted, plain):
            world.apply(event)
        with_hints, without = hinted.cycle(now), plain.cycle(now)
        assert _placements(with_hints) == _placements(without), event
        now += 1.0
    assert "bench/job-013" in _placements(with_hints)
    assert _evicted(with_hints) == ["bench/job-004"]


def _fallen_back(hints: bool) -> list[decisions.CycleResult]:
    """One 8-cpu node: qa runs 5 pods of 1 cpu (above its share of 4), qb runs 1 + 2 cpu
    and waits for 2 more (past its share: it may not reclaim); then qb's 1-cpu pod ends."""
    world = World(hints=hints, nodes=0, jobs=0)
    world.cache.add_node(benchmarks._node("node-000", cpu="8", memory="64Gi"))
    running = [("qa", f"a-{i}", "1") for i in range(5)] + [("qb", "b-0", "1"), ("qb", "b-1", "2")]
    for queue, name, cpu in running:
        pod = benchmarks._pod(name, cpu=cpu, memory="1Gi", node="node-000")
        pod["metadata"]["labels"] = {keys.QUEUE_LABEL: queue}
        world.cache.add_pod(pod)
        world.running.append(f"bench/{name}")
    for queue, name, cpu in [("qa", "a-late", "1"), ("qb", "b-late", "2")]:
        labels = {keys.QUEUE_LABEL: queue}
        # A minute old: far from starving, while the running pods passed their minimum runtime.
        at = "2026-01-01T00:09:00Z"
        world.cache.add_pod(_pod(name, cpu, "1Gi", labels=labels, at=at, priority=0))
    results = [world.cycle(EPOCH + 600), world.cycle(EPOCH + 601)]
    world.apply(("end", world.running.index("bench/b-0")))
    results.append(world.cycle(EPOCH + 602))
    return results


def test_a_queue_falling_back_wakes_its_parked_work_to_reclaim() -> None:
    # Once qb's 1-cpu pod ends, qb holds 2 cpu of its share of 4, so its 2-cpu job may reclaim:
    # 1 cpu is free, and qa holds 1 cpu above its share. Parked while it could not reclaim,
    # the job must wake although the free room alone is too small for it.
    with_hints, without = _fallen_back(hints=True), _fallen_back(hints=False)
    assert [r.bindings() for r in with_hints] == [r.bindings() for r in without]
    assert [_evicted(r) for r in with_hints] == [_evicted(r) for r in without]
    assert not with_hints[1].decisions  # nothing changed: qb's job stays parked
    assert "bench/b-late" in with_hints[-1].bindings()
    assert "bench/a-0" in _evicted(with_hints[-1])


def test_room_a_victim_frees_reaches_parked_work_the_next_cycle() -> None:
    world = World(hints=True, nodes=1, jobs=14)
    lot = typing.cast("loop.parking.Parking", world.scheduler.parking)
    now = EPOCH
    for event in [("nothing", 0), ("end", 0), ("end", 0), ("end", 0), ("job", 0), ("job", 61)]:
        world.apply(event)
        result = world.cycle(now)
        now += 1.0
    assert _evicted(result)  # the new job preempted; the rest of the victim's room is free
    parked = set(lot.parked)
    after = world.cycle(now)  # nothing else happened: the victim's end wakes parked work
    assert {f"bench/pod:{key.split('/')[1]}" for key in _placements(after)} & parked


def test_a_cycle_with_nothing_new_decides_nothing_and_keeps_the_reasons() -> None:
    world = World(hints=True, nodes=1, jobs=30)
    first = world.cycle(EPOCH)
    assert first.bindings()  # the node took what fits
    second = world.cycle(EPOCH + 1)  # its bindings are new: a cycle runs
    third = world.cycle(EPOCH + 2)
    assert third.decisions == ()
    assert dict(third.pod_reasons) == dict(second.pod_reasons)
    assert len(third.pod_reasons) == 30 - len(first.bindings())


def test_a_results_reasons_are_its_cycles_however_late_they_are_read() -> None:
    # Parked jobs' reasons reach a result lazily; the lot moving on (room freed, jobs woken
    # and placed) must not change what an earlier result says, read early or late.
    Read = tuple[dict[str, str], dict[str, str], dict[str, tuple[str, ...]]]

    def run(*, read_late: bool) -> Read:
        world = World(hints=True, nodes=1, jobs=30)
        world.cycle(EPOCH)
        world.cycle(EPOCH + 1)
        world.add_job(30)  # something new: the next cycle runs, with the backlog parked
        kept = world.cycle(EPOCH + 2)
        assert not kept.bindings()
        assert len(typing.cast("loop.parking.Parking", world.scheduler.parking).parked) > 20
        read: Read = ({}, {}, {})
        if not read_late:
            read = dict(kept.pod_reasons), dict(kept.group_reasons), dict(kept.waiting)
        for ended in range(3):
            world.apply(("end", ended))
            assert world.cycle(EPOCH + 3 + ended).bindings()  # the lot moved on
        if read_late:
            read = dict(kept.pod_reasons), dict(kept.group_reasons), dict(kept.waiting)
        return read

    early, late = run(read_late=False), run(read_late=True)
    assert len(early[0]) > 20 and early[2]  # the parked backlog's reasons and lines
    assert late == early


def test_a_pod_ending_wakes_what_fits_in_the_room_it_frees() -> None:
    world = World(hints=True, nodes=1, jobs=30)
    world.cycle(EPOCH)
    world.cycle(EPOCH + 1)
    parked = typing.cast("loop.parking.Parking", world.scheduler.parking)
    assert len(parked.parked) > 20
    world.apply(("end", 0))
    result = world.cycle(EPOCH + 2)
    assert result.bindings()  # the freed room went to parked work


def test_a_parked_group_keeps_its_turn_ahead_of_later_lower_work() -> None:
    # One queue, one shape of which the node holds one; priorities 0, 2, 0, 2, then 1 later.
    seeds, later = (3, 15, 27, 39), 51
    priorities = [(seed // 7) % 3 for seed in (*seeds, later)]
    assert priorities == [0, 2, 0, 2, 1]
    world = World(hints=True, nodes=1, jobs=0)
    for seed in seeds:
        world.add_job(seed)
    world.cycle(EPOCH)
    world.cycle(EPOCH + 1)
    parked = typing.cast("loop.parking.Parking", world.scheduler.parking)
    assert len(parked.parked) == 3  # what did not fit waits untried
    world.add_job(later)  # fresh work meets parked work in the line
    line = world.cycle(EPOCH + 2).waiting
    # Job order: priority first, then age — the later job goes between the parked ones.
    assert dict(line) == {
        "qa": ("bench/pod:job-003", "bench/pod:job-004", "bench/pod:job-000", "bench/pod:job-002")
    }


def test_a_claim_appearing_wakes_the_pod_waiting_for_it() -> None:
    world = World(hints=True, nodes=1, jobs=0)
    pod = benchmarks._pod("uses-data", cpu="1", memory="1Gi", labels={keys.QUEUE_LABEL: "qa"})
    pod["spec"].update(specs.claims("data"))
    pod["metadata"]["namespace"] = "default"
    world.cache.add_pod(pod)
    first = world.cycle(EPOCH)
    assert not first.bindings()  # no such claim yet
    assert world.cycle(EPOCH + 1).decisions == ()  # nothing changed: nothing decided
    world.cache.add_volume(specs.volume("pv-data", claim="default/data"))
    world.cache.add_claim(specs.claim("data", volume="pv-data"))
    assert world.cycle(EPOCH + 2).bindings() == {"default/uses-data": "node-000"}


def test_work_in_a_namespace_fair_queue_is_never_parked() -> None:
    # NamespaceFair orders a job after what its namespace's earlier waiting jobs need: left
    # out while parked, they would let later work of the namespace jump ahead.
    world = World(hints=True, nodes=1, jobs=0)
    fair = benchmarks._queue("qa")
    fair["spec"]["jobOrder"] = "NamespaceFair"
    world.cache.add_queue(fair)
    for seed in (3, 15, 27, 39):  # queue qa, 4 cpu each: the node holds one
        world.add_job(seed)
    world.add_job(1)  # queue qb, 2 cpu: fits beside it
    world.cycle(EPOCH)
    waiting = world.cycle(EPOCH + 1)
    parked = typing.cast("loop.parking.Parking", world.scheduler.parking)
    assert len(waiting.waiting["qa"]) == 3
    assert parked.parked == {}


def test_time_wakes_one_job_per_class_not_the_whole_backlog() -> None:
    # Parking expires after 60 s (and the first pods may be reclaimed after their minute):
    # each class's head is looked at again, not every parked job; the guard's threshold
    # (five minutes from each job's creation) is still far.
    world = World(hints=True, nodes=1, jobs=300, revisit_seconds=60)
    world.cycle(EPOCH)
    world.cycle(EPOCH + 1)
    lot = typing.cast("loop.parking.Parking", world.scheduler.parking)
    parked = dict(lot.parked)
    classes = {entry.klass for entry in parked.values()}
    assert len(parked) > 4 * len(classes)  # a backlog several times longer than its classes
    assert world.cycle(EPOCH + 30).decisions == ()  # nothing due yet: nothing tried
    assert dict(lot.parked) == parked
    left = lot.admit(world.cache.snapshot(EPOCH + 62))
    woken = set(parked) - set(left)
    assert {parked[key].klass for key in woken} == classes
    assert len(woken) == len(classes)
    # The head of each class is the job its class would try first (oldest).
    for key in woken:
        same = [k for k, e in parked.items() if e.klass == parked[key].klass]
        assert parked[key].order == min(parked[k].order for k in same)


def test_room_freed_where_a_class_may_not_run_does_not_wake_it() -> None:
    world = World(hints=True, nodes=1, jobs=30)
    pinned = benchmarks._pod("pinned", cpu="1", memory="2Gi", labels={keys.QUEUE_LABEL: "qa"})
    pinned["spec"]["nodeSelector"] = {"pool": "nowhere"}  # no node has the label
    world.cache.add_pod(pinned)
    world.cycle(EPOCH)
    world.cycle(EPOCH + 1)
    lot = typing.cast("loop.parking.Parking", world.scheduler.parking)
    assert PINNED in lot.parked
    before = set(lot.parked)
    world.apply(("end", 0))  # room frees on the one node, which the pinned pod may not use
    left = lot.admit(world.cache.snapshot(EPOCH + 2), rows=_static_rows(world))
    assert PINNED in left
    assert before - set(left)  # others woke for the room


PINNED = "bench/pod:pinned"


def _static_rows(world: World) -> typing.Any:
    framework = world.scheduler.framework
    nodes = world.cache.snapshot(EPOCH + 2).nodes
    return lambda pod: framework.static_rows(pod, nodes=nodes)
