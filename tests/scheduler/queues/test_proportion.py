"""The Proportion plugin through whole cycles: reasons, bad input, statuses, the guard.

We test these aspects:
- bad input (issue 5): a cycle in the tree, a missing parent, ``limit`` below ``guaranteed``,
  a malformed quota, a queue deleted while it has work, a job naming a parent queue — the
  job waits with its reason, the queue's status names the problem, and everything else is
  scheduled in the same cycle;
- the fair-share rule: a queue at its share is refused more while a queue below its own
  waits (with its reason); when that queue's work cannot be placed at all, backfill hands the
  idle room to the refused queue in the same cycle;
- published statuses: allocated after bindings and evictions, requested, fair share,
  pending/running PodGroups, children, parents adding up their children;
- the starvation guard: a starving gang gets nodes nominated — where its pods fit once they
  free, even when none fits anywhere today — and the room free there is held (other work is
  kept off it, with its reason); its reason says how far it got; jobs no node can take, at
  the head of its queue's line, do not keep it from a gang it can help; with the guard off
  the room goes to the small job;
- arguments are validated; the plugin keeps nothing after a session.
"""

from __future__ import annotations

import dataclasses

import pydantic
import pytest

from berth.api import resources
from berth.scheduler.framework import decisions
from berth.scheduler.plugins import proportion
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, gang, queue, t


@dataclasses.dataclass(frozen=True)
class Bad:
    id: str
    queues: list[runs.Obj]
    job_queue: str
    reason: str
    problems: dict[str, str] = dataclasses.field(default_factory=dict)


def bad_quota() -> runs.Obj:
    obj = queue("broken")
    obj["spec"]["guaranteed"] = {"cpu": "two"}
    return obj


BAD = [
    Bad(
        "cycle",
        [queue("x", parent="y"), queue("y", parent="x")],
        "x",
        "queue x is invalid: queue hierarchy has a cycle: x -> y -> x",
        {
            "x": "queue hierarchy has a cycle: x -> y -> x",
            "y": "queue hierarchy has a cycle: x -> y -> x",
        },
    ),
    Bad(
        "missing-parent",
        [queue("orphan", parent="org")],
        "orphan",
        "queue orphan is invalid: parent queue org does not exist",
        {"orphan": "parent queue org does not exist"},
    ),
    Bad(
        "limit-below-guaranteed",
        [queue("tight", guaranteed={"cpu": "4"}, limit={"cpu": "2"})],
        "tight",
        "queue tight is invalid: limit is below guaranteed for cpu (2 < 4)",
        {"tight": "limit is below guaranteed for cpu (2 < 4)"},
    ),
    Bad(
        "malformed-quota",
        [bad_quota()],
        "broken",
        "queue broken is invalid: invalid quota: spec.guaranteed.cpu: ",
    ),
    Bad("deleted-queue", [], "gone", "queue gone does not exist"),
    Bad(
        "parent-queue",
        [queue("team"), queue("team-a", parent="team")],
        "team",
        "queue team is not a leaf queue",
    ),
]


@pytest.mark.parametrize("case", BAD, ids=[c.id for c in BAD])
def test_bad_queues_hold_their_own_work_only(case: Bad) -> None:
    outcome = runs.Run(
        b.node("n1", cpu="4"),
        queue("fine"),
        *case.queues,
        *gang("stuck", 2, queue=case.job_queue, created=t(-10)),
        cpu_pod("gone-running", queue="gone", node="n1", created=t(-50)),
        *gang("ok", 2, queue="fine", created=t(-5)),
    ).cycle()
    assert outcome.bound == {"ok-0": "n1", "ok-1": "n1"}
    assert outcome.evicted == set()
    assert outcome.group_reasons["stuck"].startswith(case.reason)
    for name, problem in case.problems.items():
        assert outcome.queues[name].problem == problem
    assert outcome.queues["fine"].problem is None


def test_a_queue_at_its_share_waits_while_another_below_its_own_waits() -> None:
    outcome = runs.Run(
        b.node("n1", cpu="6"),
        queue("a-big"),
        queue("b-small"),
        *gang("big", 6, queue="a-big", created=t(-10)),
        *[cpu_pod(f"s{i}", queue="b-small", created=t(-10 + i)) for i in range(3)],
    ).cycle()
    assert outcome.bound == {"s0": "n1", "s1": "n1", "s2": "n1"}
    assert outcome.group_reasons["big"] == (
        "gang needs minMember 6, only 3 could be placed; "
        "queue a-big at its fair share for cpu (3/3) while other queues wait"
    )


def test_room_a_waiting_queue_cannot_use_goes_to_the_queue_held_back() -> None:
    outcome = runs.Run(
        b.node("n1", cpu="6"),
        queue("a-big"),
        queue("b-small"),
        *gang("big", 6, queue="a-big", created=t(-10)),
        cpu_pod("nowhere", queue="b-small", node_selector={"zone": "mars"}, created=t(-10)),
    ).cycle()
    assert outcome.bound == {f"big-{i}": "n1" for i in range(6)}
    assert outcome.pod_reasons["nowhere"].startswith("0/1 nodes fit")


def test_statuses_are_published_for_every_queue() -> None:
    outcome = runs.Run(
        b.node("n1", cpu="4"),
        b.node("n2", cpu="4"),
        queue("org", guaranteed={"cpu": "4"}),
        queue("a", parent="org", guaranteed={"cpu": "4"}),
        queue("b", parent="org"),
        queue("other"),
        *[
            cpu_pod(f"o{i}", queue="other", node="n1" if i < 4 else "n2", created=t(-100 + i))
            for i in range(8)
        ],
        *gang("train", 2, queue="a", created=t(-10)),
        *gang("later", 2, queue="b", created=t(-5)),
        *gang("huge", 8, queue="b", created=t(-4)),  # beyond org's guarantee: no reclaim
    ).cycle()
    assert outcome.evicted == {"o4", "o5", "o6", "o7"}
    assert outcome.bound == {"train-0": "n2", "train-1": "n2", "later-0": "n2", "later-1": "n2"}
    summary = {
        name: (
            s.allocated["cpu"] // 1000,
            s.requested["cpu"] // 1000,
            s.fair_share["cpu"] // 1000,
            s.running,
            s.pending,
            s.children,
        )
        for name, s in outcome.queues.items()
    }
    assert summary == {
        # org: its guarantee (4) + half of the 4 left; a: what it asked; b: the rest of org's.
        "a": (2, 0, 2, 1, 0, ()),
        "b": (2, 8, 4, 1, 1, ()),
        "org": (4, 8, 6, 2, 1, ("a", "b")),
        "other": (4, 0, 2, 4, 0, ()),
        "default": (0, 0, 0, 0, 0, ()),
    }
    assert outcome.queues["b"].allocated == resources.ResourceList.parse(
        {"cpu": "2", "memory": "2Gi", "pods": "2"}
    )


STARVING = [
    b.node("n1", cpu="4"),
    queue("q"),
    cpu_pod("busy-0", queue="q", node="n1", created=t(-900)),
    cpu_pod("busy-1", queue="q", node="n1", created=t(-900)),
    *gang("big", 4, queue="q", created=t(-400)),
    cpu_pod("small", queue="q", created=t(-10)),
]


def test_a_starving_gang_holds_the_room_it_could_use() -> None:
    outcome = runs.Run(*STARVING).cycle()
    assert outcome.bound == {}
    nominated = {d.name: d.node for d in outcome.result.of_kind(decisions.NominatePod)}
    assert nominated == {f"big-{i}": "n1" for i in range(4)}
    # Nothing says when busy-0 and busy-1 end, but the gang takes them back at the latest
    # drainPreemptSeconds (3 hours) after its starvation threshold (5 minutes): its pods were
    # made 400 seconds ago.
    assert outcome.group_reasons["big"] == (
        "starving for 400s: holding 1 node for 4/4 pods as it frees, 2 cpu, 4Gi memory idle "
        "meanwhile, expected in 10700s (drainPreemptSeconds: what still runs there is taken "
        "back then); "
        "gang needs minMember 4, only 2 could be placed; 0/1 nodes fit: 1 Insufficient cpu"
    )
    assert (
        outcome.pod_reasons["small"]
        == "0/1 nodes fit: 1 room held for starving pod group default/big"
    )


def test_a_starving_gangs_reason_says_when_it_starts_and_from_which_run_times() -> None:
    # busy-0 declares 10 minutes; busy-1 declares nothing, but 20 pods of its queue ran for
    # 20 minutes each: it started 15 minutes ago, so it is expected to end in 5.
    finished = [b.pod(f"done-{i}", queue="q", node="n1", cpu=None, memory=None) for i in range(20)]
    for pod in finished:
        pod["status"]["startTime"] = b.timestamp(t(-3000))
    run = runs.Run(
        *[obj for obj in STARVING if obj["metadata"]["name"] != "busy-0"],
        cpu_pod(
            "busy-0",
            queue="q",
            node="n1",
            created=t(-900),
            annotations={"scheduling.berth.io/expected-runtime": "10m"},
        ),
        *finished,
    )
    run.cycle()
    for pod in finished:
        pod["status"]["phase"] = "Succeeded"
        pod["status"]["containerStatuses"] = [
            {"name": "main", "state": {"terminated": {"finishedAt": b.timestamp(t(-1800))}}}
        ]
    run.put(*finished)
    outcome = run.cycle()
    assert outcome.group_reasons["big"].startswith(
        "starving for 400s: holding 1 node for 4/4 pods as it frees, 2 cpu, 4Gi memory idle "
        "meanwhile, expected in 300s (run times: 1 declared, 1 learned from 20 finished pods "
        "of queue q); gang needs"
    )
    held = outcome.result.group_why["default/big"]
    assert held.details["expectedStartSeconds"] == 300


def test_a_starving_gang_of_whole_nodes_gets_nodes_nominated_as_they_free() -> None:
    # Three nodes have one GPU free, one none: no 8-GPU pod fits anywhere today.
    busy = {"n1": 7, "n2": 7, "n3": 7, "n4": 8}
    outcome = runs.Run(
        *[b.node(n, cpu="64", gpu=8) for n in busy],
        queue("q"),
        *[
            cpu_pod(f"{n}-busy-{i}", queue="q", gpu=1, node=n, created=t(-900))
            for n, count in busy.items()
            for i in range(count)
        ],
        *gang("big", 2, queue="q", gpu=8, created=t(-400)),
        cpu_pod("small", queue="q", gpu=1, created=t(-10)),
    ).cycle()
    nominated = {d.name: d.node for d in outcome.result.of_kind(decisions.NominatePod)}
    assert nominated == {"big-0": "n1", "big-1": "n2"}
    # The GPU free on n1 and n2 is the gang's now; the small job takes n3's.
    assert outcome.bound == {"small": "n3"}
    assert outcome.group_reasons["big"].startswith(
        "starving for 400s: holding 2 nodes for 2/2 pods as they free, 2 cpu, 2Gi memory, "
        "2 nvidia.com/gpu idle meanwhile, expected in 10700s (drainPreemptSeconds: "
    )


def test_jobs_too_big_for_any_node_do_not_keep_the_guard_from_a_gang_it_can_help() -> None:
    # Two 4-cpu nodes, one full; a queue whose line for held room starts with more 6-cpu pods
    # (its share, 8 cpu, would hold them; no node can) than the guard holds for at once.
    too_big = [
        cpu_pod(f"huge-{i}", queue="q", cpu="6", created=t(-800 + i))
        for i in range(proportion.MAX_HOLDERS)
    ]
    outcome = runs.Run(
        *STARVING,
        b.node("n2", cpu="4"),
        *[cpu_pod(f"full-{i}", queue="q", node="n2", created=t(-900)) for i in range(4)],
        *too_big,
    ).cycle()
    nominated = {d.name: d.node for d in outcome.result.of_kind(decisions.NominatePod)}
    assert sorted(nominated) == [f"big-{i}" for i in range(4)]
    assert outcome.bound == {}  # n1's free room is the gang's, not the small pod's
    assert outcome.group_reasons["big"].startswith("starving for 400s: holding 2 nodes")
    for pod in too_big:
        reason = outcome.pod_reasons[pod["metadata"]["name"]]
        assert reason == "0/2 nodes fit: 2 Insufficient cpu"


@pytest.mark.parametrize("threshold", [0, None, 600], ids=["zero", "null", "not-yet"])
def test_without_the_guard_the_room_goes_to_smaller_work(threshold: int | None) -> None:
    profile = runs.profile_with({"Proportion": {"starvationThresholdSeconds": threshold}})
    outcome = runs.Run(*STARVING, profile=profile).cycle()
    assert outcome.bound == {"small": "n1"}
    assert outcome.result.of_kind(decisions.NominatePod) == []


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"starvationThresholdSeconds": -1}, "greater than or equal to 0"),
        ({"starvation": 5}, "Extra inputs are not permitted"),
    ],
    ids=["negative", "unknown"],
)
def test_bad_args_are_refused(args: dict[str, object], error: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=error):
        proportion.ProportionArgs.model_validate(args)


def test_the_plugin_keeps_nothing_after_a_session() -> None:
    run = runs.Run(*STARVING)
    run.cycle()
    plugin = next(p for p in run.scheduler.framework.plugins if p.name == proportion.NAME)
    assert isinstance(plugin, proportion.Proportion)
    assert plugin._rules is None
