"""Which waiting pods autoscalers see, through whole default-profile cycles on the simulator.

The simulator writes each pod's ``PodScheduled`` condition from its gang's ``MarkPending``
decision, as the binder does. We test these aspects:
- a pod or gang short of nodes reads ``Unschedulable`` (what Cluster Autoscaler and Karpenter
  act on), all members of a gang in one decision;
- work that waits for anything nodes cannot give reads the specific code instead: its queue
  at its limit, a gang missing members, a queue that does not exist or is closed, an invalid
  group;
- a gang short of nodes *and* of room under its queue's limit waits for the limit (the
  members after the first that found no node were never held against it);
- nothing is marked twice for the same reason (the decision repeats, the condition stands).
"""

from __future__ import annotations

import typing

from berth.scheduler.framework import decisions
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, gang, queue


def conditions(run: runs.Run) -> dict[str, tuple[str, str]]:
    """Every waiting pod's PodScheduled (reason, message), by pod name."""
    out: dict[str, tuple[str, str]] = {}
    for pod in run.cluster.objects("Pod"):
        for condition in pod.get("status", {}).get("conditions", []):
            if condition["type"] == "PodScheduled" and condition["status"] == "False":
                out[pod["metadata"]["name"]] = (condition["reason"], condition["message"])
    return out


def marks(result: decisions.CycleResult) -> dict[str, list[str]]:
    """Each MarkPending decision's pods (names), by its group's name."""
    return {
        d.group.split("/", 1)[1]: [p.key.split("/", 1)[1] for p in d.pods]
        for d in result.of_kind(decisions.MarkPending)
    }


def reason_of(run: runs.Run, name: str) -> str:
    return conditions(run)[name][0]


def test_a_gang_short_of_nodes_is_unschedulable_all_together() -> None:
    run = runs.Run(b.node("n1", cpu="4"), queue("a"), *gang("train", 6, queue="a", cpu="2"))
    outcome = run.cycle()
    assert outcome.bound == {}
    assert marks(outcome.result) == {"train": [f"train-{i}" for i in range(6)]}
    assert {reason_of(run, f"train-{i}") for i in range(6)} == {"Unschedulable"}


def test_a_pod_at_its_queues_limit_is_not_unschedulable() -> None:
    run = runs.Run(
        b.node("n1", cpu="8"),
        queue("a", limit={"cpu": "2"}),
        *[cpu_pod(f"p{i}", queue="a") for i in range(3)],
    )
    run.cycle()
    waiting = conditions(run)
    assert list(waiting) == ["p2"]
    reason, message = waiting["p2"]
    assert reason == "QueueOverLimit"
    assert "queue a at limit for cpu" in message


def test_a_gang_missing_members_waits_for_them_not_for_nodes() -> None:
    run = runs.Run(
        b.node("n1", cpu="1"),
        queue("a"),
        *gang("g", 4, queue="a")[:3],  # the group and 2 of its 4 pods
    )
    run.cycle()
    assert {name: reason for name, (reason, _) in conditions(run).items()} == {
        "g-0": "NotEnoughPods",
        "g-1": "NotEnoughPods",
    }


def test_queue_problems_and_bad_groups_say_what_they_wait_for() -> None:
    bad = b.pod_group("bad", queue="a", min_member=1)
    bad["spec"]["minResources"] = {"cpu": "lots"}
    run = runs.Run(
        b.node("n1", cpu="1"),
        queue("a"),
        queue("shut", state="Closed"),
        cpu_pod("lost", queue="nowhere"),
        cpu_pod("closed", queue="shut"),
        bad,
        cpu_pod("bad-0", group="bad"),
    )
    run.cycle()
    assert {name: reason for name, (reason, _) in conditions(run).items()} == {
        "lost": "QueueNotFound",
        "closed": "QueueClosed",
        "bad-0": "Invalid",
    }


def test_a_gang_short_of_nodes_and_of_its_limit_waits_for_the_limit() -> None:
    # n1 holds one 4-cpu pod of the gang; the queue runs 4 of its 16-cpu limit on n0, so the
    # gang of four 4-cpu pods fits the limit only once that work ends.
    def world(limit: str) -> runs.Run:
        return runs.Run(
            b.node("n0", cpu="4"),
            b.node("n1", cpu="4"),
            queue("a", limit={"cpu": limit}),
            cpu_pod("running", queue="a", cpu="4", node="n0", phase="Running"),
            *gang("big", 4, queue="a", cpu="4"),
        )

    run = world("16")
    outcome = run.cycle()
    assert outcome.bound == {}
    waiting = conditions(run)
    assert {reason for reason, _ in waiting.values()} == {"QueueOverLimit"}
    assert waiting["big-3"][1] == (
        "pod group default/big: queue a has 12 cpu left under its limit of 16; "
        "the gang's quorum needs 16"
    )
    # Under a limit that holds it, the same gang waits for nodes, all together.
    roomy = world("20")
    roomy.cycle()
    assert {reason for reason, _ in conditions(roomy).values()} == {"Unschedulable"}


def test_a_pod_no_node_matches_is_for_autoscalers_to_judge() -> None:
    # kube-scheduler marks such a pod Unschedulable too: a node pool may make matching nodes.
    run = runs.Run(
        b.node("n1", cpu="4"),
        b.pod("picky", node_selector={"gpu-model": "h100"}),
    )
    run.cycle()
    assert reason_of(run, "picky") == "Unschedulable"


def test_an_unchanged_reason_is_not_written_again() -> None:
    run = runs.Run(b.node("n1", cpu="1"), queue("a"), *gang("g", 2, queue="a", cpu="1"))
    run.cycle()
    pod = run.cluster.get("Pod", namespace="default", name="g-0")
    assert pod is not None
    first = typing.cast("dict[str, typing.Any]", pod["status"]["conditions"][0])
    run.clock.advance(5)
    run.cycle()
    again = run.cluster.get("Pod", namespace="default", name="g-0")
    assert again is not None
    assert again["status"]["conditions"][0]["lastTransitionTime"] == first["lastTransitionTime"]
