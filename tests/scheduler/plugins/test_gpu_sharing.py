"""GpuSharing: shares of a GPU with KAI-Scheduler's annotations, cycle by cycle (issue 28).

Scenario tables run default-profile cycles on the in-memory cluster. We test these aspects:
- shares go on devices, never more than a device's worth on one; the chosen device is
  recorded on the pod (``runai-gpu``, with the binding); a whole-GPU pod never gets a device
  a share uses, although the node's ``nvidia.com/gpu`` column counts only the share;
- ``gpu-memory`` shares are sized by each node's device memory (``nvidia.com/gpu.memory``),
  and go nowhere its label is missing;
- the multi-device form takes its share on distinct devices;
- bad input (0, 1.5, ``half``, both annotations, a share plus whole GPUs, memory above every
  GPU's) makes the pod wait with a reason whose code and details name the annotation, and
  nothing else is affected;
- queue quota counts shares in fractions of ``nvidia.com/gpu``;
- gangs of shares are placed all or nothing;
- reclaim and preemption that evict a share free exactly its share on its device, where the
  pod they evict for goes; a share nominated to a node with no device room for it (the
  starvation guard's) opens no device there;
- a profile without GpuSharing refuses shared pods rather than placing them as GPU-less;
- the filter's reasons and the scores of the baseline policies (plugin tables).
"""

from __future__ import annotations

import typing

import numpy as np
import pytest

from berth.scheduler.framework import cyclestate, decisions, profiles
from berth.scheduler.plugins import registry
from berth.scheduler.plugins.gpu_sharing import policies
from berth.scheduler.snapshot import gpudevices, gpushare
from tests.scheduler import builders as b
from tests.scheduler.plugins import harness
from tests.scheduler.queues import runs

Obj = dict[str, typing.Any]
GPU = "nvidia.com/gpu"


def gpu_node(
    name: str, *, gpus: int = 2, memory: str | None = "40960", **fields: typing.Any
) -> Obj:
    labels = dict(fields.pop("labels", {}))
    if memory is not None:
        labels[gpushare.MEMORY_LABEL] = memory
    return b.node(name, cpu="32", memory="256Gi", gpu=gpus, labels=labels, **fields)


def share(name: str, fraction: str, *, at: float = 0, **fields: typing.Any) -> Obj:
    annotations = {gpushare.FRACTION_ANNOTATION: fraction, **fields.pop("annotations", {})}
    fields.setdefault("cpu", "1")
    fields.setdefault("memory", "1Gi")
    return b.pod(name, annotations=annotations, created=b.EPOCH + at, **fields)


def devices_of(run: runs.Run) -> dict[str, dict[int, int]]:
    """Per node, thousandths used on each device, from the pods' recorded devices (read back
    from the API objects, independently of the plugin)."""
    used: dict[str, dict[int, int]] = {}
    nodes = {n["metadata"]["name"]: n for n in run.cluster.objects("Node")}
    for pod in run.cluster.objects("Pod"):
        node = pod["spec"].get("nodeName")
        annotations = pod["metadata"].get("annotations") or {}
        share_ = gpushare.parse(annotations)
        if node is None or share_ is None:
            continue
        recorded = gpushare.devices_of(annotations)
        assert recorded is not None, f"{pod['metadata']['name']} has no device recorded"
        memory = gpushare.device_memory(nodes[node]["metadata"].get("labels") or {})
        taken = share_.per_device(memory)
        assert taken is not None
        for device in recorded:
            used.setdefault(node, {}).setdefault(device, 0)
            used[node][device] += taken
    return used


def whole_on(run: runs.Run, node: str) -> int:
    """Whole GPUs the pods on ``node`` hold (a reservation pod's is its shares' device)."""
    return sum(
        int((p["spec"]["containers"][0]["resources"].get("requests") or {}).get(GPU, 0))
        for p in run.cluster.objects("Pod")
        if p["spec"].get("nodeName") == node
        and p["metadata"].get("namespace") != gpushare.RESERVATION_NAMESPACE
    )


def assert_never_over_committed(run: runs.Run) -> None:
    counts = {
        n["metadata"]["name"]: int(n["status"]["allocatable"].get(GPU, 0))
        for n in run.cluster.objects("Node")
    }
    for node, devices in devices_of(run).items():
        assert all(0 < used <= 1000 for used in devices.values()), (node, devices)
        assert all(device < counts[node] for device in devices), (node, devices)
        assert len(devices) + whole_on(run, node) <= counts[node], (node, devices)


def test_shares_fill_devices_and_record_them() -> None:
    run = runs.Run(
        gpu_node("n0"), *[share(f"p{i}", "0.25", at=i) for i in range(8)], share("p8", "0.25", at=9)
    )
    outcome = run.cycle()
    assert len(outcome.bound) == 8
    assert outcome.pod_reasons["p8"] == "0/1 nodes fit: 1 Insufficient nvidia.com/gpu"
    annotate = outcome.result.of_kind(decisions.AnnotatePod)
    assert {d.name for d in annotate} == {f"p{i}" for i in range(8)}
    assert all(set(d.annotations) == {gpushare.INDEX_ANNOTATION} for d in annotate)
    assert devices_of(run) == {"n0": {0: 1000, 1: 1000}}
    assert_never_over_committed(run)


def test_a_share_goes_only_where_one_device_has_room() -> None:
    run = runs.Run(gpu_node("n0"), share("a", "0.6", at=0), share("b", "0.6", at=1))
    run.cycle()
    # 0.8 of a GPU is free in the column, but no device has 0.5 left.
    run.put(share("c", "0.5", at=2), share("d", "0.4", at=3))
    outcome = run.cycle()
    assert outcome.bound == {"d": "n0"}
    assert outcome.pod_reasons["c"] == "0/1 nodes fit: 1 no GPU with 0.5 free"
    assert_never_over_committed(run)


def test_a_whole_gpu_pod_never_gets_a_shared_device() -> None:
    run = runs.Run(gpu_node("n0", gpus=4), *[share(f"s{i}", "0.3", at=i) for i in range(4)])
    run.cycle()
    # Four shares of 0.3 open two devices (three on one, as FGD keeps the other whole).
    assert sorted(devices_of(run)["n0"].values()) == [300, 900]
    run.put(b.pod("w1", cpu="1", gpu=2, created=b.EPOCH + 10))
    run.put(b.pod("w2", cpu="1", gpu=1, created=b.EPOCH + 11))
    outcome = run.cycle()
    # The column has 2.8 GPUs free; only two devices are whole.
    assert outcome.bound == {"w1": "n0"}
    assert outcome.pod_reasons["w2"] == "0/1 nodes fit: 1 Insufficient nvidia.com/gpu"
    assert_never_over_committed(run)


def test_memory_shares_are_sized_by_each_nodes_devices() -> None:
    run = runs.Run(
        gpu_node("small", gpus=1, memory="16384"),
        gpu_node("large", gpus=1, memory="81920"),
        gpu_node("unlabelled", gpus=1, memory=None),
        b.queue("team"),
        b.pod("m", cpu="1", queue="team", annotations={"gpu-memory": "40000"}),
    )
    outcome = run.cycle()
    assert outcome.bound == {"m": "large"}
    pod = next(p for p in run.cluster.objects("Pod") if p["metadata"]["name"] == "m")
    assert pod["metadata"]["annotations"][gpushare.INDEX_ANNOTATION] == "0"
    # Charged 489/1000 of the 80 GiB device it runs on.
    assert run.cycle().queues["team"].allocated[GPU] == 489


def test_the_multi_device_form_takes_distinct_devices() -> None:
    run = runs.Run(
        gpu_node("n0", gpus=4),
        share("two", "0.5", annotations={gpushare.DEVICES_ANNOTATION: "2"}),
    )
    outcome = run.cycle()
    assert outcome.bound == {"two": "n0"}
    used = devices_of(run)["n0"]
    assert len(used) == 2 and set(used.values()) == {500}


BAD_INPUT = [
    ("zero", {"gpu-fraction": "0"}, {}, "Invalid", "gpu-fraction"),
    ("above-one", {"gpu-fraction": "1.5"}, {}, "Invalid", "gpu-fraction"),
    ("half", {"gpu-fraction": "half"}, {}, "Invalid", "gpu-fraction"),
    ("both", {"gpu-fraction": "0.5", "gpu-memory": "2000"}, {}, "Invalid", "gpu-memory"),
    ("plus-whole", {"gpu-fraction": "0.5"}, {"gpu": 1}, "Invalid", "gpu-fraction"),
    ("memory-too-large", {"gpu-memory": "100000"}, {}, "Unschedulable", "gpu-memory"),
]


@pytest.mark.parametrize(
    ("annotations", "fields", "code", "annotation"),
    [row[1:] for row in BAD_INPUT],
    ids=[row[0] for row in BAD_INPUT],
)
def test_bad_input_waits_naming_the_annotation_and_nothing_else_is_affected(
    annotations: dict[str, str], fields: dict[str, typing.Any], code: str, annotation: str
) -> None:
    run = runs.Run(
        gpu_node("n0"),
        b.pod("bad", cpu="1", annotations=annotations, **fields),
        share("good", "0.5", at=1),
        b.pod("whole", cpu="1", gpu=1, created=b.EPOCH + 2),
    )
    outcome = run.cycle()
    assert outcome.bound == {"good": "n0", "whole": "n0"}
    why = outcome.result.pod_why["default/bad"]
    assert why.code.value == code
    assert why.details["annotation"] == annotation
    assert annotation in why.message
    assert_never_over_committed(run)


def test_a_queue_limit_counts_shares_in_fractions() -> None:
    limited = b.queue("team", limit={GPU: "1"})
    run = runs.Run(
        gpu_node("n0", gpus=4),
        limited,
        *[share(f"p{i}", "0.3", queue="team", at=i) for i in range(4)],
    )
    outcome = run.cycle()
    assert set(outcome.bound) == {"p0", "p1", "p2"}
    assert outcome.result.pod_why["default/p3"].code.value == "QueueOverLimit"
    assert outcome.queues["team"].allocated[GPU] == 900


def test_a_gang_of_shares_starts_whole_or_not_at_all() -> None:
    members = [share(f"g{i}", "0.5", group="g", at=i) for i in range(5)]
    run = runs.Run(gpu_node("n0"), b.pod_group("g", min_member=5), *members)
    outcome = run.cycle()
    assert outcome.bound == {}  # four halves fit on two devices, the fifth does not
    assert "g" in outcome.group_reasons
    run.put(gpu_node("n1", gpus=1))
    outcome = run.cycle()
    assert len(outcome.bound) == 5
    assert_never_over_committed(run)


def recorded(run: runs.Run, name: str) -> str:
    pod = next(p for p in run.cluster.objects("Pod") if p["metadata"]["name"] == name)
    return str(pod["metadata"]["annotations"][gpushare.INDEX_ANNOTATION])


def test_reclaim_of_a_share_frees_exactly_its_share_for_the_reclaimer() -> None:
    run = runs.Run(
        gpu_node("n0", gpus=2),
        b.queue("qa"),
        b.queue("qb"),
        *[share(f"a{i}", "0.5", queue="qa", at=i) for i in range(4)],
    )
    assert len(run.cycle().bound) == 4
    devices = {f"a{i}": recorded(run, f"a{i}") for i in range(4)}
    run.put(share("b0", "0.5", queue="qb", at=10))
    run.clock.advance(120)  # past the minimum runtime before reclaim
    outcome = run.cycle()
    (victim,) = outcome.evicted  # one half freed: exactly what b0 needs
    assert outcome.bound == {"b0": "n0"}
    assert recorded(run, "b0") == devices[victim]
    assert devices_of(run) == {"n0": {0: 1000, 1: 1000}}
    assert_never_over_committed(run)


def test_preemption_of_a_share_frees_its_device_for_the_preemptor() -> None:
    run = runs.Run(
        gpu_node("n0", gpus=2),
        b.queue("team"),
        b.priority_class("high", 1000),
        share("low-a", "0.75", queue="team", at=0),
        share("low-b", "0.75", queue="team", at=1),
    )
    run.cycle()
    devices = {name: recorded(run, name) for name in ("low-a", "low-b")}
    run.put(share("urgent", "0.5", queue="team", priority_class="high", at=10))
    outcome = run.cycle()
    (victim,) = outcome.evicted
    assert outcome.bound == {"urgent": "n0"}
    assert recorded(run, "urgent") == devices[victim]
    assert sorted(devices_of(run)["n0"].values()) == [500, 750]
    assert_never_over_committed(run)


def test_a_share_nominated_where_no_device_has_room_opens_no_device() -> None:
    # Four GPUs: one held whole, three shared with 0.2 left on each. The starving g-0 (0.25)
    # fits none, yet the starvation guard nominates the node for it (room frees there).
    # Counting the nominee on a device would open the one the whole-GPU pod holds, and the
    # high-priority h (0.3), preempting v, would join it: five devices in use on four.
    def on(device: int) -> dict[str, typing.Any]:
        return {"node": "n0", "annotations": {gpushare.INDEX_ANNOTATION: str(device)}}

    run = runs.Run(
        gpu_node("n0", gpus=4),
        b.queue("team"),
        b.queue("other"),
        b.priority_class("high", 1000),
        b.pod("w", cpu="1", gpu=1, queue="other", node="n0"),
        share("a0", "0.75", queue="other", **on(0)),
        share("v", "0.05", queue="team", **on(0)),
        share("a1", "0.8", queue="other", **on(1)),
        share("a2", "0.8", queue="other", **on(2)),
    )
    run.clock.advance(400)  # past the starvation threshold of g, created at the epoch
    run.put(
        b.pod_group("g", min_member=1, queue="team"),
        share("g-0", "0.25", group="g", queue="team", at=1),
        share("h", "0.3", queue="team", priority_class="high", at=390),
    )
    outcome = run.cycle()
    assert_never_over_committed(run)
    assert outcome.group_reasons["g"].startswith("starving for 400s: holding 1 node")
    # No device has 0.3 left, even with v gone: h waits, and v keeps running.
    assert outcome.bound == {}
    assert outcome.evicted == set()
    assert outcome.pod_reasons["h"] == "0/1 nodes fit: 1 no GPU with 0.3 free"
    assert devices_of(run) == {"n0": {0: 800, 1: 800, 2: 800}}


def test_a_profile_without_gpu_sharing_refuses_shares() -> None:
    without = harness.profile_with(without=("GpuSharing",))
    bound, reasons, _ = harness.cycle(gpu_node("n0"), share("p", "0.5"), profile=without)
    assert bound == {}
    assert "gpu-fraction" in reasons["default/p"]


# Plugin tables ------------------------------------------------------------------------------


def plugin_of(profile: profiles.Profile | None = None) -> tuple[typing.Any, typing.Any]:
    from berth.scheduler import loop
    from berth.util import clocks

    scheduler = loop.Scheduler(
        profile or registry.default_profile(),
        registry=registry.in_tree_registry(),
        clock=clocks.VirtualClock(b.EPOCH),
    )
    plugin = next(p for p in scheduler.framework.plugins if p.name == "GpuSharing")
    return scheduler, plugin


def test_whole_free_and_free_matrix_follow_the_column() -> None:
    snap = harness.snapshot(
        gpu_node("n0", gpus=4),
        share("a", "0.5", node="n0", annotations={gpushare.INDEX_ANNOTATION: "1"}),
        b.pod("w", cpu="1", gpu=1, node="n0"),
    )
    devices = gpudevices.build(snap.nodes, labels=snap.nodes.labels, shared=snap.shared_gpus)
    assert devices is not None
    assert devices.whole_free(snap.nodes).tolist() == [2]
    assert devices.free_matrix(snap.nodes).tolist() == [[1000, 500, 1000, 0]]
    half = gpushare.ShareRequest(milli=500)
    assert devices.slots_for(0, half, snap.nodes) == (1, 0, 2)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # Shares of 0.5: the node with a half-used device is the tightest fit.
        (policies.Policy.BEST_FIT, "used"),
        (policies.Policy.PACKING, "used"),
        (policies.Policy.FRAGMENTATION_GRADIENT, "used"),
    ],
    ids=["best-fit", "packing", "fgd"],
)
def test_policies_prefer_the_half_used_device(policy: policies.Policy, expected: str) -> None:
    profile = harness.profile_with(args={"GpuSharing": {"policy": policy.value}})
    bound, _, _ = harness.cycle(
        gpu_node("empty"),
        gpu_node("used"),
        share("old", "0.5", node="used", annotations={gpushare.INDEX_ANNOTATION: "0"}),
        share("new", "0.5"),
        profile=profile,
    )
    assert bound == {"default/new": expected}


def test_ranked_keeps_fgds_order_and_breaks_ties_by_packing() -> None:
    gain = np.array([5, 5, 7, -2], dtype=np.int64)
    left = np.array([3000, 1000, 8000, 0], dtype=np.int64)
    cpu = np.array([10, 10, 10, 10], dtype=np.int64)
    assert policies.ranked(gain, left, cpu).tolist() == [80, 90, 100, 70]


def test_a_bad_share_is_refused_at_pre_filter() -> None:
    scheduler, plugin = plugin_of()
    snap = harness.snapshot(gpu_node("n0"))
    pod = harness.info(annotations={"gpu-fraction": "half"})
    status = plugin.pre_filter(cyclestate.CycleState(), pod, snap.nodes)
    assert status.code.name == "UNSCHEDULABLE_AND_UNRESOLVABLE"
    assert status.reason().details == {"annotation": "gpu-fraction"}
    assert scheduler is not None


def gpu_reservation(name: str, *, gpus: str, annotations: dict[str, str] | None = None) -> Obj:
    obj = b.reservation(name)
    requests = {"cpu": "1", "memory": "1Gi"}
    if gpus:
        requests[GPU] = gpus
    template: Obj = {"spec": {"containers": [b.container(requests=requests)]}}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    obj["spec"]["template"] = template
    return obj


def test_a_reservation_keeps_its_gpu_from_shares_and_gives_it_to_its_owner() -> None:
    run = runs.Run(gpu_node("n0", gpus=2), gpu_reservation("keep", gpus="1"))
    run.cycle()  # the reservation is placed: it holds one of the two devices
    run.put(*[share(f"s{i}", "0.5", at=i) for i in range(4)])
    outcome = run.cycle()
    assert len(outcome.bound) == 2  # the other device only
    run.put(b.pod("owner", cpu="1", gpu=1, labels={"app": "keep"}, created=b.EPOCH + 20))
    outcome = run.cycle()
    assert outcome.bound == {"owner": "n0"}
    assert_never_over_committed(run)


def test_owners_share_a_reserved_gpu() -> None:
    run = runs.Run(gpu_node("n0", gpus=2), gpu_reservation("keep", gpus="1"))
    run.cycle()
    run.put(share("other", "0.5", at=1))
    run.put(*[share(f"owner{i}", "0.5", labels={"app": "keep"}, at=10 + i) for i in range(2)])
    for _ in range(2):
        run.cycle()
    assert all(node == "n0" for node in run.nodes_of().values())
    assert_never_over_committed(run)


def test_a_reservation_may_not_reserve_a_share() -> None:
    half = {gpushare.FRACTION_ANNOTATION: "0.5"}
    run = runs.Run(gpu_node("n0", gpus=1), gpu_reservation("half", gpus="", annotations=half))
    outcome = run.cycle()
    (unschedulable,) = [
        d
        for d in outcome.result.of_kind(decisions.Unschedulable)
        if d.subject is decisions.Subject.RESERVATION
    ]
    assert unschedulable.reason.details["annotation"] == gpushare.FRACTION_ANNOTATION
    assert "holds whole GPUs" in unschedulable.reason.message


def reservation_pod(node: str, device: int) -> Obj:
    """A reservation pod of a shared device, as Berth writes it (berth.status.gpu_reservations)."""
    return b.pod(
        f"{gpushare.RESERVATION_POD_PREFIX}{node}-{device}",
        namespace=gpushare.RESERVATION_NAMESPACE,
        cpu="1m",
        memory="10Mi",
        gpu=1,
        node=node,
        scheduler="default-scheduler",
        labels={gpushare.GROUP_LABEL: gpushare.group_of(node, device)},
        annotations={gpushare.INDEX_ANNOTATION: str(device)},
    )


def test_reservation_pods_count_once_with_the_shares_on_their_devices() -> None:
    """A reservation pod's whole GPU is the device its shares are on: whole-GPU pods see the
    same free devices with and without them; once its last share is gone, the device stays
    taken until the reservation pod goes too."""
    run = runs.Run(gpu_node("n0", gpus=4), *[share(f"s{i}", "0.3", at=i) for i in range(4)])
    run.cycle()
    opened = sorted(devices_of(run)["n0"])
    assert len(opened) == 2
    run.put(*(reservation_pod("n0", device) for device in opened))
    run.put(b.pod("w1", cpu="1", gpu=2, created=b.EPOCH + 10))
    run.put(b.pod("w2", cpu="1", gpu=1, created=b.EPOCH + 11))
    outcome = run.cycle()
    assert outcome.bound == {"w1": "n0"}  # as without reservation pods
    assert outcome.pod_reasons["w2"] == "0/1 nodes fit: 1 Insufficient nvidia.com/gpu"
    # A share still fits beside the others on an open device (its reservation pod is not
    # counted as one more GPU on it).
    run.put(share("s4", "0.1", at=12))
    outcome = run.cycle()
    assert outcome.bound == {"s4": "n0"}
    assert_never_over_committed(run)
    # Every share of one device leaves: its reservation pod still holds it.
    emptied = next(d for d in opened if devices_of(run)["n0"][d] <= 400)
    for pod in run.cluster.objects("Pod"):
        recorded = gpushare.devices_of(pod["metadata"].get("annotations") or {})
        if pod["metadata"]["namespace"] == "default" and recorded == (emptied,):
            run.cluster.delete("Pod", namespace="default", name=pod["metadata"]["name"])
    assert run.cycle().bound == {}
    run.cluster.delete(
        "Pod",
        namespace=gpushare.RESERVATION_NAMESPACE,
        name=f"{gpushare.RESERVATION_POD_PREFIX}n0-{emptied}",
    )
    assert run.cycle().bound == {"w2": "n0"}
