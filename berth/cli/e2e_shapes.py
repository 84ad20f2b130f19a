"""The shapes ``berth bench e2e --real --shape S`` races, after kube-scheduler's scheduler_perf.

Each shape follows one workload of ``test/integration/scheduler_perf`` in Kubernetes v1.36.3
(``<dir>/performance-config.yaml``, its templates in ``templates/``): the same nodes
(``node-default.yaml``: cpu 4, memory 32Gi, 110 pods; three zones ``moon-1..3`` as
TopologySpreading labels them), the same pod templates (cpu 100m / memory 500Mi, the same
labels and constraints), and at 5000 nodes the same counts of pods already running (``init``)
and pods measured, taken from the workload's ``performance`` variant; other node counts scale
them. Here the init pods are created already bound (round-robin over the nodes, one per node
for the affinity shapes, so every constraint holds), where scheduler_perf has its scheduler
place them unmeasured: the cluster looks the same to every scheduler and costs no race.

- ``basic``: misc/``SchedulingBasic`` 5000Nodes_10000Pods: 1000 init, 10 000 measured;
- ``anti-affinity``: affinity/``SchedulingPodAntiAffinity`` 5000Nodes_2000Pods: 1000, 2000;
- ``spread``: topology_spreading/``TopologySpreading`` 5000Nodes_5000Pods: 5000, 5000;
- ``preferred-affinity``: affinity/``SchedulingPreferredPodAffinity`` 5000Nodes_5000Pods:
  5000, 5000;
- ``gang``: none (scheduler_perf 1.36 has no gang workload): SchedulingBasic's pods in gangs
  of 8: 1000, 2000;
- ``unschedulable-backlog``: misc/``Unschedulable`` 5kNodes/100Init/10kPods: 100, 10 000;
- ``dra``: dra/``SchedulingWithResourceClaimTemplate`` 5000pods_500nodes: 0, 2500 at 500
  nodes (25 000 at 5000).

In detail:

- ``anti-affinity``: every pod (label ``color: green``) repels the others per node, required.
- ``spread``: every pod (``color: blue``) spreads over the zones, ``maxSkew`` 5,
  ``DoNotSchedule``; the init pods are plain (``pod-default.yaml``), as there.
- ``preferred-affinity``: every pod (``color: red``) prefers nodes running its kind (weight 1).
- ``gang``: each scheduler gets the gang in the form its users write it: kube-scheduler a
  ``scheduling.k8s.io/v1alpha2`` PodGroup (``gang.minCount`` 8, its alpha ``GangScheduling``
  gate on) and pods naming it in ``spec.schedulingGroup``; Berth its own PodGroup
  (``minMember`` 8) and the ``scheduling.berth.io/pod-group`` label. The null scheduler sees
  plain pods.
- ``dra``: every node has :data:`DEVICES_PER_NODE` GPUs of a fake DRA driver
  (:data:`DRA_DRIVER`: a ResourceSlice per node and a DeviceClass, as ``createResourceDriver``
  publishes them; :mod:`berth.api.fake_devices`), and every pod one claim from the
  namespace's ResourceClaimTemplate (``pod-with-claim-template.yaml``: one device of the
  class); kube-controller-manager's resourceclaim controller makes each pod's claim, the
  scheduler allocates it (``status.allocation``, ``reservedFor``) and binds the pod. Where
  scheduler_perf gives its nodes room for 10 claims and fills half with 2500 init pods, the
  nodes here have 8 GPUs (as a GPU node has) and no init pods (a running pod's claim would
  have to be allocated before the race by one of the schedulers raced). 2500 measured pods
  take 62.5 % of 500 nodes' devices in each race, which starts with every device free. The
  null scheduler writes what a DRA scheduler writes (the claim's finalizer, its allocation of
  the node's next device, round-robin, with ``reservedFor``, then the binding), checking
  nothing (:mod:`berth.cli.e2e_null`): the ceiling of a DRA scheduler's writes.
- ``unschedulable-backlog``: scheduler_perf's churn of ``pod-high-priority-large-cpu.yaml``
  (cpu 9: no node fits) becomes a *standing* backlog of that many such pods (``--standing``,
  levels such as 0, 10 000 and 50 000), created and left unschedulable before the plain pods
  stream in. The null scheduler's standing pods name no scheduler (it would bind anything):
  they weigh on the API server alone.

Each scheduler's pods are in namespaces of their own, so constraints never cross schedulers
(affinity terms match their own namespace).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

from berth.api import core, custom_objects, dra, keys
from berth.api import objects as api_objects
from berth.emulator import kubelets

__all__ = [
    "DEVICES_PER_NODE",
    "DRA",
    "DRA_DRIVER",
    "NODE_ALLOCATABLE",
    "SHAPES",
    "ContenderLabel",
    "UNSCHEDULABLE",
    "ZONES",
    "Shape",
    "claim_objects",
    "gang_objects",
    "init_pods",
    "measured_pods",
    "pools",
    "standing_pods",
]

NODE_ALLOCATABLE = "cpu=4,memory=32Gi,pods=110"
ZONE_KEY = "topology.kubernetes.io/zone"
ZONES = ("moon-1", "moon-2", "moon-3")
GANG_SIZE = 8
UNSCHEDULABLE = "unschedulable-backlog"
DRA = "dra"
DRA_DRIVER = "gpu.example.com"
DEVICES_PER_NODE = 8
_CLAIM_TEMPLATE = "gpu"  # the template's name, the pods' entry and the claim's request
_IMAGE = "registry.k8s.io/pause:3.10"

ContenderLabel = typing.Literal["null", "kube_scheduler", "berth"]


@dataclasses.dataclass(frozen=True)
class Shape:
    name: str
    mirrors: str
    init: int  # pods already running at 5000 nodes
    measured: int  # pods measured at 5000 nodes
    labels: collections.abc.Mapping[str, str] = dataclasses.field(default_factory=dict)
    constraint: core.PodSpec = dataclasses.field(default_factory=core.PodSpec)  # added to spec
    init_constrained: bool = True  # init pods carry the labels and constraint too
    one_init_per_node: bool = False
    gang: int = 0
    claims: bool = False  # each measured pod claims one device from a ResourceClaimTemplate

    def counts(self, nodes: int, pods: int | None) -> tuple[int, int]:
        """(init, measured) pods at ``nodes`` nodes; ``pods`` overrides the measured count."""
        scale = nodes / 5000
        init = round(self.init * scale)
        if self.one_init_per_node:
            init = min(init, nodes)
        measured = pods if pods is not None else max(100, round(self.measured * scale))
        if self.claims and pods is None:
            measured = min(measured, nodes * DEVICES_PER_NODE)  # one device each
        if self.gang:
            measured = max(self.gang, measured - measured % self.gang)
        return init, measured


def _term(color: str) -> core.PodAffinityTerm:
    return {
        "labelSelector": {"matchLabels": {"color": color}},
        "topologyKey": "kubernetes.io/hostname",
    }


SHAPES: dict[str, Shape] = {
    shape.name: shape
    for shape in (
        Shape("basic", "misc/SchedulingBasic 5000Nodes_10000Pods", 1000, 10_000),
        Shape(
            "anti-affinity",
            "affinity/SchedulingPodAntiAffinity 5000Nodes_2000Pods",
            1000,
            2000,
            labels={"color": "green"},
            constraint={
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [_term("green")]
                    }
                }
            },
            one_init_per_node=True,
        ),
        Shape(
            "spread",
            "topology_spreading/TopologySpreading 5000Nodes_5000Pods",
            5000,
            5000,
            labels={"color": "blue"},
            constraint={
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 5,
                        "topologyKey": ZONE_KEY,
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"color": "blue"}},
                    }
                ]
            },
            init_constrained=False,
        ),
        Shape(
            "preferred-affinity",
            "affinity/SchedulingPreferredPodAffinity 5000Nodes_5000Pods",
            5000,
            5000,
            labels={"color": "red"},
            constraint={
                "affinity": {
                    "podAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 1, "podAffinityTerm": _term("red")}
                        ]
                    }
                }
            },
            one_init_per_node=True,
        ),
        Shape(
            "gang",
            "none in scheduler_perf 1.36: SchedulingBasic's pods in gangs of 8",
            1000,
            2000,
            gang=GANG_SIZE,
        ),
        Shape(UNSCHEDULABLE, "misc/Unschedulable 5kNodes/100Init/10kPods", 100, 10_000),
        Shape(
            DRA,
            "dra/SchedulingWithResourceClaimTemplate 5000pods_500nodes (8 devices a node, "
            "no init pods)",
            0,
            25_000,
            claims=True,
        ),
    )
}


def pools(nodes: int, *, devices: bool = False) -> list[kubelets.NodePool]:
    """``nodes`` nodes of ``node-default.yaml``'s size in three zones (as TopologySpreading
    labels them; the other shapes ignore the zone); with ``devices``, each with
    :data:`DEVICES_PER_NODE` devices of :data:`DRA_DRIVER` (the ``dra`` shape; the others
    ignore them)."""
    specs = []
    gpus = f" devices={DRA_DRIVER}:{DEVICES_PER_NODE}" if devices else ""
    for index, zone in enumerate(ZONES):
        count = nodes // len(ZONES) + (1 if index < nodes % len(ZONES) else 0)
        if count:
            specs.append(f"{count}x {NODE_ALLOCATABLE} label={ZONE_KEY}={zone}{gpus} name={zone}")
    return [kubelets.parse_pool(spec, index=i) for i, spec in enumerate(specs)]


def _pod(
    name: str,
    *,
    scheduler: str,
    cpu: str = "100m",
    labels: collections.abc.Mapping[str, str] = {},
    extra: core.PodSpec | None = None,
    node: str | None = None,
) -> core.Pod:
    resources = {"cpu": cpu, "memory": "500Mi"}
    spec: core.PodSpec = {
        "schedulerName": scheduler,
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "pause",
                "image": _IMAGE,
                "ports": [{"containerPort": 80}],
                "resources": {"requests": resources, "limits": dict(resources)},
            }
        ],
        **(extra or {}),
    }
    if node is not None:
        spec["nodeName"] = node
    metadata: api_objects.ObjectMeta = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def init_pods(shape: Shape, count: int, *, nodes: collections.abc.Sequence[str]) -> list[core.Pod]:
    """The pods already running: bound at creation, round-robin over ``nodes``."""
    labels = shape.labels if shape.init_constrained else {}
    extra = shape.constraint if shape.init_constrained else None
    return [
        _pod(
            f"init-{i:06d}",
            scheduler="default-scheduler",
            labels=labels,
            extra=extra,
            node=nodes[i % len(nodes)],
        )
        for i in range(count)
    ]


def _group_name(index: int) -> str:
    return f"gang-{index:05d}"


def measured_pods(
    shape: Shape, count: int, *, contender: ContenderLabel, scheduler: str
) -> list[core.Pod]:
    """The pods raced, naming ``scheduler``; in gangs for the ``gang`` shape, each in the form
    ``contender`` reads (see the module docstring)."""
    made = []
    for i in range(count):
        pod = _pod(f"p-{i:06d}", scheduler=scheduler, labels=shape.labels, extra=shape.constraint)
        if shape.claims:
            pod["spec"]["resourceClaims"] = [
                {"name": _CLAIM_TEMPLATE, "resourceClaimTemplateName": _CLAIM_TEMPLATE}
            ]
            pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": _CLAIM_TEMPLATE}]
        if shape.gang:
            group = _group_name(i // shape.gang)
            if contender == "berth":
                pod["metadata"].setdefault("labels", {})[keys.POD_GROUP_LABEL] = group
            elif contender == "kube_scheduler":
                pod["spec"]["schedulingGroup"] = {"podGroupName": group}
        made.append(pod)
    return made


def gang_objects(
    shape: Shape, count: int, *, contender: ContenderLabel
) -> list[custom_objects.PodGroup] | list[api_objects.ForeignObject]:
    """The gangs' objects for ``contender``, created before its pods (none for the null
    scheduler, or a shape without gangs)."""
    if not shape.gang or contender == "null":
        return []
    groups = range(count // shape.gang)
    if contender == "berth":
        ours: list[custom_objects.PodGroup] = [
            {
                "apiVersion": keys.API_VERSION,
                "kind": "PodGroup",
                "metadata": {"name": _group_name(g)},
                "spec": {"minMember": shape.gang},
            }
            for g in groups
        ]
        return ours
    kubernetes: list[api_objects.ForeignObject] = [
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": _group_name(g)},
            "spec": {"schedulingPolicy": {"gang": {"minCount": shape.gang}}},
        }
        for g in groups
    ]
    return kubernetes


def claim_objects(shape: Shape) -> list[dra.ResourceClaimTemplate]:
    """The namespace's ResourceClaimTemplate for a shape whose pods claim devices
    (``resourceclaimtemplate.yaml``: one device of the driver's class), else nothing."""
    if not shape.claims:
        return []
    request: dra.DeviceRequest = {
        "name": _CLAIM_TEMPLATE,
        "exactly": {"deviceClassName": DRA_DRIVER},
    }
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": _CLAIM_TEMPLATE},
            "spec": {"spec": {"devices": {"requests": [request]}}},
        }
    ]


def standing_pods(start: int, stop: int, *, scheduler: str) -> list[core.Pod]:
    """Pods ``start``..``stop`` of the standing backlog: cpu 9, more than any node has
    (``pod-high-priority-large-cpu.yaml``, without the priority: nothing is preempted here)."""
    return [_pod(f"u-{i:06d}", scheduler=scheduler, cpu="9") for i in range(start, stop)]


GANG_FEATURE_GATES = {"GenericWorkload": True, "GangScheduling": True}
"""The alpha gates kube-scheduler 1.36 gangs under (API server, controller manager and
kube-scheduler), with ``scheduling.k8s.io/v1alpha2`` served."""
GANG_RUNTIME_CONFIG = ("scheduling.k8s.io/v1alpha2=true",)
