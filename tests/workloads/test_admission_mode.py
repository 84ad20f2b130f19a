"""Workloads in admission mode: the operator gates, Berth decides, kube-scheduler binds.

The real operator (``berth run --mode admission``'s leader parts) runs against the emulator with
the tests' stand-in for kube-scheduler (:mod:`tests.admission.stack`); pods carry Berth's gate in
their templates (what the webhook would add) and name no scheduler. We test these aspects:

- a Job with parallelism 4, room for 3: Berth derives the group from the Job, no pod is ungated
  or bound and the group says why; with room, all four are admitted and bound together;
- a scheduler-plugins PodGroup with pods labelled as the training operator labels them: admitted
  as a gang, its own status written back;
- a pod naming a queue that does not admit its namespace stays gated, and its group says why;
- a JobSet that starts in stages is a gang per stage, each admitted whole; a Volcano PodGroup
  with its pods annotated as Volcano's operators do is admitted as a gang, its status written;
- a pod of a namespace with a default queue (naming ``default``, as the webhook labels it) is
  counted in that queue;
- with ``interop_volcano_pods``, pods whose ``schedulerName`` is ``volcano`` (no gate: the
  webhook leaves other schedulers' pods alone) are Berth's own: their Volcano PodGroup is a
  gang, Berth binds them itself, and the Volcano status is written back.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import json
import typing

import pytest

from berth.api import keys
from berth.emulator import testing
from berth.operator import main, scheduling, settings
from tests.admission import stack
from tests.workloads import cluster

pytestmark = pytest.mark.timeout(90)

Obj = dict[str, typing.Any]
SP_CRD = cluster.ROOT / "helm" / "berth" / "files" / "scheduler-plugins-podgroups.yaml"
VOLCANO_CRD = cluster.ROOT / "helm" / "berth" / "files" / "volcano-podgroups.yaml"


def gated_pod(name: str, *, cpu: str = "1", labels: dict[str, str] | None = None) -> Obj:
    body = stack.pod(name, cpu=cpu, labels=labels)
    return {"apiVersion": "v1", "kind": "Pod", **body}


def bound(emulator: testing.RunningEmulator, *names: str) -> bool:
    pods = {p["metadata"]["name"]: p for p in stack.all_pods(emulator)}
    return all(bool((pods.get(n) or {}).get("spec", {}).get("nodeName")) for n in names)


def group_condition(emulator: testing.RunningEmulator, name: str) -> Obj | None:
    found = emulator.call(emulator.api.storage.get, (keys.GROUP, "podgroups"), "default", name)
    for condition in ((found or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Scheduled":  # beside it, ScaleUp says what autoscalers do
            return typing.cast(Obj, condition)
    return None


@contextlib.asynccontextmanager
async def operator(
    emulator: testing.RunningEmulator, **extra: typing.Any
) -> collections.abc.AsyncIterator[None]:
    config = settings.Settings(
        **extra,
        kubeconfig=emulator.kubeconfig,
        mode=settings.Mode.ADMISSION,
        admission={"webhook": False, "bind_timeout": 10.0},
        http_host="127.0.0.1",
        http_port=0,
        log_level="warning",
        leader_election={"enabled": False},
    )
    stop = asyncio.Event()
    task = asyncio.create_task(
        main.run(config, stop=stop, leader_components=scheduling.leader_components)
    )
    try:
        async with stack.stand_in(emulator):
            yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def test_job_gang_in_admission_mode(emulator: testing.RunningEmulator) -> None:
    stack.install_crds(emulator)
    emulator.kubectl("apply", "-f", str(SP_CRD))
    emulator.start_kubelets(["1x cpu=4,memory=16Gi"], speedup=100, start_delay=0)
    async with operator(emulator):
        # kube-scheduler places a pod that is not Berth's: room for three one-CPU pods is left.
        blocker = gated_pod("blocker")
        blocker["spec"].pop("schedulingGates")
        stack.create(emulator, "v1", "pods", blocker)
        await stack.eventually(lambda: bound(emulator, "blocker"), what="the blocker bound")
        job = stack.create(
            emulator,
            "batch/v1",
            "jobs",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "train"},
                "spec": {"parallelism": 4, "completions": 4, "template": {"spec": {}}},
            },
        )
        owner = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "train",
            "uid": job["metadata"]["uid"],
            "controller": True,
        }
        names = [f"train-{i}" for i in range(4)]
        for name in names:
            body = gated_pod(name)
            body["metadata"]["ownerReferences"] = [owner]
            stack.create(emulator, "v1", "pods", body)

        def derived() -> str | None:
            pod = stack.get_pod(emulator, "train-0") or {}
            return typing.cast(
                str | None, pod["metadata"].get("labels", {}).get(keys.POD_GROUP_LABEL)
            )

        await stack.eventually(lambda: derived() is not None, what="the group derived")
        group = derived()
        assert group is not None

        def waits() -> bool:
            condition = group_condition(emulator, group) or {}
            return condition.get("reason") == "NotEnoughResources"

        await stack.eventually(waits, what="the group to say why it waits")
        assert "only 3 could be placed" in str((group_condition(emulator, group) or {})["message"])
        for name in names:
            pod = stack.get_pod(emulator, name)
            assert pod is not None and stack.gates(pod) == [keys.ADMISSION_GATE]
            assert not pod["spec"].get("nodeName")

        emulator.call(
            emulator.api.delete,
            emulator.api.resource("v1", "pods"),
            namespace="default",
            name="blocker",
        )
        await stack.eventually(lambda: bound(emulator, *names), what="all four admitted and bound")

        # A scheduler-plugins PodGroup, honoured in admission mode too.
        stack.create(
            emulator,
            "scheduling.x-k8s.io/v1alpha1",
            "podgroups",
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "pair"},
                "spec": {"minMember": 2},
            },
        )
        emulator.call(
            emulator.api.delete,
            emulator.api.resource("batch/v1", "jobs"),
            namespace="default",
            name="train",
        )
        await stack.eventually(
            lambda: not stack.get_pod(emulator, "train-0"), what="the Job's pods gone"
        )
        for name in ("pair-0", "pair-1"):
            labels = {keys.INTEROP_POD_GROUP_LABEL: "pair"}
            stack.create(emulator, "v1", "pods", gated_pod(name, cpu="500m", labels=labels))
        await stack.eventually(lambda: bound(emulator, "pair-0", "pair-1"), what="the pair bound")

        def written() -> bool:
            found = emulator.call(
                emulator.api.storage.get, ("scheduling.x-k8s.io", "podgroups"), "default", "pair"
            )
            status = (found or {}).get("status") or {}
            return status.get("phase") in ("Scheduling", "Running")

        await stack.eventually(written, what="the scheduler-plugins status written back")


async def test_forbidden_queue_stays_gated_in_admission_mode(
    emulator: testing.RunningEmulator,
) -> None:
    stack.install_crds(emulator)
    emulator.start_kubelets(["1x cpu=4,memory=16Gi"], speedup=100, start_delay=0)
    stack.create(
        emulator,
        keys.API_VERSION,
        "queues",
        {
            "apiVersion": keys.API_VERSION,
            "kind": "Queue",
            "metadata": {"name": "team-a"},
            "spec": {"namespaceSelector": {"matchLabels": {"team": "a"}}},
        },
    )
    async with operator(emulator):
        stack.create(
            emulator, "v1", "pods", gated_pod("sneaky", labels={keys.QUEUE_LABEL: "team-a"})
        )
        await asyncio.sleep(0)  # let the informers see it

        def explained() -> bool:
            for event in emulator.call(
                emulator.api.list, emulator.api.resource("v1", "events"), namespace="default"
            ).items:
                if "does not admit namespace default" in str(event.get("message")):
                    return True
            return False

        await stack.eventually(explained, what="an Event saying the queue does not admit it")
        pod = stack.get_pod(emulator, "sneaky")
        assert pod is not None and stack.gates(pod) == [keys.ADMISSION_GATE]


async def test_volcano_pods_are_claimed_in_admission_mode(
    emulator: testing.RunningEmulator,
) -> None:
    stack.install_crds(emulator)
    emulator.kubectl("apply", "-f", str(VOLCANO_CRD))
    emulator.start_kubelets(["1x cpu=4,memory=16Gi"], speedup=100, start_delay=0)
    async with operator(emulator, interop_volcano_pods=True):
        stack.create(
            emulator,
            "scheduling.volcano.sh/v1beta1",
            "podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "vc"},
                "spec": {"minMember": 2},
            },
        )

        def volcano_pod(name: str) -> Obj:
            body = gated_pod(name, cpu="500m")
            body["spec"].pop("schedulingGates")
            body["spec"]["schedulerName"] = "volcano"
            body["metadata"]["annotations"] = {keys.INTEROP_POD_GROUP_ANNOTATION: "vc"}
            return body

        stack.create(emulator, "v1", "pods", volcano_pod("vc-0"))

        def says_it_waits() -> bool:
            pod = stack.get_pod(emulator, "vc-0") or {}
            conditions = (pod.get("status") or {}).get("conditions") or []
            return any("waiting for pods: 1/2" in str(c.get("message")) for c in conditions)

        await stack.eventually(says_it_waits, what="the lone pod to say it waits for the gang")
        assert not bound(emulator, "vc-0")
        stack.create(emulator, "v1", "pods", volcano_pod("vc-1"))
        await stack.eventually(lambda: bound(emulator, "vc-0", "vc-1"), what="the gang bound")

        def written() -> bool:
            found = emulator.call(
                emulator.api.storage.get, ("scheduling.volcano.sh", "podgroups"), "default", "vc"
            )
            return ((found or {}).get("status") or {}).get("phase") == "Running"

        await stack.eventually(written, what="the Volcano status written back")


def owner_ref(obj: Obj) -> Obj:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }


async def test_staged_jobset_and_volcano_group_in_admission_mode(
    emulator: testing.RunningEmulator,
) -> None:
    stack.install_crds(emulator)
    emulator.kubectl("apply", "-f", str(cluster.CRDS / "jobset.yaml"))
    emulator.kubectl("apply", "-f", str(VOLCANO_CRD))
    emulator.start_kubelets(["2x cpu=4,memory=16Gi"], speedup=100, start_delay=0)
    async with operator(emulator):
        # A JobSet whose workers start once its initializer is ready: a gang per stage.
        rjob = "jobset.sigs.k8s.io/replicatedjob-name"
        template = {"spec": {"parallelism": 1, "template": {"spec": {}}}}
        jobset = stack.create(
            emulator,
            "jobset.x-k8s.io/v1alpha2",
            "jobsets",
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {"name": "staged"},
                "spec": {
                    "replicatedJobs": [
                        {"name": "init", "template": template},
                        {
                            "name": "node",
                            "dependsOn": [{"name": "init", "status": "Ready"}],
                            "template": {"spec": {"parallelism": 2, "template": {"spec": {}}}},
                        },
                    ]
                },
            },
        )

        def job(name: str, stage: str) -> Obj:
            body = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": name,
                    "labels": {rjob: stage},
                    "ownerReferences": [owner_ref(jobset)],
                },
                "spec": {"template": {"spec": {}}},
            }
            return stack.create(emulator, "batch/v1", "jobs", body)

        def job_pod(owner: Obj, name: str) -> Obj:
            stage = owner["metadata"]["labels"][rjob]
            body = gated_pod(name, cpu="500m", labels={rjob: stage})
            body["metadata"]["ownerReferences"] = [owner_ref(owner)]
            return stack.create(emulator, "v1", "pods", body)

        init, node_job = job("staged-init-0", "init"), job("staged-node-0", "node")
        job_pod(init, "init-0")
        job_pod(node_job, "node-0")
        await stack.eventually(lambda: bound(emulator, "init-0"), what="the first stage bound")
        node = stack.get_pod(emulator, "node-0")
        assert node is not None and stack.gates(node) == [keys.ADMISSION_GATE]
        groups = emulator.call(emulator.api.storage.list, (keys.GROUP, "podgroups"), "default")
        sizes = {g["metadata"]["name"]: g["spec"]["minMember"] for g in groups}
        assert sorted(sizes.values()) == [1, 2], sizes
        assert any("-node-" in name for name in sizes)
        job_pod(node_job, "node-1")
        await stack.eventually(
            lambda: bound(emulator, "node-0", "node-1"), what="the second stage bound whole"
        )

        # A Volcano PodGroup, its pods annotated as Volcano's operators do (gated by the webhook).
        stack.create(
            emulator,
            "scheduling.volcano.sh/v1beta1",
            "podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "vc"},
                "spec": {"minMember": 2},
            },
        )
        for name in ("vc-0", "vc-1"):
            body = gated_pod(name, cpu="500m")
            body["metadata"]["annotations"] = {keys.INTEROP_POD_GROUP_ANNOTATION: "vc"}
            stack.create(emulator, "v1", "pods", body)
        await stack.eventually(lambda: bound(emulator, "vc-0", "vc-1"), what="the Volcano gang")

        def volcano_running() -> bool:
            found = emulator.call(
                emulator.api.storage.get, ("scheduling.volcano.sh", "podgroups"), "default", "vc"
            )
            return ((found or {}).get("status") or {}).get("phase") == "Running"

        await stack.eventually(volcano_running, what="the Volcano status written back")


async def test_namespace_default_queue_in_admission_mode(
    emulator: testing.RunningEmulator,
) -> None:
    stack.install_crds(emulator)
    emulator.start_kubelets(["1x cpu=4,memory=16Gi"], speedup=100, start_delay=0)
    queue = {"apiVersion": keys.API_VERSION, "kind": "Queue", "metadata": {"name": "team-ml"}}
    stack.create(emulator, keys.API_VERSION, "queues", queue)
    # The stand-in kube-scheduler binds in "default": that namespace names its queue.
    patch = {"metadata": {"labels": {keys.NAMESPACE_QUEUE_LABEL: "team-ml"}}}
    emulator.kubectl("patch", "namespace", "default", "--type=merge", "-p", json.dumps(patch))
    async with operator(emulator):
        # The webhook gives a pod of an opted-in namespace the queue label "default".
        body = gated_pod("q", cpu="500m", labels={keys.QUEUE_LABEL: "default"})
        stack.create(emulator, "v1", "pods", body)
        await stack.eventually(lambda: bound(emulator, "q"), what="the pod admitted and bound")

        def counted() -> bool:
            found = emulator.call(emulator.api.storage.get, (keys.GROUP, "queues"), "", "team-ml")
            return ((found or {}).get("status") or {}).get("allocated", {}).get("cpu") == "500m"

        await stack.eventually(counted, what="the namespace's queue to count the pod")
