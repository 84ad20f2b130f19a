"""Which reservation pods shared GPUs need (berth.status.gpu_reservations), from real snapshots.

We test these aspects:
- a device Berth's shares use gets one reservation pod, as KAI's node tooling looks for it
  (namespace, name prefix, node, one nvidia.com/gpu, the group label), and the shares get the
  device's group label (each device's, for a share on several);
- once the reservation pod is seen and the labels are on, nothing more is asked;
- the last share gone, the reservation pod is deleted (by its UID); KAI's own reservation pods
  and another scheduler's shares are never touched;
- a long node name still gives a valid pod name.
"""

from __future__ import annotations

import typing

from berth.scheduler.snapshot import gpushare
from berth.status import gpu_reservations
from tests.scheduler import builders as b
from tests.scheduler.queues import runs

Obj = dict[str, typing.Any]
BERTH = {b.SCHEDULER}


def gpu_node(name: str, gpus: int) -> Obj:
    return b.node(name, cpu="32", memory="256Gi", gpu=gpus)


def share(name: str, fraction: str, **fields: typing.Any) -> Obj:
    annotations = {gpushare.FRACTION_ANNOTATION: fraction, **fields.pop("annotations", {})}
    return b.pod(name, cpu="1", memory="1Gi", annotations=annotations, **fields)


def bound_copy(run: runs.Run, name: str, **labels: str) -> Obj:
    pod = run.cluster.get("Pod", namespace="default", name=name)
    assert pod is not None
    pod["metadata"].setdefault("labels", {}).update(labels)
    return pod


def test_a_shared_device_gets_one_reservation_pod_and_its_shares_the_group() -> None:
    run = runs.Run(gpu_node("n0", 2), share("a", "0.5"), share("b", "0.5", created=b.EPOCH + 1))
    assert run.cycle().bound == {"a": "n0", "b": "n0"}
    snapshot = run.cluster.snapshot()
    [(node, device)] = gpu_reservations.plan(snapshot, schedulers=BERTH).create
    assert node == "n0"
    group = gpushare.group_of("n0", device)
    plan = gpu_reservations.plan(snapshot, schedulers=BERTH)
    assert plan.labels == {
        "default/a": {"metadata": {"labels": {gpushare.GROUP_LABEL: group}}},
        "default/b": {"metadata": {"labels": {gpushare.GROUP_LABEL: group}}},
    }
    assert plan.delete == ()
    holder = gpu_reservations.reservation_pod("n0", device)
    assert holder["metadata"]["namespace"] == gpushare.RESERVATION_NAMESPACE
    assert holder["metadata"]["name"].startswith(gpushare.RESERVATION_POD_PREFIX)
    assert holder["metadata"]["labels"][gpushare.GROUP_LABEL] == group
    assert holder["spec"]["nodeName"] == "n0"
    assert holder["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"

    # The reservation pod seen, the labels on: nothing more to write.
    run.put(holder, bound_copy(run, "a", **{gpushare.GROUP_LABEL: group}))
    run.put(bound_copy(run, "b", **{gpushare.GROUP_LABEL: group}))
    assert gpu_reservations.plan(run.cluster.snapshot(), schedulers=BERTH) == (
        gpu_reservations.Plan()
    )

    # The shares go: the reservation pod goes (by its UID).
    run.cluster.delete("Pod", namespace="default", name="a")
    assert gpu_reservations.plan(run.cluster.snapshot(), schedulers=BERTH).delete == ()
    run.cluster.delete("Pod", namespace="default", name="b")
    seen = run.cluster.get(
        "Pod", namespace=gpushare.RESERVATION_NAMESPACE, name=holder["metadata"]["name"]
    )
    assert seen is not None
    plan = gpu_reservations.plan(run.cluster.snapshot(), schedulers=BERTH)
    assert plan.delete == ((holder["metadata"]["name"], seen["metadata"]["uid"]),)
    assert plan.create == () and plan.labels == {}


def test_a_share_on_several_devices_carries_each_devices_group() -> None:
    annotations = {gpushare.DEVICES_ANNOTATION: "2"}
    run = runs.Run(gpu_node("n0", 4), share("multi", "0.5", annotations=annotations))
    assert run.cycle().bound == {"multi": "n0"}
    plan = gpu_reservations.plan(run.cluster.snapshot(), schedulers=BERTH)
    devices = sorted(d for _, d in plan.create)
    assert len(devices) == 2
    groups = [gpushare.group_of("n0", d) for d in devices]
    assert plan.labels["default/multi"] == {
        "metadata": {
            "labels": {
                gpushare.GROUP_LABEL: groups[0],
                **{f"{gpushare.MULTI_GROUP_LABEL_PREFIX}{g}": g for g in groups},
            }
        }
    }


def test_kais_reservation_pods_and_other_schedulers_shares_are_left_alone() -> None:
    kai_holder = b.pod(
        f"{gpushare.RESERVATION_POD_PREFIX}n0-abcde",
        namespace=gpushare.RESERVATION_NAMESPACE,
        gpu=1,
        node="n0",
        scheduler="default-scheduler",
        labels={gpushare.GROUP_LABEL: "kai-group"},
    )
    kai_share = share(
        "kai", "0.5", node="n0", scheduler="kai-scheduler", labels={gpushare.GROUP_LABEL: "kai"}
    )
    run = runs.Run(gpu_node("n0", 2), kai_holder, kai_share)
    run.cycle()
    assert gpu_reservations.plan(run.cluster.snapshot(), schedulers=BERTH) == (
        gpu_reservations.Plan()
    )


def test_a_long_node_name_gives_a_valid_pod_name() -> None:
    node = "n" * 250
    name = gpu_reservations.pod_name(node, 3)
    assert len(name) <= 253 and name.startswith(gpushare.RESERVATION_POD_PREFIX)
    assert name.endswith("-3") and name != gpu_reservations.pod_name("m" * 250, 3)
