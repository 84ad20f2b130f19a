"""DefaultBinder: binding is a recorded decision, and reserve pods are someone else's.

We test these aspects:
- a normal pod gets exactly one ``BindPod`` with its namespace, name, uid and node;
- a reserve pod (annotation ``scheduling.berth.io/reserve-pod: "true"``) is skipped and
  nothing is recorded.
"""

from __future__ import annotations

import dataclasses

from berth.scheduler.framework import cyclestate, decisions
from berth.scheduler.plugins import default_binder
from berth.scheduler.snapshot import pods
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness


def test_binds_a_pod_by_recording_the_decision() -> None:
    recorder = decisions.DecisionRecorder()
    pod = harness.info(name="web", namespace="shop")
    status = default_binder.DefaultBinder().bind(
        cyclestate.CycleState(), pod, "n7", recorder=recorder
    )
    assert status.is_success()
    assert recorder.decisions() == (
        decisions.BindPod(namespace="shop", name="web", uid="uid-shop-web", node="n7"),
    )


def test_skips_reserve_pods() -> None:
    recorder = decisions.DecisionRecorder()
    # Reserve pods exist only in memory (the annotation alone makes none: users can write it).
    reserve = dataclasses.replace(pods.pod_info(b.pod("r")), reserve=True)
    status = default_binder.DefaultBinder().bind(
        cyclestate.CycleState(), reserve, "n1", recorder=recorder
    )
    assert status.is_skip()
    assert len(recorder) == 0
