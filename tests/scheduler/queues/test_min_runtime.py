"""When the next running pod passes its minimum runtime, kept across sessions: whatever pods
arrive, bind, end and go between snapshots, the answer equals a walk over every running pod
(or comes earlier, never later, while an ended pod's entry waits to be dropped)."""

from __future__ import annotations

import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from berth.scheduler.plugins.proportion import min_runtime
from berth.scheduler.snapshot import cache, pods, snapshots
from tests.scheduler import builders as b

MIN_RUNTIME = 50


def _min_runtime(pod: pods.PodInfo) -> int:
    return MIN_RUNTIME if pod.queue == "q0" else 2 * MIN_RUNTIME


def _walked(snapshot: snapshots.Snapshot) -> float:
    soonest = math.inf
    for pod in snapshot.pods.values():
        if pod.queue is None or pod.node_name is None or pod.terminal or pod.deleting:
            continue
        started = pod.start_time if pod.start_time is not None else pod.creation_timestamp
        passes_at = started + _min_runtime(pod)
        if snapshot.now < passes_at < soonest:
            soonest = passes_at
    return soonest


Step = tuple[str, int]
steps = st.lists(
    st.tuples(
        st.sampled_from(["add", "bind", "end", "remove", "tick", "snap", "skip"]), st.integers(0, 7)
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=100, deadline=None)
@given(steps=steps)
@example(steps=[("add", 1), ("bind", 1), ("snap", 0), ("tick", 3), ("snap", 0)])
@example(steps=[("add", 1), ("add", 3), ("bind", 1), ("tick", 2), ("bind", 3), ("end", 1)])
@example(steps=[("add", 2), ("snap", 0), ("skip", 0), ("bind", 2), ("snap", 0)])
@example(steps=[("add", 2), ("snap", 0), ("bind", 2), ("skip", 0), ("tick", 2), ("snap", 0)])
def test_the_kept_answer_is_the_walked_one(steps: list[Step]) -> None:
    live = cache.ClusterCache()
    live.add_node(b.node("n1", cpu="64"))
    kept = min_runtime.MinRuntime()
    now = b.EPOCH
    waiting: set[int] = set()
    running: set[int] = set()
    gone = False  # a pod stopped running: its entry may linger, early
    for kind, i in steps:
        name, queue = f"p{i}", f"q{i % 2}"
        if kind == "add" and i not in waiting | running:
            live.add_pod(b.pod(name, queue=queue, created=now))
            waiting.add(i)
        elif kind == "bind" and i in waiting:
            live.assume_pod(f"default/{name}", node="n1", started=now)
            waiting.discard(i)
            running.add(i)
        elif kind == "end" and i in running:
            live.update_pod(b.pod(name, queue=queue, node="n1", phase="Succeeded"))
            running.discard(i)
            gone = True
        elif kind == "remove" and i in waiting | running:
            live.remove_pod(f"default/{name}")
            gone = gone or i in running
            waiting.discard(i)
            running.discard(i)
        elif kind == "tick":
            now += 10 * (i + 1)
        elif kind == "skip":
            live.snapshot(now)  # a snapshot the plugin never saw (a session skipped)
        if kind == "snap" or i % 2:  # sessions do not see every change one by one
            snapshot = live.snapshot(now)
            answer = kept.next_after(snapshot, min_runtime=_min_runtime)
            assert answer <= _walked(snapshot)
            if not gone:
                assert answer == _walked(snapshot)
