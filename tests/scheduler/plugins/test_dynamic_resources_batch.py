"""DRA with Berth's batch logic: gangs, queue quota counted in devices, preemption.

We test these aspects:

- a gang's claims are allocated in one transaction or not at all: 4 pods claiming 2 GPUs each
  through a template, on nodes with room for 3 members' devices, allocate no claim and bind no
  pod, and the group's reason names a claim that could not be met; a node's slice added, all
  4 are allocated and bound in one cycle;
- gang members sharing one claim allocate it once and all go where it is;
- queue quota counts devices per DeviceClass (``deviceclass/<name>``): a queue limited to 4
  devices of a class runs two 2-device pods and holds the third with a reason naming the
  class; a claim shared by two pods of the queue is counted once; a device shared by capacity
  counts as the fraction of it the claim consumes; the queue's status reports the devices;
- a gang whose quorum exceeds the queue's device limit even with the queue empty can never fit;
- preemption frees a victim's devices for the preemptor (its claim's devices go with it).
"""

from __future__ import annotations

import typing

from berth.scheduler.framework import decisions
from tests.scheduler import builders as b
from tests.scheduler import dra_builders as d
from tests.scheduler.plugins import dra, harness

Obj = dict[str, typing.Any]

GPU = d.device_class("gpu")
CLASS = "deviceclass/gpu"


def _gang(size: int = 4, *, gpus: int = 2) -> list[Obj]:
    return [
        d.template("two", d.request(count=gpus)),
        b.pod_group("train", min_member=size),
        *[
            d.pod_with_claims(f"train-{i}", templates={"gpu": "two"}, group="train")
            for i in range(size)
        ],
    ]


def test_a_gang_with_room_for_three_of_four_allocates_nothing_then_all_when_a_node_comes() -> None:
    nodes = [b.node(f"n{i}") for i in range(3)]
    slices = [d.node_slice(f"n{i}") for i in range(3)]
    outcome = dra.run(*nodes, GPU, *slices, *_gang())
    assert outcome.bindings == {}
    assert [c for c in outcome.claims.values() if c.get("status")] == []  # no claim allocated
    why = outcome.group_why["default/train"]
    assert why.code.value == "NotEnoughResources"
    assert "gang needs minMember 4, only 3 could be placed" in why.message
    assert "too few free devices for resourceclaim default/train-" in why.message
    assert "(request gpu: 2 of deviceclass gpu)" in why.message
    assert not [x for x in outcome.decided if type(x).__name__ == "ReserveClaim"]

    def add_node(cluster: typing.Any) -> None:
        cluster.put(b.node("n3"))
        cluster.put(d.node_slice("n3"))

    outcome = dra.run(*nodes, GPU, *slices, *_gang(), cycles=2, between=add_node)
    assert sorted(outcome.bindings) == [f"default/train-{i}" for i in range(4)]
    for i in range(4):
        claim = outcome.claim_of(f"train-{i}")
        node = outcome.bindings[f"default/train-{i}"]
        assert [x.partition("/")[0] for x in outcome.devices_of(claim)] == [node, node]
        assert [r["name"] for r in claim["status"]["reservedFor"]] == [f"train-{i}"]


def test_gang_members_sharing_a_claim_allocate_it_once_and_follow_it() -> None:
    members = [
        d.pod_with_claims(f"m{i}", claims={"gpu": "shared"}, group="g", cpu="3") for i in range(2)
    ]
    outcome = dra.run(
        b.node("n1"),
        b.node("n2", cpu="8"),
        GPU,
        d.resource_slice(
            "fabric",
            pool="fabric",
            node_selector={
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
                ]
            },
            devices=d.gpus(1),
        ),
        d.claim("shared"),
        b.pod_group("g", min_member=2),
        *members,
    )
    assert outcome.bindings == {"default/m0": "n2", "default/m1": "n2"}
    claim = outcome.claims["shared"]
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["m0", "m1"]
    reserved = [x for x in outcome.decided if isinstance(x, decisions.ReserveClaim)]
    assert [(x.pod, x.allocation is not None, x.after) for x in reserved] == [
        ("m0", True, None),
        ("m1", False, "m0"),  # only if m0's write of the allocation lands
    ]


def test_queue_limit_counts_devices_per_class() -> None:
    outcome = dra.run(
        b.node("n1"),
        b.node("n2"),
        GPU,
        d.node_slice("n1", devices=d.gpus(4)),
        d.node_slice("n2", devices=d.gpus(4)),
        d.template("two", d.request(count=2)),
        b.queue("team", limit={CLASS: 4}),
        *[
            d.pod_with_claims(f"p{i}", templates={"gpu": "two"}, queue="team", created=b.EPOCH + i)
            for i in range(3)
        ],
    )
    assert sorted(outcome.bindings) == ["default/p0", "default/p1"]
    why = outcome.why["default/p2"]
    assert why.code.value == "QueueOverLimit"
    assert why.message == "queue team at limit for deviceclass/gpu (4/4)"
    assert dict(why.details) == {"queue": "team", "resource": CLASS}


def test_a_claim_shared_by_two_pods_counts_once_in_the_queue() -> None:
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=d.gpus(4)),
        d.claim("shared", d.request(count=2)),
        d.template("two", d.request(count=2)),
        b.queue("team", limit={CLASS: 4}),
        d.pod_with_claims("s0", claims={"gpu": "shared"}, queue="team", created=b.EPOCH),
        d.pod_with_claims("s1", claims={"gpu": "shared"}, queue="team", created=b.EPOCH + 1),
        d.pod_with_claims("own", templates={"gpu": "two"}, queue="team", created=b.EPOCH + 2),
        cycles=2,
    )
    assert sorted(outcome.bindings) == ["default/own", "default/s0", "default/s1"]
    status = outcome.cluster.get("Queue", name="team")["status"]
    assert status["allocated"][CLASS] == "4"  # 2 shared + 2 own, not 6


def test_consumable_capacity_counts_the_fraction_consumed() -> None:
    shared = d.device("gpu-0", shared=True, capacity={"memory": "80Gi"})
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=[shared]),
        d.template("quarter", d.request(capacity={"memory": "20Gi"})),
        b.queue("team", limit={CLASS: "500m"}),
        *[
            d.pod_with_claims(
                f"p{i}", templates={"gpu": "quarter"}, queue="team", created=b.EPOCH + i
            )
            for i in range(3)
        ],
    )
    assert sorted(outcome.bindings) == ["default/p0", "default/p1"]
    assert (
        outcome.why["default/p2"].message == "queue team at limit for deviceclass/gpu (500m/500m)"
    )


def test_a_gang_over_the_device_limit_can_never_fit() -> None:
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=d.gpus(8)),
        b.queue("team", limit={CLASS: 4}),
        d.template("two", d.request(count=2)),
        b.pod_group("big", min_member=3, queue="team"),
        *[d.pod_with_claims(f"big-{i}", templates={"gpu": "two"}, group="big") for i in range(3)],
    )
    assert outcome.bindings == {}
    why = outcome.group_why["default/big"]
    assert why.code.value == "OverQueueLimit"
    assert why.message == "can never fit: needs 6 deviceclass/gpu, queue limit 4"


def test_preemption_frees_the_victims_devices() -> None:
    profile = harness.profile_with(actions=("allocate", "preempt"))
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=d.gpus(1)),
        d.template("one"),
        b.queue("team"),
        d.pod_with_claims("low", templates={"gpu": "one"}, queue="team", priority=1),
        cycles=3,
        profile=profile,
        between=lambda c: c.put(
            d.pod_with_claims("high", templates={"gpu": "one"}, queue="team", priority=100)
        ),
    )
    assert outcome.bindings.get("default/high") == "n1"
    assert "default/low" not in [
        f"default/{p['metadata']['name']}" for p in outcome.cluster.objects("Pod")
    ]
    assert outcome.devices_of(outcome.claim_of("high")) == ["n1/gpu-0"]
