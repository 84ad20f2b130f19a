"""scheduler-plugins and Volcano PodGroups through ``berth up`` and the real kubectl.

The chart's minimal CRDs (``helm/berth/files/``) are applied to the running cluster — after
Berth started, as an operator installing them later would. We test these aspects:

- a scheduler-plugins PodGroup and pods labelled ``scheduling.x-k8s.io/pod-group`` (as the
  Kubeflow training operator labels them): no pod starts while the gang is short, all start
  once it is whole, and its own status says Pending, then Running with the counts; the Berth
  PodGroup standing for it goes when it is deleted;
- a Volcano PodGroup and pods annotated ``scheduling.k8s.io/group-name``: its status says
  Inqueue before the pods exist (its operators wait for that) and Running once they run;
- a 1.35 Workload (``scheduling.k8s.io/v1alpha1``, served as a CRD here) and pods with
  ``spec.workloadRef``: each pod group a gang, each replica key its own, deleted with it;
- with ``interop.volcano.claimPods`` / ``interop.schedulerPlugins.claimPods`` on, pods whose
  ``schedulerName`` is ``volcano`` or ``scheduler-plugins-scheduler`` are Berth's: a gang with
  their PodGroup, each left alone while the setting is off;
- bad input: a scheduler-plugins PodGroup with minMember 0 leaves its pods waiting with a reason
  naming minMember; a pod two PodGroups claim waits and says which two.
"""

from __future__ import annotations

import collections.abc
import json
import typing

import pytest

from tests import open_crds
from tests.workloads import cluster

pytestmark = pytest.mark.slow

Obj = dict[str, typing.Any]
FILES = cluster.ROOT / "helm" / "berth" / "files"
SP = "podgroups.scheduling.x-k8s.io"
VOLCANO = "podgroups.scheduling.volcano.sh"
BPG = "podgroups.scheduling.berth.io"


def pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    scheduler: str = "berth-scheduler",
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> collections.abc.Iterator[cluster.Kubectl]:
    with cluster.berth_up(tmp_path_factory.mktemp("up"), nodes="2x cpu=4,memory=16Gi") as kubectl:
        for path in sorted(FILES.glob("*podgroups.yaml")):
            kubectl("apply", "-f", str(path))
        yield kubectl


def namespace(kubectl: cluster.Kubectl, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    kubectl("apply", "-f", "-", input=json.dumps(body))


def bound(kubectl: cluster.Kubectl, ns: str) -> list[str]:
    pods = kubectl.items("pods", namespace=ns)
    return sorted(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName"))


def status(kubectl: cluster.Kubectl, resource: str, name: str, ns: str) -> Obj:
    found: Obj = kubectl.get(resource, name, namespace=ns).get("status") or {}
    return found


def pod_reason(kubectl: cluster.Kubectl, name: str, ns: str) -> str:
    for condition in kubectl.get("pod", name, namespace=ns)["status"].get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return str(condition.get("message") or "")
    return ""


def test_scheduler_plugins_podgroup_is_a_gang_with_its_status_written_back(
    kubectl: cluster.Kubectl,
) -> None:
    namespace(kubectl, "sp")
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "mnist"},
        "spec": {"minMember": 3, "scheduleTimeoutSeconds": 600},
    }
    kubectl.apply(group, namespace="sp")
    labels = {"scheduling.x-k8s.io/pod-group": "mnist", "training.kubeflow.org/job-name": "mnist"}
    kubectl.apply(*(pod(f"mnist-worker-{i}", labels=labels) for i in (0, 1)), namespace="sp")
    mirror = cluster.eventually(
        lambda: kubectl.items(BPG, namespace="sp"), what="the Berth PodGroup standing for it"
    )[0]
    assert mirror["spec"]["minMember"] == 3
    assert mirror["metadata"]["ownerReferences"][0]["kind"] == "PodGroup"
    cluster.eventually(
        lambda: status(kubectl, SP, "mnist", "sp").get("phase") == "Pending",
        what="its status to say Pending",
    )
    cluster.eventually(
        lambda: "waiting for pods: 2/3 created" in pod_reason(kubectl, "mnist-worker-0", "sp"),
        what="the pods to say they wait for the third",
    )
    assert bound(kubectl, "sp") == []
    kubectl.apply(pod("mnist-worker-2", labels=labels), namespace="sp")
    cluster.eventually(lambda: len(bound(kubectl, "sp")) == 3, what="the gang to start")
    cluster.eventually(
        lambda: status(kubectl, SP, "mnist", "sp").get("running") == 3,
        what="its status to count 3 running",
    )
    assert status(kubectl, SP, "mnist", "sp")["phase"] == "Running"
    table = kubectl("get", SP, "-n", "sp")
    assert "Running" in table
    kubectl("delete", SP, "mnist", "-n", "sp")
    cluster.eventually(lambda: not kubectl.items(BPG, namespace="sp"), what="the mirror to go")


def test_volcano_podgroup_is_inqueue_then_running(kubectl: cluster.Kubectl) -> None:
    namespace(kubectl, "vc")
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "tf"},
        "spec": {"minMember": 2, "queue": "default"},
    }
    kubectl.apply(group, namespace="vc")
    # The training operator creates the pods once the group left Pending.
    cluster.eventually(
        lambda: status(kubectl, VOLCANO, "tf", "vc").get("phase") == "Inqueue",
        what="the Volcano group to be Inqueue",
    )
    annotations = {"scheduling.k8s.io/group-name": "tf", "volcano.sh/task-spec": "worker"}
    kubectl.apply(*(pod(f"tf-worker-{i}", annotations=annotations) for i in (0, 1)), namespace="vc")
    cluster.eventually(lambda: len(bound(kubectl, "vc")) == 2, what="the gang to start")
    cluster.eventually(
        lambda: status(kubectl, VOLCANO, "tf", "vc").get("running") == 2,
        what="its status to count 2 running",
    )
    written = status(kubectl, VOLCANO, "tf", "vc")
    assert written["phase"] == "Running"
    assert written["conditions"][0]["type"] == "Scheduled"


def test_scheduler_plugins_podgroup_with_min_member_0_holds_its_pods(
    kubectl: cluster.Kubectl,
) -> None:
    namespace(kubectl, "zero")
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "empty"},
        "spec": {"minMember": 0},
    }
    kubectl.apply(group, namespace="zero")
    kubectl.apply(pod("p", labels={"scheduling.x-k8s.io/pod-group": "empty"}), namespace="zero")
    message = cluster.eventually(
        lambda: pod_reason(kubectl, "p", "zero"), what="the pod to say why it waits"
    )
    assert (
        "scheduler-plugins PodGroup empty: minMember is 0: a gang needs at least 1 pod" in message
    )
    assert bound(kubectl, "zero") == []
    assert status(kubectl, SP, "empty", "zero").get("phase") in (None, "Pending")


def test_pod_two_podgroups_claim_waits_and_names_them(kubectl: cluster.Kubectl) -> None:
    namespace(kubectl, "two")
    labels = {"scheduling.berth.io/pod-group": "a", "scheduling.x-k8s.io/pod-group": "b"}
    kubectl.apply(
        {
            "apiVersion": "scheduling.berth.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "a"},
        },
        pod("p", labels=labels),
        namespace="two",
    )
    message = cluster.eventually(
        lambda: pod_reason(kubectl, "p", "two"), what="the pod to say why it waits"
    )
    assert "two PodGroups claim the pod" in message
    assert (
        "scheduling.berth.io/pod-group=a" in message
        and "scheduling.x-k8s.io/pod-group=b" in message
    )
    assert bound(kubectl, "two") == []


def test_the_scheduler_plugins_example_runs_as_its_readme_says(kubectl: cluster.Kubectl) -> None:
    namespace(kubectl, "example")
    example = cluster.ROOT / "examples" / "workloads" / "scheduler-plugins" / "podgroup.yaml"
    kubectl("apply", "-n", "example", "-f", str(example))
    cluster.eventually(lambda: len(bound(kubectl, "example")) == 3, what="the three pods to run")
    cluster.eventually(
        lambda: status(kubectl, SP, "mnist", "example").get("running") == 3,
        what="its status to count 3 running",
    )
    assert kubectl.get(BPG, "mnist", namespace="example")["spec"]["minMember"] == 3


# What a 1.36 API server serves natively (with the WorkloadAPI gates on); the embedded cluster
# gets it as a CRD.
KUBERNETES_CRD = open_crds.crd(
    group="scheduling.k8s.io",
    kind="PodGroup",
    plural="podgroups",
    version="v1alpha2",
    annotations={
        "api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/5832"
    },
)


def test_kubernetes_podgroup_and_scheduling_group_pods_are_a_gang(kubectl: cluster.Kubectl) -> None:
    kubectl("apply", "-f", "-", input=json.dumps(KUBERNETES_CRD))
    namespace(kubectl, "k8s")
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "workers"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    kubectl.apply(group, namespace="k8s")
    first = pod("w-0")
    first["spec"]["schedulingGroup"] = {"podGroupName": "workers"}
    kubectl.apply(first, namespace="k8s")
    mirror = cluster.eventually(lambda: kubectl.items(BPG, namespace="k8s"), what="the mirror")[0]
    assert mirror["spec"]["minMember"] == 2
    cluster.eventually(
        lambda: "waiting for pods: 1/2 created" in pod_reason(kubectl, "w-0", "k8s"),
        what="the pod to wait for the second",
    )
    second = pod("w-1")
    second["spec"]["schedulingGroup"] = {"podGroupName": "workers"}
    kubectl.apply(second, namespace="k8s")
    cluster.eventually(lambda: len(bound(kubectl, "k8s")) == 2, what="the gang to start")


# What a 1.35 API server serves natively (with the GenericWorkload gate on).
WORKLOADS_CRD = open_crds.crd(
    group="scheduling.k8s.io",
    kind="Workload",
    plural="workloads",
    version="v1alpha1",
    annotations={
        "api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/4671"
    },
)


def test_workload_pod_groups_and_replicas_are_gangs(kubectl: cluster.Kubectl) -> None:
    kubectl("apply", "-f", "-", input=json.dumps(WORKLOADS_CRD))
    namespace(kubectl, "wl")
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "train"},
        "spec": {
            "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
            "podGroups": [
                {"name": "workers", "policy": {"gang": {"minCount": 2}}},
                {"name": "shards", "policy": {"gang": {"minCount": 2}}},
            ],
        },
    }
    kubectl.apply(workload, namespace="wl")

    def member(name: str, group: str, key: str | None = None) -> Obj:
        made = pod(name)
        ref = {"name": "train", "podGroup": group}
        if key is not None:
            ref["podGroupReplicaKey"] = key
        made["spec"]["workloadRef"] = ref
        return made

    kubectl.apply(member("w-0", "workers"), namespace="wl")
    cluster.eventually(
        lambda: "waiting for pods: 1/2 created" in pod_reason(kubectl, "w-0", "wl"),
        what="the pod to wait for the second of its pod group",
    )
    mirrors = {g["metadata"]["name"]: g for g in kubectl.items(BPG, namespace="wl")}
    assert mirrors["train-workers"]["spec"]["minMember"] == 2
    assert mirrors["train-workers"]["metadata"]["ownerReferences"][0]["kind"] == "Workload"
    kubectl.apply(member("w-1", "workers"), namespace="wl")
    cluster.eventually(lambda: bound(kubectl, "wl") == ["w-0", "w-1"], what="the gang to start")
    # Replica keys: each key its own gang of the pod group's minCount.
    kubectl.apply(
        member("s0-a", "shards", "0"),
        member("s0-b", "shards", "0"),
        member("s1-a", "shards", "1"),
        namespace="wl",
    )
    cluster.eventually(
        lambda: bound(kubectl, "wl") == ["s0-a", "s0-b", "w-0", "w-1"],
        what="replica 0 to start",
    )
    cluster.eventually(
        lambda: "waiting for pods: 1/2 created" in pod_reason(kubectl, "s1-a", "wl"),
        what="replica 1 to wait for its second pod",
    )
    kubectl.apply(member("s1-b", "shards", "1"), namespace="wl")
    cluster.eventually(lambda: len(bound(kubectl, "wl")) == 6, what="replica 1 to start")
    names = {g["metadata"]["name"] for g in kubectl.items(BPG, namespace="wl")}
    assert names == {"train-workers", "train-shards", "train-shards-0", "train-shards-1"}
    kubectl("delete", "workloads.scheduling.k8s.io", "train", "-n", "wl")
    cluster.eventually(lambda: not kubectl.items(BPG, namespace="wl"), what="the mirrors to go")


@pytest.mark.parametrize(
    ("scheduler", "flavor", "setting"),
    [
        ("volcano", "volcano", "BERTH_INTEROP_VOLCANO_PODS"),
        (
            "scheduler-plugins-scheduler",
            "scheduler-plugins",
            "BERTH_INTEROP_SCHEDULER_PLUGINS_PODS",
        ),
    ],
    ids=["volcano", "scheduler-plugins"],
)
def test_other_schedulers_pods_are_claimed_when_asked(
    tmp_path_factory: pytest.TempPathFactory, scheduler: str, flavor: str, setting: str
) -> None:
    if flavor == "volcano":
        group: Obj = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pair"},
            "spec": {"minMember": 2, "queue": "default"},
        }
        keys: Obj = {"annotations": {"scheduling.k8s.io/group-name": "pair"}}
    else:
        group = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "pair"},
            "spec": {"minMember": 2},
        }
        keys = {"labels": {"scheduling.x-k8s.io/pod-group": "pair"}}
    with cluster.berth_up(
        tmp_path_factory.mktemp("claim"), nodes="1x cpu=4,memory=16Gi", settings={setting: "true"}
    ) as kubectl:
        for path in sorted(FILES.glob("*podgroups.yaml")):
            kubectl("apply", "-f", str(path))
        namespace(kubectl, "moved")
        kubectl.apply(group, namespace="moved")
        kubectl.apply(pod("pair-0", scheduler=scheduler, **keys), namespace="moved")
        cluster.eventually(
            lambda: "waiting for pods: 1/2 created" in pod_reason(kubectl, "pair-0", "moved"),
            what="the lone pod to say it waits for its gang",
        )
        assert bound(kubectl, "moved") == []
        kubectl.apply(pod("pair-1", scheduler=scheduler, **keys), namespace="moved")
        # A plain pod of that scheduler is Berth's as well (placed alone).
        kubectl.apply(pod("alone", scheduler=scheduler), namespace="moved")
        cluster.eventually(
            lambda: bound(kubectl, "moved") == ["alone", "pair-0", "pair-1"],
            what="the gang and the plain pod to start",
        )


def test_other_schedulers_pods_are_left_alone_by_default(kubectl: cluster.Kubectl) -> None:
    namespace(kubectl, "theirs")
    kubectl.apply(pod("vc", scheduler="volcano"), namespace="theirs")
    kubectl.apply(pod("sp", scheduler="scheduler-plugins-scheduler"), namespace="theirs")
    # A pod of Berth's created after them is placed: Berth has seen both and left them.
    kubectl.apply(pod("ours"), namespace="theirs")
    cluster.eventually(lambda: bound(kubectl, "theirs") == ["ours"], what="Berth's pod placed")
    for name in ("vc", "sp"):
        assert pod_reason(kubectl, name, "theirs") == ""
