"""The preemption window (``preemptionDelay`` on a Queue or a PodGroup; KAI's
``preemption-delay``), through whole default-profile cycles on the simulator.

A 4-cpu node is full of queue ``a``'s priority-1 pods; a priority-100 gang of two arrives in
the same queue (created 10 s before the first cycle). We test these aspects:
- inside the window nothing is evicted: the gang waits, its reason says for what and how long
  (``PreemptionDelayed``), and its pods read ``Unschedulable`` — new nodes are what it waits
  for; once the window has passed it preempts as before;
- a node that arrives inside the window takes the gang, and nothing is ever evicted;
- a PodGroup's own delay overrides its queue's (``0``: evict at once), a parent queue's holds
  for its subtree; reclaim toward a guarantee waits the same way;
- with queueing hints on, a gang parked in its window wakes when the window ends;
- a malformed delay that reaches Berth (the API server refuses it; an older one may not) keeps
  only its own object's work waiting, with the field named.
"""

from __future__ import annotations

from berth.scheduler import loop
from berth.scheduler.framework import decisions, reasons
from berth.scheduler.plugins import registry
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, gang, queue, t


def with_delay(obj: runs.Obj, delay: str) -> runs.Obj:
    obj["spec"]["preemptionDelay"] = delay
    return obj


def lo_pods(queue_name: str = "a") -> list[runs.Obj]:
    out = []
    for i in range(4):
        pod = cpu_pod(f"lo{i}", queue=queue_name, node="n1", priority=1, created=t(-100 + i))
        pod["status"]["startTime"] = b.timestamp(t(-100))
        out.append(pod)
    return out


def hi_gang(*, delay: str | None = None) -> list[runs.Obj]:
    objs = gang("hi", 2, queue="a", priority=100, created=t(-10))
    if delay is not None:
        with_delay(objs[0], delay)
    return objs


def world(*, queue_delay: str = "2m", group_delay: str | None = None) -> runs.Run:
    return runs.Run(
        b.node("n1", cpu="4", memory="64Gi"),
        with_delay(queue("a"), queue_delay),
        *lo_pods(),
        *hi_gang(delay=group_delay),
    )


def condition(run: runs.Run, name: str) -> dict[str, str]:
    pod = run.cluster.get("Pod", namespace="default", name=name)
    assert pod is not None
    (found,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    return dict(found)


def pod_scheduled(run: runs.Run, name: str) -> str:
    return condition(run, name)["reason"]


def message(run: runs.Run, name: str) -> str:
    return condition(run, name)["message"]


def test_inside_the_window_nothing_is_evicted_and_nodes_are_asked_for() -> None:
    run = world()
    outcome = run.cycle()
    assert outcome.evicted == set()
    assert outcome.bound == {}
    why = outcome.result.group_why["default/hi"]
    assert why.code is reasons.ReasonCode.PREEMPTION_DELAYED
    assert why.message.startswith(
        "could preempt to fit, but waits for new nodes first: "
        "queue a's preemptionDelay 2m0s ends in 1m50s; "
    )
    assert why.details["delaySeconds"] == 120.0
    assert why.details["remainingSeconds"] == 110.0
    assert {pod_scheduled(run, "hi-0"), pod_scheduled(run, "hi-1")} == {"Unschedulable"}
    assert message(run, "hi-0") == message(run, "hi-1") == f"pod group default/hi: {why.message}"
    # Still inside (one second left): still nothing.
    run.clock.advance(109)
    assert run.cycle().evicted == set()
    # Past it: the gang preempts as it would have at once.
    run.clock.advance(2)
    outcome = run.cycle()
    assert outcome.evicted == {"lo2", "lo3"}
    assert set(outcome.bound) == {"hi-0", "hi-1"}


def test_a_node_arriving_inside_the_window_takes_the_gang_and_nothing_is_evicted() -> None:
    run = world()
    assert run.cycle().evicted == set()
    run.clock.advance(60)
    run.put(b.node("n2", cpu="4", memory="64Gi"))  # the autoscaler's node
    outcome = run.cycle()
    assert outcome.evicted == set()
    assert outcome.bound == {"hi-0": "n2", "hi-1": "n2"}
    run.clock.advance(120)
    assert run.cycle().evicted == set()


def test_the_groups_own_delay_overrides_its_queues() -> None:
    run = world(queue_delay="2m", group_delay="0")
    assert run.cycle().evicted == {"lo2", "lo3"}
    shorter = world(queue_delay="2m", group_delay="30s")
    why = shorter.cycle().result.group_why["default/hi"]
    assert "its preemptionDelay 30s ends in 20s" in why.message
    shorter.clock.advance(21)
    assert shorter.cycle().evicted == {"lo2", "lo3"}


def test_a_parent_queues_delay_holds_for_its_subtree() -> None:
    run = runs.Run(
        b.node("n1", cpu="4", memory="64Gi"),
        with_delay(queue("org"), "90s"),
        queue("a", parent="org"),
        *lo_pods(),
        *hi_gang(),
    )
    why = run.cycle().result.group_why["default/hi"]
    assert "queue org's preemptionDelay 1m30s ends in 1m20s" in why.message


def test_reclaim_toward_a_guarantee_waits_for_the_window_too() -> None:
    run = runs.Run(
        b.node("n1", cpu="4", memory="64Gi"),
        with_delay(queue("a", guaranteed={"cpu": "2"}), "1m"),
        queue("b"),
        *lo_pods("b"),
        *gang("g", 2, queue="a", created=t(-10)),
    )
    outcome = run.cycle()
    assert outcome.evicted == set()
    why = outcome.result.group_why["default/g"]
    assert why.code is reasons.ReasonCode.PREEMPTION_DELAYED
    assert why.message.startswith("could reclaim to fit, but waits for new nodes first")
    run.clock.advance(51)
    outcome = run.cycle()
    assert len(outcome.evicted) == 2
    assert set(outcome.bound) == {"g-0", "g-1"}


def test_a_gang_parked_in_its_window_wakes_when_it_ends() -> None:
    run = world(queue_delay="1m")
    run.scheduler = loop.Scheduler(
        registry.default_profile(),
        registry=registry.in_tree_registry(),
        clock=run.clock,
        hints=True,
    )
    assert run.cycle().evicted == set()
    run.clock.advance(30)
    quiet = run.cycle()
    assert quiet.evicted == set()
    assert quiet.result.of_kind(decisions.MarkPending) == []  # parked: no news to tell
    run.clock.advance(21)  # 61 s after the gang's pods were created
    assert run.cycle().evicted == {"lo2", "lo3"}


def test_a_malformed_delay_keeps_only_its_own_work_waiting() -> None:
    run = runs.Run(
        b.node("n1", cpu="4", memory="64Gi"),
        with_delay(queue("broken"), "forever"),
        queue("fine"),
        cpu_pod("stuck", queue="broken"),
        cpu_pod("runs", queue="fine"),
    )
    outcome = run.cycle()
    assert outcome.bound == {"runs": "n1"}
    assert outcome.pod_reasons["stuck"] == (  # a pod's group of one: the reason as it is
        "queue broken is invalid: spec.preemptionDelay: "
        "preemptionDelay must be a duration such as 30s, 2m or 1h30m: a number and a unit "
        "(ns, us, ms, s, m, h), never negative (duration 'forever' is malformed: use a number "
        "and a unit (ns, us, ms, s, m, h), e.g. '90m', '1h30m', '1.5h', or '0')"
    )
    bad_group = runs.Run(
        b.node("n1", cpu="4", memory="64Gi"),
        queue("a"),
        *hi_gang(delay="-5s"),
    )
    outcome = bad_group.cycle()
    assert outcome.bound == {}
    why = outcome.result.group_why["default/hi"]
    assert why.code is reasons.ReasonCode.INVALID
    assert why.message == (
        "spec.preemptionDelay: preemptionDelay must be a duration such as 30s, 2m or 1h30m: a "
        "number and a unit (ns, us, ms, s, m, h), never negative (duration '-5s' must not be "
        "negative)"
    )
