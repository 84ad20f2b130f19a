"""DRA objects in the cache and the snapshot (``devicestore``, ``devices`` and the infos).

We test these aspects:

- classes, slices, claims and templates parse once; a malformed field is a ``problem`` naming
  it (a selector that does not compile, a bad quantity, a request with both kinds, a constraint
  naming no request), never an exception;
- pods' ``spec.resourceClaims`` resolve through ``status.resourceClaimStatuses`` (a template's
  claim is not there until made; an entry the controller skipped needs nothing);
- pools: only the newest generation counts, a missing slice makes the pool incomplete,
  duplicate device names or undeclared counters break it, with the reason;
- which pools a node reaches: its own slices, slices selecting it by label or ``allNodes``,
  devices selecting it one by one;
- the allocated state: devices allocated whole, capacity consumed by shares, counters drawn
  (a device once however many shares), admin access counting for nothing;
- per queue, devices held and asked for, a claim once per queue; the capacity per class;
- the catalog (and its selector answers) survives claim changes and is rebuilt on slice
  changes; a DRA change is a change of the world for parked work;
- without ``dynamic_resources`` the snapshot says DRA is not watched, until the source says it
  feeds DRA objects (``watch_devices``);
- assumed claims (a write in flight): the devices count as taken at once, in no other claim;
  the overlay gives way to the API's word (the write's version seen, the allocation and the
  consumer shown, the claim replaced or deleted), is undone when the write fails, and goes
  with a pod that finished.
"""

from __future__ import annotations

import typing

from berth.scheduler.snapshot import cache as cache_module
from berth.scheduler.snapshot import devices, pods, resourceclaims, resourceslices
from tests.scheduler import builders as b
from tests.scheduler import dra_builders as d

Obj = dict[str, typing.Any]


def _cache(*objs: Obj) -> cache_module.ClusterCache:
    cache = cache_module.ClusterCache(dynamic_resources=True)
    for obj in objs:
        kind = obj["kind"]
        add = {
            "Node": cache.add_node,
            "Pod": cache.add_pod,
            "Queue": cache.add_queue,
            "DeviceClass": cache.add_device_class,
            "ResourceSlice": cache.add_resource_slice,
            "ResourceClaim": cache.add_resource_claim,
            "ResourceClaimTemplate": cache.add_resource_claim_template,
        }[kind]
        add(obj)
    return cache


def test_malformed_fields_are_problems_naming_them() -> None:
    problem = resourceslices.resource_slice_info(
        d.node_slice("n1", devices=[d.device("g", capacity={"memory": "lots"})])
    ).problem
    assert problem is not None and problem.startswith("spec.devices[0].capacity[memory].value")
    both = {
        "name": "gpu",
        "exactly": {"deviceClassName": "gpu"},
        "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}],
    }
    assert resourceclaims.resource_claim_info(d.claim("c", both)).problem == (
        "spec.devices.requests[0]: exactly one of exactly and firstAvailable must be set"
    )
    unknown = d.claim("c", constraints=[{"requests": ["nic"], "matchAttribute": "a.io/x"}])
    assert resourceclaims.resource_claim_info(unknown).problem == (
        "spec.devices.constraints[0].requests: no request named nic"
    )
    selector = d.claim("c", d.request(selectors=["device.driver =="]))
    found = resourceclaims.resource_claim_info(selector).problem
    assert found is not None
    assert found.startswith("spec.devices.requests[0].exactly.selectors[0].cel.expression: ")


def test_pod_claims_resolve_through_the_statuses() -> None:
    pod = d.pod_with_claims("p", templates={"gpu": "t", "nic": "n"}, claims={"shared": "s"})
    pod["status"]["resourceClaimStatuses"] = [
        {"name": "gpu", "resourceClaimName": "p-gpu-abc"},
        {"name": "nic"},
    ]
    info = pods.pod_info(pod)
    by_name = {c.name: c for c in info.resource_claims}
    assert by_name["gpu"].claim == "p-gpu-abc" and by_name["gpu"].from_template
    assert by_name["nic"].claim is None and by_name["nic"].skipped
    assert by_name["shared"].claim == "s" and not by_name["shared"].from_template
    assert info.resource_claim_keys == ("default/p-gpu-abc", "default/s")
    waiting = pods.pod_info(d.pod_with_claims("q", templates={"gpu": "t"}))
    assert waiting.resource_claims[0].claim is None and not waiting.resource_claims[0].skipped
    bad = b.pod("r", spec={"resourceClaims": [{"name": "x"}]})
    assert pods.pod_info(bad).invalid == (
        "invalid spec.resourceClaims[0]: exactly one of resourceClaimName and "
        "resourceClaimTemplateName must be set"
    )


def test_only_the_newest_complete_generation_of_a_pool_counts() -> None:
    catalog = (
        _cache(
            b.node("n1"),
            d.resource_slice("old", node="n1", pool="n1", generation=1, devices=d.gpus(3)),
            d.resource_slice("new", node="n1", pool="n1", generation=2, devices=d.gpus(1)),
            d.resource_slice("half", node="n1", pool="other", count=2, devices=d.gpus(2)),
        )
        .snapshot(b.EPOCH)
        .devices.catalog
    )
    pools = {p.id[1]: p for p in catalog.pools_for("n1", labels={})}
    assert [x.name for x in pools["n1"].devices] == ["gpu-0"]
    assert pools["n1"].generation == 2
    assert pools["other"].incomplete and pools["other"].devices == ()


def test_broken_pools_say_why() -> None:
    duplicate = (
        _cache(
            d.resource_slice("a", node="n1", pool="n1", count=2, devices=d.gpus(1)),
            d.resource_slice("b", node="n1", pool="n1", count=2, devices=d.gpus(1)),
        )
        .snapshot(b.EPOCH)
        .devices.catalog
    )
    [pool] = duplicate.pools_for("n1", labels={})
    assert pool.problem == "pool gpu.example.com/n1: duplicate device name gpu-0"
    assert pool.devices == ()
    counters = (
        _cache(d.node_slice("n1", devices=[d.device("g", consumes={"mem": {"memory": "1Gi"}})]))
        .snapshot(b.EPOCH)
        .devices.catalog
    )
    [pool] = counters.pools_for("n1", labels={})
    assert pool.problem is not None and "counter set mem" in pool.problem


def test_the_pools_a_node_reaches() -> None:
    rack = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}
        ]
    }
    catalog = (
        _cache(
            d.node_slice("n1"),
            d.resource_slice("fabric", pool="fabric", all_nodes=True, devices=d.gpus(1)),
            d.resource_slice("rack-a", pool="rack-a", node_selector=rack, devices=d.gpus(1)),
            d.resource_slice(
                "mixed",
                pool="mixed",
                per_device=True,
                devices=[d.device("for-n1", nodeName="n1"), d.device("for-n2", nodeName="n2")],
            ),
        )
        .snapshot(b.EPOCH)
        .devices.catalog
    )

    def reached(node: str, labels: dict[str, str]) -> dict[str, list[str]]:
        return {
            p.id[1]: [x.name for x in p.devices] for p in catalog.pools_for(node, labels=labels)
        }

    assert reached("n1", {"rack": "a"}) == {
        "fabric": ["gpu-0"],
        "mixed": ["for-n1"],
        "n1": ["gpu-0", "gpu-1"],
        "rack-a": ["gpu-0"],
    }
    assert reached("n2", {"rack": "b"}) == {"fabric": ["gpu-0"], "mixed": ["for-n2"]}


def test_the_allocated_state_from_the_claims() -> None:
    shared_status = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": d.GPU_DRIVER,
                        "pool": "n1",
                        "device": "shared",
                        "shareID": "a",
                        "consumedCapacity": {"memory": "10Gi"},
                    }
                ]
            }
        },
    }
    shared_again = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": d.GPU_DRIVER,
                        "pool": "n1",
                        "device": "shared",
                        "shareID": "b",
                        "consumedCapacity": {"memory": "20Gi"},
                    }
                ]
            }
        },
    }
    admin = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": d.GPU_DRIVER,
                        "pool": "n1",
                        "device": "whole",
                        "adminAccess": True,
                    }
                ]
            }
        }
    }
    state = (
        _cache(
            d.node_slice(
                "n1",
                devices=[
                    d.device("whole", consumes={"set": {"c": "1"}}),
                    d.device(
                        "shared",
                        shared=True,
                        capacity={"memory": "80Gi"},
                        consumes={"set": {"c": "1"}},
                    ),
                ],
            ),
            d.resource_slice("n1-counters", node="n1", pool="n1", counters={"set": {"c": "4"}}),
            d.claim("one", status=d.allocated((d.GPU_DRIVER, "n1", "whole"))),
            d.claim("two", status=shared_status),
            d.claim("three", status=shared_again),
            d.claim("four", status=admin),
        )
        .snapshot(b.EPOCH)
        .devices.allocated
    )
    gib = 2**30 * 1000
    assert state.exclusive == {(d.GPU_DRIVER, "n1", "whole")}
    assert state.consumed == {(d.GPU_DRIVER, "n1", "shared"): {"memory": 30 * gib}}
    assert state.counters == {((d.GPU_DRIVER, "n1"), "set"): {"c": 2000}}


def test_queue_usage_counts_a_claim_once_per_queue_and_classes_have_capacity() -> None:
    allocated = d.allocated((d.GPU_DRIVER, "n1", "gpu-0"), (d.GPU_DRIVER, "n1", "gpu-1"))
    snapshot = _cache(
        b.node("n1"),
        d.device_class("gpu"),
        d.node_slice("n1", devices=d.gpus(4)),
        d.claim("shared", d.request(count=2), status=allocated),
        d.claim("waiting", d.request(count=3)),
        b.queue("q"),
        d.pod_with_claims("a", claims={"gpu": "shared"}, queue="q", node="n1"),
        d.pod_with_claims("b", claims={"gpu": "shared"}, queue="q", node="n1"),
        d.pod_with_claims("c", claims={"gpu": "waiting"}, queue="q"),
    ).snapshot(b.EPOCH)
    usage = snapshot.devices.queue_usage(snapshot.pods)
    held, asked = usage["q"]
    assert dict(held) == {"deviceclass/gpu": 2000}
    assert dict(asked) == {"deviceclass/gpu": 3000}
    assert dict(snapshot.devices.catalog.class_capacity()) == {"deviceclass/gpu": 4000}


def test_the_catalog_lives_across_claim_changes_and_world_changes_count() -> None:
    cache = _cache(b.node("n1"), d.device_class("gpu"), d.node_slice("n1"))
    first = cache.snapshot(b.EPOCH)
    cache.add_resource_claim(d.claim("c"))
    second = cache.snapshot(b.EPOCH + 1)
    assert second.devices.catalog is first.devices.catalog
    assert second.devices is not first.devices
    assert first.changes is not None and second.changes is not None
    assert not second.changes.same_world(first.changes)
    cache.add_resource_slice(d.node_slice("n1", devices=d.gpus(3)))
    third = cache.snapshot(b.EPOCH + 2)
    assert third.devices.catalog is not second.devices.catalog
    same = cache.snapshot(b.EPOCH + 3)
    assert same.devices is third.devices  # nothing changed: the same view


def test_without_dynamic_resources_nothing_is_watched() -> None:
    assert not cache_module.ClusterCache().snapshot(b.EPOCH).devices.watched
    assert devices.EMPTY.watched is False
    assert _cache().snapshot(b.EPOCH).devices.watched


def test_watching_devices_can_begin_later() -> None:
    cache = cache_module.ClusterCache()
    first = cache.snapshot(b.EPOCH)
    cache.watch_devices()
    second = cache.snapshot(b.EPOCH + 1)
    assert second.devices.watched
    assert first.changes is not None and second.changes is not None
    assert not second.changes.same_world(first.changes)  # refused pods may be placed now


def _versioned(obj: Obj, version: int) -> Obj:
    obj["metadata"]["resourceVersion"] = str(version)
    return obj


def _assumed_cache() -> cache_module.ClusterCache:
    return _cache(
        b.node("n1"),
        d.device_class("gpu"),
        d.node_slice("n1", devices=d.gpus(2)),
        _versioned(d.claim("c"), 10),
        d.pod_with_claims("p", claims={"gpu": "c"}, uid="uid-p"),
    )


def _allocation(device: str = "gpu-0") -> resourceclaims.AllocationInfo:
    found = resourceclaims.allocation_info(
        d.allocated((d.GPU_DRIVER, "n1", device), node="n1")["allocation"]
    )
    assert found is not None
    return found


def test_an_assumed_claim_holds_its_devices_until_the_api_shows_the_write() -> None:
    cache = _assumed_cache()
    assert cache.assume_resource_claim(
        "default/c", uid="uid-claim-default-c", pod="p", pod_uid="uid-p", allocation=_allocation()
    )
    snapshot = cache.snapshot(b.EPOCH)
    claim = snapshot.devices.claims["default/c"]
    assert claim.allocation is not None and claim.reserved_for_pod("uid-p")
    assert snapshot.devices.allocated.exclusive == {(d.GPU_DRIVER, "n1", "gpu-0")}
    # An unrelated change of the claim (a label) does not end the assumption.
    cache.add_resource_claim(_versioned(d.claim("c"), 11))
    assert cache.snapshot(b.EPOCH + 1).devices.allocated.exclusive
    cache.settle_resource_claim("default/c", pod_uid="uid-p", version="12")
    assert cache.snapshot(b.EPOCH + 2).devices.allocated.exclusive
    # The write as the informer brings it: the API's word, the overlay gone.
    written = d.claim("c", status=d.allocated((d.GPU_DRIVER, "n1", "gpu-1"), node="n1"))
    cache.add_resource_claim(_versioned(written, 12))
    state = cache.snapshot(b.EPOCH + 3).devices
    assert state.allocated.exclusive == {(d.GPU_DRIVER, "n1", "gpu-1")}
    assert not state.claims["default/c"].reserved_for_pod("uid-p")  # the API says so


def test_an_assumed_claim_gives_way_when_the_api_shows_allocation_and_consumer() -> None:
    cache = _assumed_cache()
    cache.assume_resource_claim(
        "default/c", uid="uid-claim-default-c", pod="p", pod_uid="uid-p", allocation=_allocation()
    )
    shown = d.claim(
        "c",
        status=d.allocated((d.GPU_DRIVER, "n1", "gpu-1"), node="n1", reserved_for=[("p", "uid-p")]),
    )
    cache.add_resource_claim(_versioned(shown, 13))  # kube-scheduler's choice (admission mode)
    assert cache.snapshot(b.EPOCH).devices.allocated.exclusive == {(d.GPU_DRIVER, "n1", "gpu-1")}
    # Nothing is left to forget: the API's word stands.
    assert not cache.forget_resource_claim("default/c", pod_uid="uid-p")


def test_a_failed_write_is_forgotten_and_frees_the_devices() -> None:
    cache = _assumed_cache()
    before = cache.snapshot(b.EPOCH)
    cache.assume_resource_claim(
        "default/c", uid="uid-claim-default-c", pod="p", pod_uid="uid-p", allocation=_allocation()
    )
    assert cache.forget_resource_claim("default/c", pod_uid="uid-p")
    after = cache.snapshot(b.EPOCH + 1)
    assert not after.devices.allocated.exclusive
    assert after.devices.claims["default/c"].allocation is None
    assert before.changes is not None and after.changes is not None
    assert not after.changes.same_world(before.changes)  # room freed: parked work may fit


def test_a_shared_claim_assumed_for_two_pods_keeps_the_holders_allocation() -> None:
    cache = _assumed_cache()
    cache.add_pod(d.pod_with_claims("q", claims={"gpu": "c"}, uid="uid-q"))
    uid = "uid-claim-default-c"
    cache.assume_resource_claim(
        "default/c", uid=uid, pod="p", pod_uid="uid-p", allocation=_allocation()
    )
    cache.assume_resource_claim("default/c", uid=uid, pod="q", pod_uid="uid-q", allocation=None)
    claim = cache.snapshot(b.EPOCH).devices.claims["default/c"]
    assert claim.reserved_for_pod("uid-p") and claim.reserved_for_pod("uid-q")
    cache.forget_resource_claim("default/c", pod_uid="uid-q")
    claim = cache.snapshot(b.EPOCH + 1).devices.claims["default/c"]
    assert claim.allocation is not None and not claim.reserved_for_pod("uid-q")
    cache.forget_resource_claim("default/c", pod_uid="uid-p")  # the holder's write failed
    assert cache.snapshot(b.EPOCH + 2).devices.claims["default/c"].allocation is None


def test_an_assumption_ends_with_its_claim_or_its_pod() -> None:
    uid = "uid-claim-default-c"
    replaced = _assumed_cache()
    assert not replaced.assume_resource_claim(
        "default/c", uid="another", pod="p", pod_uid="uid-p", allocation=_allocation()
    )
    replaced.assume_resource_claim(
        "default/c", uid=uid, pod="p", pod_uid="uid-p", allocation=_allocation()
    )
    new = d.claim("c")
    new["metadata"]["uid"] = "uid-new"
    replaced.add_resource_claim(_versioned(new, 20))
    assert replaced.snapshot(b.EPOCH).devices.claims["default/c"].allocation is None
    deleted = _assumed_cache()
    deleted.assume_resource_claim(
        "default/c", uid=uid, pod="p", pod_uid="uid-p", allocation=_allocation()
    )
    deleted.remove_resource_claim("default/c")
    deleted.add_resource_claim(_versioned(d.claim("c"), 30))
    assert deleted.snapshot(b.EPOCH).devices.claims["default/c"].allocation is None
    finished = _assumed_cache()
    finished.assume_resource_claim(
        "default/c", uid=uid, pod="p", pod_uid="uid-p", allocation=_allocation()
    )
    finished.add_pod(d.pod_with_claims("p", claims={"gpu": "c"}, uid="uid-p", phase="Succeeded"))
    assert finished.snapshot(b.EPOCH).devices.claims["default/c"].allocation is None


def test_selector_answers_outlive_a_catalog_for_unchanged_slices() -> None:
    cache = _cache(d.device_class("gpu"), d.node_slice("n1"), d.node_slice("n2"))
    first = cache.snapshot(b.EPOCH).devices
    [selector] = first.classes["gpu"].selectors
    kept = first.catalog.devices[(d.GPU_DRIVER, "n1", "gpu-0")]
    replaced = first.catalog.devices[(d.GPU_DRIVER, "n2", "gpu-0")]
    assert first.catalog.selects(selector, kept) is True
    assert first.catalog.selects(selector, replaced) is True
    cache.add_resource_slice(d.node_slice("n2", devices=d.gpus(3)))
    second = cache.snapshot(b.EPOCH + 1).devices
    assert second.catalog is not first.catalog
    assert second.catalog.devices[(d.GPU_DRIVER, "n1", "gpu-0")] is kept
    memo = second.catalog._memo  # the answers the next catalog starts from
    assert memo.get(kept) == {selector.expression: True}
    assert replaced not in memo
