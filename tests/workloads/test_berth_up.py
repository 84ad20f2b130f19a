"""Workloads through ``berth up`` and the real kubectl: groups Berth derives from owners.

The embedded cluster has no workload controllers, so the tests create what the controllers
would — the owner objects (through minimal CRDs, ``examples/workloads/crds/``), the objects in
between (a JobSet's Jobs, a LeaderWorkerSet's StatefulSets...) and the pods with the
ownerReferences and labels their controllers give them. We test these aspects:

- a ``batch/v1`` Job with parallelism 4 (and an Indexed one): with room for 3, no pod starts and
  its PodGroup says why; with room for 4, all start together; deleting the Job deletes its group;
- every other kind (JobSet, TrainJob, PyTorchJob, TFJob, XGBoostJob, PaddleJob, MPIJob,
  RayCluster, RayJob, SparkApplication, LeaderWorkerSet): the group has the minMember its owner's
  spec says, no pod starts while the gang is short of a pod, all start once it is whole, and the
  group is deleted with its owner;
- a JobSet whose replicated Jobs start in stages (``dependsOn``): a gang per stage, each
  whole or not at all, all deleted with the JobSet;
- labels on the owner: ``group-by-owner: disabled`` makes each pod a group of one,
  ``pod-group`` puts the pods in the PodGroup it names, ``queue`` sets the derived group's queue;
- a pod whose owner does not exist, or is of a version Berth does not read, waits and says so;
- ``berth up --mode admission --admission-namespaces all``: a Job of 5 naming no scheduler and
  carrying no label, with room for 4, is gated whole (none starts); with room all five start; a
  namespace labelled ``scheduling.berth.io/admission=disabled`` keeps its plain pods ungated.
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import json
import pathlib
import typing

import pytest

from tests.workloads import cluster

pytestmark = pytest.mark.slow

Obj = dict[str, typing.Any]
SCHEDULER = "berth-scheduler"


def meta(name: str, **extra: typing.Any) -> Obj:
    return {"name": name, **extra}


def ref(owner: Obj) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod(
    name: str,
    owner: Obj | None,
    *,
    cpu: str = "100m",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    metadata: Obj = meta(name, labels=labels or {}, annotations=annotations or {})
    if owner is not None:
        metadata["ownerReferences"] = [ref(owner)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "schedulerName": SCHEDULER,
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def owned(obj: Obj, owner: Obj) -> Obj:
    return {**obj, "metadata": {**obj["metadata"], "ownerReferences": [ref(owner)]}}


TEMPLATE = {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}


class Namespace:
    """One test's namespace: creates objects with kubectl and reads them back (UIDs)."""

    def __init__(self, kubectl: cluster.Kubectl, name: str) -> None:
        self.kubectl = kubectl
        self.name = name
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        kubectl("apply", "-f", "-", input=json.dumps(namespace))

    def create(self, obj: Obj) -> Obj:
        self.kubectl.apply(obj, namespace=self.name)
        kind = obj["kind"].lower()
        group = obj["apiVersion"].rpartition("/")[0]
        resource = f"{kind}.{group}" if group else kind
        return self.kubectl.get(resource, obj["metadata"]["name"], namespace=self.name)

    def pods(self) -> list[Obj]:
        return self.kubectl.items("pods", namespace=self.name)

    def groups(self) -> list[Obj]:
        return self.kubectl.items("podgroups.scheduling.berth.io", namespace=self.name)

    def bound(self) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.pods() if p["spec"].get("nodeName"))


def scheduled_condition(group: Obj) -> Obj:
    """The group's ``Scheduled`` condition (conditions are sorted by type: ``ScaleUp`` may come
    first)."""
    (condition,) = [c for c in group["status"]["conditions"] if c["type"] == "Scheduled"]
    return typing.cast(Obj, condition)


def job_pods(job: Obj, count: int, *, cpu: str, indexed: bool = False) -> list[Obj]:
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    out = []
    for i in range(count):
        labels = {"batch.kubernetes.io/job-name": name, "batch.kubernetes.io/controller-uid": uid}
        annotations = {"batch.kubernetes.io/job-completion-index": str(i)} if indexed else {}
        out.append(pod(f"{name}-{i}", job, cpu=cpu, labels=labels, annotations=annotations))
    return out


def job_object(name: str, *, parallelism: int, indexed: bool = False) -> Obj:
    spec: Obj = {"parallelism": parallelism, "completions": parallelism, "template": TEMPLATE}
    if indexed:
        spec["completionMode"] = "Indexed"
    spec["template"] = {
        "spec": {
            "schedulerName": SCHEDULER,
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}],
        }
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(name), "spec": spec}


@pytest.mark.parametrize("indexed", [False, True], ids=["job", "indexed-job"])
def test_job_with_parallelism_4_starts_whole_or_not_at_all(
    tmp_path: pathlib.Path, indexed: bool
) -> None:
    with cluster.berth_up(tmp_path, nodes="2x cpu=2,memory=8Gi") as kubectl:
        ns = Namespace(kubectl, "team")
        ns.create(pod("blocker", None, cpu="1"))  # leaves room for 3 one-CPU pods
        cluster.eventually(lambda: ns.bound() == ["blocker"], what="the blocker to run")
        job = ns.create(job_object("train", parallelism=4, indexed=indexed))
        kubectl.apply(*job_pods(job, 4, cpu="1", indexed=indexed), namespace="team")

        def waiting_group() -> Obj | None:
            for group in ns.groups():
                for condition in (group.get("status") or {}).get("conditions") or []:
                    if condition["reason"] == "NotEnoughResources":
                        return typing.cast(Obj, group)
            return None

        group = cluster.eventually(waiting_group, what="the Job's group to say why it waits")
        assert group["spec"]["minMember"] == 4
        assert group["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        message = scheduled_condition(group)["message"]
        assert "gang needs minMember 4, only 3 could be placed" in message
        assert ns.bound() == ["blocker"]
        table = kubectl("get", "bpg", "-n", "team")
        assert "NotEnoughResources" in table and group["metadata"]["name"] in table

        kubectl("delete", "pod", "blocker", "-n", "team")
        names = [f"train-{i}" for i in range(4)]
        cluster.eventually(lambda: ns.bound() == names, what="all four pods to start")
        kubectl("delete", "job", "train", "-n", "team")
        cluster.eventually(lambda: not ns.groups(), what="the group to go with its Job")


def test_pod_of_a_deleted_owner_waits_and_says_so(tmp_path: pathlib.Path) -> None:
    with cluster.berth_up(tmp_path, nodes="1x cpu=2,memory=8Gi") as kubectl:
        ns = Namespace(kubectl, "team")
        ghost = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "gone", "uid": "0000-gone"},
        }
        ns.create(pod("orphan", ghost))

        def reason() -> str | None:
            found = kubectl.get("pod", "orphan", namespace="team")
            for condition in found["status"].get("conditions") or []:
                if condition["type"] == "PodScheduled" and "does not exist" in condition.get(
                    "message", ""
                ):
                    return str(condition["message"])
            return None

        message = cluster.eventually(reason, what="the pod to say its owner is gone")
        assert "its owner batch/v1 Job gone (uid 0000-gone) does not exist" in message
        # An owner of a known kind in a version Berth does not read: the pod waits, saying so.
        future = {
            "apiVersion": "kubeflow.org/v2",
            "kind": "PyTorchJob",
            "metadata": {"name": "next", "uid": "0000-next"},
        }
        ns.create(pod("ahead", future))

        def version_reason() -> str:
            found = kubectl.get("pod", "ahead", namespace="team")
            conditions = found["status"].get("conditions") or []
            return " ".join(str(c.get("message", "")) for c in conditions)

        cluster.eventually(
            lambda: (
                "its owner kubeflow.org/v2 PyTorchJob next is of a version Berth cannot read "
                "(it reads PyTorchJob as kubeflow.org/v1)" in version_reason()
            ),
            what="the pod to say its owner's version is unknown",
        )
        assert not ns.bound()


@dataclasses.dataclass
class Scenario:
    """A workload as its operator lays it out: ``build(ns)`` creates the owners and returns
    the top owner's ``kind/name`` for kubectl, the pods (the last one completes the gang) and
    the expected minMember of each group."""

    build: collections.abc.Callable[[Namespace], tuple[str, list[Obj], list[int]]]
    owner_kind: str


def _jobset(ns: Namespace) -> tuple[str, list[Obj], list[int]]:
    rjobs = [
        {
            "name": "driver",
            "replicas": 1,
            "template": {"spec": {"parallelism": 1, "template": TEMPLATE}},
        },
        {
            "name": "workers",
            "replicas": 2,
            "template": {"spec": {"parallelism": 2, "template": TEMPLATE}},
        },
    ]
    js = ns.create(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": meta("js"),
            "spec": {"replicatedJobs": rjobs},
        }
    )
    pods: list[Obj] = []
    for rjob, index, parallelism in (("driver", 0, 1), ("workers", 0, 2), ("workers", 1, 2)):
        job = ns.create(owned(job_object(f"js-{rjob}-{index}", parallelism=parallelism), js))
        pods += job_pods(job, parallelism, cpu="100m")
    return "jobset.jobset.x-k8s.io/js", pods, [5]


def _jobset_stages(ns: Namespace) -> tuple[str, list[Obj], list[int]]:
    """A JobSet whose workers start once its initializer is ready: two stages, two gangs."""
    rjobs = [
        {"name": "init", "template": {"spec": {"parallelism": 2, "template": TEMPLATE}}},
        {
            "name": "node",
            "replicas": 2,
            "dependsOn": [{"name": "init", "status": "Ready"}],
            "template": {"spec": {"parallelism": 2, "template": TEMPLATE}},
        },
    ]
    js = ns.create(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": meta("staged"),
            "spec": {"replicatedJobs": rjobs},
        }
    )
    pods: list[Obj] = []
    for rjob, index in (("init", 0), ("node", 0), ("node", 1)):
        labels = {"jobset.sigs.k8s.io/replicatedjob-name": rjob}
        made_job = job_object(f"staged-{rjob}-{index}", parallelism=2)
        made_job["metadata"]["labels"] = labels
        job = ns.create(owned(made_job, js))
        for made in job_pods(job, 2, cpu="100m"):
            made["metadata"]["labels"].update(labels)
            pods.append(made)
    return "jobset.jobset.x-k8s.io/staged", pods, [2, 4]


def _trainjob(ns: Namespace) -> tuple[str, list[Obj], list[int]]:
    tj = ns.create(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": meta("tj"),
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        }
    )
    rjobs = [
        {
            "name": "node",
            "replicas": 1,
            "template": {"spec": {"parallelism": 3, "completions": 3, "template": TEMPLATE}},
        }
    ]
    js = ns.create(
        owned(
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": meta("tj"),
                "spec": {"replicatedJobs": rjobs},
            },
            tj,
        )
    )
    job = ns.create(owned(job_object("tj-node-0", parallelism=3), js))
    return "trainjob.trainer.kubeflow.org/tj", job_pods(job, 3, cpu="100m"), [3]


def _kubeflow(
    kind: str, replicas: dict[str, int]
) -> collections.abc.Callable[[Namespace], tuple[str, list[Obj], list[int]]]:
    field = {
        "PyTorchJob": "pytorchReplicaSpecs",
        "TFJob": "tfReplicaSpecs",
        "XGBoostJob": "xgbReplicaSpecs",
        "PaddleJob": "paddleReplicaSpecs",
    }[kind]

    def build(ns: Namespace) -> tuple[str, list[Obj], list[int]]:
        spec = {
            field: {rtype: {"replicas": n, "template": TEMPLATE} for rtype, n in replicas.items()}
        }
        job = ns.create(
            {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": meta("kf"), "spec": spec}
        )
        pods = [
            pod(
                f"kf-{rtype.lower()}-{i}",
                job,
                labels={
                    "training.kubeflow.org/job-name": "kf",
                    "training.kubeflow.org/replica-type": rtype.lower(),
                    "training.kubeflow.org/replica-index": str(i),
                },
            )
            for rtype, n in replicas.items()
            for i in range(n)
        ]
        return f"{kind.lower()}.kubeflow.org/kf", pods, [sum(replicas.values())]

    return build


def _mpijob(ns: Namespace) -> tuple[str, list[Obj], list[int]]:
    spec = {
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": TEMPLATE},
            "Worker": {"replicas": 2, "template": TEMPLATE},
        }
    }
    mpi = ns.create(
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": meta("mpi"),
            "spec": spec,
        }
    )
    launcher = ns.create(owned(job_object("mpi-launcher", parallelism=1), mpi))
    role = "training.kubeflow.org/job-role"
    pods = [pod(f"mpi-worker-{i}", mpi, labels={role: "worker"}) for i in range(2)]
    pods += [pod("mpi-launcher-x", launcher, labels={role: "launcher"})]
    return "mpijob.kubeflow.org/mpi", pods, [3]


def _ray_spec(workers: int) -> Obj:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": TEMPLATE},
        "workerGroupSpecs": [
            {
                "groupName": "w",
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": 8,
                "rayStartParams": {},
                "template": TEMPLATE,
            }
        ],
    }


def _ray_pods(cluster_obj: Obj, workers: int) -> list[Obj]:
    name = cluster_obj["metadata"]["name"]
    pods = [
        pod(
            f"{name}-head", cluster_obj, labels={"ray.io/cluster": name, "ray.io/node-type": "head"}
        )
    ]
    pods += [
        pod(
            f"{name}-w-{i}",
            cluster_obj,
            labels={"ray.io/cluster": name, "ray.io/node-type": "worker", "ray.io/group": "w"},
        )
        for i in range(workers)
    ]
    return pods


def _raycluster(ns: Namespace) -> tuple[str, list[Obj], list[int]]:
    rc = ns.create(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": meta("rc"),
            "spec": _ray_spec(2),
        }
    )
    return "raycluster.ray.io/rc", _ray_pods(rc, 2), [3]


def _rayjob(ns: Namespace) -> tuple[str, list[Obj], list[int]]:
    rj = ns.create(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": meta("rj"),
            "spec": {"entrypoint": "python run.py", "rayClusterSpec": _ray_spec(1)},
        }
    )
    rc = ns.create(
        owned(
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "metadata": meta("rj-raycluster-abcde"),
                "spec": _ray_spec(1),
            },
            rj,
        )
    )
    # The submitter (a Job's pod) comes once the cluster runs: it is not counted in the gang.
    ns.create(owned(job_object("rj", parallelism=1), rj))
    return "rayjob.ray.io/rj", _ray_pods(rc, 1), [2]


def _spark(ns: Namespace) -> tuple[str, list[Obj], list[int]]:
    spec = {
        "type": "Python",
        "mode": "cluster",
        "driver": {"cores": 1, "memory": "512m"},
        "executor": {"cores": 1, "memory": "512m", "instances": 2},
    }
    app = ns.create(
        {
            "apiVersion": "sparkoperator.k8s.io/v1beta2",
            "kind": "SparkApplication",
            "metadata": meta("pi"),
            "spec": spec,
        }
    )
    driver = ns.create(
        pod("pi-driver", app, labels={"spark-role": "driver", "spark-app-name": "pi"})
    )
    executors = [
        pod(f"pi-exec-{i}", driver, labels={"spark-role": "executor", "spark-app-name": "pi"})
        for i in (1, 2)
    ]
    return "sparkapplication.sparkoperator.k8s.io/pi", executors, [1]


def _lws(ns: Namespace) -> tuple[str, list[Obj], list[int]]:
    lws = ns.create(
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": meta("lws"),
            "spec": {
                "replicas": 2,
                "leaderWorkerTemplate": {"size": 2, "workerTemplate": TEMPLATE},
            },
        }
    )
    leaders = ns.create(
        owned(
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": meta("lws"),
                "spec": {
                    "selector": {"matchLabels": {"app": "lws"}},
                    "serviceName": "lws",
                    "template": {"metadata": {"labels": {"app": "lws"}}, "spec": TEMPLATE["spec"]},
                },
            },
            lws,
        )
    )
    index = "leaderworkerset.sigs.k8s.io/group-index"
    pods: list[Obj] = []
    for i in (0, 1):
        leader = ns.create(
            pod(
                f"lws-{i}",
                leaders,
                labels={index: str(i), "leaderworkerset.sigs.k8s.io/worker-index": "0"},
            )
        )
        workers = ns.create(
            owned(
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "metadata": meta(f"lws-{i}"),
                    "spec": {
                        "selector": {"matchLabels": {"app": f"lws-{i}"}},
                        "serviceName": "lws",
                        "template": {
                            "metadata": {"labels": {"app": f"lws-{i}"}},
                            "spec": TEMPLATE["spec"],
                        },
                    },
                },
                leader,
            )
        )
        pods.append(
            pod(
                f"lws-{i}-1",
                workers,
                labels={index: str(i), "leaderworkerset.sigs.k8s.io/worker-index": "1"},
            )
        )
    return "leaderworkerset.leaderworkerset.x-k8s.io/lws", pods, [2, 2]


SCENARIOS = {
    "jobset": Scenario(_jobset, "JobSet"),
    "jobset-stages": Scenario(_jobset_stages, "JobSet"),
    "trainjob": Scenario(_trainjob, "JobSet"),
    "pytorchjob": Scenario(_kubeflow("PyTorchJob", {"Master": 1, "Worker": 2}), "PyTorchJob"),
    "tfjob": Scenario(_kubeflow("TFJob", {"PS": 1, "Worker": 2}), "TFJob"),
    "xgboostjob": Scenario(_kubeflow("XGBoostJob", {"Master": 1, "Worker": 1}), "XGBoostJob"),
    "paddlejob": Scenario(_kubeflow("PaddleJob", {"Worker": 3}), "PaddleJob"),
    "mpijob": Scenario(_mpijob, "MPIJob"),
    "raycluster": Scenario(_raycluster, "RayCluster"),
    "rayjob": Scenario(_rayjob, "RayJob"),
    "sparkapplication": Scenario(_spark, "SparkApplication"),
    "leaderworkerset": Scenario(_lws, "LeaderWorkerSet"),
}


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> collections.abc.Iterator[cluster.Kubectl]:
    with cluster.berth_up(tmp_path_factory.mktemp("up"), nodes="2x cpu=4,memory=16Gi") as kubectl:
        for path in sorted(cluster.CRDS.glob("*.yaml")):
            kubectl("apply", "-f", str(path))
        yield kubectl


@pytest.mark.parametrize("name", list(SCENARIOS), ids=list(SCENARIOS))
def test_group_derived_from_the_owner(kubectl: cluster.Kubectl, name: str) -> None:
    scenario = SCENARIOS[name]
    ns = Namespace(kubectl, name)
    top, pods, sizes = scenario.build(ns)
    already = ns.bound()  # a Spark driver runs before its executors exist
    *first, last = pods
    kubectl.apply(*first, namespace=name)
    groups = cluster.eventually(
        lambda: len(ns.groups()) == len(sizes) and ns.groups(), what="the derived groups"
    )
    assert sorted(g["spec"]["minMember"] for g in groups) == sorted(sizes)
    assert {g["metadata"]["ownerReferences"][0]["kind"] for g in groups} == {scenario.owner_kind}
    if min(sizes) > 1:
        # One pod short of the gang: nothing starts.
        cluster.eventually(
            lambda: all(
                p["metadata"].get("labels", {}).get("scheduling.berth.io/pod-group")
                for p in ns.pods()
                if p["metadata"]["name"] not in already
            ),
            what="every pod grouped",
        )
        # A group with a pod missing starts none (a complete one, another LWS replica, may).
        label = "scheduling.berth.io/pod-group"
        members = collections.Counter(p["metadata"]["labels"].get(label) for p in ns.pods())
        short = {
            g["metadata"]["name"]
            for g in ns.groups()
            if members[g["metadata"]["name"]] < g["spec"]["minMember"]
        }
        assert short

        def says_it_waits_for_pods() -> bool:
            messages = [
                c.get("message", "")
                for g in ns.groups()
                if g["metadata"]["name"] in short
                for c in (g.get("status") or {}).get("conditions") or []
            ]
            return len(messages) == len(short) and all("waiting for pods" in m for m in messages)

        cluster.eventually(says_it_waits_for_pods, what="the short group to say it waits")
        waiting = [p for p in ns.pods() if p["metadata"]["labels"].get(label) in short]
        assert not [p["metadata"]["name"] for p in waiting if p["spec"].get("nodeName")]
    kubectl.apply(last, namespace=name)
    everyone = sorted(p["metadata"]["name"] for p in ns.pods())
    assert set(everyone) >= {p["metadata"]["name"] for p in pods}
    cluster.eventually(lambda: ns.bound() == everyone, what="every pod to start")
    kubectl("delete", top, "-n", name)
    cluster.eventually(lambda: not ns.groups(), what="the groups to go with their owner")


def labelled_job(ns: Namespace, name: str, labels: dict[str, str], count: int) -> list[Obj]:
    """A Job labelled ``labels`` (as its owner would label it) and its ``count`` pods."""
    body = job_object(name, parallelism=count)
    body["metadata"]["labels"] = labels
    return job_pods(ns.create(body), count, cpu="100m")


def test_labels_on_the_owner_opt_out_or_override(kubectl: cluster.Kubectl) -> None:
    ns = Namespace(kubectl, "labelled")
    queue = {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": "owners-queue"},
        "spec": {},
    }
    kubectl.apply(queue)
    mine = {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "mine"},
        "spec": {"minMember": 2},
    }
    ns.create(mine)
    # Opted out: each pod a group of one, no PodGroup derived: one pod of three starts alone.
    solo = labelled_job(ns, "solo", {"scheduling.berth.io/group-by-owner": "disabled"}, 3)
    # Named: the pods join the PodGroup the owner names (its minMember, 2, not parallelism 3).
    named = labelled_job(ns, "named", {"scheduling.berth.io/pod-group": "mine"}, 2)
    # Queue: the derived group goes to the queue the owner names.
    queued = labelled_job(ns, "queued", {"scheduling.berth.io/queue": "owners-queue"}, 2)
    kubectl.apply(*solo[:1], *named, *queued, namespace=ns.name)
    everyone = sorted(p["metadata"]["name"] for p in (*solo[:1], *named, *queued))
    cluster.eventually(lambda: ns.bound() == everyone, what="every pod to start")
    groups = {g["metadata"]["name"]: g for g in ns.groups()}
    derived = [g for n, g in groups.items() if n != "mine"]
    assert len(derived) == 1, sorted(groups)  # the queued Job's, none for the others
    assert derived[0]["spec"]["queue"] == "owners-queue"
    assert derived[0]["spec"]["minMember"] == 2
    assert derived[0]["metadata"]["ownerReferences"][0]["name"] == "queued"
    pods = {p["metadata"]["name"]: p for p in ns.pods()}
    label = "scheduling.berth.io/pod-group"
    assert {pods[n]["metadata"]["labels"].get(label) for n in ("named-0", "named-1")} == {"mine"}
    assert label not in pods["solo-0"]["metadata"]["labels"]
    assert pods["solo-0"]["metadata"]["annotations"]["scheduling.berth.io/grouped-by"] == (
        "Pod/solo-0"
    )


@pytest.mark.parametrize("folder", ["job", "jobset", "pytorchjob", "raycluster"])
def test_the_examples_apply_with_the_minimal_crds(kubectl: cluster.Kubectl, folder: str) -> None:
    ns = Namespace(kubectl, f"example-{folder}")
    path = cluster.ROOT / "examples" / "workloads" / folder
    out = kubectl("apply", "-n", ns.name, "-f", str(path))
    assert "created" in out


def _plain(obj: Obj) -> Obj:
    """``obj`` (a pod) as admission mode's users write it: naming no scheduler."""
    spec = {k: v for k, v in obj["spec"].items() if k != "schedulerName"}
    return {**obj, "spec": spec}


def test_admission_of_every_namespace_gates_a_plain_job_whole(tmp_path: pathlib.Path) -> None:
    """``berth up --mode admission --admission-namespaces all`` (the chart's
    ``admission.namespaces=all``): a Job of 5 with no label, in a namespace no one labelled,
    with room for 4: none of its pods starts; with room for the fifth all five start. A
    namespace labelled ``scheduling.berth.io/admission=disabled`` keeps its plain pods ungated."""
    extra = ("--mode", "admission", "--admission-namespaces", "all")
    with cluster.berth_up(tmp_path, nodes="5x cpu=1,memory=4Gi", extra=extra) as kubectl:
        ns = Namespace(kubectl, "team")
        ns.create(_plain(pod("blocker", None, cpu="1")))  # leaves room for 4 one-CPU pods
        cluster.eventually(lambda: ns.bound() == ["blocker"], what="the blocker to run")
        job = ns.create(job_object("train", parallelism=5))
        # 900m each: once all five run, each node keeps 100m for the pod outside.
        kubectl.apply(*(_plain(p) for p in job_pods(job, 5, cpu="900m")), namespace="team")

        def waiting_group() -> Obj | None:
            for group in ns.groups():
                for condition in (group.get("status") or {}).get("conditions") or []:
                    if condition["reason"] == "NotEnoughResources":
                        return typing.cast(Obj, group)
            return None

        group = cluster.eventually(waiting_group, what="the Job's group to say why it waits")
        assert group["spec"]["minMember"] == 5
        assert (
            "gang needs minMember 5, only 4 could be placed"
            in scheduled_condition(group)["message"]
        )
        waiting = [p for p in ns.pods() if p["metadata"]["name"].startswith("train-")]
        assert len(waiting) == 5
        for one in waiting:
            assert not one["spec"].get("nodeName"), one["metadata"]["name"]
            assert one["spec"]["schedulingGates"] == [{"name": "scheduling.berth.io/admission"}]

        kubectl("delete", "pod", "blocker", "-n", "team")
        names = [f"train-{i}" for i in range(5)]
        cluster.eventually(lambda: ns.bound() == names, what="all five pods to start")

        # Opted out: a plain pod is not gated, and the stand-in binder binds it at once.
        out = Namespace(kubectl, "outside")
        kubectl("label", "namespace", "outside", "scheduling.berth.io/admission=disabled")
        created = out.create(_plain(pod("free", None, cpu="100m")))
        assert not created["spec"].get("schedulingGates")
        cluster.eventually(lambda: out.bound() == ["free"], what="the ungated pod to be bound")
