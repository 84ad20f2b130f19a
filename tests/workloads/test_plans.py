"""Deriving a pod's group from its owners, kind by kind (pure: owner objects in, plan out).

We test these aspects:

- every kind Berth knows sizes its gang as its operator runs it: Job (parallelism, completions,
  the tail of completions, Indexed), JobSet (sum over replicated Jobs, dependsOn and InOrder
  left out), PyTorchJob / TFJob / XGBoostJob / PaddleJob (replicas, minAvailable, elastic),
  MPIJob (launcher + workers, WaitForWorkersReady), TrainJob through its JobSet, RayCluster and
  RayJob (head + workers, minReplicas when autoscaling, numOfHosts, suspended groups),
  SparkApplication (the driver, minResources for the executors), LeaderWorkerSet (a gang per
  replica);
- the group is named after the highest owner Berth knows and owned by it; owners it does not
  know are a group of one;
- owners opt out (``group-by-owner: disabled``) or override the group or the queue with their
  labels; the queue falls back to the spec's, the pod's, then the namespace's;
- bad input holds the pod with a reason naming what is wrong: a deleted owner (or one replaced
  under the same name), an unknown version, an unreadable spec, an owner loop.
"""

from __future__ import annotations

import typing

import pytest
import yaml

from berth.api import keys
from berth.workloads import plans
from tests.workloads import owners as o

Obj = dict[str, typing.Any]


def chain(
    *objects: Obj, end: plans.End = plans.End.TOP, next: plans.OwnerRef | None = None
) -> plans.Chain:
    """The chain as the walk reads it: the pod's owner first."""
    return plans.Chain(tuple(objects), end, next)


JOB = o.job("train")
RJOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET = o.jobset("js", [o.rjob("driver"), o.rjob("workers", replicas=2, parallelism=4)])
TRAINJOB = o.obj(
    "trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", {"runtimeRef": {"name": "torch"}}
)
TJ_JOBSET = o.owned(o.jobset("tj", [o.rjob("node", replicas=1, parallelism=3)]), TRAINJOB)
RAY = o.obj("ray.io/v1", "RayCluster", "rc", o.ray_spec(o.worker_group("gpu", replicas=3)))
RAYJOB = o.obj(
    "ray.io/v1",
    "RayJob",
    "rj",
    {"entrypoint": "python x.py", "rayClusterSpec": o.ray_spec(o.worker_group("w", replicas=2))},
)
RAYJOB_CLUSTER = o.owned(
    o.obj("ray.io/v1", "RayCluster", "rj-raycluster-x", RAYJOB["spec"]["rayClusterSpec"]), RAYJOB
)
SPARK = o.obj(
    "sparkoperator.k8s.io/v1beta2",
    "SparkApplication",
    "pi",
    {
        "type": "Scala",
        "mode": "cluster",
        "driver": {"cores": 1, "memory": "512m"},
        "executor": {"cores": 2, "memory": "2g", "instances": 3},
    },
)
SPARK_DRIVER = o.pod_of(SPARK, "pi-driver")
LWS = o.obj(
    "leaderworkerset.x-k8s.io/v1",
    "LeaderWorkerSet",
    "lws",
    {
        "replicas": 2,
        "leaderWorkerTemplate": {"size": 4, "workerTemplate": o.template()["template"]},
    },
)
LWS_LEADER_STS = o.owned(o.obj("apps/v1", "StatefulSet", "lws", {}), LWS)
LWS_LEADER = o.pod_of(
    LWS_LEADER_STS, "lws-1", labels={"leaderworkerset.sigs.k8s.io/group-index": "1"}
)
LWS_WORKER_STS = o.owned(o.obj("apps/v1", "StatefulSet", "lws-1", {}), LWS_LEADER)


def kf(kind: str, replicas: dict[str, int | None], **extra: typing.Any) -> Obj:
    return o.kubeflow(kind, "kf", replicas, **extra)


# (id, pod, chain, expected min_member, expected owner kind)
GANGS: list[tuple[str, Obj, plans.Chain, int, str]] = [
    ("job", o.pod_of(JOB, "train-0"), chain(JOB), 4, "Job"),
    (
        "job-indexed",
        o.pod_of(o.job("ix", completionMode="Indexed"), "ix-0"),
        chain(o.job("ix", completionMode="Indexed")),
        4,
        "Job",
    ),
    (
        "job-parallelism-above-completions",
        o.pod_of(JOB, "p"),
        chain(o.job("train", parallelism=8, completions=3)),
        3,
        "Job",
    ),
    (
        "job-tail-of-completions",
        o.pod_of(JOB, "p"),
        chain({**o.job("train", parallelism=4, completions=6), "status": {"succeeded": 4}}),
        2,
        "Job",
    ),
    (
        "job-work-queue",
        o.pod_of(JOB, "p"),
        chain(o.job("train", parallelism=5, completions=None)),
        5,
        "Job",
    ),
    (
        "job-defaults",
        o.pod_of(JOB, "p"),
        chain(o.job("train", parallelism=None, completions=None)),
        1,
        "Job",
    ),
    (
        "cronjob-job",
        o.pod_of(JOB, "p"),
        chain(
            o.owned(JOB, o.obj("batch/v1", "CronJob", "nightly", {})),
            o.obj("batch/v1", "CronJob", "nightly", {}),
        ),
        4,
        "Job",
    ),
    ("jobset", o.pod_of(JOBSET, "p"), chain(o.owned(JOB, JOBSET), JOBSET), 1 + 2 * 4, "JobSet"),
    (
        "jobset-depends-on",
        o.pod_of(JOB, "p", labels={RJOB: "init"}),
        chain(
            JOB,
            o.jobset(
                "js",
                [
                    o.rjob("init", parallelism=2),
                    o.rjob("node", replicas=4, dependsOn=[{"name": "init", "status": "Complete"}]),
                ],
            ),
        ),
        2,
        "JobSet",
    ),
    (
        "jobset-in-order",
        o.pod_of(JOB, "p", labels={RJOB: "a"}),
        chain(
            JOB,
            o.jobset(
                "js",
                [o.rjob("a", parallelism=2), o.rjob("b", replicas=3)],
                startupPolicy={"startupPolicyOrder": "InOrder"},
            ),
        ),
        2,
        "JobSet",
    ),
    (
        "trainjob-via-jobset",
        o.pod_of(JOB, "p"),
        chain(o.owned(JOB, TJ_JOBSET), TJ_JOBSET, TRAINJOB),
        3,
        "JobSet",
    ),
    (
        "pytorchjob",
        o.pod_of(None, "p"),
        chain(kf("PyTorchJob", {"Master": 1, "Worker": 3})),
        4,
        "PyTorchJob",
    ),
    (
        "pytorchjob-replicas-default-1",
        o.pod_of(None, "p"),
        chain(kf("PyTorchJob", {"Master": None, "Worker": 2})),
        3,
        "PyTorchJob",
    ),
    (
        "pytorchjob-min-available",
        o.pod_of(None, "p"),
        chain(
            kf(
                "PyTorchJob",
                {"Master": 1, "Worker": 7},
                runPolicy={"schedulingPolicy": {"minAvailable": 5}},
            )
        ),
        5,
        "PyTorchJob",
    ),
    (
        "pytorchjob-elastic",
        o.pod_of(None, "p"),
        chain(kf("PyTorchJob", {"Worker": 8}, elasticPolicy={"minReplicas": 2, "maxReplicas": 8})),
        2,
        "PyTorchJob",
    ),
    (
        "tfjob",
        o.pod_of(None, "p"),
        chain(kf("TFJob", {"Chief": 1, "PS": 2, "Worker": 4})),
        7,
        "TFJob",
    ),
    (
        "xgboostjob",
        o.pod_of(None, "p"),
        chain(kf("XGBoostJob", {"Master": 1, "Worker": 2})),
        3,
        "XGBoostJob",
    ),
    ("paddlejob", o.pod_of(None, "p"), chain(kf("PaddleJob", {"Worker": 4})), 4, "PaddleJob"),
    (
        "mpijob-worker",
        o.pod_of(None, "p"),
        chain(kf("MPIJob", {"Launcher": 1, "Worker": 4})),
        5,
        "MPIJob",
    ),
    (
        "mpijob-launcher-via-job",
        o.pod_of(None, "p"),
        chain(
            o.owned(
                o.job("kf-launcher", parallelism=1, completions=1),
                kf("MPIJob", {"Launcher": 1, "Worker": 4}),
            ),
            kf("MPIJob", {"Launcher": 1, "Worker": 4}),
        ),
        5,
        "MPIJob",
    ),
    (
        "mpijob-wait-for-workers",
        o.pod_of(None, "p"),
        chain(
            kf("MPIJob", {"Launcher": 1, "Worker": 4}, launcherCreationPolicy="WaitForWorkersReady")
        ),
        4,
        "MPIJob",
    ),
    ("raycluster", o.pod_of(RAY, "p"), chain(RAY), 4, "RayCluster"),
    (
        "raycluster-autoscaling-min-replicas",
        o.pod_of(None, "p"),
        chain(
            o.obj(
                "ray.io/v1",
                "RayCluster",
                "rc",
                o.ray_spec(o.worker_group("a", replicas=5, low=2, high=10), autoscaling=True),
            )
        ),
        3,
        "RayCluster",
    ),
    (
        "raycluster-replicas-clamped-multi-host-suspended",
        o.pod_of(None, "p"),
        chain(
            o.obj(
                "ray.io/v1",
                "RayCluster",
                "rc",
                o.ray_spec(
                    o.worker_group("tpu", replicas=1, low=2, high=4, hosts=4),
                    o.worker_group("off", replicas=3, suspend=True),
                ),
            )
        ),
        1 + 2 * 4,
        "RayCluster",
    ),
    (
        "rayjob-cluster-pod",
        o.pod_of(RAYJOB_CLUSTER, "p"),
        chain(RAYJOB_CLUSTER, RAYJOB),
        3,
        "RayJob",
    ),
    (
        "rayjob-submitter-via-job",
        o.pod_of(None, "p"),
        chain(o.owned(o.job("rj", parallelism=1, completions=1), RAYJOB), RAYJOB),
        3,
        "RayJob",
    ),
    ("spark-driver", SPARK_DRIVER, chain(SPARK), 1, "SparkApplication"),
    (
        "spark-executor-via-driver-pod",
        o.pod_of(SPARK_DRIVER, "pi-exec-1"),
        chain(SPARK_DRIVER, SPARK),
        1,
        "SparkApplication",
    ),
    ("lws-leader", LWS_LEADER, chain(LWS_LEADER_STS, LWS), 4, "LeaderWorkerSet"),
    (
        "lws-worker",
        o.pod_of(
            LWS_WORKER_STS, "lws-1-2", labels={"leaderworkerset.sigs.k8s.io/group-index": "1"}
        ),
        chain(LWS_WORKER_STS, LWS_LEADER, LWS_LEADER_STS, LWS),
        4,
        "LeaderWorkerSet",
    ),
    (
        "lws-leader-ready",
        LWS_LEADER,
        chain(LWS_LEADER_STS, {**LWS, "spec": {**LWS["spec"], "startupPolicy": "LeaderReady"}}),
        1,
        "LeaderWorkerSet",
    ),
]


@pytest.mark.parametrize(
    ("pod", "owners", "min_member", "kind"), [c[1:] for c in GANGS], ids=[c[0] for c in GANGS]
)
def test_gang_is_sized_as_the_operator_runs_it(
    pod: Obj, owners: plans.Chain, min_member: int, kind: str
) -> None:
    plan = plans.plan(pod, owners)
    assert plan.outcome is plans.Outcome.GANG, plan.problem
    assert plan.gang is not None and plan.gang.min_member == min_member, plan.gang
    assert plan.owner is not None and plan.owner.kind == kind
    assert plan.group is not None and plan.group.startswith(f"{kind.lower()}-")
    assert len(plan.group) <= plans.MAX_NAME
    assert plan.queue == keys.DEFAULT_QUEUE


def test_group_belongs_to_the_top_owner_with_its_uid_in_the_name() -> None:
    plan = plans.plan(o.pod_of(JOB, "p"), chain(o.owned(JOB, JOBSET), JOBSET))
    assert plan.owner == plans.OwnerRef("jobset.x-k8s.io/v1alpha2", "JobSet", "js", "uid-JobSet-js")
    assert plan.grouped_by == "JobSet/js"
    again = plans.plan(o.pod_of(JOB, "q"), chain(o.owned(JOB, JOBSET), JOBSET))
    assert again.group == plan.group
    other = {**JOBSET, "metadata": {**JOBSET["metadata"], "uid": "another"}}
    assert plans.plan(o.pod_of(JOB, "p"), chain(o.owned(JOB, other), other)).group != plan.group


STAGED = o.jobset(
    "staged",
    [
        o.rjob("init", parallelism=2),
        o.rjob("sidecar"),
        o.rjob("node", replicas=4, parallelism=2, dependsOn=[{"name": "init", "status": "Ready"}]),
        o.rjob("ps", replicas=2, dependsOn=[{"name": "init", "status": "Ready"}]),
        o.rjob("eval", dependsOn=[{"name": "node", "status": "Complete"}]),
    ],
)
IN_ORDER = o.jobset(
    "ordered",
    [o.rjob("a", parallelism=2), o.rjob("b", replicas=3), o.rjob("c", parallelism=5)],
    startupPolicy={"startupPolicyOrder": "InOrder"},
)


@pytest.mark.parametrize(
    ("jobset", "rjob", "min_member", "stage"),
    [
        (STAGED, "init", 2 + 1, None),
        (STAGED, "sidecar", 2 + 1, None),
        (STAGED, "node", 4 * 2 + 2, "node"),
        (STAGED, "ps", 4 * 2 + 2, "node"),
        (STAGED, "eval", 1, "eval"),
        (IN_ORDER, "a", 2, None),
        (IN_ORDER, "b", 3, "b"),
        (IN_ORDER, "c", 5, "c"),
    ],
    ids=[
        "first-stage",
        "no-dependency-is-first-stage",
        "later-stage",
        "same-dependencies-same-stage",
        "third-stage",
        "in-order-first",
        "in-order-second",
        "in-order-third",
    ],
)
def test_jobset_stages_are_gangs_of_their_own(
    jobset: Obj, rjob: str, min_member: int, stage: str | None
) -> None:
    job = o.owned(o.job(f"{jobset['metadata']['name']}-{rjob}-0"), jobset)
    plan = plans.plan(o.pod_of(job, "p", labels={RJOB: rjob}), chain(job, jobset))
    assert plan.outcome is plans.Outcome.GANG, plan.problem
    assert plan.gang is not None and plan.gang.min_member == min_member, plan.gang
    assert plan.gang.replica == stage
    first = plans.group_name(plans.owner_ref(jobset))
    assert plan.owner == plans.owner_ref(jobset)  # deleted with the JobSet, every stage
    if stage is None:
        assert plan.group == first
    else:
        assert plan.group != first and plan.group is not None and f"-{stage}-" in plan.group
        assert "starts after" in plan.gang.why


def test_jobset_stage_needs_the_pods_replicated_job() -> None:
    job = o.owned(o.job("staged-node-0"), STAGED)
    unlabelled = plans.plan(o.pod_of(job, "p"), chain(job, STAGED))
    assert unlabelled.outcome is plans.Outcome.HELD
    assert unlabelled.problem is not None and RJOB in unlabelled.problem
    unknown = plans.plan(o.pod_of(job, "p", labels={RJOB: "gone"}), chain(job, STAGED))
    assert unknown.outcome is plans.Outcome.HELD
    assert unknown.problem is not None and "'gone'" in unknown.problem
    # One stage: the label is not needed.
    assert plans.plan(o.pod_of(JOB, "p"), chain(o.owned(JOB, JOBSET), JOBSET)).gang is not None


def test_jobset_depending_on_an_unknown_replicated_job_is_held() -> None:
    bad = o.jobset("bad", [o.rjob("a"), o.rjob("b", dependsOn=[{"name": "z", "status": "Ready"}])])
    plan = plans.plan(o.pod_of(JOB, "p", labels={RJOB: "a"}), chain(JOB, bad))
    assert plan.outcome is plans.Outcome.HELD
    assert plan.problem == (
        "cannot read the spec of its owner jobset.x-k8s.io/v1alpha2 JobSet bad: "
        "spec.replicatedJobs[1].dependsOn names 'z', not a replicated Job before it"
    )


def test_lws_replicas_are_separate_gangs() -> None:
    first = plans.plan(
        o.pod_of(LWS_LEADER_STS, "lws-0", labels={"leaderworkerset.sigs.k8s.io/group-index": "0"}),
        chain(LWS_LEADER_STS, LWS),
    )
    second = plans.plan(LWS_LEADER, chain(LWS_LEADER_STS, LWS))
    assert first.group != second.group
    assert first.owner == second.owner


def test_spark_gang_holds_room_for_its_executors() -> None:
    plan = plans.plan(SPARK_DRIVER, chain(SPARK))
    assert plan.gang is not None
    # driver 1 core, 512Mi + 384Mi overhead; 3 executors of 2 cores, 2048Mi + 384Mi overhead
    assert plan.gang.min_resources == {
        "cpu": "7000m",
        "memory": f"{512 + 384 + 3 * (2048 + 384)}Mi",
    }


def test_long_names_are_cut_to_a_label_value() -> None:
    long = o.job("x" * 80)
    plan = plans.plan(o.pod_of(long, "p"), chain(long))
    assert plan.group is not None and len(plan.group) == plans.MAX_NAME


SINGLES: list[tuple[str, Obj, plans.Chain]] = [
    (
        "no-owner-known",
        o.pod_of(o.obj("example.com/v1", "Thing", "t", {}), "p"),
        chain(end=plans.End.UNKNOWN_KIND, next=plans.OwnerRef("example.com/v1", "Thing", "t", "u")),
    ),
    (
        "deployment",
        o.pod_of(None, "p"),
        chain(
            o.obj("apps/v1", "ReplicaSet", "web-1", {}), o.obj("apps/v1", "Deployment", "web", {})
        ),
    ),
    (
        "job-opted-out",
        o.pod_of(JOB, "p"),
        chain(
            o.obj(
                "batch/v1",
                "Job",
                "train",
                JOB["spec"],
                labels={keys.GROUP_BY_OWNER_LABEL: "disabled"},
            )
        ),
    ),
    (
        "pod-opted-out",
        o.pod_of(JOB, "p", labels={keys.GROUP_BY_OWNER_LABEL: "disabled"}),
        chain(JOB),
    ),
    (
        "rbac-forbids-reading-the-owner",
        o.pod_of(None, "p"),
        chain(end=plans.End.FORBIDDEN, next=plans.OwnerRef("batch/v1", "Job", "j", "u")),
    ),
]


@pytest.mark.parametrize(("pod", "owners"), [c[1:] for c in SINGLES], ids=[c[0] for c in SINGLES])
def test_pods_without_a_gang_are_groups_of_one(pod: Obj, owners: plans.Chain) -> None:
    plan = plans.plan(pod, owners, default_queue="team-a")
    assert plan.outcome is plans.Outcome.SINGLE
    assert plan.queue == "team-a"


def test_owner_names_its_group() -> None:
    named = o.obj("batch/v1", "Job", "train", JOB["spec"], labels={keys.POD_GROUP_LABEL: "mine"})
    plan = plans.plan(o.pod_of(named, "p"), chain(named))
    assert (plan.outcome, plan.group, plan.grouped_by) == (plans.Outcome.NAMED, "mine", "Job/train")


@pytest.mark.parametrize(
    ("owner_labels", "spec_queue", "pod_labels", "expected"),
    [
        ({keys.QUEUE_LABEL: "owners"}, "specs", {keys.QUEUE_LABEL: "pods"}, "owners"),
        ({}, "specs", {keys.QUEUE_LABEL: "pods"}, "specs"),
        ({}, None, {keys.QUEUE_LABEL: "pods"}, "pods"),
        ({}, None, {}, "namespaces"),
    ],
    ids=["owner-label", "spec", "pod-label", "namespace-default"],
)
def test_queue_precedence(
    owner_labels: dict[str, str], spec_queue: str | None, pod_labels: dict[str, str], expected: str
) -> None:
    policy = {"runPolicy": {"schedulingPolicy": {"queue": spec_queue}}} if spec_queue else {}
    job = kf("PyTorchJob", {"Worker": 2}, **policy)
    job["metadata"]["labels"] = owner_labels
    plan = plans.plan(o.pod_of(job, "p", labels=pod_labels), chain(job), default_queue="namespaces")
    assert plan.queue == expected


HELD: list[tuple[str, Obj, plans.Chain, str]] = [
    (
        "deleted-owner",
        o.pod_of(JOB, "p"),
        chain(end=plans.End.MISSING, next=plans.OwnerRef("batch/v1", "Job", "train", "uid-1")),
        "its owner batch/v1 Job train (uid uid-1) does not exist (deleted?)",
    ),
    (
        "unknown-version",
        o.pod_of(None, "p"),
        chain(
            end=plans.End.UNSUPPORTED_VERSION,
            next=plans.OwnerRef("kubeflow.org/v2", "PyTorchJob", "kf", "u"),
        ),
        "its owner kubeflow.org/v2 PyTorchJob kf is of a version Berth cannot read "
        "(it reads PyTorchJob as kubeflow.org/v1)",
    ),
    (
        "loop",
        o.pod_of(None, "p"),
        chain(end=plans.End.LOOP, next=plans.OwnerRef("v1", "Pod", "p", "u")),
        "its owners form a loop or a chain too long to follow (at v1 Pod p)",
    ),
    (
        "job-parallelism-not-a-number",
        o.pod_of(None, "p"),
        chain(o.job("j", parallelism="four")),  # type: ignore[arg-type]
        "cannot read the spec of its owner batch/v1 Job j: "
        "spec.parallelism is 'four', not an integer",
    ),
    (
        "job-without-spec",
        o.pod_of(None, "p"),
        chain({**JOB, "spec": None}),
        "cannot read the spec of its owner batch/v1 Job train: Job.spec is missing",
    ),
    (
        "jobset-without-replicated-jobs",
        o.pod_of(None, "p"),
        chain(o.jobset("js", [])),
        "spec.replicatedJobs is empty",
    ),
    (
        "pytorchjob-negative-replicas",
        o.pod_of(None, "p"),
        chain(kf("PyTorchJob", {"Worker": -1})),
        "spec.pytorchReplicaSpecs.Worker.replicas is -1, less than 0",
    ),
    (
        "raycluster-max-below-min",
        o.pod_of(None, "p"),
        chain(
            o.obj("ray.io/v1", "RayCluster", "rc", o.ray_spec(o.worker_group("a", low=4, high=2)))
        ),
        "spec.workerGroupSpecs[0].maxReplicas 2 is below minReplicas 4",
    ),
    (
        "spark-memory-unreadable",
        o.pod_of(None, "p"),
        chain(
            o.obj(
                "sparkoperator.k8s.io/v1beta2",
                "SparkApplication",
                "s",
                {"driver": {"memory": "lots"}},
            )
        ),
        "spec.driver.memory is 'lots', not a Spark memory size like 512m",
    ),
    (
        "lws-pod-without-group-index",
        o.pod_of(None, "p"),
        chain(LWS_LEADER_STS, LWS),
        "the pod has no leaderworkerset.sigs.k8s.io/group-index label",
    ),
]


@pytest.mark.parametrize(
    ("pod", "owners", "problem"), [c[1:] for c in HELD], ids=[c[0] for c in HELD]
)
def test_bad_input_holds_the_pod_and_says_what_is_wrong(
    pod: Obj, owners: plans.Chain, problem: str
) -> None:
    plan = plans.plan(pod, owners)
    assert plan.outcome is plans.Outcome.HELD
    assert plan.problem is not None and problem in plan.problem


EXAMPLES = o.ROOT / "examples" / "workloads"


@pytest.mark.parametrize(
    ("path", "min_member"),
    [
        ("job/job.yaml", 4),
        ("jobset/jobset.yaml", 5),
        ("pytorchjob/pytorchjob.yaml", 4),
        ("raycluster/raycluster.yaml", 3),
    ],
    ids=["job", "jobset", "pytorchjob", "raycluster"],
)
def test_examples_derive_the_gangs_their_readmes_promise(path: str, min_member: int) -> None:
    owner = yaml.safe_load((EXAMPLES / path).read_text())
    owner["metadata"]["uid"] = "uid-example"
    plan = plans.plan(o.pod_of(owner, "p"), chain(owner))
    assert plan.gang is not None and plan.gang.min_member == min_member
    readme = (EXAMPLES / path).parent.joinpath("README.md").read_text()
    assert f"minMember: {min_member}" in readme


def test_a_later_stage_says_what_it_waits_for_as_docs_workloads_md_shows() -> None:
    """docs/workloads.md: ``JobSet/train: stage node (starts after init Ready): node 2x4 + ps
    2x1`` (replicas x pods of each replicated Job of the stage)."""
    train = o.jobset(
        "train",
        [
            o.rjob("init"),
            o.rjob(
                "node", replicas=2, parallelism=4, dependsOn=[{"name": "init", "status": "Ready"}]
            ),
            o.rjob("ps", replicas=2, dependsOn=[{"name": "init", "status": "Ready"}]),
        ],
    )
    job = o.owned(o.job("train-node-0"), train)
    plan = plans.plan(o.pod_of(job, "p", labels={RJOB: "node"}), chain(job, train))
    assert plan.gang is not None, plan.problem
    assert f"{plan.grouped_by}: {plan.gang.why}" == (
        "JobSet/train: stage node (starts after init Ready): node 2x4 + ps 2x1"
    )
