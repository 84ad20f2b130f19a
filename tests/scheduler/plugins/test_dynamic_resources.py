"""DynamicResources: pods get devices through ResourceClaims as kube-scheduler allocates them.

Each case is a cluster of API dicts run through default-profile cycles on the simulator (which
plays the resourceclaim controller and applies the claims' writes); the assertions read where
pods went, the allocations written into the claims, and why the others wait.

We test these aspects:

- requests: ``count`` devices, ``allocationMode: All`` (every matching device, all free),
  ``firstAvailable`` (the first alternative that fits), selectors of the class and of the
  request (attributes, capacity quantities, semantic versions);
- constraints: ``matchAttribute`` and ``distinctAttribute`` across a claim's devices;
- a claim shared by several pods (allocated once, reserved by each; its node decides theirs),
  and claims made for each pod from a template;
- admin access (a device in use may be taken for monitoring), device taints and tolerations;
- partitionable devices (shared counters), consumable capacity (a device shared by claims
  up to its capacity, with its request policy);
- per-node and network-attached devices (``allNodes``, a slice's ``nodeSelector``,
  per-device node selection), and the allocation's node selector written accordingly;
- pools: only the newest generation counts; an incomplete pool is not allocated from;
- claims allocated already (by kube-scheduler or another leader) are used as they are, never
  written again, and send the pod where they are usable; one allocated between a cycle's
  snapshot and its writes is not overwritten, and its pods are not bound;
- bad input: a missing class, claim or template, a selector that does not compile or fails on
  a device, a broken pool, a claim being deleted, not the pod's own, reserved by 256 consumers
  or malformed — the pod waits with a reason naming the object and field, and the rest of the
  cluster is scheduled as before (a plain pod beside it is always bound); a pod whose claim the
  resourceclaim controller has not made yet waits as ``ResourceClaimPending``, and no
  condition is decided for it (kube-scheduler's PreEnqueue writes nothing either);
- a pod refused by one node's devices is told which claim, and whether devices were taken;
- without a source feeding DRA objects, Berth's own pods with claims are refused as before and
  admission mode's pass every extension point untouched.
"""

from __future__ import annotations

import typing

import pytest

from berth.scheduler.framework import cyclestate, decisions, interfaces, sessions
from berth.scheduler.snapshot import pods
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler import dra_builders as d
from tests.scheduler.plugins import dra, harness

Obj = dict[str, typing.Any]

GPU = d.device_class("gpu")
PLAIN = b.pod("plain")


def _bound(outcome: dra.Run, pod: str) -> str | None:
    return outcome.bindings.get(f"default/{pod}")


# Requests ------------------------------------------------------------------------------------


def test_count_goes_where_enough_devices_are_free_and_writes_them() -> None:
    outcome = dra.run(
        b.node("n1"),
        b.node("n2"),
        GPU,
        d.node_slice("n1", devices=d.gpus(1)),
        d.node_slice("n2", devices=d.gpus(3)),
        d.template("two", d.request(count=2)),
        d.pod_with_claims("p", templates={"gpu": "two"}),
    )
    assert _bound(outcome, "p") == "n2"
    claim = outcome.claim_of("p")
    assert outcome.devices_of(claim) == ["n2/gpu-0", "n2/gpu-1"]
    status = claim["status"]
    assert status["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-default-p"}]
    assert status["allocation"]["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
        ]
    }
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]


def test_all_takes_every_matching_device_of_the_node() -> None:
    devices = [
        d.device("a-0", attributes={"model": "a100"}),
        d.device("h-0", attributes={"model": "h100"}),
        d.device("a-1", attributes={"model": "a100"}),
    ]
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=devices),
        d.claim(
            "every-a100",
            d.request(all=True, selectors=['device.attributes["gpu.example.com"].model == "a100"']),
        ),
        d.pod_with_claims("p", claims={"gpu": "every-a100"}),
    )
    assert _bound(outcome, "p") == "n1"
    assert outcome.devices_of(outcome.claims["every-a100"]) == ["n1/a-0", "n1/a-1"]


def test_all_needs_every_matching_device_free() -> None:
    taken = d.claim(
        "taken",
        status=d.allocated((d.GPU_DRIVER, "n1", "gpu-1"), node="n1", reserved_for=[("x", "u")]),
    )
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1"),
        taken,
        d.claim("every", d.request(all=True)),
        d.pod_with_claims("p", claims={"gpu": "every"}),
        PLAIN,
    )
    assert _bound(outcome, "p") is None
    assert outcome.code("p") == "NotEnoughResources"
    assert "resourceclaim default/every (request gpu: all of deviceclass gpu)" in outcome.message(
        "p"
    )
    assert _bound(outcome, "plain") == "n1"


def test_first_available_takes_the_first_alternative_that_fits() -> None:
    big = d.device_class("big", selectors=['device.attributes["gpu.example.com"].model == "h100"'])
    first = d.request(
        first_available=[d.sub_request("h100", cls="big", count=2), d.sub_request("any", count=1)]
    )
    outcome = dra.run(
        b.node("n1"),
        GPU,
        big,
        d.node_slice("n1", devices=d.gpus(2, model="a100")),
        d.claim("c", first),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    assert _bound(outcome, "p") == "n1"
    results = outcome.claims["c"]["status"]["allocation"]["devices"]["results"]
    assert [(r["request"], r["device"]) for r in results] == [("gpu/any", "gpu-0")]


def test_first_available_prefers_the_first_alternative_when_it_fits() -> None:
    big = d.device_class("big", selectors=['device.attributes["gpu.example.com"].model == "h100"'])
    first = d.request(
        first_available=[d.sub_request("h100", cls="big", count=2), d.sub_request("any", count=1)]
    )
    outcome = dra.run(
        b.node("n1"),
        GPU,
        big,
        d.node_slice("n1", devices=d.gpus(2, model="h100")),
        d.claim("c", first),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    results = outcome.claims["c"]["status"]["allocation"]["devices"]["results"]
    assert [r["request"] for r in results] == ["gpu/h100", "gpu/h100"]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) > 0', ["big"]),
        (
            'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("2.0.0"))',
            ["big"],
        ),
        ('device.attributes["gpu.example.com"].mig == false', ["big"]),
        ('has(device.attributes["gpu.example.com"].driverVersion)', ["small", "big"]),
    ],
    ids=["capacity-quantity", "semver", "bool", "has"],
)
def test_request_selectors_see_attributes_capacity_and_versions(
    selector: str, expected: list[str]
) -> None:
    devices = [
        d.device(
            "small",
            attributes={"driverVersion": ("version", "1.9.0"), "mig": True},
            capacity={"memory": "40Gi"},
        ),
        d.device(
            "big",
            attributes={"driverVersion": ("version", "2.1.0"), "mig": False},
            capacity={"memory": "80Gi"},
        ),
    ]
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=devices),
        d.claim("c", d.request(all=True, selectors=[selector])),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    assert [x.partition("/")[2] for x in outcome.devices_of(outcome.claims["c"])] == expected


# Constraints ---------------------------------------------------------------------------------

NUMA = "gpu.example.com/numa"


@pytest.mark.parametrize(
    ("constraint", "expected"),
    [
        ({"matchAttribute": NUMA}, ["n1/gpu-1", "n1/gpu-2"]),
        ({"distinctAttribute": NUMA}, ["n1/gpu-0", "n1/gpu-1"]),
    ],
    ids=["matchAttribute", "distinctAttribute"],
)
def test_constraints_hold_across_the_claims_devices(constraint: Obj, expected: list[str]) -> None:
    devices = [
        d.device("gpu-0", attributes={"numa": 0}),
        d.device("gpu-1", attributes={"numa": 1}),
        d.device("gpu-2", attributes={"numa": 1}),
    ]
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=devices),
        d.claim("c", d.request(count=2), constraints=[constraint]),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    assert outcome.devices_of(outcome.claims["c"]) == expected


def test_match_attribute_across_requests_and_drivers() -> None:
    nic = d.device_class("nic", driver=d.NIC_DRIVER)
    pcie = "dra.example.com/pcieRoot"
    outcome = dra.run(
        b.node("n1"),
        GPU,
        nic,
        d.node_slice(
            "n1",
            devices=[
                d.device("gpu-0", attributes={pcie: "root-a"}),
                d.device("gpu-1", attributes={pcie: "root-b"}),
            ],
        ),
        d.node_slice(
            "n1", driver=d.NIC_DRIVER, devices=[d.device("nic-0", attributes={pcie: "root-b"})]
        ),
        d.claim(
            "c",
            d.request("gpu"),
            d.request("nic", cls="nic"),
            constraints=[{"requests": ["gpu", "nic"], "matchAttribute": pcie}],
        ),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    assert outcome.devices_of(outcome.claims["c"]) == ["n1/gpu-1", "n1/nic-0"]


def test_a_constraint_no_device_set_can_meet_leaves_the_pod_waiting() -> None:
    devices = [d.device("gpu-0", attributes={"numa": 0}), d.device("gpu-1", attributes={"numa": 1})]
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=devices),
        d.claim("c", d.request(count=2), constraints=[{"matchAttribute": NUMA}]),
        d.pod_with_claims("p", claims={"gpu": "c"}),
        PLAIN,
    )
    assert _bound(outcome, "p") is None
    assert outcome.code("p") == "DevicesUnavailable"
    assert "no devices matching resourceclaim default/c" in outcome.message("p")
    assert _bound(outcome, "plain") == "n1"


# Sharing -------------------------------------------------------------------------------------


def test_a_shared_claim_is_allocated_once_and_its_pods_follow_it() -> None:
    outcome = dra.run(
        b.node("n1"),
        b.node("n2"),
        GPU,
        d.node_slice("n1", devices=d.gpus(1)),
        d.node_slice("n2", devices=d.gpus(1)),
        d.claim("shared"),
        *[d.pod_with_claims(f"p{i}", claims={"gpu": "shared"}) for i in range(3)],
        cycles=2,
    )
    nodes = {_bound(outcome, f"p{i}") for i in range(3)}
    assert len(nodes) == 1 and None not in nodes
    claim = outcome.claims["shared"]
    assert len(outcome.devices_of(claim)) == 1
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["p0", "p1", "p2"]
    allocations = [x for x in outcome.decided if getattr(x, "allocation", None) is not None]
    assert len(allocations) == 1  # written once, by the pod that allocated it


def test_template_claims_are_each_pods_own() -> None:
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=d.gpus(2)),
        d.template("one"),
        *[d.pod_with_claims(f"p{i}", templates={"gpu": "one"}) for i in range(3)],
        PLAIN,
    )
    assert {_bound(outcome, f"p{i}") for i in range(2)} == {"n1"}
    assert _bound(outcome, "p2") is None
    assert outcome.code("p2") == "NotEnoughResources"
    assert sorted(
        outcome.devices_of(outcome.claim_of("p0")) + outcome.devices_of(outcome.claim_of("p1"))
    ) == [
        "n1/gpu-0",
        "n1/gpu-1",
    ]
    assert "status" not in outcome.claim_of("p2")
    assert _bound(outcome, "plain") == "n1"


def test_a_deleted_pod_releases_its_devices_for_the_next() -> None:
    def delete_first(cluster: typing.Any) -> None:
        cluster.delete("Pod", namespace="default", name="p0")

    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=d.gpus(1)),
        d.template("one"),
        d.pod_with_claims("p0", templates={"gpu": "one"}, created=b.EPOCH),
        d.pod_with_claims("p1", templates={"gpu": "one"}, created=b.EPOCH + 1),
        cycles=2,
        between=delete_first,
    )
    assert outcome.bindings == {"default/p0": "n1", "default/p1": "n1"}
    assert outcome.devices_of(outcome.claim_of("p1")) == ["n1/gpu-0"]
    assert [c for c in outcome.claims if c.startswith("p0-")] == []  # deleted with its pod


# Admin access, taints ------------------------------------------------------------------------


def test_admin_access_takes_a_device_in_use_without_taking_it_from_anyone() -> None:
    taken = d.claim(
        "taken",
        status=d.allocated((d.GPU_DRIVER, "n1", "gpu-0"), node="n1", reserved_for=[("x", "u")]),
    )
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=d.gpus(1)),
        taken,
        d.claim("monitor", d.request(admin=True)),
        d.pod_with_claims("p", claims={"gpu": "monitor"}),
    )
    assert _bound(outcome, "p") == "n1"
    result = outcome.claims["monitor"]["status"]["allocation"]["devices"]["results"][0]
    assert (result["device"], result["adminAccess"]) == ("gpu-0", True)


@pytest.mark.parametrize(
    ("tolerations", "bound"),
    [
        ((), False),
        (({"key": "broken", "operator": "Exists", "effect": "NoSchedule"},), True),
        (({"key": "broken", "value": "yes", "effect": "NoSchedule"},), True),
        (({"key": "other", "operator": "Exists"},), False),
    ],
    ids=["untolerated", "exists", "equal", "other-key"],
)
def test_device_taints_keep_untolerating_requests_away(
    tolerations: tuple[Obj, ...], bound: bool
) -> None:
    tainted = d.device("gpu-0", taints=[{"key": "broken", "value": "yes", "effect": "NoSchedule"}])
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=[tainted]),
        d.claim("c", d.request(tolerations=tolerations)),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    assert (_bound(outcome, "p") == "n1") is bound
    if bound:
        result = outcome.claims["c"]["status"]["allocation"]["devices"]["results"][0]
        assert result["tolerations"][0]["key"] == tolerations[0]["key"]


def test_a_none_effect_taint_keeps_nobody_away() -> None:
    tainted = d.device("gpu-0", taints=[{"key": "note", "effect": "None"}])
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=[tainted]),
        d.claim("c"),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    assert _bound(outcome, "p") == "n1"


# Partitionable devices, consumable capacity ---------------------------------------------------


def _partitioned() -> list[Obj]:
    """One GPU of 80Gi published whole and as two 40Gi partitions, drawing one counter set."""
    return [
        d.resource_slice(
            "n1-counters", node="n1", pool="n1", count=2, counters={"gpu-0": {"memory": "80Gi"}}
        ),
        d.resource_slice(
            "n1-devices",
            node="n1",
            pool="n1",
            count=2,
            devices=[
                d.device(
                    "whole", attributes={"part": "whole"}, consumes={"gpu-0": {"memory": "80Gi"}}
                ),
                d.device(
                    "half-0", attributes={"part": "half"}, consumes={"gpu-0": {"memory": "40Gi"}}
                ),
                d.device(
                    "half-1", attributes={"part": "half"}, consumes={"gpu-0": {"memory": "40Gi"}}
                ),
            ],
        ),
    ]


HALF = 'device.attributes["gpu.example.com"].part == "half"'
WHOLE = 'device.attributes["gpu.example.com"].part == "whole"'


def test_partitions_share_their_counters() -> None:
    outcome = dra.run(
        b.node("n1"),
        GPU,
        *_partitioned(),
        d.template("half", d.request(selectors=[HALF])),
        d.template("whole", d.request(selectors=[WHOLE])),
        d.pod_with_claims("h0", templates={"gpu": "half"}, created=b.EPOCH),
        d.pod_with_claims("h1", templates={"gpu": "half"}, created=b.EPOCH + 1),
        d.pod_with_claims("w", templates={"gpu": "whole"}, created=b.EPOCH + 2),
    )
    assert _bound(outcome, "h0") == _bound(outcome, "h1") == "n1"
    assert _bound(outcome, "w") is None
    assert outcome.code("w") == "NotEnoughResources"


def test_an_allocated_partition_blocks_the_whole_device_in_the_next_cycle() -> None:
    outcome = dra.run(
        b.node("n1"),
        GPU,
        *_partitioned(),
        d.template("half", d.request(selectors=[HALF])),
        d.template("whole", d.request(selectors=[WHOLE])),
        d.pod_with_claims("h0", templates={"gpu": "half"}, created=b.EPOCH),
        cycles=2,
        between=lambda c: c.put(d.pod_with_claims("w", templates={"gpu": "whole"})),
    )
    assert _bound(outcome, "h0") == "n1"
    assert _bound(outcome, "w") is None


SHARED_GPU = d.device(
    "gpu-0",
    shared=True,
    capacity={"memory": "80Gi"},
    policies={"memory": {"default": "80Gi", "validRange": {"min": "10Gi", "step": "10Gi"}}},
)


def test_consumable_capacity_shares_a_device_up_to_its_capacity() -> None:
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=[SHARED_GPU]),
        d.template("slice", d.request(capacity={"memory": "25Gi"})),
        *[
            d.pod_with_claims(f"p{i}", templates={"gpu": "slice"}, created=b.EPOCH + i)
            for i in range(3)
        ],
    )
    # 25Gi rounds up to 30Gi (min 10Gi, step 10Gi): two fit in 80Gi, the third does not.
    assert _bound(outcome, "p0") == _bound(outcome, "p1") == "n1"
    assert _bound(outcome, "p2") is None
    assert outcome.code("p2") == "NotEnoughResources"
    results = [
        outcome.claim_of(f"p{i}")["status"]["allocation"]["devices"]["results"][0] for i in (0, 1)
    ]
    assert [r["consumedCapacity"] for r in results] == [{"memory": "30Gi"}] * 2
    assert len({r["shareID"] for r in results}) == 2


def test_consumable_capacity_counts_earlier_shares_from_the_claims() -> None:
    earlier = d.claim(
        "earlier",
        status={
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": d.GPU_DRIVER,
                            "pool": "n1",
                            "device": "gpu-0",
                            "shareID": "00000000-0000-0000-0000-000000000001",
                            "consumedCapacity": {"memory": "60Gi"},
                        }
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "x", "uid": "u"}],
        },
    )
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice("n1", devices=[SHARED_GPU]),
        earlier,
        d.template("slice", d.request(capacity={"memory": "20Gi"})),
        d.template("more", d.request(capacity={"memory": "30Gi"})),
        d.pod_with_claims("fits", templates={"gpu": "slice"}),
        d.pod_with_claims("too-big", templates={"gpu": "more"}),
    )
    assert _bound(outcome, "fits") == "n1"
    assert _bound(outcome, "too-big") is None


def test_a_request_the_policy_refuses_is_not_served() -> None:
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.node_slice(
            "n1",
            devices=[
                d.device(
                    "gpu-0",
                    shared=True,
                    capacity={"memory": "80Gi"},
                    policies={"memory": {"validRange": {"min": "10Gi", "max": "40Gi"}}},
                )
            ],
        ),
        d.claim("c", d.request(capacity={"memory": "50Gi"})),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    assert _bound(outcome, "p") is None
    assert outcome.code("p") == "DevicesUnavailable"


# Where devices are ---------------------------------------------------------------------------


def test_network_attached_devices_serve_every_node_and_pin_nothing() -> None:
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.resource_slice("fabric", pool="fabric", all_nodes=True, devices=d.gpus(1)),
        d.claim("c"),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    assert _bound(outcome, "p") == "n1"
    assert "nodeSelector" not in outcome.claims["c"]["status"]["allocation"]


def test_a_slices_node_selector_decides_where_its_devices_reach() -> None:
    rack = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}
        ]
    }
    outcome = dra.run(
        b.node("n1", labels={"rack": "b"}),
        b.node("n2", labels={"rack": "a"}),
        GPU,
        d.resource_slice("rack-a", pool="rack-a", node_selector=rack, devices=d.gpus(1)),
        d.claim("c"),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    assert _bound(outcome, "p") == "n2"
    assert outcome.claims["c"]["status"]["allocation"]["nodeSelector"] == rack


def test_per_device_node_selection() -> None:
    outcome = dra.run(
        b.node("n1"),
        b.node("n2"),
        GPU,
        d.resource_slice(
            "mixed",
            pool="mixed",
            per_device=True,
            devices=[d.device("local-n2", nodeName="n2")],
        ),
        d.claim("c"),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    assert _bound(outcome, "p") == "n2"


# Pools ---------------------------------------------------------------------------------------


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.resource_slice("old", node="n1", pool="n1", generation=1, devices=d.gpus(2)),
        d.resource_slice("new", node="n1", pool="n1", generation=2, devices=d.gpus(1)),
        d.claim("c", d.request(count=2)),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    assert _bound(outcome, "p") is None


def test_an_incomplete_pool_is_not_allocated_from() -> None:
    outcome = dra.run(
        b.node("n1"),
        GPU,
        d.resource_slice("half", node="n1", pool="n1", count=2, devices=d.gpus(2)),
        d.claim("c"),
        d.pod_with_claims("p", claims={"gpu": "c"}),
        PLAIN,
    )
    assert _bound(outcome, "p") is None
    assert "resource pool gpu.example.com/n1 is being updated" in outcome.message("p")
    assert _bound(outcome, "plain") == "n1"


# Claims allocated already ---------------------------------------------------------------------


def test_a_claim_allocated_elsewhere_sends_the_pod_there_and_is_not_rewritten() -> None:
    status = d.allocated((d.GPU_DRIVER, "n2", "gpu-1"), node="n2")
    outcome = dra.run(
        b.node("n1"),
        b.node("n2"),
        GPU,
        d.node_slice("n1"),
        d.node_slice("n2"),
        d.claim("c", status=status),
        d.pod_with_claims("p", claims={"gpu": "c"}),
    )
    assert _bound(outcome, "p") == "n2"
    claim = outcome.claims["c"]
    assert claim["status"]["allocation"] == status["allocation"]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p"]
    reserve = [x for x in outcome.decided if type(x).__name__ == "ReserveClaim"]
    assert [x.allocation for x in reserve] == [None]  # only reserved, never allocated again


def test_a_claim_allocated_where_the_pod_cannot_go_names_the_claim() -> None:
    outcome = dra.run(
        b.node("n1", labels={"zone": "a"}),
        b.node("n2", labels={"zone": "b"}),
        GPU,
        d.node_slice("n2"),
        d.claim("c", status=d.allocated((d.GPU_DRIVER, "n2", "gpu-0"), node="n2")),
        d.pod_with_claims("p", claims={"gpu": "c"}, node_selector={"zone": "a"}),
        PLAIN,
    )
    assert _bound(outcome, "p") is None
    assert "resourceclaim default/c's allocation" in outcome.message("p")
    assert _bound(outcome, "plain") is not None
    # Reserved by nobody, it is freed to be allocated again (kube-scheduler's PostFilter).
    assert "resourceclaim default/c is allocated where the pod cannot go" in outcome.message("p")
    freed = [x for x in outcome.decided if isinstance(x, decisions.DeallocateClaim)]
    assert [(x.key, x.pod) for x in freed] == [("default/c", "p")]
    assert not (outcome.claims["c"].get("status") or {}).get("allocation")


def test_a_claim_in_use_where_the_pod_cannot_go_stays_allocated() -> None:
    status = d.allocated((d.GPU_DRIVER, "n2", "gpu-0"), node="n2", reserved_for=[("user", "u")])
    outcome = dra.run(
        b.node("n1", labels={"zone": "a"}),
        b.node("n2", labels={"zone": "b"}),
        GPU,
        d.node_slice("n2"),
        d.claim("c", status=status),
        d.pod_with_claims("user", claims={"gpu": "c"}, node="n2", uid="u"),
        d.pod_with_claims("p", claims={"gpu": "c"}, node_selector={"zone": "a"}),
    )
    assert _bound(outcome, "p") is None
    assert not [x for x in outcome.decided if isinstance(x, decisions.DeallocateClaim)]
    assert outcome.claims["c"]["status"]["allocation"] == status["allocation"]


# Bad input -----------------------------------------------------------------------------------

_SLICE = d.node_slice("n1")


@pytest.mark.parametrize(
    ("objs", "expected"),
    [
        (
            [d.claim("c", d.request(cls="missing")), d.pod_with_claims("p", claims={"gpu": "c"})],
            "resourceclaim default/c: request gpu: deviceclass missing does not exist",
        ),
        (
            [
                d.device_class("broken", selectors=["device.attributes["]),
                d.claim("c", d.request(cls="broken")),
                d.pod_with_claims("p", claims={"gpu": "c"}),
            ],
            "deviceclass broken (used by resourceclaim default/c): "
            "spec.selectors[1].cel.expression: compilation failed",
        ),
        (
            [
                d.claim("c", d.request(selectors=['device.attributes["x.io"].y == 1'])),
                d.pod_with_claims("p", claims={"gpu": "c"}),
            ],
            "resourceclaim default/c: spec.devices.requests[0].exactly.selectors[0]."
            "cel.expression: no such key: 'y' (on device gpu.example.com/n1/gpu-0)",
        ),
        (
            [d.pod_with_claims("p", claims={"gpu": "nowhere"})],
            "resourceclaim default/nowhere not found (spec.resourceClaims[0])",
        ),
        (
            [d.pod_with_claims("p", templates={"gpu": "nowhere"})],
            "resourceclaimtemplate default/nowhere not found "
            "(spec.resourceClaims[0].resourceClaimTemplateName)",
        ),
        (
            [d.claim("c", deleting=True), d.pod_with_claims("p", claims={"gpu": "c"})],
            "resourceclaim default/c is being deleted",
        ),
        (
            [
                d.claim("c", d.request(count=0)),
                d.pod_with_claims("p", claims={"gpu": "c"}),
            ],
            "resourceclaim default/c: spec.devices.requests[0].exactly.count: 0 is not a "
            "positive integer",
        ),
        (
            [
                d.claim(
                    "c",
                    status=d.allocated(
                        (d.GPU_DRIVER, "n1", "gpu-0"),
                        reserved_for=[(f"x{i}", f"u{i}") for i in range(256)],
                    ),
                ),
                d.pod_with_claims("p", claims={"gpu": "c"}),
            ],
            "resourceclaim default/c is in use by 256 consumers, the most a claim may have",
        ),
        (
            [
                d.claim(
                    "stolen",
                    owner={
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": "q",
                        "uid": "other",
                        "controller": True,
                    },
                ),
                d.pod_with_claims(
                    "p",
                    templates={"gpu": "t"},
                    spec={},
                )
                | {
                    "status": {
                        "phase": "Pending",
                        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "stolen"}],
                    }
                },
                d.template("t"),
            ],
            "resourceclaim default/stolen was not made for pod default/p",
        ),
    ],
    ids=[
        "class-missing",
        "selector-does-not-compile",
        "selector-fails-on-a-device",
        "claim-missing",
        "template-missing",
        "claim-deleting",
        "claim-malformed",
        "reserved-by-256",
        "claim-not-the-pods",
    ],
)
def test_bad_input_waits_with_a_reason_naming_the_object_and_field(
    objs: list[Obj], expected: str
) -> None:
    outcome = dra.run(b.node("n1"), GPU, _SLICE, *objs, PLAIN)
    assert _bound(outcome, "p") is None
    assert outcome.code("p") == "ResourceClaimProblem"
    assert expected in outcome.message("p")
    assert _bound(outcome, "plain") == "n1"  # the rest of the cluster as before
    written = [c for c in outcome.claims.values() if (c.get("status") or {}).get("reservedFor")]
    assert all(r["name"] != "p" for c in written for r in c["status"]["reservedFor"])


def test_a_pod_whose_claim_is_not_made_yet_waits_and_nothing_is_written_on_it() -> None:
    # The cache alone (no in-memory resourceclaim controller): the template exists, the pod
    # names it, its claim is not made yet. kube-scheduler's PreEnqueue keeps such a pod out
    # of its queue without a write; Berth says why in its own views only.
    cache = b.cache_of(b.node("n1"))
    cache.watch_devices()
    cache.add_device_class(GPU)
    cache.add_resource_slice(_SLICE)
    cache.add_resource_claim_template(d.template("one"))
    b.load(cache, d.pod_with_claims("p", templates={"gpu": "one"}), PLAIN)
    clock = clocks.VirtualClock(b.EPOCH)
    scheduler = harness.scheduler(harness.profile_with(), clock=clock)
    result = scheduler.run_session(cache.snapshot(b.EPOCH))
    assert result.bindings() == {"default/plain": "n1"}
    why = result.pod_why["default/p"]
    assert why.code.value == "ResourceClaimPending"
    assert "waiting for the resourceclaim controller" in why.message
    marked = [p.key for m in result.of_kind(decisions.MarkPending) for p in m.pods]
    assert "default/p" not in marked

    # Made and named in the pod's status, but the claim's watch has not brought it yet.
    made = d.pod_with_claims("p", templates={"gpu": "one"})
    made["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu"}]}
    cache.add_pod(made)
    result = scheduler.run_session(cache.snapshot(b.EPOCH + 1))
    assert result.pod_why["default/p"].code.value == "ResourceClaimPending"
    assert "resourceclaim default/p-gpu not found" in result.pod_why["default/p"].message
    assert not [p for m in result.of_kind(decisions.MarkPending) for p in m.pods]


@pytest.mark.parametrize(
    ("slices", "expected"),
    [
        (
            [
                d.resource_slice("a", node="n1", pool="n1", count=2, devices=d.gpus(1)),
                d.resource_slice("b", node="n1", pool="n1", count=2, devices=d.gpus(1)),
            ],
            "resource pool gpu.example.com/n1 is broken: pool gpu.example.com/n1: duplicate "
            "device name gpu-0",
        ),
        (
            [d.node_slice("n1", devices=[d.device("gpu-0", consumes={"nope": {"memory": "1"}})])],
            "draws from counter set nope, which no slice of the pool declares",
        ),
        (
            [d.node_slice("n1", devices=[d.device("gpu-0", capacity={"memory": "lots"})])],
            "spec.devices[0].capacity[memory].value",
        ),
    ],
    ids=["duplicate-device-names", "unknown-counter-set", "malformed-quantity"],
)
def test_a_broken_pool_is_a_reason_and_other_pools_still_serve(
    slices: list[Obj], expected: str
) -> None:
    outcome = dra.run(
        b.node("n1"),
        b.node("n2"),
        GPU,
        *slices,
        d.node_slice("n2", devices=d.gpus(1)),
        d.template("one"),
        d.pod_with_claims("p0", templates={"gpu": "one"}, created=b.EPOCH),
        d.pod_with_claims("p1", templates={"gpu": "one"}, created=b.EPOCH + 1),
    )
    assert _bound(outcome, "p0") == "n2"
    assert _bound(outcome, "p1") is None
    assert expected in outcome.message("p1")


def test_a_claim_allocated_meanwhile_is_not_overwritten_and_the_pod_not_bound() -> None:
    """Another leader allocates the gang's shared claim between this cycle's snapshot and its
    writes: the write refused, no member is bound, and nothing stays reserved for them."""
    clock = clocks.VirtualClock(b.EPOCH)
    sim = harness.in_memory(
        b.node("n1"),
        GPU,
        d.node_slice("n1"),
        d.claim("shared"),
        b.pod_group("g", min_member=2),
        *[d.pod_with_claims(f"m{i}", claims={"gpu": "shared"}, group="g") for i in range(2)],
        clock=clock,
    )
    elsewhere = d.allocated((d.GPU_DRIVER, "n1", "gpu-1"), node="n1", reserved_for=[("x", "u")])

    class Racing:
        def apply(self, result: decisions.CycleResult) -> None:
            sim.put(d.claim("shared", status=elsewhere))  # the other leader's write lands first
            sim.apply(result)

    scheduler = harness.scheduler(harness.profile_with(), clock=clock)
    result = scheduler.run_once(sim, Racing())
    assert sorted(result.bindings()) == ["default/m0", "default/m1"]  # what was decided
    pods = {p["metadata"]["name"]: p for p in sim.objects("Pod")}
    assert not pods["m0"]["spec"].get("nodeName") and not pods["m1"]["spec"].get("nodeName")
    claim = sim.get("ResourceClaim", namespace="default", name="shared")
    assert claim["status"]["allocation"] == elsewhere["allocation"]  # never overwritten
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["x"]


def test_without_dra_objects_watched_the_plugin_stays_out_of_the_way() -> None:
    """A source that feeds no DRA object (the operator until its informers watch them): Berth's
    own pods with claims are refused as before, and a pod kube-scheduler binds (admission
    mode) goes through every extension point untouched."""
    snapshot = harness.snapshot(
        b.node("n1"), d.pod_with_claims("ours", templates={"gpu": "t"}), PLAIN
    )
    assert not snapshot.devices.watched
    scheduler = harness.scheduler(harness.profile_with(), clock=clocks.VirtualClock(b.EPOCH))
    result = scheduler.run_session(snapshot)
    why = result.pod_why["default/ours"].message
    assert "does not implement spec.resourceClaims" in why and "admission mode" in why
    assert result.bindings() == {"default/plain": "n1"}
    plugin = next(p for p in scheduler.framework.plugins if p.name == "DynamicResources")
    assert isinstance(plugin, interfaces.ReservePlugin)
    assert isinstance(plugin, interfaces.PreBindPlugin)
    admitted = pods.pod_info(
        d.pod_with_claims("admitted", templates={"gpu": "t"}, scheduler="default-scheduler")
    )
    session = sessions.open_session(snapshot, framework=scheduler.framework)
    try:
        state = cyclestate.CycleState()
        assert plugin.reserve(state, admitted, "n1").is_success()
        recorder = decisions.DecisionRecorder()
        assert plugin.pre_bind(state, admitted, "n1", recorder=recorder).is_success()
        assert len(recorder) == 0
    finally:
        sessions.close_session(session)
