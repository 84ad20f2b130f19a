"""Markers Berth relies on cannot be written by users (issue 20).

The reserve-pod marker (``scheduling.berth.io/reserve-pod``) used to be read from a pod's
annotations: a user setting it made the pod look like an in-memory reserve pod — never
evicted, never given a condition. Reserve pods are now known only from memory (built from a
Reservation). We test these aspects:

- a user pod carrying the annotation is an ordinary pod (``reserve`` False);
- such pods are preempted like any other (the newest, lowest-priority ones go);
- a reserve pod built from a Reservation is still one.
"""

from __future__ import annotations

from berth.scheduler.snapshot import pods
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, gang, queue, t

MARKER = {pods.RESERVE_POD_ANNOTATION: "true"}


def test_a_user_pod_with_the_reserve_pod_annotation_is_an_ordinary_pod() -> None:
    info = pods.pod_info(b.pod("sneaky", annotations=MARKER))
    assert not info.reserve


def test_pods_claiming_to_be_reserve_pods_are_preempted_like_any_other() -> None:
    run = runs.Run(
        b.node("n1", cpu="4"),
        queue("q"),
        *[
            cpu_pod(
                f"low{i}", queue="q", node="n1", priority=1, created=t(-100 + i), annotations=MARKER
            )
            for i in range(4)
        ],
        *gang("hi", 2, queue="q", priority=100, created=t(-10)),
    )
    outcome = run.cycle()
    assert outcome.evicted == {"low2", "low3"}
