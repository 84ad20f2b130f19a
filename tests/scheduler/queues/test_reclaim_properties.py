"""No thrash: fair-share reclaim over random workloads and many cycles (issue 16, "Must show" 3).

Random queues (flat, or two children under a parent; weights, reclaimable or not, their own
minimum runtime or the profile's) on random nodes receive random batches of pods (alone or
in gangs, one or two cpu) at random moments; a cycle runs after each batch. No queue has a
guarantee and no pod a priority, so every eviction is fair-share reclaim.

We test these aspects, for every eviction of every cycle:
- the pod had run at least its queue's minimum runtime (``reclaimMinRuntimeSeconds``, else
  the profile's 60 s), counted from its ``status.startTime``;
- the queue it was taken from still holds at least its published fair share of cpu after
  the cycle (memory is plentiful, so cpu is what the shares split), and so does its parent
  when the room went to a queue outside it.
"""

from __future__ import annotations

import dataclasses

import hypothesis
import hypothesis.strategies as st

from berth.api import quantities
from berth.scheduler.snapshot import wire
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, gang, queue, t

DEFAULT_MIN_RUNTIME = 60


@dataclasses.dataclass(frozen=True)
class QueueDraw:
    name: str
    parent: str | None
    weight: int
    reclaimable: bool
    min_runtime: int | None


@dataclasses.dataclass(frozen=True)
class Batch:
    after: int  # seconds after the previous batch
    queue: int  # index into the leaf queues
    count: int
    cpu: int
    gang: int  # 1: pods alone; more: gangs of that size


@st.composite
def setups(draw: st.DrawFn) -> tuple[list[int], list[QueueDraw], list[Batch]]:
    nodes = draw(st.lists(st.sampled_from([4, 8]), min_size=1, max_size=3))
    nested = draw(st.booleans())
    names = ["qa", "qb", "qc"][: draw(st.integers(2, 3))]
    draws: list[QueueDraw] = []
    for name in names:
        draws.append(
            QueueDraw(
                name=name,
                parent="org" if nested and name != "qc" else None,
                weight=draw(st.integers(1, 4)),
                reclaimable=draw(st.booleans()) or name == "qa",
                min_runtime=draw(st.sampled_from([None, 0, 30, 120])),
            )
        )
    batches = draw(
        st.lists(
            st.builds(
                Batch,
                after=st.sampled_from([0, 20, 45, 90, 90, 300]),
                queue=st.integers(0, len(draws) - 1),
                count=st.integers(2, 10),
                cpu=st.integers(1, 2),
                gang=st.sampled_from([1, 1, 2, 3]),
            ),
            min_size=2,
            max_size=6,
        )
    )
    return nodes, draws, batches


def queue_of(pod: runs.Obj) -> str:
    return str(pod["metadata"]["labels"]["scheduling.berth.io/queue"])


def cores(text: str | None) -> int:
    return quantities.parse_milli(text) if text else 0


@hypothesis.given(setups())
@hypothesis.settings(max_examples=150, deadline=None)
def test_fair_share_reclaim_waits_for_the_minimum_runtime_and_keeps_victims_at_share(
    drawn: tuple[list[int], list[QueueDraw], list[Batch]],
) -> None:
    nodes, draws, batches = drawn
    objs: list[runs.Obj] = [
        b.node(f"n{i}", cpu=str(c), memory="256Gi") for i, c in enumerate(nodes)
    ]
    if any(d.parent for d in draws):
        objs.append(queue("org"))
    for d in draws:
        obj = queue(d.name, parent=d.parent, weight=d.weight, reclaimable=d.reclaimable)
        if d.min_runtime is not None:
            obj["spec"]["reclaimMinRuntimeSeconds"] = d.min_runtime
        objs.append(obj)
    run = runs.Run(*objs)
    by_name = {d.name: d for d in draws}
    elapsed = 0.0
    serial = 0
    for batch in batches:
        run.clock.advance(batch.after)
        elapsed += batch.after
        d = draws[batch.queue]
        for _ in range(batch.count):
            serial += 1
            name = f"{d.name}-{serial:03d}"
            created = t(elapsed + serial / 1000)
            if batch.gang == 1:
                run.put(cpu_pod(name, queue=d.name, cpu=str(batch.cpu), created=created))
            else:
                members = gang(name, batch.gang, queue=d.name, cpu=str(batch.cpu), created=created)
                for member in members[1:]:
                    member["metadata"]["labels"]["scheduling.berth.io/queue"] = d.name
                run.put(*members)
        before = {p["metadata"]["name"]: p for p in run.cluster.objects("Pod")}
        outcome = run.cycle()
        now = run.clock.now()
        hypothesis.event(f"evictions: {min(len(outcome.evicted), 3)}")
        for evicted in outcome.evicted:
            pod = before[evicted]
            victim = queue_of(pod)
            started = wire.parse_time(pod["status"].get("startTime"))
            assert started is not None
            minimum = by_name[victim].min_runtime
            assert now - started >= (DEFAULT_MIN_RUNTIME if minimum is None else minimum), (
                evicted,
                now - started,
            )
            assert by_name[victim].reclaimable
            parent = by_name[victim].parent
            # A parent whose other child took the room keeps its total (less the difference
            # in pod sizes, free for the next cycle): only a parent losing to the outside is
            # held to its share.
            inside = parent is not None and any(
                by_name[queue_of(before[k])].parent == parent for k in outcome.bound
            )
            for name in (victim, None if inside else parent):
                if name is None:
                    continue
                status = outcome.queues[name]
                assert cores(status.allocated.get("cpu")) >= cores(status.fair_share.get("cpu")), (
                    evicted,
                    name,
                )
        run.clock.advance(1)
        elapsed += 1
