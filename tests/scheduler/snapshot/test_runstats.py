"""Run times learned from finished pods (issue #33): what the cache counts, and the estimates
the starvation guard takes from them for pods that declare no run time."""

from __future__ import annotations

import typing

from berth.scheduler.snapshot import cache as cache_module
from berth.scheduler.snapshot import pods, runstats, runtimes
from tests.scheduler import builders as b

START = b.EPOCH + 1000.0


def _ran(
    cache: cache_module.ClusterCache,
    name: str,
    *,
    seconds: float,
    queue: str = "q",
    phase: str = "Succeeded",
    deleting: bool = False,
) -> None:
    """A pod seen running on ``n1`` since START, then seen finished ``seconds`` later."""
    running = b.pod(name, queue=queue, node="n1")
    running["status"]["startTime"] = b.timestamp(START)
    cache.add_pod(running)
    done: dict[str, typing.Any] = b.pod(name, queue=queue, node="n1", phase=phase)
    done["status"]["startTime"] = b.timestamp(START)
    done["status"]["containerStatuses"] = [
        {"name": "main", "state": {"terminated": {"finishedAt": b.timestamp(START + seconds)}}}
    ]
    if deleting:
        done["metadata"]["deletionTimestamp"] = b.timestamp(START + seconds)
    cache.update_pod(done)


def _learning_cache(count: int, *, seconds: float, queue: str = "q") -> cache_module.ClusterCache:
    cache = b.cache_of(b.node("n1", cpu="1000", memory="1000Gi"), b.queue(queue))
    for i in range(count):
        _ran(cache, f"done-{i}", seconds=seconds + i, queue=queue)
    return cache


def test_finished_pods_count_from_start_to_their_last_container() -> None:
    cache = _learning_cache(runstats.MIN_SAMPLES, seconds=600)
    runs = cache.snapshot(START + 5000).run_times
    assert runs.count(runstats.Scope(queue="q")) == runstats.MIN_SAMPLES
    assert runs.count(runstats.Scope()) == runstats.MIN_SAMPLES
    samples = runs.samples(pods.pod_info(b.pod("next", queue="q")))
    assert samples is not None and samples.scope == runstats.Scope(queue="q")
    assert samples.quantile(0.0) == 600 and samples.quantile(1.0) == 600 + 19


def test_deleted_or_evicted_pods_are_no_run_time() -> None:
    cache = b.cache_of(b.node("n1", cpu="1000", memory="1000Gi"), b.queue("q"))
    _ran(cache, "deleted", seconds=60, deleting=True)
    _ran(cache, "killed", seconds=60, phase="Failed", deleting=True)
    _ran(cache, "ok", seconds=60)
    runs = cache.snapshot(START + 500).run_times
    assert runs.count(runstats.Scope(queue="q")) == 1


def test_a_pod_without_a_hint_is_estimated_from_its_queue_and_says_so() -> None:
    cache = _learning_cache(30, seconds=1200)
    now = START + 10_000
    snapshot = cache.snapshot(now)
    waiting = pods.pod_info(b.pod("waiting", queue="q"))
    estimate = runtimes.estimate_end(
        waiting, now=now, queues=snapshot.queues, run_times=snapshot.run_times, quantile=0.5
    )
    assert estimate.source is runtimes.Source.LEARNED
    assert estimate.end is not None and 1200 <= estimate.end - now <= 1230
    assert estimate.describe() == "learned from 30 finished pods of queue q"
    # A pod of a queue with too few finished pods takes the cluster's run times; a pod that
    # declares its run time keeps its own.
    other = pods.pod_info(b.pod("other", queue="elsewhere"))
    wide = runtimes.estimate_end(
        other, now=now, queues=snapshot.queues, run_times=snapshot.run_times, quantile=0.5
    )
    assert wide.scope == runstats.Scope()
    hinted = pods.pod_info(
        b.pod("hinted", queue="q", annotations={"scheduling.berth.io/expected-runtime": "5m"})
    )
    declared = runtimes.estimate_end(
        hinted, now=now, queues=snapshot.queues, run_times=snapshot.run_times, quantile=0.5
    )
    assert declared.source is runtimes.Source.DECLARED and declared.end == now + 300


def test_a_running_pod_is_estimated_from_the_runs_longer_than_its_age() -> None:
    cache = b.cache_of(b.node("n1", cpu="1000", memory="1000Gi"), b.queue("q"))
    for i in range(20):
        _ran(cache, f"short-{i}", seconds=300)
    for i in range(20):
        _ran(cache, f"long-{i}", seconds=7200)
    now = START + 3600
    snapshot = cache.snapshot(now)
    running = pods.pod_info(b.pod("running", queue="q", node="n1"))
    running_started = runtimes.estimate_end(
        running, now=now, queues=snapshot.queues, run_times=snapshot.run_times, quantile=0.5
    )
    # Its queue's median is 5 minutes, but a pod an hour in is one of the long ones.
    assert running_started.end is not None
    assert running_started.end - (running.start_time or running.creation_timestamp) == 7200


def test_without_enough_finished_pods_nothing_is_guessed() -> None:
    cache = _learning_cache(runstats.MIN_SAMPLES - 1, seconds=600)
    snapshot = cache.snapshot(START + 5000)
    estimate = runtimes.estimate_end(
        pods.pod_info(b.pod("next", queue="q")),
        now=START + 5000,
        queues=snapshot.queues,
        run_times=snapshot.run_times,
        quantile=0.5,
    )
    assert estimate.source is runtimes.Source.UNKNOWN and estimate.end is None
    assert estimate.describe() == "no declared run time, and too few pods finished to learn one"


def test_a_pod_that_outran_every_run_seen_has_no_estimate_and_says_why() -> None:
    cache = _learning_cache(25, seconds=600)
    now = START + 50_000
    snapshot = cache.snapshot(now)
    running = pods.pod_info(b.pod("old", queue="q", node="n1"))
    estimate = runtimes.estimate_end(
        running, now=now, queues=snapshot.queues, run_times=snapshot.run_times, quantile=0.5
    )
    assert estimate.end is None
    assert estimate.describe() == (
        "no declared run time, and it has run longer than any of the 25 finished pods of queue q"
    )
