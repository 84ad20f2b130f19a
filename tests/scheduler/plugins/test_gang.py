"""Gang: all or nothing, minMember and minResources, timeouts.

We test these aspects:
- quorum: a group is not tried until minMember pods exist (``waiting for pods: 3/8 created,
  minMember 8``), gated pods count as created, failed ones do not;
- readiness: placed + done (+ this session's, - evicted) against minMember, and pipelined;
- minResources against free capacity on schedulable nodes plus what the group holds;
- in cycles: a gang fits across several nodes and is placed whole; one that does not fit
  holds nothing and says why; minMember below the group's size places what fits when quorum
  fits; two gangs compete and the loser leaves its room to a later one;
- timeouts with ``onScheduleTimeout: Fail``: a group whose quorum has waited past
  scheduleTimeoutSeconds (or the default arg) gets the timeout reason; a younger one does
  not; the clock starts at quorum (Requeue: tests/scheduler/queues/test_gang_timeouts.py).
"""

from __future__ import annotations

import typing

import pytest

from berth.api import resources
from berth.scheduler.framework import jobs, statuses
from berth.scheduler.plugins import gang
from berth.scheduler.snapshot import podgroups
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]


def group_with(*members: Obj, **fields: typing.Any) -> podgroups.PodGroupInfo:
    static = podgroups.pod_group_info(b.pod_group("g", **fields))
    return podgroups.with_members(static, members=[harness.info(**_fields(m)) for m in members])


def _fields(pod: Obj) -> dict[str, typing.Any]:
    return {
        "name": pod["metadata"]["name"],
        "group": "g",
        "node": pod["spec"].get("nodeName"),
        "phase": pod["status"]["phase"],
        "gates": [g["name"] for g in pod["spec"].get("schedulingGates", [])],
        "created": b.EPOCH,
    }


@pytest.mark.parametrize(
    ("members", "min_member", "expected"),
    [
        ([b.pod(f"p{i}") for i in range(3)], 8, "waiting for pods: 3/8 created, minMember 8"),
        ([b.pod(f"p{i}") for i in range(8)], 8, None),
        ([b.pod("a"), b.pod("b", gates=["x"])], 2, None),
        ([b.pod("a"), b.pod("b", phase="Failed")], 2, "waiting for pods: 1/2 created, minMember 2"),
        ([b.pod("a", phase="Succeeded"), b.pod("b")], 2, None),
        ([], 1, "waiting for pods: 0/1 created, minMember 1"),
    ],
    ids=["too-few", "enough", "gated-count", "failed-do-not", "done-count", "none"],
)
def test_quorum(members: list[Obj], min_member: int, expected: str | None) -> None:
    status = gang.quorum_status(group_with(*members, min_member=min_member))
    if expected is None:
        assert status.is_success()
    else:
        assert status.code is statuses.Code.PENDING
        assert status.message() == expected


@pytest.mark.parametrize(
    ("placed", "done", "allocated", "evicted", "pipelined", "ready", "ready_pipelined"),
    [
        (0, 0, 3, 0, 0, False, False),
        (0, 0, 4, 0, 0, True, True),
        (2, 1, 1, 0, 0, True, True),
        (3, 0, 1, 1, 0, False, False),
        (1, 0, 1, 0, 2, False, True),
    ],
    ids=["short", "exact", "running-and-done-count", "evicted-do-not", "pipelined"],
)
def test_readiness(
    placed: int,
    done: int,
    allocated: int,
    evicted: int,
    pipelined: int,
    ready: bool,
    ready_pipelined: bool,
) -> None:
    members = [b.pod(f"r{i}", node="n") for i in range(placed)]
    members += [b.pod(f"d{i}", phase="Succeeded") for i in range(done)]
    job = jobs.Job(group_with(*members, min_member=4), pending=[])
    for i in range(allocated):
        job.allocated[f"default/a{i}"] = "n"  # type: ignore[index]
    for i in range(evicted):
        job.evicted.add(f"default/r{i}")  # type: ignore[arg-type]
    for i in range(pipelined):
        job.pipelined[f"default/q{i}"] = "n"  # type: ignore[index]
    assert gang.ready_status(job).is_success() is ready
    assert gang.ready_status(job, pipelined=True).is_success() is ready_pipelined
    if not ready:
        assert gang.ready_status(job).message() == (
            f"gang needs minMember 4, only {job.occupied()} could be placed"
        )


@pytest.mark.parametrize(
    ("min_resources", "held", "expected"),
    [
        ({"cpu": "6"}, {}, None),
        ({"cpu": "7"}, {}, "cpu (needs 7, 6 free)"),
        ({"cpu": "7"}, {"cpu": 1000}, None),
        ({b.GPU: "1"}, {}, "nvidia.com/gpu (needs 1, 0 free)"),
        (
            {"cpu": "8", "memory": "100Gi"},
            {},
            "cpu (needs 8, 6 free), memory (needs 100Gi, 48Gi free)",
        ),
    ],
    ids=["fits", "short", "held-counts", "resource-nobody-has", "several"],
)
def test_min_resources(
    min_resources: dict[str, str], held: dict[str, int], expected: str | None
) -> None:
    nodes = harness.snapshot(
        b.node("a", cpu="4", memory="32Gi"),
        b.node("b", cpu="4", memory="16Gi"),
        b.node("cordoned", cpu="64", memory="1Ti", unschedulable=True),
        b.pod("busy", node="b", cpu="2", memory=None),
    ).nodes
    group = group_with(min_resources=min_resources)
    status = gang.min_resources_status(group, nodes=nodes, held=resources.ResourceList(held))
    if expected is None:
        assert status.is_success()
    else:
        assert status.message() == (
            f"not enough free resources in the cluster for minResources: {expected}"
        )


def test_quorum_since_is_the_min_member_th_creation() -> None:
    group = podgroups.pod_group_info(b.pod_group("g", min_member=2, created=b.EPOCH))
    pods_ = [
        harness.info(name=f"p{i}", group="g", created=b.EPOCH + t) for i, t in enumerate([9, 3, 5])
    ]
    assert gang.quorum_since(group, members=pods_) == b.EPOCH + 5
    assert gang.quorum_since(group, members=pods_[:1]) is None
    late_group = podgroups.pod_group_info(b.pod_group("g", min_member=2, created=b.EPOCH + 50))
    assert gang.quorum_since(late_group, members=pods_) == b.EPOCH + 50


GPU_NODES = [b.node(f"gpu-{i}", cpu="8", memory="64Gi", gpu=2) for i in range(4)]


def test_a_gang_spans_several_nodes_whole() -> None:
    bound, _, groups = harness.cycle(*GPU_NODES, *b.gang("train", 8, cpu="1", memory="1Gi", gpu=1))
    assert len(bound) == 8
    assert sorted(bound.values()) == sorted(f"gpu-{i}" for i in range(4) for _ in range(2))
    assert groups == {}


BUSY = b.pod("busy", node="gpu-0", cpu="1", memory="1Gi", gpu=1)  # 7 of the 8 GPUs free


def test_a_gang_that_does_not_fit_holds_nothing_and_says_why() -> None:
    bound, pods_, groups = harness.cycle(
        *GPU_NODES, BUSY, *b.gang("train", 8, cpu="1", memory="1Gi", gpu=1)
    )
    assert bound == {}
    assert groups == {
        "default/train": "gang needs minMember 8, only 7 could be placed; "
        "0/4 nodes fit: 4 Insufficient nvidia.com/gpu"
    }
    assert pods_["default/train-7"] == "0/4 nodes fit: 4 Insufficient nvidia.com/gpu"


def test_a_gang_larger_than_the_cluster_is_never_tried_and_says_so() -> None:
    bound, pods_, groups = harness.cycle(
        *GPU_NODES, *b.gang("train", 9, cpu="1", memory="1Gi", gpu=1)
    )
    assert bound == {}
    said = "can never fit: needs 9 nvidia.com/gpu, the cluster has 8"
    assert groups == {"default/train": said}
    assert pods_["default/train-0"] == f"pod group default/train: {said}"


def test_the_cluster_check_is_coded_and_never_says_never_of_what_could_fit() -> None:
    nodes = [b.node("n0", cpu="4", memory="8Gi"), b.node("n1", cpu="4", memory="8Gi")]
    # Three pods of 3 cpu ask 9 of 8: never. With minMember 2 they ask 6: they could fit.
    never = b.gang("g", 3, cpu="3")
    assert harness.cycle(*nodes, *never)[2]["default/g"] == (
        "can never fit: needs 9 cpu, the cluster has 8"
    )
    pods_codes, group_codes = harness.reason_codes(*nodes, *never)
    assert group_codes["default/g"] == "ClusterTooSmall"
    assert pods_codes["default/g-0"] == "ClusterTooSmall"
    group = b.pod_group("part", min_member=2)
    members = [b.pod(f"p{i}", group="part", cpu="3") for i in range(3)]
    bound, _, groups = harness.cycle(*nodes, group, *members)
    assert len(bound) == 2 and "default/part" not in groups
    # A cordoned node's capacity is not the cluster's.
    cordoned = [nodes[0], {**nodes[1], "spec": {"unschedulable": True}}]
    assert harness.cycle(*cordoned, *b.gang("two", 2, cpu="3"))[2]["default/two"] == (
        "can never fit: needs 6 cpu, the cluster has 4"
    )


def test_min_member_below_size_places_what_fits() -> None:
    objs = b.gang("elastic", 10, min_member=6, cpu="1", memory="1Gi", gpu=1)
    bound, pods_, groups = harness.cycle(*GPU_NODES, *objs)
    assert len(bound) == 8
    assert groups == {}
    assert sorted(pods_) == ["default/elastic-8", "default/elastic-9"]


def test_waiting_for_pods() -> None:
    objs = [b.pod_group("train", min_member=8), *[b.pod(f"t{i}", group="train") for i in range(3)]]
    bound, pods_, groups = harness.cycle(*GPU_NODES, *objs)
    assert bound == {}
    assert groups == {"default/train": "waiting for pods: 3/8 created, minMember 8"}
    assert (
        pods_["default/t0"] == "pod group default/train: waiting for pods: 3/8 created, minMember 8"
    )


def test_the_loser_of_two_gangs_leaves_its_room_to_a_later_one() -> None:
    objs = [
        *b.gang("first", 6, gpu=1, created=b.EPOCH - 30),
        *b.gang("second", 6, gpu=1, created=b.EPOCH - 20),
        *b.gang("third", 2, gpu=1, created=b.EPOCH - 10),
    ]
    bound, _, groups = harness.cycle(*GPU_NODES, *objs)
    assert (
        sorted(k.rsplit("-", 1)[0] for k in bound) == ["default/first"] * 6 + ["default/third"] * 2
    )
    assert groups["default/second"].startswith("gang needs minMember 6, only 2 could be placed")


def test_min_resources_blocks_a_group_in_a_cycle() -> None:
    objs = [
        b.pod_group("big", min_member=1, min_resources={b.GPU: "16"}),
        b.pod("big-0", group="big", gpu=1),
    ]
    bound, _, groups = harness.cycle(*GPU_NODES, *objs)
    assert bound == {}
    assert groups == {
        "default/big": "not enough free resources in the cluster for minResources: "
        "nvidia.com/gpu (needs 16, 8 free)"
    }


@pytest.mark.parametrize(
    ("timeout", "default", "age", "timed_out"),
    [
        (60, None, 120, True),
        (60, None, 30, False),
        (None, 60, 120, True),
        (None, None, 10_000, False),
    ],
    ids=["own-timeout-passed", "young", "default-timeout", "no-timeout"],
)
def test_timeout_with_fail(
    timeout: int | None, default: int | None, age: int, timed_out: bool
) -> None:
    created = b.EPOCH - age
    group = b.pod_group("stuck", min_member=8, timeout=timeout, created=created)
    group["spec"]["onScheduleTimeout"] = "Fail"
    objs = [
        BUSY,
        group,
        *[b.pod(f"s{i}", group="stuck", gpu=1, created=created) for i in range(8)],
    ]
    gang_args = {} if default is None else {"defaultScheduleTimeoutSeconds": default}
    # The starvation guard (Proportion) would hold room for the old gang: not the point here.
    profile = harness.profile_with(
        args={"Gang": gang_args, "Proportion": {"starvationThresholdSeconds": 0}}
    )
    _, _, groups = harness.cycle(*GPU_NODES, *objs, profile=profile)
    reason = groups["default/stuck"]
    waited = (
        "gang needs minMember 8, only 7 could be placed; "
        "0/4 nodes fit: 4 Insufficient nvidia.com/gpu"
    )
    if timed_out:
        limit = timeout or default
        assert reason == f"schedule timeout of {limit}s exceeded (waiting {age}s): {waited}"
    else:
        assert reason == waited
