"""Other schedulers' PodGroups as Berth PodGroups, and Berth's verdict in their status (pure).

We test these aspects:

- a scheduler-plugins PodGroup's minMember, minResources and scheduleTimeoutSeconds, and a
  Volcano PodGroup's minMember, minResources, queue and priorityClassName carry over to the
  Berth PodGroup standing for it, which the original owns (garbage collection) and names;
- Volcano's minTaskMember is honoured as its sum when that is larger than minMember;
- a group that cannot be honoured (minMember 0 or missing, a malformed or negative quantity)
  is marked invalid with what is wrong, and its status stays Pending;
- the status written back follows the group: each flavour's phase names, the counts, and for
  Volcano Inqueue while waiting (its operators create pods only then) with the reason in an
  Unschedulable condition;
- a 1.35 Workload (``scheduling.k8s.io/v1alpha1``) stands as one Berth PodGroup per pod group
  (gang minCount, or basic: one), and one per replica key its pods name, each named as the
  pods' ``spec.workloadRef`` resolves, owned by the Workload; a gang of 0 is marked invalid;
- the other schedulers' names whose pods Berth claims: only those asked for, each only with its
  interop on, never Berth's own name twice; a claimed pod is pending as one of Berth's own (the
  profile's checks apply to it), another scheduler's is not Berth's;
- a pod whose ``spec.workloadRef`` and a group label name different groups is never placed.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import keys, workload_refs
from berth.operator import settings
from berth.scheduler.snapshot import cache, pods
from berth.workloads import interop

Obj = dict[str, typing.Any]


def group(api_version: str, spec: Obj) -> Obj:
    meta = {"name": "g", "namespace": "team", "uid": "u-1"}
    return {"apiVersion": api_version, "kind": "PodGroup", "metadata": meta, "spec": spec}


def test_scheduler_plugins_group_carries_over() -> None:
    spec = {"minMember": 3, "minResources": {"cpu": "3"}, "scheduleTimeoutSeconds": 60}
    mirror = interop.mirror(interop.SCHEDULER_PLUGINS, group("scheduling.x-k8s.io/v1alpha1", spec))
    assert mirror["metadata"]["name"] == "g" and mirror["metadata"]["namespace"] == "team"
    assert mirror["spec"] == spec
    owner = mirror["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"], owner["uid"]) == (
        "scheduling.x-k8s.io/v1alpha1",
        "PodGroup",
        "u-1",
    )
    annotations = mirror["metadata"]["annotations"]
    assert annotations[keys.MIRROR_OF_ANNOTATION] == "scheduling.x-k8s.io/v1alpha1 PodGroup g"
    assert annotations[keys.INVALID_ANNOTATION] is None


def test_volcano_group_carries_over_with_its_queue_and_priority() -> None:
    spec = {
        "minMember": 2,
        "queue": "team-a",
        "priorityClassName": "high",
        "minResources": {"cpu": "2"},
    }
    mirror = interop.mirror(interop.VOLCANO, group("scheduling.volcano.sh/v1beta1", spec))
    assert mirror["spec"] == spec


@pytest.mark.parametrize(
    ("spec", "min_member"),
    [
        ({"minMember": 2, "minTaskMember": {"ps": 1, "worker": 4}}, 5),
        ({"minMember": 6, "minTaskMember": {"ps": 1, "worker": 4}}, 6),
        ({"minTaskMember": {"worker": 3}}, 3),
    ],
    ids=["sum-above-min", "min-above-sum", "tasks-only"],
)
def test_volcano_min_task_member_is_honoured_as_its_sum(spec: Obj, min_member: int) -> None:
    mirror = interop.mirror(interop.VOLCANO, group("scheduling.volcano.sh/v1beta1", spec))
    assert mirror["spec"]["minMember"] == min_member
    assert mirror["spec"]["queue"] == keys.DEFAULT_QUEUE


@pytest.mark.parametrize(
    ("flavor", "spec", "problem"),
    [
        (
            interop.SCHEDULER_PLUGINS,
            {"minMember": 0},
            "minMember is 0: a gang needs at least 1 pod",
        ),
        (interop.SCHEDULER_PLUGINS, {}, "minMember is None: a gang needs at least 1 pod"),
        (interop.VOLCANO, {"minMember": "two"}, "minMember is 'two'"),
        (
            interop.SCHEDULER_PLUGINS,
            {"minMember": 2, "minResources": {"cpu": "lots"}},
            "minResources cpu",
        ),
        (
            interop.VOLCANO,
            {"minMember": 2, "minResources": {"cpu": "-1"}},
            "minResources cpu is negative",
        ),
    ],
    ids=["min-member-0", "min-member-missing", "min-member-text", "bad-quantity", "negative"],
)
def test_a_group_that_cannot_be_honoured_is_marked_invalid(
    flavor: interop.Flavor, spec: Obj, problem: str
) -> None:
    mirror = interop.mirror(flavor, group(flavor.api_version, spec))
    marked = mirror["metadata"]["annotations"][keys.INVALID_ANNOTATION]
    assert marked.startswith(f"{flavor.name} PodGroup g: ") and problem in marked
    assert mirror["spec"]["minMember"] >= 1  # a valid Berth object, never placed
    assert "minResources" not in mirror["spec"] or "minResources" not in problem


@pytest.mark.parametrize(
    ("phase", "sp", "volcano"),
    [
        ("Pending", "Pending", "Inqueue"),
        ("Inqueue", "Pending", "Inqueue"),
        ("Scheduled", "Scheduling", "Running"),
        ("Running", "Running", "Running"),
        ("Finished", "Finished", "Completed"),
        ("Failed", "Failed", "Pending"),
    ],
)
def test_status_phase_in_each_flavours_words(phase: str, sp: str, volcano: str) -> None:
    counts = {"running": 2, "succeeded": 1, "failed": 0}
    reason = None if phase in ("Scheduled", "Running", "Finished") else "gang needs minMember 3"
    written = interop.foreign_status(
        interop.SCHEDULER_PLUGINS, phase=phase, reason=reason, **counts
    )
    assert written == {"phase": sp, **counts}
    written = interop.foreign_status(interop.VOLCANO, phase=phase, reason=reason, **counts)
    assert written["phase"] == volcano
    (condition,) = written["conditions"]
    if reason is None:
        assert condition["type"] == "Scheduled"
    else:
        assert condition == {
            "type": "Unschedulable",
            "status": "True",
            "reason": "Unschedulable",
            "message": reason,
        }


def test_invalid_group_stays_pending() -> None:
    counts = {"running": 0, "succeeded": 0, "failed": 0}
    for flavor in interop.FLAVORS:
        written = interop.foreign_status(
            flavor, phase="Pending", reason="bad", invalid=True, **counts
        )
        assert written["phase"] == "Pending"


@pytest.mark.parametrize(
    ("spec", "min_member", "problem"),
    [
        ({"schedulingPolicy": {"gang": {"minCount": 4}}}, 4, None),
        ({"schedulingPolicy": {"basic": {}}}, 1, None),
        ({"schedulingPolicy": {"gang": {"minCount": 0}}}, 1, "schedulingPolicy.gang.minCount is 0"),
        ({}, 1, "schedulingPolicy.gang.minCount is None"),
    ],
    ids=["gang", "basic", "gang-of-0", "no-policy"],
)
def test_kubernetes_podgroup_policy_becomes_min_member(
    spec: Obj, min_member: int, problem: str | None
) -> None:
    mirror = interop.mirror(interop.KUBERNETES, group("scheduling.k8s.io/v1alpha2", spec))
    assert mirror["spec"] == {"minMember": min_member}
    marked = mirror["metadata"]["annotations"][keys.INVALID_ANNOTATION]
    assert (marked is None) if problem is None else (problem in marked)
    assert not interop.KUBERNETES.writes_status


@pytest.mark.parametrize(
    ("values", "claimed"),
    [
        ({}, ()),
        ({"interop_volcano_pods": True}, ("volcano",)),
        ({"interop_volcano_pods": True, "interop_volcano": False}, ()),
        ({"interop_scheduler_plugins_pods": True}, ("scheduler-plugins-scheduler",)),
        (
            {"interop_scheduler_plugins_pods": True, "interop_volcano_pods": True},
            ("scheduler-plugins-scheduler", "volcano"),
        ),
        ({"interop_volcano_pods": True, "scheduler_name": "volcano"}, ()),
    ],
    ids=["default", "volcano", "volcano-interop-off", "scheduler-plugins", "both", "own-name"],
)
def test_claimed_scheduler_names(values: Obj, claimed: tuple[str, ...]) -> None:
    config = settings.Settings(**values, leader_election={"enabled": False})
    assert config.claimed_scheduler_names == claimed


WORKLOAD = {
    "apiVersion": "scheduling.k8s.io/v1alpha1",
    "kind": "Workload",
    "metadata": {"name": "train", "namespace": "team", "uid": "u-w"},
    "spec": {
        "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
        "podGroups": [
            {"name": "workers", "policy": {"gang": {"minCount": 4}}},
            {"name": "driver", "policy": {"basic": {}}},
            {"name": "broken", "policy": {"gang": {"minCount": 0}}},
        ],
    },
}


@pytest.mark.parametrize(
    ("replica_keys", "expected"),
    [
        ((), {"train-workers": 4, "train-driver": 1, "train-broken": 1}),
        (
            [("workers", "0"), ("workers", "1"), ("nowhere", "0")],
            {
                "train-workers": 4,
                "train-driver": 1,
                "train-broken": 1,
                "train-workers-0": 4,
                "train-workers-1": 4,
            },
        ),
    ],
    ids=["pod-groups", "replica-keys"],
)
def test_workload_pod_groups_are_mirrored_as_the_pods_name_them(
    replica_keys: list[tuple[str, str]], expected: dict[str, int]
) -> None:
    made = interop.mirrors(interop.WORKLOADS, WORKLOAD, replica_keys=replica_keys)
    assert {m["metadata"]["name"]: m["spec"]["minMember"] for m in made} == expected
    for mirror in made:
        (owner,) = mirror["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Workload", "train", "u-w")
        assert owner["apiVersion"] == "scheduling.k8s.io/v1alpha1"
    # The pods' spec.workloadRef resolves to the same names.
    for name in expected:
        _, group, *key = name.split("-")
        ref = {"name": "train", "podGroup": group}
        if key:
            ref["podGroupReplicaKey"] = key[0]
        found = workload_refs.from_pod_spec({"workloadRef": ref})
        assert found is not None and found.group_name == name
    invalid = {
        m["metadata"]["name"]: m["metadata"]["annotations"][keys.INVALID_ANNOTATION] for m in made
    }
    assert invalid["train-broken"] == (
        "Workload train pod group broken: policy.gang.minCount is 0: a gang needs at least 1 pod"
    )
    assert invalid["train-workers"] is None and invalid["train-driver"] is None
    assert not interop.WORKLOADS.writes_status


def test_workload_ref_names_odd_replica_keys_safely() -> None:
    odd = workload_refs.group_name("train", "workers", replica_key="Rack A/7")
    assert odd.startswith("train-workers-r") and " " not in odd and "/" not in odd
    assert odd != workload_refs.group_name("train", "workers", replica_key="Rack A/8")
    assert workload_refs.from_pod_spec({"workloadRef": {"name": "train"}}) is None


def _pod(name: str, **spec: typing.Any) -> Obj:
    containers = [{"name": "main", "image": "busybox"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "uid": f"u-{name}"},
        "spec": {"containers": containers, **spec},
    }


def test_claimed_pods_are_berths_own() -> None:
    claimed = cache.ClusterCache(scheduler_names=("berth-scheduler", "volcano"))
    for made in (
        _pod("claimed", schedulerName="volcano"),
        _pod("theirs", schedulerName="scheduler-plugins-scheduler"),
    ):
        claimed.add_pod(made)
    pending = {p.name: p for p in claimed.snapshot(0.0).pending}
    assert set(pending) == {"claimed"}
    assert pending["claimed"].scheduler_name == "berth-scheduler"


def test_workload_ref_and_a_label_naming_another_group_are_refused() -> None:
    made = _pod("p", workloadRef={"name": "train", "podGroup": "workers"})
    made["metadata"]["labels"] = {keys.POD_GROUP_LABEL: "other"}
    info = pods.pod_info(made)
    assert info.invalid == (
        "two PodGroups claim the pod (spec.workloadRef=train-workers, "
        f"label {keys.POD_GROUP_LABEL}=other): remove all but one"
    )
    agreeing = _pod("q", workloadRef={"name": "train", "podGroup": "workers"})
    assert pods.pod_info(agreeing).pod_group == "team/train-workers"
