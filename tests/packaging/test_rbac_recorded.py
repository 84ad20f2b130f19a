"""The chart's RBAC is exactly what the operator uses, recorded from real runs (issue 9).

For each mode the chart is installed into the API server emulator with helm-sdkpy (the
release's CRDs, ServiceAccount, roles and bindings as Helm renders them with the default
values), and the real operator (:func:`berth.operator.main.run` with the leader-only parts
``berth run`` starts) runs against it authenticated as the chart's ServiceAccount, next to
simulated nodes, while a user drives every path the operator has:

- ``examples/`` as ``berth demo`` applies them (queues, a gang, a reservation and its owner, a
  plain pod), run to completion: informers, Kopf, binding, Events, status writers;
- a reservation nobody claims expires after its ``ttl``, and a pod that fits nowhere is
  explained on the pod (``PodScheduled=False``);
- a gated pod naming Berth's scheduler is pinned, ungated and bound, and because the user
  labels it while the API server is slow to serve the pin (a delay armed in the emulator: the
  one thing this run does to the server), the pin conflicts and Berth reads the pod again;
- a high-priority pod preempts a running low-priority one (the Eviction API);
- in admission mode, a gated gang is admitted (pinned, ungated) and bound by a stand-in
  kube-scheduler (:mod:`tests.admission.stack`), and a gated bare pod that it does not bind in
  time is rejected: deleted and recreated gated;
- a pod whose claims are of ``WaitForFirstConsumer`` classes gets a static volume reserved for
  one (its ``claimRef``) and the other, to be provisioned, annotated with the node (nothing
  binds claims here: its binding waits, as kube-scheduler's would, until the pod is deleted);
- a pod claims a GPU through a ResourceClaimTemplate (DRA): Berth allocates its claim and
  reserves it for the pod (the claim's finalizer and status) before binding it;
- a day passes on the operator's clock, so ended reservations are garbage-collected;
- the process stops cleanly, releasing its Lease (created and renewed meanwhile).

Every request the emulator served to that identity becomes an RBAC request
(:mod:`tests.packaging.rbac`). We test these aspects:

- requests become RBAC requests by Kubernetes' verb mapping; a grant covers a call as
  Kubernetes' RBAC decides it; grants follow the bindings to the user;
- the recording tells the operator's requests (its token) from every other client's;
- every call the operator made is granted by the chart's rendered roles, in both modes;
- every grant the chart makes was used, but for :data:`UNEXERCISED` (each with its reason);
- the Lease is reached only in the release namespace, through the Role: the ClusterRole grants
  no Lease rights;
- no wildcards and no Secrets; the non-resource requests are discovery, which Kubernetes grants
  every authenticated user;
- pod writes per mode: bindings, evictions and status through their subresources, and a patch of
  the pod itself (pin and ungate; RBAC cannot narrow it to fields) in both; creating and deleting
  pods in ``runai-reservation`` in both (a pod asking half a GPU with KAI's ``gpu-fraction``
  gets a reservation pod there, deleted with it: a Role there grants that and nothing else),
  anywhere only in admission mode (a rejected bare pod recreated gated);
- NOTES.txt points at ``kubectl berth queues`` and ``kubectl berth why`` as the plugin parses them.
"""

from __future__ import annotations

import asyncio
import collections
import collections.abc
import dataclasses
import pathlib
import tempfile
import time
import typing

import aiohttp
import pytest
import yaml

from berth.cli import kubectl_berth, up
from berth.emulator import faults, patches, resources, server, testing
from berth.operator import main, scheduling, settings
from tests.admission import stack
from tests.packaging import charts, rbac

Obj = dict[str, typing.Any]

RELEASE, NAMESPACE, SERVICE_ACCOUNT = "berth", "berth-system", "berth"
OPERATOR = rbac.service_account_user(SERVICE_ACCOUNT, namespace=NAMESPACE)
OPERATOR_TOKEN = "token-of-the-berth-service-account"
ADMIN = "kubernetes-admin"  # whoever uses the emulator's kubeconfig: the stand-in kube-scheduler
ADMIN_TOKEN = "berth-emulator"  # the token in the emulator's own kubeconfig
MODES = {
    "scheduler": {},
    # The webhook answers the API server and calls nothing itself, so it has nothing to record;
    # without it (as the chart allows) pods carry the gate in their own spec.
    "admission": {"mode": "admission", "admission": {"webhook": {"enabled": False}}},
}
EXAMPLES = charts.REPO / "examples"
SPEEDUP = 30.0  # simulated pods run 30x faster than their sim.berth.io/duration
WAIT = 15.0  # seconds any one step may take before the run is declared stuck

_WALK = "the owner walk reads this kind as it reads the Job of the run; its CRD is not installed"
UNEXERCISED: dict[tuple[str, str, str], str] = {
    **{
        (group, resource, "get"): _WALK
        for group, resource in (
            ("batch", "cronjobs"),
            ("apps", "statefulsets"),
            ("apps", "replicasets"),
            ("apps", "deployments"),
            ("jobset.x-k8s.io", "jobsets"),
            ("kubeflow.org", "pytorchjobs"),
            ("kubeflow.org", "tfjobs"),
            ("kubeflow.org", "xgboostjobs"),
            ("kubeflow.org", "paddlejobs"),
            ("kubeflow.org", "mpijobs"),
            ("trainer.kubeflow.org", "trainjobs"),
            ("ray.io", "rayclusters"),
            ("ray.io", "rayjobs"),
            ("ray.io", "rayservices"),
            ("sparkoperator.k8s.io", "sparkapplications"),
            ("leaderworkerset.x-k8s.io", "leaderworkersets"),
        )
    },
    **{
        (group, resource, verb): "the run serves no scheduler-plugins, Volcano or Kubernetes "
        "PodGroups or Workloads: Berth honours them only where they are served "
        "(tests/workloads cover them)"
        for group, resource, verb in (
            ("scheduling.x-k8s.io", "podgroups", "list"),
            ("scheduling.x-k8s.io", "podgroups", "watch"),
            ("scheduling.x-k8s.io", "podgroups/status", "patch"),
            ("scheduling.volcano.sh", "podgroups", "list"),
            ("scheduling.volcano.sh", "podgroups", "watch"),
            ("scheduling.volcano.sh", "podgroups", "patch"),
            ("scheduling.k8s.io", "podgroups", "list"),
            ("scheduling.k8s.io", "podgroups", "watch"),
            ("scheduling.k8s.io", "workloads", "list"),
            ("scheduling.k8s.io", "workloads", "watch"),
        )
    },
    **{
        (group, resource, verb): "the run serves no autoscaler API (ProvisioningRequest, "
        "CapacityBuffer): Berth asks only where one is served (tests/kube/"
        "test_capacity_requests.py; the realcluster tier asks real Karpenter as the chart's "
        "ServiceAccount, and fails on any refused request)"
        for group, resource, verb in (
            ("", "podtemplates", "get"),
            ("", "podtemplates", "create"),
            ("", "podtemplates", "delete"),
            ("autoscaling.x-k8s.io", "provisioningrequests", "list"),
            ("autoscaling.x-k8s.io", "provisioningrequests", "create"),
            ("autoscaling.x-k8s.io", "provisioningrequests", "delete"),
            ("autoscaling.x-k8s.io", "capacitybuffers", "list"),
            ("autoscaling.x-k8s.io", "capacitybuffers", "create"),
            ("autoscaling.x-k8s.io", "capacitybuffers", "delete"),
            ("autoscaling.x-k8s.io", "capacitybuffers", "patch"),
            ("", "events", "list"),
            ("karpenter.sh", "nodeclaims", "list"),
        )
    },
    ("scheduling.berth.io", "podgroups", "get"): "read only when a derived PodGroup exists "
    "already (a pod of its workload grouped in an earlier batch): timing-dependent",
    ("scheduling.berth.io", "podgroups", "patch"): "a derived PodGroup is patched only when its "
    "workload is resized",
    ("", "events", "patch"): "an Event is patched when its reason repeats after the repeat "
    "interval; whether a recorded run lasts that long is timing (the realcluster tier sees it)",
    ("resource.k8s.io", "resourceclaims", "get"): (
        "a claim is written at the version the informer showed; it is read only when that "
        "write conflicts, or to release it after a failed binding (tests/kube/"
        "test_resource_claim_binding.py)"
    ),
    ("resource.k8s.io", "resourceclaims/binding", "patch"): (
        "a synthetic subresource Kubernetes 1.36 checks when status.allocation or reservedFor "
        "changes; the emulator does not authorize it (the realcluster tier, v1.36, does: its "
        "DRA tests fail on any request the API server refuses Berth)"
    ),
    ("authentication.k8s.io", "tokenreviews", "create"): (
        "only when a client calls the HTTP API; the emulator has no TokenReview (the calls are "
        "tested against a stand-in API server in tests/operator/test_http_auth.py)"
    ),
    ("authorization.k8s.io", "subjectaccessreviews", "create"): (
        "likewise, the SubjectAccessReview that follows an authenticated token"
    ),
}
"""Grants no run here can use, as (apiGroup, resource, verb) -> the reason. A grant joins only
with the reason it cannot be."""


class SteppingClock:
    """The wall clock, which the test may move forward (a day passing, in a second)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return time.time() + self.offset


# The user's side ------------------------------------------------------------------------------


class User:
    """Someone with kubectl: creates, reads and deletes objects (through the emulator's
    in-process API, on its own thread: the same server-side path, without the subprocesses)."""

    def __init__(self, cluster: testing.RunningEmulator) -> None:
        self.cluster = cluster

    def _resource(self, api_version: str, plural: str) -> resources.Resource:
        return self.cluster.call(self.cluster.api.resource, api_version, plural)

    def create(self, manifest: str) -> None:
        api = self.cluster.api
        for document in yaml.safe_load_all(manifest):
            group, _, version = str(document["apiVersion"]).rpartition("/")
            resource = self.cluster.call(api.registry.by_kind, group, version, document["kind"])
            assert resource is not None, document["kind"]
            namespace = "default" if resource.namespaced else None
            self.cluster.call(api.create, resource, document, namespace=namespace)

    def objects(self, api_version: str, plural: str) -> dict[str, Obj]:
        resource = self._resource(api_version, plural)
        listed = self.cluster.call(self.cluster.api.list, resource, namespace=None)
        return {o["metadata"]["name"]: o for o in listed.items}

    def pods(self) -> dict[str, Obj]:
        return self.objects("v1", "pods")

    def reservations(self) -> dict[str, Obj]:
        return self.objects("scheduling.berth.io/v1alpha1", "reservations")

    def patch_pod(self, name: str, patch: Obj) -> None:
        resource = self._resource("v1", "pods")
        self.cluster.call(
            self.cluster.api.patch,
            resource,
            patch,
            namespace="default",
            name=name,
            patch_type=patches.MERGE_PATCH,
        )

    def delete_pod(self, name: str) -> None:
        resource = self._resource("v1", "pods")
        self.cluster.call(self.cluster.api.delete, resource, namespace="default", name=name)

    async def until(self, what: str, check: collections.abc.Callable[[], bool]) -> None:
        """Wait (bounded by :data:`WAIT`) until ``check()`` holds."""
        deadline = time.monotonic() + WAIT
        while not check():
            if time.monotonic() > deadline:
                phases = {name: phase(obj) for name, obj in self.pods().items()}
                raise AssertionError(f"timed out waiting until {what}; pods: {phases}")
            await asyncio.sleep(0.05)


def phase(obj: Obj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


def succeeded(user: User, *names: str) -> collections.abc.Callable[[], bool]:
    def check() -> bool:
        pods = user.pods()
        return all(phase(pods.get(name)) == "Succeeded" for name in names)

    return check


def explained(user: User, *, name: str) -> collections.abc.Callable[[], bool]:
    def check() -> bool:
        conditions = (user.pods()[name].get("status") or {}).get("conditions") or ()
        return any(
            c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions
        )

    return check


def pod(name: str, *, cpu: str, extra: str = "", spec: str = "", duration: str = "10s") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{sim.berth.io/duration: {duration}}}
  {extra}
spec:
  restartPolicy: Never
  {spec}
  containers:
  - name: main
    image: busybox:1.37
    resources: {{requests: {{cpu: "{cpu}", memory: 256Mi}}}}
"""


URGENT = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: urgent}
value: 1000
"""
UNCLAIMED = """
apiVersion: scheduling.berth.io/v1alpha1
kind: Reservation
metadata: {name: unclaimed}
spec:
  template: {spec: {containers: [{name: hold, resources: {requests: {cpu: "1", memory: 1Gi}}}]}}
  owners: [{labelSelector: {matchLabels: {app: never-started}}}]
  ttl: 2s
"""
GATED_GANG = """
apiVersion: scheduling.berth.io/v1alpha1
kind: PodGroup
metadata: {name: gated}
spec: {minMember: 2}
"""
BATCH_JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: batch}
spec:
  parallelism: 2
  completions: 2
  template:
    spec:
      schedulerName: berth-scheduler
      restartPolicy: Never
      containers: [{name: main, image: busybox:1.37}]
"""
BERTHS = "schedulerName: berth-scheduler"
LOCAL_STORAGE = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-0}
spec:
  storageClassName: local
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/local-0}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  storageClassName: local
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: provisioned}
provisioner: example.com/provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: scratch}
spec:
  storageClassName: provisioned
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
"""
CLAIMED = (
    "volumes: [{name: data, persistentVolumeClaim: {claimName: data}},"
    " {name: scratch, persistentVolumeClaim: {claimName: scratch}}]"
)
DEVICES = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: gpu.example.com}}
spec:
  selectors: [{{cel: {{expression: 'device.driver == "gpu.example.com"'}}}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {node}-gpu}}
spec:
  driver: gpu.example.com
  nodeName: {node}
  pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}
  devices: [{{name: gpu-0}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: one-gpu}}
spec:
  spec:
    devices:
      requests: [{{name: gpu, exactly: {{deviceClassName: gpu.example.com}}}}]
"""
GPU_CLAIM = "resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]"
SPARE = "nodeSelector: {pool: spare}"
SHARE = f"""
apiVersion: v1
kind: Pod
metadata:
  name: half
  annotations: {{gpu-fraction: "0.5", sim.berth.io/duration: 1h}}
spec:
  {BERTHS}
  nodeSelector: {{pool: gpu}}
  containers:
  - name: main
    image: busybox:1.37
    resources: {{requests: {{cpu: 100m, memory: 256Mi}}}}
"""
QUEUED = "labels: {scheduling.berth.io/queue: default}"
GATE = "schedulingGates: [{name: scheduling.berth.io/admission}]"
EXAMPLE_PODS = ("train-0", "train-1", "train-2", "train-3", "trainer", "hello")


async def drive(
    user: User, *, clock: SteppingClock, kube_scheduler: stack.StandInScheduler | None
) -> None:
    """Everything a user does while the operator runs (see the module docstring);
    ``kube_scheduler`` is the stand-in for kube-scheduler, in admission mode."""
    examples = up.LocalCluster(user.cluster.threaded, user.cluster.kubeconfig, nodes=4)
    await up.apply_examples(examples, EXAMPLES)
    user.create(UNCLAIMED)
    user.create(pod("fits-nowhere", cpu="64", extra=QUEUED, spec=BERTHS))
    finishing = [*EXAMPLE_PODS, "gated-by-hand"]
    if kube_scheduler is not None:
        user.create(GATED_GANG)
        for name in ("gated-0", "gated-1"):
            labels = "labels: {scheduling.berth.io/pod-group: gated}"
            user.create(pod(name, cpu="1", extra=labels, spec=GATE))
        finishing += ["gated-0", "gated-1"]
    await edit_while_pinned(user, name="gated-by-hand")
    # A Job's pods (no Job controller here: created as it would): Berth reads the Job, writes
    # the PodGroup it derives and labels the pods with it.
    user.create(BATCH_JOB)
    job_uid = user.objects("batch/v1", "jobs")["batch"]["metadata"]["uid"]
    owner = (
        "ownerReferences: [{apiVersion: batch/v1, kind: Job, name: batch, "
        f"uid: {job_uid}, controller: true}}]"
    )
    for name in ("batch-0", "batch-1"):
        user.create(pod(name, cpu="500m", extra=owner, spec=BERTHS, duration="1s"))
    finishing += ["batch-0", "batch-1"]
    await user.until("the examples ran", succeeded(user, *finishing))
    await user.until(
        "the unclaimed reservation expired",
        lambda: phase(user.reservations().get("unclaimed")) == "Expired",
    )
    await user.until("the pod that fits nowhere is explained", explained(user, name="fits-nowhere"))
    user.delete_pod("fits-nowhere")

    user.create(LOCAL_STORAGE)
    user.create(pod("claimant", cpu="100m", spec=f"{BERTHS}\n  {CLAIMED}"))
    await user.until(
        "the claims got a volume and the node Berth picked",
        lambda: (
            bool(user.objects("v1", "persistentvolumes")["local-0"]["spec"].get("claimRef"))
            and "volume.kubernetes.io/selected-node"
            in (
                user.objects("v1", "persistentvolumeclaims")["scratch"]["metadata"].get(
                    "annotations"
                )
                or {}
            )
        ),
    )
    user.delete_pod("claimant")

    # A pod claiming a GPU through a template (DRA): its claim is allocated and reserved for
    # it before Berth binds it.
    node = sorted(user.objects("v1", "nodes"))[0]
    user.create(DEVICES.format(node=node))
    user.create(pod("gpu-user", cpu="100m", spec=f"{BERTHS}\n  {GPU_CLAIM}"))
    await user.until(
        "the GPU claim was allocated and the pod bound",
        lambda: (
            any(
                (c.get("status") or {}).get("reservedFor")
                for c in user.objects("resource.k8s.io/v1", "resourceclaims").values()
            )
            and bool(user.pods()["gpu-user"]["spec"].get("nodeName"))
        ),
    )
    user.delete_pod("gpu-user")

    # Half a GPU with KAI-Scheduler's annotation: Berth keeps the device with a reservation pod
    # in runai-reservation, labels the share with its group, and deletes the reservation pod
    # once the share is gone.
    user.create(SHARE)
    await user.until(
        "the share's device got its reservation pod and the share its group",
        lambda: (
            any(n.startswith("gpu-reservation-gpu-0-") for n in user.pods())
            and "runai-gpu-group" in (user.pods()["half"]["metadata"].get("labels") or {})
        ),
    )
    user.delete_pod("half")
    await user.until(
        "the reservation pod went with the share",
        lambda: not any(n.startswith("gpu-reservation-") for n in user.pods()),
    )

    # A low-priority pod fills the spare node; an urgent one needs that node.
    user.create(pod("filler", cpu="3", extra=QUEUED, spec=f"{BERTHS}\n  {SPARE}", duration="1h"))
    await user.until("the filler runs", lambda: phase(user.pods().get("filler")) == "Running")
    urgent = f"{BERTHS}\n  {SPARE}\n  priorityClassName: urgent"
    user.create(pod("urgent", cpu="3", extra=QUEUED, spec=urgent))
    await user.until("the urgent pod preempted the filler", lambda: "filler" not in user.pods())
    # Bound where the filler was (whether it then runs depends on how fast the filler's kubelet
    # lets go of the capacity: not what this run is about).
    await user.until(
        "the urgent pod was bound",
        lambda: user.pods()["urgent"]["spec"].get("nodeName") == "spare-0",
    )

    if kube_scheduler is not None:
        await reject_and_recreate(user, kube_scheduler=kube_scheduler)

    # A day later, ended reservations are past their retention.
    clock.offset += 25 * 3600
    await user.until("ended reservations were collected", lambda: not user.reservations())


async def edit_while_pinned(user: User, *, name: str) -> None:
    """A gated pod naming Berth's scheduler (its template carries the gate, or an admission-mode
    replica left it gated): Berth pins it, ungates it and binds it. The user labels it while
    the pin is on its way (the API server is slow to serve it), so the pin conflicts (409) and
    Berth reads the pod again before pinning once more."""
    user.cluster.faults.add(
        faults.Fault("PATCH", f"/api/v1/namespaces/default/pods/{name}", delay=1.0)
    )
    user.create(pod(name, cpu="1", extra=QUEUED, spec=f"{BERTHS}\n  {GATE}"))
    await user.until("Berth pins the gated pod", lambda: user.cluster.faults.pending == 0)
    user.patch_pod(name, {"metadata": {"labels": {"edited": "by-hand"}}})


async def reject_and_recreate(user: User, *, kube_scheduler: stack.StandInScheduler) -> None:
    """Admission mode: kube-scheduler does not bind an admitted bare pod in time, so Berth
    rejects the allocation: it deletes the pod and creates it again, gated."""
    kube_scheduler.paused = True
    user.create(pod("late", cpu="1", extra=QUEUED, spec=GATE))
    first = user.pods()["late"]["metadata"]["uid"]

    def recreated() -> bool:
        again = user.pods().get("late")
        return again is not None and again["metadata"]["uid"] != first

    await user.until("the unbound pod is recreated", recreated)
    kube_scheduler.resume()
    await user.until("the recreated pod ran", succeeded(user, "late"))


# The run -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Recording:
    mode: str
    rendered: list[Obj]  # the chart's objects as installed
    served: list[rbac.Served]
    calls: set[rbac.Call]
    non_resource: set[rbac.NonResource]
    grants: list[rbac.Grant]
    notes: str  # NOTES.txt as Helm rendered it for the install


async def record(mode: str, *, directory: pathlib.Path) -> Recording:
    emulator = rbac.RecordingEmulator(users={ADMIN_TOKEN: ADMIN, OPERATOR_TOKEN: OPERATOR})
    threaded = server.ThreadedEmulator(emulator).start()
    try:
        cluster = testing.RunningEmulator(
            threaded, emulator.write_kubeconfig(directory / "admin.kubeconfig"), directory
        )
        installed = await charts.install(
            cluster.kubeconfig, release=RELEASE, namespace=NAMESPACE, values=MODES[mode]
        )
        rendered = [d for d in yaml.safe_load_all(installed["manifest"]) if d]
        cluster.start_kubelets(
            [
                "3x cpu=8,memory=32Gi",
                "1x cpu=4,memory=16Gi label=pool=spare name=spare",
                "1x cpu=4,memory=16Gi,nvidia.com/gpu=1 label=pool=gpu name=gpu",
            ],
            speedup=SPEEDUP,
        )
        user = User(cluster)
        user.create(URGENT)
        operator_config = directory / "operator.kubeconfig"
        operator_config.write_text(
            yaml.safe_dump(rbac.kubeconfig(emulator.url, token=OPERATOR_TOKEN, namespace=NAMESPACE))
        )
        config = settings.Settings(
            kubeconfig=operator_config,
            namespace=NAMESPACE,
            mode=settings.Mode(mode),
            admission={"webhook": False, "bind_timeout": 1.0},
            http_host="127.0.0.1",
            http_port=0,
            log_level="warning",
            leader_election={"identity": f"{RELEASE}-0"},
        )
        clock = SteppingClock()
        stop = asyncio.Event()
        operator = asyncio.create_task(
            main.run(config, stop=stop, leader_components=scheduling.leader_components, clock=clock)
        )
        try:
            if mode == "admission":
                async with stack.stand_in(cluster) as kube_scheduler:
                    await drive(user, clock=clock, kube_scheduler=kube_scheduler)
            else:
                await drive(user, clock=clock, kube_scheduler=None)
        finally:
            stop.set()
            code = await asyncio.wait_for(operator, 30)
        assert code is main.ExitCode.OK
        served = list(emulator.served)
    finally:
        threaded.stop()
    found, other = rbac.calls(served, user=OPERATOR)
    notes = str(installed["info"]["notes"])
    grants = rbac.grants(rendered, user=OPERATOR)
    return Recording(mode, rendered, served, found, other, grants, notes)


@pytest.fixture(scope="module", params=list(MODES), ids=list(MODES))
def recording(request: pytest.FixtureRequest) -> Recording:
    with tempfile.TemporaryDirectory(prefix="berth-rbac-") as directory:
        return asyncio.run(record(str(request.param), directory=pathlib.Path(directory)))


# What a request is in RBAC terms ----------------------------------------------------------

REQUESTS = [
    ("GET", "/api/v1/namespaces/default/pods/p", {}, ("", "pods", "get", "default")),
    ("GET", "/api/v1/pods", {"limit": "500"}, ("", "pods", "list", None)),
    ("GET", "/api/v1/pods", {"watch": "true"}, ("", "pods", "watch", None)),
    ("GET", "/api/v1/watch/nodes", {}, ("", "nodes", "watch", None)),
    ("GET", "/api/v1/namespaces/ns", {}, ("", "namespaces", "get", None)),
    ("POST", "/api/v1/namespaces/default/pods", {}, ("", "pods", "create", "default")),
    ("POST", "/api/v1/namespaces/ns/pods/p/binding", {}, ("", "pods/binding", "create", "ns")),
    (
        "PUT",
        "/apis/coordination.k8s.io/v1/namespaces/berth-system/leases/berth-scheduler",
        {},
        ("coordination.k8s.io", "leases", "update", "berth-system"),
    ),
    (
        "PATCH",
        "/apis/scheduling.berth.io/v1alpha1/queues/team-a/status",
        {},
        ("scheduling.berth.io", "queues/status", "patch", None),
    ),
    (
        "DELETE",
        "/apis/scheduling.berth.io/v1alpha1/namespaces/ns/reservations/r",
        {},
        ("scheduling.berth.io", "reservations", "delete", "ns"),
    ),
    ("DELETE", "/api/v1/namespaces/ns/pods", {}, ("", "pods", "deletecollection", "ns")),
]
REQUEST_IDS = [
    "get-one",
    "list",
    "watch-query",
    "watch-legacy-path",
    "get-cluster-scoped",
    "create",
    "create-subresource",
    "update",
    "patch-status-cluster-scoped",
    "delete-one",
    "delete-collection",
]


@pytest.mark.parametrize(("method", "path", "query", "expected"), REQUESTS, ids=REQUEST_IDS)
def test_requests_become_rbac_requests(
    method: str, path: str, query: dict[str, str], expected: tuple[str, str, str, str | None]
) -> None:
    request = rbac.served(
        path, method=method, query=query, user=OPERATOR, registry=resources.Registry()
    )
    assert rbac.calls([request], user=OPERATOR) == ({rbac.Call(*expected)}, set())
    assert rbac.calls([request], user=ADMIN) == (set(), set())


@pytest.mark.parametrize(
    ("path", "discovery"),
    [
        ("/api", True),
        ("/apis/scheduling.berth.io/v1alpha1", True),
        ("/apis/scheduling.berth.io", True),
        ("/version", True),
        ("/metrics", False),
        ("/logs/kube-apiserver.log", False),
    ],
    ids=["core-versions", "group-version", "group", "version", "metrics", "logs"],
)
def test_only_discovery_paths_need_no_grant(path: str, discovery: bool) -> None:
    request = rbac.served(
        path, method="GET", query={}, user=OPERATOR, registry=resources.Registry()
    )
    _, other = rbac.calls([request], user=OPERATOR)
    assert other == {rbac.NonResource(path, "get")}
    assert rbac.discovery(rbac.NonResource(path, "get")) is discovery
    assert not rbac.discovery(rbac.NonResource(path, "post"))


async def test_the_recorder_names_each_request_by_its_token() -> None:
    users = {ADMIN_TOKEN: ADMIN, OPERATOR_TOKEN: OPERATOR}
    emulator = rbac.RecordingEmulator(users=users)
    async with emulator, aiohttp.ClientSession() as session:
        for token in (OPERATOR_TOKEN, ADMIN_TOKEN, "stolen"):
            headers = {"Authorization": f"Bearer {token}"}
            async with session.get(f"{emulator.url}/api/v1/nodes", headers=headers) as r:
                assert r.status == 200
        # A watch answers at once with its headers and then streams: enough to be recorded.
        async with session.get(f"{emulator.url}/api/v1/pods?watch=1") as r:
            assert r.status == 200
    assert [(s.user, s.method, s.path, s.watch) for s in emulator.served] == [
        (OPERATOR, "GET", "/api/v1/nodes", False),
        (ADMIN, "GET", "/api/v1/nodes", False),
        ("", "GET", "/api/v1/nodes", False),
        ("", "GET", "/api/v1/pods", True),
    ]


@pytest.mark.parametrize(
    ("grant", "call", "allowed"),
    [
        (("ClusterRole/r", "", "pods", "get", None), ("", "pods", "get", "ns"), True),
        (("ClusterRole/r", "", "pods", "get", None), ("", "pods", "get", None), True),
        (("ClusterRole/r", "", "pods", "get", None), ("", "pods", "list", None), False),
        (("ClusterRole/r", "", "pods", "get", None), ("", "pods/status", "get", "ns"), False),
        (("ClusterRole/r", "", "pods", "get", None), ("apps", "pods", "get", "ns"), False),
        (("Role/ns/r", "", "pods", "get", "ns"), ("", "pods", "get", "ns"), True),
        (("Role/ns/r", "", "pods", "get", "ns"), ("", "pods", "get", "other"), False),
        (("Role/ns/r", "", "pods", "list", "ns"), ("", "pods", "list", None), False),
    ],
    ids=[
        "cluster-role-in-a-namespace",
        "cluster-role-cluster-wide",
        "other-verb",
        "subresource-is-not-the-resource",
        "other-group",
        "role-in-its-namespace",
        "role-elsewhere",
        "role-across-namespaces",
    ],
)
def test_a_grant_allows_what_kubernetes_rbac_allows(
    grant: tuple[str, str, str, str, str | None],
    call: tuple[str, str, str, str | None],
    allowed: bool,
) -> None:
    assert rbac.allows(rbac.Grant(*grant), call=rbac.Call(*call)) is allowed


def test_grants_follow_the_bindings_to_the_user() -> None:
    def role(kind: str, name: str, verbs: list[str], namespace: str | None = None) -> Obj:
        metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
        rule = {"apiGroups": [""], "resources": ["pods"], "verbs": verbs}
        return {"kind": kind, "metadata": metadata, "rules": [rule]}

    def binding(kind: str, role: str, subject: Obj, namespace: str | None = None) -> Obj:
        metadata = {"name": role, **({"namespace": namespace} if namespace else {})}
        ref_kind = "ClusterRole" if kind == "ClusterRoleBinding" else "Role"
        return {
            "kind": kind,
            "metadata": metadata,
            "roleRef": {"kind": ref_kind, "name": role},
            "subjects": [subject],
        }

    account = {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    stranger = {"kind": "ServiceAccount", "name": "other", "namespace": NAMESPACE}
    objects = [
        role("ClusterRole", "reader", ["get", "list"]),
        role("ClusterRole", "writer", ["delete"]),
        role("Role", "local", ["create"], namespace="team"),
        binding("ClusterRoleBinding", "reader", account),
        binding("ClusterRoleBinding", "writer", stranger),
        binding("RoleBinding", "local", account, namespace="team"),
    ]
    assert rbac.grants(objects, user=OPERATOR) == [
        rbac.Grant("ClusterRole/reader", "", "pods", "get", None),
        rbac.Grant("ClusterRole/reader", "", "pods", "list", None),
        rbac.Grant("Role/team/local", "", "pods", "create", "team"),
    ]


# The chart against the recordings ----------------------------------------------------------


def roles(recording: Recording) -> list[Obj]:
    return [o for o in recording.rendered if o["kind"] in ("ClusterRole", "Role")]


@pytest.mark.slow
def test_the_recording_tells_the_operator_from_the_other_clients(recording: Recording) -> None:
    # The operator by its token; the stand-in kube-scheduler by the emulator's; helm's requests
    # arrive with no token at all.
    by_user = collections.Counter(request.user for request in recording.served)
    assert set(by_user) <= {OPERATOR, ADMIN, ""}
    assert by_user[OPERATOR] > 0
    # Helm keeps the release in a Secret: recorded, and not as the operator's.
    assert any(
        r.user != OPERATOR and r.method == "POST" and r.route and r.route.plural == "secrets"
        for r in recording.served
    )
    accounts = [o for o in recording.rendered if o["kind"] == "ServiceAccount"]
    assert [(o["metadata"]["name"], o["metadata"]["namespace"]) for o in accounts] == [
        (SERVICE_ACCOUNT, NAMESPACE)
    ]


@pytest.mark.slow
def test_every_call_the_operator_made_is_granted(recording: Recording) -> None:
    denied = [
        str(call)
        for call in sorted(recording.calls)
        if not any(rbac.allows(grant, call=call) for grant in recording.grants)
    ]
    assert denied == []


@pytest.mark.slow
def test_every_grant_the_chart_makes_was_used(recording: Recording) -> None:
    unused = [
        str(grant)
        for grant in recording.grants
        if not any(rbac.allows(grant, call=call) for call in recording.calls)
        and (grant.api_group, grant.resource, grant.verb) not in UNEXERCISED
    ]
    assert unused == []
    # The allow-list only names grants the chart still makes and no run could use.
    granted = {(g.api_group, g.resource, g.verb) for g in recording.grants}
    assert set(UNEXERCISED) <= granted


@pytest.mark.slow
def test_the_lease_is_reached_through_the_role_in_the_release_namespace(
    recording: Recording,
) -> None:
    lease_calls = {c for c in recording.calls if c.resource == "leases"}
    assert {c.verb for c in lease_calls} == {"get", "create", "update"}
    assert {c.namespace for c in lease_calls} == {NAMESPACE}
    leases = [g for g in recording.grants if g.resource == "leases"]
    assert {g.role for g in leases} == {f"Role/{NAMESPACE}/{RELEASE}-leader-election"}
    # The Role holds the Lease rights and nothing else; the other Role, in runai-reservation,
    # creates and deletes pods there and does nothing else (the reservation pods of shared
    # GPUs), and so do the calls it serves.
    reserving = f"Role/runai-reservation/{RELEASE}-gpu-reservations"
    roles_ = {g.role for g in recording.grants if g.role.startswith("Role/")}
    assert roles_ == {f"Role/{NAMESPACE}/{RELEASE}-leader-election", reserving}
    others = [g for g in recording.grants if g.role == reserving]
    assert {(g.resource, g.verb) for g in others} == {("pods", "create"), ("pods", "delete")}
    if recording.mode == "scheduler":  # admission mode also recreates rejected pods
        made = {
            (c.verb, c.namespace)
            for c in recording.calls
            if c.resource == "pods" and c.verb in ("create", "delete")
        }
        assert made == {("create", "runai-reservation"), ("delete", "runai-reservation")}


@pytest.mark.slow
def test_no_wildcards_and_no_secrets(recording: Recording) -> None:
    for role in roles(recording):
        for rule in role["rules"]:
            # The viewer role's rule names paths (nonResourceURLs), no API group or resource.
            resources = rule.get("resources", [])
            values = [*rule.get("apiGroups", []), *resources, *rule["verbs"]]
            assert "*" not in values, (role["metadata"]["name"], rule)
            assert "*" not in rule.get("nonResourceURLs", []), (role["metadata"]["name"], rule)
            assert not any(r.split("/")[0] == "secrets" for r in resources), rule
    assert not any(call.resource.startswith("secrets") for call in recording.calls)


POD_WRITES = {
    "scheduler": {
        ("pods", "patch"),
        ("pods/binding", "create"),
        ("pods/eviction", "create"),
        ("pods/status", "patch"),
        # Only in runai-reservation (the reservation pods of shared GPUs): a Role there.
        ("pods", "create"),
        ("pods", "delete"),
    },
}
POD_WRITES["admission"] = POD_WRITES["scheduler"]


@pytest.mark.slow
def test_pod_writes_are_what_the_mode_needs(recording: Recording) -> None:
    def pod_writes(items: collections.abc.Iterable[rbac.Call | rbac.Grant]) -> set[tuple[str, str]]:
        return {
            (item.resource, item.verb)
            for item in items
            if item.api_group == ""
            and item.resource.split("/")[0] == "pods"
            and item.verb not in ("get", "list", "watch")
        }

    assert pod_writes(recording.grants) == POD_WRITES[recording.mode]
    # ... and the recorded run made each of them: none is granted for a path never taken.
    assert pod_writes(recording.calls) == POD_WRITES[recording.mode]


@pytest.mark.slow
def test_requests_for_no_resource_are_discovery(recording: Recording) -> None:
    assert recording.non_resource
    assert [r for r in sorted(recording.non_resource) if not rbac.discovery(r)] == []


@pytest.mark.slow
def test_notes_point_at_the_kubectl_berth_plugin(recording: Recording) -> None:
    commands = [
        line.split("#")[0].split()
        for line in recording.notes.splitlines()
        if line.strip().startswith("kubectl berth ")
    ]
    assert sorted(c[2] for c in commands) == ["queues", "why"]
    for command in commands:
        assert command[2] in kubectl_berth.cli.commands
        if command[2] == "why":
            kubectl_berth.parse_target(command[3])
