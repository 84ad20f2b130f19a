"""The pending signal, decided from reason codes alone (``berth.scheduler.framework.pending``).

We test these aspects:
- every reason code says whether more nodes could remove its obstacle (a new code without a
  row fails here), and the ``PodScheduled`` reason is ``Unschedulable`` exactly for those:
  never for a pod a non-capacity obstacle stops, whatever its code's own value;
- a gang below quorum is one verdict: one member (or the group) stopped by something nodes
  cannot fix keeps every member off the autoscalers' list, and each member then says what
  stops its gang; a gang at quorum judges each further pod on its own;
- a pod nothing looked at this cycle, or one waiting for the resourceclaim controller to make
  its claim, is no news: left out, and a gang of only such pods gets no decision;
- a gang the autoscaler cannot fit is withheld: every member leaves the autoscalers' list and
  says the autoscaler's verdict (never ``Unschedulable``); a gang that waits for something
  else keeps what it says; a withheld gang cannot be said to wait for capacity.
"""

from __future__ import annotations

import hypothesis
import hypothesis.strategies as st
import pytest

from berth.scheduler.framework import pending, reasons

Code = reasons.ReasonCode


def why(code: Code, message: str = "m", **details: reasons.Detail) -> reasons.Reason:
    return reasons.new(code, message, **details)


def test_every_code_says_whether_nodes_could_help() -> None:
    assert set(pending.NEEDS_CAPACITY) == set(Code)


@hypothesis.given(code=st.sampled_from(list(Code)))
def test_only_capacity_obstacles_read_unschedulable(code: Code) -> None:
    capacity = pending.needs_capacity(code)
    told = pending.condition_reason(why(code), capacity=capacity)
    assert (told == pending.UNSCHEDULABLE) == capacity


def test_a_plugin_error_reads_as_kube_schedulers_scheduler_error() -> None:
    assert pending.condition_reason(why(Code.ERROR), capacity=False) == "SchedulerError"


def test_a_gang_short_of_nodes_is_marked_whole_for_autoscalers() -> None:
    gang = pending.Gang(
        key="ns/train",
        whole=True,
        reason=why(Code.NOT_ENOUGH_RESOURCES, "gang needs 6"),
        pods={
            "ns/train-1": why(Code.NOT_ENOUGH_RESOURCES, "0/2 nodes fit: 2 Insufficient gpu"),
            "ns/train-0": why(Code.UNSCHEDULABLE, "0/2 nodes fit: node selector"),
        },
    )
    marked = pending.decide(gang)
    assert marked is not None
    assert marked.capacity
    assert [(p.key, p.condition, p.reason.message) for p in marked.pods] == [
        ("ns/train-0", "Unschedulable", "0/2 nodes fit: node selector"),
        ("ns/train-1", "Unschedulable", "0/2 nodes fit: 2 Insufficient gpu"),
    ]


def test_one_member_nodes_cannot_help_keeps_the_whole_gang_off_the_list() -> None:
    gang = pending.Gang(
        key="ns/train",
        whole=True,
        reason=why(Code.NOT_ENOUGH_RESOURCES, "gang needs 3, only 1 could be placed"),
        pods={
            "ns/train-0": why(Code.NOT_ENOUGH_RESOURCES, "0/2 nodes fit"),
            "ns/train-1": why(Code.VOLUME_IN_USE, "claim data is used by pod other"),
            "ns/train-2": why(Code.NOT_ENOUGH_RESOURCES, "0/2 nodes fit"),
        },
    )
    marked = pending.decide(gang)
    assert marked is not None and not marked.capacity
    by_key = {p.key: p for p in marked.pods}
    assert by_key["ns/train-1"].condition == "VolumeInUse"
    assert by_key["ns/train-1"].reason.message == "claim data is used by pod other"
    for key in ("ns/train-0", "ns/train-2"):
        assert by_key[key].condition == "VolumeInUse"
        assert by_key[key].reason.message == (
            "pod group ns/train: pod ns/train-1 waits: claim data is used by pod other"
        )
        assert by_key[key].reason.details["group"] == "ns/train"


def test_the_groups_own_obstacle_is_what_its_members_say() -> None:
    group_reason = why(Code.QUEUE_AT_LIMIT, "queue a at limit for cpu (8/8)", queue="a")
    gang = pending.Gang(
        key="ns/g",
        whole=True,
        reason=group_reason,
        pods={"ns/g-0": why(Code.NOT_ENOUGH_RESOURCES, "0/1 nodes fit")},
    )
    marked = pending.decide(gang)
    assert marked is not None
    (only,) = marked.pods
    assert (only.condition, only.reason.message) == (
        "QueueOverLimit",
        "pod group ns/g: queue a at limit for cpu (8/8)",
    )
    assert only.reason.details == {"queue": "a", "group": "ns/g"}


def test_a_gang_at_quorum_judges_each_further_pod_on_its_own() -> None:
    gang = pending.Gang(
        key="ns/elastic",
        whole=False,
        reason=None,
        pods={
            "ns/elastic-4": why(Code.NOT_ENOUGH_RESOURCES),
            "ns/elastic-5": why(Code.QUEUE_AT_LIMIT),
        },
    )
    marked = pending.decide(gang)
    assert marked is not None
    assert [(p.key, p.condition) for p in marked.pods] == [
        ("ns/elastic-4", "Unschedulable"),
        ("ns/elastic-5", "QueueOverLimit"),
    ]


@pytest.mark.parametrize("code", [Code.NOT_TRIED, Code.RESOURCE_CLAIM_PENDING])
def test_pods_no_action_looked_at_are_no_news(code: Code) -> None:
    untried = why(code, "not tried this cycle")
    assert pending.decide(pending.Gang(key="p", whole=True, reason=None, pods={"p": untried})) is (
        None
    )
    marked = pending.decide(
        pending.Gang(
            key="g",
            whole=True,
            reason=None,
            pods={"a": untried, "b": why(Code.NOT_ENOUGH_PODS)},
        )
    )
    assert marked is not None
    assert [(p.key, p.condition) for p in marked.pods] == [("b", "NotEnoughPods")]


@hypothesis.given(
    group=st.none() | st.sampled_from(list(Code)),
    members=st.lists(st.sampled_from(list(Code)), min_size=1, max_size=6),
)
def test_a_whole_gang_is_one_verdict_that_capacity_codes_alone_make(
    group: Code | None, members: list[Code]
) -> None:
    gang = pending.Gang(
        key="g",
        whole=True,
        reason=None if group is None else why(group),
        pods={f"p{i}": why(code) for i, code in enumerate(members)},
    )
    marked = pending.decide(gang)
    told = [c for c in members if c not in pending.NO_NEWS]
    if not told:
        assert marked is None
        return
    assert marked is not None
    codes = [*told, *([group] if group is not None else [])]
    expected = all(pending.needs_capacity(c) for c in codes)
    assert {p.capacity for p in marked.pods} == {expected}
    if not expected:
        # Every member names an obstacle nodes cannot remove, and none reads Unschedulable
        # (not even one whose own code's value is that word).
        assert all(not pending.needs_capacity(p.reason.code) for p in marked.pods)
        assert all(p.condition != pending.UNSCHEDULABLE for p in marked.pods)


def test_a_gang_in_its_preemption_window_asks_for_nodes_and_says_how_long_it_waits() -> None:
    window = why(Code.PREEMPTION_DELAYED, "could preempt to fit, but waits for new nodes first")
    marked = pending.decide(
        pending.Gang(
            key="ns/g",
            whole=True,
            reason=window,
            pods={"ns/g-0": why(Code.NOT_ENOUGH_RESOURCES, "0/1 nodes fit")},
        )
    )
    assert marked is not None and marked.capacity
    (only,) = marked.pods
    assert (only.condition, only.reason.message) == (
        "Unschedulable",
        "pod group ns/g: could preempt to fit, but waits for new nodes first",
    )


def test_a_gang_the_autoscaler_cannot_fit_is_withheld_from_its_list() -> None:
    mark = pending.decide(
        pending.Gang(
            key="t/g",
            whole=True,
            reason=None,
            pods={"t/g-0": why(Code.NOT_ENOUGH_RESOURCES), "t/g-1": why(Code.CLUSTER_TOO_SMALL)},
        )
    )
    assert mark is not None and mark.capacity
    verdict = why(Code.AUTOSCALER_CANNOT_FIT, "pod group t/g: Karpenter cannot place 1 of 2")
    held = pending.withheld(mark, verdict)
    assert held.group == "t/g" and not held.capacity
    assert [(p.key, p.condition, p.reason) for p in held.pods] == [
        ("t/g-0", "AutoscalerCannotFit", verdict),
        ("t/g-1", "AutoscalerCannotFit", verdict),
    ]


def test_a_gang_waiting_for_something_else_keeps_what_it_says() -> None:
    mark = pending.decide(
        pending.Gang(
            key="t/g",
            whole=True,
            reason=why(Code.QUEUE_AT_LIMIT, "queue at limit"),
            pods={"t/g-0": why(Code.NOT_ENOUGH_RESOURCES)},
        )
    )
    assert mark is not None and not mark.capacity
    assert pending.withheld(mark, why(Code.AUTOSCALER_CANNOT_FIT)) is mark


def test_a_withheld_gang_cannot_be_said_to_wait_for_capacity() -> None:
    mark = pending.MarkPending(group="p", pods=())
    with pytest.raises(ValueError, match="NotEnoughResources"):
        pending.withheld(mark, why(Code.NOT_ENOUGH_RESOURCES))
