"""Other schedulers' PodGroups -> Berth PodGroups, and Berth's verdict -> their status. Pure.

Workloads written for a gang scheduler already carry their gang (and on Kubernetes 1.36, the
API server's own ``scheduling.k8s.io/v1alpha2`` PodGroup, :data:`KUBERNETES`, whose minCount
Berth honours without writing its status): the Kubeflow training
operator, the MPI and Spark operators and KubeRay create a scheduler-plugins PodGroup
(``scheduling.x-k8s.io/v1alpha1``; pods labelled ``scheduling.x-k8s.io/pod-group``) or a Volcano
PodGroup (``scheduling.volcano.sh/v1beta1``; pods annotated ``scheduling.k8s.io/group-name``).
Berth honours such a group as it is: :mod:`berth.kube.grouping.interop_groups` keeps a Berth
PodGroup of the same name in step with it (:func:`mirror`) — so the pods' own keys find it,
``kubectl get bpg`` shows it with its reason, and it goes with the original (ownerReference) — and
writes Berth's verdict back into the original's status (:func:`foreign_status`), where its operator
looks.

- scheduler-plugins: ``minMember``, ``minResources``, ``scheduleTimeoutSeconds`` carry over;
  status ``phase`` (Pending, Scheduling, Running, Finished, Failed) and the ``running``,
  ``succeeded``, ``failed`` counts are written back.
- Volcano: ``minMember``, ``minResources``, ``queue``, ``priorityClassName`` carry over;
  ``minTaskMember`` (a minimum per task) is honoured as its sum when that is above ``minMember``
  (Berth counts a gang's pods, not its roles: never fewer than Volcano would start). Status
  ``phase`` is written back, ``Inqueue`` while the group waits — the training operator creates
  a job's pods only once its Volcano PodGroup left ``Pending`` — and an ``Unschedulable``
  condition says why, with the counts.
- Kubernetes' own gangs, whose status Berth leaves alone: 1.36's PodGroup
  (:data:`KUBERNETES`: ``schedulingPolicy.gang.minCount``) and 1.35's Workload
  (:data:`WORKLOADS`: one Berth PodGroup per ``spec.podGroups[]`` and per replica key its pods
  name, :func:`mirrors`).
- A group that cannot be honoured (``minMember`` below 1, a quantity that does not parse) gets
  a mirror marked invalid: it is never placed and its reason says what is wrong.
"""

from __future__ import annotations

import collections.abc
import dataclasses

import typing_extensions

from berth.api import custom_objects, keys, objects, quantities, workload_refs
from berth.api import errors as api_errors

__all__ = [
    "FLAVORS",
    "KUBERNETES",
    "SCHEDULER_PLUGINS",
    "VOLCANO",
    "WORKLOADS",
    "Flavor",
    "ForeignStatus",
    "Mirror",
    "MirrorMeta",
    "foreign_status",
    "mirror",
    "mirrors",
]


class MirrorMeta(typing_extensions.TypedDict):
    """A mirror's metadata. An annotation set to ``None`` is one the mirror must not carry
    (its ``invalid`` mark once the original is fixed): removed by the merge patch that writes it,
    left out when it is created."""

    name: str
    namespace: str
    annotations: dict[str, str | None]
    ownerReferences: list[objects.OwnerReference]


class Mirror(typing_extensions.TypedDict):
    """The Berth PodGroup that stands for another scheduler's gang, as written."""

    apiVersion: str
    kind: str
    metadata: MirrorMeta
    spec: custom_objects.PodGroupSpec


class ForeignStatus(typing_extensions.TypedDict, total=False):
    """The status fields Berth writes into a scheduler-plugins or Volcano PodGroup (both name
    them alike; Volcano's conditions are shaped as ``metav1.Condition``)."""

    phase: str
    running: int
    succeeded: int
    failed: int
    conditions: list[objects.Condition]


@dataclasses.dataclass(frozen=True)
class Flavor:
    """One other scheduler's PodGroup API."""

    name: str  # "scheduler-plugins", "volcano": the setting and chart value that enable it
    group: str
    version: str
    status_subresource: bool  # Volcano's CRD has none: its status is written on the object
    pod_key: str  # how its pods join a group, for messages
    writes_status: bool = True  # False: Berth leaves the original's status to its owners
    scheduler_name: str | None = None  # its pods' schedulerName, which Berth can claim
    kind: str = "PodGroup"  # the kind holding the gangs
    plural: str = "podgroups"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def path(self) -> str:
        """The cluster-wide collection of its objects."""
        return f"/apis/{self.api_version}/{self.plural}"

    def object_path(self, *, namespace: str, name: str) -> str:
        return f"/apis/{self.api_version}/namespaces/{namespace}/{self.plural}/{name}"


SCHEDULER_PLUGINS = Flavor(
    "scheduler-plugins",
    "scheduling.x-k8s.io",
    "v1alpha1",
    status_subresource=True,
    pod_key=f"label {keys.INTEROP_POD_GROUP_LABEL}",
    scheduler_name="scheduler-plugins-scheduler",  # its chart's second-scheduler profile
)
VOLCANO = Flavor(
    "volcano",
    "scheduling.volcano.sh",
    "v1beta1",
    status_subresource=False,
    pod_key=f"annotation {keys.INTEROP_POD_GROUP_ANNOTATION}",
    scheduler_name="volcano",
)
KUBERNETES = Flavor(
    "kubernetes",
    "scheduling.k8s.io",
    "v1alpha2",
    status_subresource=True,
    pod_key="spec.schedulingGroup.podGroupName",
    writes_status=False,
)
"""Kubernetes 1.36's own PodGroup (KEP 5832): ``spec.schedulingPolicy.gang.minCount`` (or
``basic``: no gang); pods join with ``spec.schedulingGroup.podGroupName``."""
WORKLOADS = Flavor(
    "kubernetes-workloads",
    "scheduling.k8s.io",
    "v1alpha1",
    status_subresource=False,
    pod_key="spec.workloadRef",
    writes_status=False,
    kind="Workload",
    plural="workloads",
)
"""Kubernetes 1.35's Workload (KEP 4671): one gang per ``spec.podGroups[]`` (``policy.gang.
minCount``, or ``basic``: no gang), and per ``podGroupReplicaKey`` its pods name; pods join
with ``spec.workloadRef`` (:mod:`berth.api.workload_refs` names the Berth PodGroups)."""
FLAVORS = (SCHEDULER_PLUGINS, VOLCANO, KUBERNETES, WORKLOADS)


def _problems(spec: objects.JSONObject, *, field: str = "minMember") -> tuple[int, list[str]]:
    """``spec``'s minMember (1 when unusable) and what is wrong with it; ``field`` is what the
    original calls minMember, for the messages."""
    problems: list[str] = []
    min_member = spec.get("minMember")
    if min_member is None:
        min_member = 1 if "minTaskMember" in spec else None
    if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 1:
        problems.append(f"{field} is {min_member!r}: a gang needs at least 1 pod")
        min_member = 1
    resources = spec.get("minResources")
    if resources is not None:
        if not isinstance(resources, collections.abc.Mapping):
            problems.append(f"minResources is {resources!r}, not a map of quantities")
        else:
            for name, value in sorted(resources.items()):
                try:
                    if quantities.parse_milli(value) < 0:
                        problems.append(f"minResources {name} is negative ({value})")
                except api_errors.QuantityError as exc:
                    problems.append(f"minResources {name}: {exc}")
    return min_member, problems


def _kubernetes_spec(spec: objects.JSONObject) -> objects.JSONObject:
    """A ``scheduling.k8s.io/v1alpha2`` PodGroup's policy as ``minMember``."""
    policy = spec.get("schedulingPolicy")
    policy = policy if isinstance(policy, collections.abc.Mapping) else {}
    gang = policy.get("gang")
    if isinstance(gang, collections.abc.Mapping):
        return {"minMember": gang.get("minCount")}
    if "basic" in policy:
        return {"minMember": 1}
    return {"minMember": None}


def mirrors(
    flavor: Flavor,
    obj: objects.ForeignObject,
    /,
    *,
    replica_keys: collections.abc.Iterable[tuple[str, str]] = (),
) -> list[Mirror]:
    """The Berth PodGroups that stand for ``obj``: one for a PodGroup; for a
    :data:`WORKLOADS` Workload one per pod group, and one per (pod group, replica key) in
    ``replica_keys`` (the keys its pods name)."""
    if flavor is not WORKLOADS:
        return [mirror(flavor, obj)]
    meta = obj.get("metadata", {})
    workload = meta.get("name", "")
    groups = obj.get("spec", {}).get("podGroups")
    by_name = {
        str(g.get("name")): g
        for g in (groups if isinstance(groups, list) else ())
        if isinstance(g, collections.abc.Mapping) and g.get("name")
    }
    wanted: list[tuple[str, str | None]] = [(name, None) for name in by_name]
    wanted += sorted((g, key) for g, key in set(replica_keys) if g in by_name)
    out = []
    for pod_group, key in wanted:
        name = workload_refs.group_name(workload, pod_group, replica_key=key)
        policy = by_name[pod_group].get("policy")
        renamed: objects.ForeignObject = {
            **obj,
            "metadata": {**meta, "name": name},
            "spec": {"schedulingPolicy": policy},
        }
        what = f"Workload {workload} pod group {pod_group}" + (
            f" replica {key}" if key is not None else ""
        )
        made = mirror(flavor, renamed, what=what, owner=workload)
        out.append(made)
    return out


def mirror(
    flavor: Flavor,
    obj: objects.ForeignObject,
    /,
    *,
    what: str | None = None,
    owner: str | None = None,
) -> Mirror:
    """The Berth PodGroup that stands for ``obj`` (a PodGroup of ``flavor``; ``what`` names it
    in messages and ``owner`` is the name of the object it belongs to, when not ``obj``)."""
    meta = obj.get("metadata", {})
    spec = obj.get("spec", {})
    if flavor in (KUBERNETES, WORKLOADS):
        spec = _kubernetes_spec(spec)
    fields = {KUBERNETES: "schedulingPolicy.gang.minCount", WORKLOADS: "policy.gang.minCount"}
    min_member, problems = _problems(spec, field=fields.get(flavor, "minMember"))
    out: custom_objects.PodGroupSpec = {"minMember": min_member}
    resources = spec.get("minResources")
    if not any(p.startswith("minResources") for p in problems) and resources:
        assert isinstance(resources, collections.abc.Mapping)  # _problems refused any other
        out["minResources"] = {str(k): str(v) for k, v in resources.items()}
    if flavor is SCHEDULER_PLUGINS:
        timeout = spec.get("scheduleTimeoutSeconds")
        if isinstance(timeout, int) and not isinstance(timeout, bool) and timeout >= 1:
            out["scheduleTimeoutSeconds"] = timeout
    elif flavor is VOLCANO:
        tasks = spec.get("minTaskMember")
        if isinstance(tasks, collections.abc.Mapping):
            counts = [v for v in tasks.values() if isinstance(v, int) and v > 0]
            out["minMember"] = max(min_member, sum(counts))
        out["queue"] = str(spec.get("queue") or keys.DEFAULT_QUEUE)
        if spec.get("priorityClassName"):
            out["priorityClassName"] = str(spec["priorityClassName"])
    name = meta.get("name", "")
    annotations: dict[str, str | None] = {
        keys.MIRROR_OF_ANNOTATION: f"{flavor.api_version} {what or f'PodGroup {name}'}",
        keys.INVALID_ANNOTATION: (
            f"{what or f'{flavor.name} PodGroup {name}'}: {'; '.join(problems)}"
            if problems
            else None
        ),
    }
    return {
        "apiVersion": keys.API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace") or "default",
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": flavor.api_version,
                    "kind": flavor.kind,
                    "name": owner or name,
                    "uid": meta.get("uid", ""),
                    "controller": True,
                }
            ],
        },
        "spec": out,
    }


_SP_PHASES = {
    "Pending": "Pending",
    "Inqueue": "Pending",
    "Scheduled": "Scheduling",
    "Running": "Running",
    "Finished": "Finished",
    "Failed": "Failed",
}
_VOLCANO_PHASES = {
    "Pending": "Inqueue",
    "Inqueue": "Inqueue",
    "Scheduled": "Running",
    "Running": "Running",
    "Finished": "Completed",
    "Failed": "Pending",
}


def foreign_status(
    flavor: Flavor,
    /,
    *,
    phase: str,
    running: int,
    succeeded: int,
    failed: int,
    reason: str | None,
    invalid: bool = False,
) -> ForeignStatus:
    """The status (the fields Berth owns) of a ``flavor`` PodGroup whose Berth mirror is in
    ``phase`` with these counts; ``reason``: why it waits (None once placed)."""
    status: ForeignStatus = {"running": running, "succeeded": succeeded, "failed": failed}
    if flavor is SCHEDULER_PLUGINS:
        status["phase"] = "Pending" if invalid else _SP_PHASES.get(phase, "Unknown")
        return status
    status["phase"] = "Pending" if invalid else _VOLCANO_PHASES.get(phase, "Unknown")
    if reason is not None:
        status["conditions"] = [
            {
                "type": "Unschedulable",
                "status": "True",
                "reason": "Unschedulable",
                "message": reason,
            }
        ]
    else:
        status["conditions"] = [{"type": "Scheduled", "status": "True", "reason": "Scheduled"}]
    return status
