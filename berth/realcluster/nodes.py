"""Simulated nodes on a real API server: Node objects for KWOK, and the stages it plays.

The nodes come from the same pool specs as the emulator's (:class:`berth.emulator.kubelets.
NodePool`), with the same labels and per-node pod subnets. KWOK manages the nodes annotated
:data:`MANAGED_ANNOTATION` and plays a kubelet for each through :data:`STAGES`:

- a node becomes Ready with the capacity it was created with;
- a pod bound to it becomes Running and Ready, with an IP from the node's subnet;
- with ``sim.berth.io/duration`` (``90s``, ``1h30m``) a running pod Succeeds that long after it
  started, as in the emulator (without the emulator's speed-up: this is real time);
- a deleted or evicted pod is removed, as a kubelet confirms a deletion.

Node heartbeats are not played: kube-controller-manager runs without its node lifecycle
controller (:mod:`berth.realcluster.controlplane`), so nothing marks quiet nodes NotReady.
"""

from __future__ import annotations

import collections.abc
import typing

import yaml

from berth.api import core, dra, fake_devices, keys, objects
from berth.emulator import addresses, kubelets

__all__ = [
    "CONFIGURATION",
    "MANAGED_ANNOTATION",
    "STAGES",
    "KwokConfiguration",
    "Stage",
    "StageDelay",
    "StageNext",
    "StageRequirement",
    "StageSelector",
    "StageSpec",
    "device_manifests",
    "node_manifests",
    "stages_config",
]

MANAGED_ANNOTATION = "kwok.x-k8s.io/node"
MANAGED_VALUE = "fake"


# KWOK's kinds (kwok.x-k8s.io/v1alpha1, config.kwok.x-k8s.io/v1alpha1): the fields written here.


class StageRequirement(typing.TypedDict, total=False):
    """A Stage selector's requirement: ``key`` is a jq expression on the object."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: list[str]


class StageSelector(typing.TypedDict):
    matchExpressions: list[StageRequirement]


class StageNext(typing.TypedDict, total=False):
    """What the stage does: write the status its template renders, or delete the object."""

    statusTemplate: str
    delete: bool


class StageDelay(typing.TypedDict, total=False):
    durationMilliseconds: int
    durationFrom: dict[str, str]  # {expressionFrom}: a jq expression giving the duration


class StageSpec(typing.TypedDict, total=False):
    resourceRef: dict[str, str]  # {apiGroup, kind}
    selector: StageSelector
    next: StageNext
    delay: StageDelay


class Stage(objects.KubeObject, total=False):
    """A KWOK Stage: one step of the lifecycle KWOK plays for the objects it selects."""

    spec: StageSpec


class KwokConfiguration(typing.TypedDict):
    apiVersion: str
    kind: str
    options: dict[str, int]


def _taint(taint: core.Taint) -> core.Taint:
    """A pool's taint as :func:`berth.emulator.kubelets.parse_pool` spells it."""
    out = core.Taint(key=taint["key"], effect=taint["effect"])
    if "value" in taint:
        out["value"] = taint["value"]
    return out


def node_manifests(pools: collections.abc.Sequence[kubelets.NodePool]) -> list[core.Node]:
    """One Node per pool member, with capacity, labels, taints and a pod subnet."""
    carver = addresses.SubnetCarver(taken=())
    nodes: list[core.Node] = []
    for pool in pools:
        pods = int(pool.allocatable.get("pods", "110"))
        for name in pool.names():
            spec: core.NodeSpec = {"podCIDR": str(carver.carve(pods=pods))}
            if pool.taints:
                spec["taints"] = [_taint(t) for t in pool.taints]
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "annotations": {MANAGED_ANNOTATION: MANAGED_VALUE},
                        "labels": {
                            "kubernetes.io/hostname": name,
                            "kubernetes.io/os": "linux",
                            "kubernetes.io/arch": "amd64",
                            "type": "kwok",
                            kubelets.POOL_LABEL: pool.prefix,
                            **pool.labels,
                        },
                    },
                    "spec": spec,
                    "status": {
                        "capacity": dict(pool.allocatable),
                        "allocatable": dict(pool.allocatable),
                    },
                }
            )
    return nodes


def device_manifests(
    pools: collections.abc.Sequence[kubelets.NodePool],
) -> list[dra.DeviceClass | dra.ResourceSlice]:
    """The DRA objects of the pools' ``devices=`` (no kubelet plugin runs on KWOK's nodes):
    a DeviceClass per driver and a ResourceSlice per node and driver
    (:mod:`berth.api.fake_devices`)."""
    classes: dict[str, dra.DeviceClass] = {}
    slices: list[dra.ResourceSlice] = []
    for pool in pools:
        for driver, count in pool.devices:
            classes.setdefault(driver, fake_devices.device_class(driver))
            slices += [
                fake_devices.node_slice(driver=driver, node=name, count=count)
                for name in pool.names()
            ]
    return [*classes.values(), *slices]


def _pod_stage(
    name: str,
    *,
    match: list[StageRequirement],
    next_: StageNext,
    delay: StageDelay | None = None,
) -> Stage:
    spec: StageSpec = {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": match},
        "next": next_,
    }
    if delay is not None:
        spec["delay"] = delay
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": spec,
    }


_NOT_DELETED: StageRequirement = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}

_NODE_READY = """\
{{ $now := Now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
{{ with NodeIP }}
- address: {{ . | Quote }}
  type: InternalIP
{{ end }}
{{ with NodeName }}
- address: {{ . | Quote }}
  type: Hostname
{{ end }}
allocatable:
{{ YAML .status.allocatable 1 }}
capacity:
{{ YAML .status.capacity 1 }}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: kwok
  kubeProxyVersion: kwok
phase: Running
"""

_POD_RUNNING = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with NodeIPWith .spec.nodeName }}
hostIP: {{ . | Quote }}
{{ end }}
{{ $host := or .spec.hostNetwork false }}
{{ $uid := or .metadata.uid "" }}
{{ with PodIPWith .spec.nodeName $host $uid .metadata.name .metadata.namespace }}
podIP: {{ . | Quote }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""

_POD_SUCCEEDED = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  type: Ready
  reason: PodCompleted
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
{{ end }}
phase: Succeeded
"""

STAGES: list[Stage] = [
    {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "node-ready"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Node"},
            "selector": {
                "matchExpressions": [
                    {
                        "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
                        "operator": "NotIn",
                        "values": ["True"],
                    }
                ]
            },
            "next": {"statusTemplate": _NODE_READY},
        },
    },
    _pod_stage(
        "pod-running",
        match=[
            _NOT_DELETED,
            {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
        ],
        next_={"statusTemplate": _POD_RUNNING},
    ),
    _pod_stage(
        "pod-succeeded",
        match=[
            _NOT_DELETED,
            {"key": ".status.phase", "operator": "In", "values": ["Running"]},
            {
                "key": f'.metadata.annotations["{keys.SIM_DURATION_ANNOTATION}"]',
                "operator": "Exists",
            },
        ],
        delay={
            "durationMilliseconds": 0,
            "durationFrom": {
                "expressionFrom": f'.metadata.annotations["{keys.SIM_DURATION_ANNOTATION}"]'
            },
        },
        next_={"statusTemplate": _POD_SUCCEEDED},
    ),
    _pod_stage(
        "pod-deleted",
        match=[{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
        next_={"delete": True},
    ),
]
"""KWOK's stages for Berth's simulated nodes (what :mod:`berth.emulator.kubelets` does)."""


CONFIGURATION: KwokConfiguration = {
    "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
    "kind": "KwokConfiguration",
    # KWOK plays 4 stages at a time by default: thousands of nodes would take minutes to
    # become Ready. It has no client rate limit of its own.
    "options": {"nodePlayStageParallelism": 32, "podPlayStageParallelism": 32},
}


def stages_config() -> str:
    """KWOK's ``--config`` file: its configuration and the stages, as YAML documents."""
    return yaml.safe_dump_all([CONFIGURATION, *STAGES], sort_keys=False)
