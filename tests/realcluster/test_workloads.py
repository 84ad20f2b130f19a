"""Workloads users submit, on the real control plane: batch/v1 Jobs.

We test these aspects:
- the real Job controller creates the pods of a Job whose template names Berth's scheduler;
  Berth binds them, KWOK runs them to completion, and the Job completes;
- a Job of parallelism 4 (also Indexed, also in admission mode) is one gang: with room for 3
  none of its pods starts and the PodGroup Berth derived (minMember 4, owned by the Job) says
  it waits; with room for the fourth all four run; deleting the Job lets the real garbage
  collector delete the group;
- in admission mode, a scheduler-plugins or Volcano PodGroup's pods, keyed only by that
  scheduler's label or annotation and naming no scheduler, are gated by the chart's webhook:
  one alone waits (kube-scheduler does not start it), both run once the gang is whole;
- in admission mode with the chart value ``admission.namespaces=all`` (``helm upgrade``), a
  Job of 5 with no labels, in a namespace no one labelled, is gated whole: with room for 4 none
  of its pods starts, with room for the fifth all five run; a namespace labelled
  ``scheduling.berth.io/admission=disabled`` keeps its plain pods ungated.
"""

from __future__ import annotations

import asyncio
import typing

import pytest

from berth.api import keys
from berth.emulator import kubelets
from berth.realcluster import install, nodes, processes
from tests.realcluster import cluster, pods

pytestmark = pytest.mark.realcluster


def test_a_job_created_by_the_user_is_scheduled_by_berth(real: cluster.RealCluster) -> None:
    real.berth()
    namespace = real.namespace()
    pod = pods.pod("unused", cpu="1", queue="default", duration="2s")
    template = {"metadata": {"labels": pod["metadata"]["labels"],
                             "annotations": pod["metadata"]["annotations"]},
                "spec": pod["spec"]}  # fmt: skip
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "crunch"},
        "spec": {"parallelism": 3, "completions": 3, "backoffLimit": 0, "template": template},
    }
    real.create(job, namespace=namespace)
    real.kubectl(
        "wait",
        "-n",
        namespace,
        "job/crunch",
        "--for=condition=Complete",
        f"--timeout={cluster.WAIT}",
    )
    created = real.pods(namespace)
    assert len(created) == 3
    assert all(p["spec"]["schedulerName"] == keys.DEFAULT_SCHEDULER_NAME for p in created)
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "Job" for p in created)
    binders = {
        r.name: r.user
        for r in real.audited()
        if r.resource == "pods/binding" and r.succeeded and r.namespace == namespace
    }
    assert binders == {p["metadata"]["name"]: install.USER for p in created}


def _room(real: cluster.RealCluster, name: str, count: int) -> None:
    """``count`` more nodes of 4 cpu labelled ``job-room=NAME`` (each holds one 3-cpu pod)."""
    existing = len(real.json("get", "nodes", "-l", f"job-room={name}")["items"])
    pool = kubelets.parse_pool(f"{existing + count}x cpu=4,memory=16Gi label=job-room={name}"
                               f" name={name}")  # fmt: skip
    real.create(*nodes.node_manifests([pool])[existing:])
    real.kubectl("wait", "--for=condition=Ready", "nodes", "-l", f"job-room={name}",
                 f"--timeout={cluster.WAIT}")  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "indexed"),
    [("scheduler", False), ("scheduler", True), ("admission", False)],
    ids=["scheduler", "scheduler-indexed", "admission"],
)
def test_a_job_starts_as_one_gang_when_all_of_it_fits(
    real: cluster.RealCluster, mode: str, indexed: bool
) -> None:
    real.berth(mode=mode)
    namespace = real.namespace()
    room = f"room-{namespace}"
    _room(real, room, 3)
    pod = pods.pod("unused", cpu="3", queue="default",
                   scheduler=keys.DEFAULT_SCHEDULER_NAME if mode == "scheduler" else None,
                   extra_spec={"nodeSelector": {"job-room": room}})  # fmt: skip
    spec: dict[str, object] = {
        "parallelism": 4,
        "completions": 4,
        "backoffLimit": 0,
        "template": {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]},
    }
    if indexed:
        spec["completionMode"] = "Indexed"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"}, "spec": spec}
    real.create(job, namespace=namespace)

    def group() -> dict[str, typing.Any]:
        groups = real.json("get", "podgroups", "-n", namespace)["items"]
        return groups[0] if groups else {}

    def waiting() -> bool:
        conditions = (group().get("status") or {}).get("conditions") or []
        return any(c["type"] == "Scheduled" and c["status"] == "False" for c in conditions)

    processes.wait_until("the Job's PodGroup waiting", waiting, timeout=90, interval=0.5)
    derived = group()
    assert derived["spec"]["minMember"] == 4
    assert derived["metadata"]["ownerReferences"][0]["kind"] == "Job"
    created = real.pods(namespace)
    assert len(created) == 4 and not [p for p in created if p["spec"].get("nodeName")]

    _room(real, room, 1)
    for member in real.pods(namespace):
        real.wait(f"pod/{member['metadata']['name']}", jsonpath="{.status.phase}",
                  value="Running", namespace=namespace)  # fmt: skip
    real.kubectl("delete", "job", "train", "-n", namespace, "--cascade=background")
    name = derived["metadata"]["name"]  # type: ignore[index]
    real.kubectl(
        "wait", "--for=delete", f"podgroup/{name}", "-n", namespace, f"--timeout={cluster.WAIT}"
    )  # fmt: skip  (the real garbage collector)
    real.kubectl("delete", "nodes", "-l", f"job-room={room}", "--wait=false")


def test_every_namespace_is_gated_with_the_chart_value_and_a_plain_job_starts_whole(
    real: cluster.RealCluster,
) -> None:
    real.berth(mode="admission")
    asyncio.run(install.upgrade(real.plane, real.installation,
                                values={"admission": {"namespaces": "all"}}))  # fmt: skip
    try:
        namespace = real.namespace()
        room = f"room-{namespace}"
        _room(real, room, 4)
        pod = pods.pod("unused", cpu="3", scheduler=None,
                       extra_spec={"nodeSelector": {"job-room": room}})  # fmt: skip
        assert not pod["metadata"]["labels"]
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "unlabelled"},
            "spec": {"parallelism": 5, "completions": 5, "backoffLimit": 0,
                     "template": {"spec": pod["spec"]}},
        }  # fmt: skip
        real.create(job, namespace=namespace)

        def waiting() -> bool:
            groups = real.json("get", "podgroups", "-n", namespace)["items"]
            conditions = [c for g in groups for c in (g.get("status") or {}).get("conditions", [])]
            return any(c["type"] == "Scheduled" and c["status"] == "False" for c in conditions)

        processes.wait_until("the Job's PodGroup waiting", waiting, timeout=90, interval=0.5)
        (group,) = real.json("get", "podgroups", "-n", namespace)["items"]
        assert group["spec"]["minMember"] == 5
        created = real.pods(namespace)
        assert len(created) == 5
        for member in created:
            assert not member["spec"].get("nodeName")
            assert [g["name"] for g in member["spec"]["schedulingGates"]] == [keys.ADMISSION_GATE]
            assert member["metadata"]["labels"][keys.QUEUE_LABEL] == keys.DEFAULT_QUEUE

        _room(real, room, 1)
        for member in created:
            real.wait(f"pod/{member['metadata']['name']}", jsonpath="{.status.phase}",
                      value="Running", namespace=namespace)  # fmt: skip

        # A namespace opted out: its plain pods are kube-scheduler's alone, never gated.
        opted_out = real.namespace()
        real.kubectl("label", "namespace", opted_out, f"{keys.ADMISSION_LABEL}=disabled")
        real.create(pods.pod("alone", scheduler=None), namespace=opted_out)
        alone = real.json("get", "pod", "alone", "-n", opted_out)
        assert not alone["spec"].get("schedulingGates")
        assert keys.QUEUE_LABEL not in (alone["metadata"].get("labels") or {})
        real.kubectl("delete", "job", "unlabelled", "-n", namespace, "--cascade=background")
        real.kubectl("delete", "nodes", "-l", f"job-room={room}", "--wait=false")
    finally:
        asyncio.run(install.upgrade(real.plane, real.installation, values={}))


@pytest.mark.parametrize("flavor", ["scheduler-plugins", "volcano"])
def test_other_schedulers_gang_is_gated_in_admission_mode(
    real: cluster.RealCluster, flavor: str
) -> None:
    """The chart's webhook gates pods keyed only by the other scheduler's label or annotation
    (a matchConditions expression for Volcano's), so kube-scheduler does not start one alone."""
    real.berth(mode="admission")
    namespace = real.namespace()
    crd = install.CHART / "files" / f"{flavor}-podgroups.yaml"
    real.kubectl("apply", "-f", str(crd))
    group = "scheduling.x-k8s.io" if flavor == "scheduler-plugins" else "scheduling.volcano.sh"
    version = "v1alpha1" if flavor == "scheduler-plugins" else "v1beta1"
    real.kubectl("wait", "--for=condition=Established", f"crd/podgroups.{group}",
                 f"--timeout={cluster.WAIT}")  # fmt: skip
    original = {"apiVersion": f"{group}/{version}", "kind": "PodGroup",
                "metadata": {"name": "pair"}, "spec": {"minMember": 2}}  # fmt: skip
    real.create(original, namespace=namespace)

    def member(name: str) -> dict[str, typing.Any]:
        made = pods.pod(name, cpu="100m", scheduler=None)
        if flavor == "scheduler-plugins":
            made["metadata"]["labels"][keys.INTEROP_POD_GROUP_LABEL] = "pair"
        else:
            made["metadata"]["annotations"] = {keys.INTEROP_POD_GROUP_ANNOTATION: "pair"}
        return made

    real.create(member("pair-0"), namespace=namespace)

    def mirror_waits() -> bool:
        found = real.json("get", "podgroups.scheduling.berth.io", "-n", namespace)["items"]
        conditions = [c for g in found for c in (g.get("status") or {}).get("conditions") or []]
        return any(c["type"] == "Scheduled" and c["status"] == "False" for c in conditions)

    processes.wait_until("the gang to wait for its second pod", mirror_waits, timeout=90,
                         interval=0.5)  # fmt: skip
    (alone,) = real.pods(namespace)
    assert not alone["spec"].get("nodeName")
    assert keys.ADMISSION_GATE in [g["name"] for g in alone["spec"].get("schedulingGates") or []]
    real.create(member("pair-1"), namespace=namespace)
    for name in ("pair-0", "pair-1"):
        real.wait(f"pod/{name}", jsonpath="{.status.phase}", value="Running",
                  namespace=namespace)  # fmt: skip
