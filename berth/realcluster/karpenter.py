"""Karpenter as one more component of a real control plane: its CRDs, a NodePool, its controller.

Karpenter's core ships a KWOK cloud provider (package ``sigs.k8s.io/karpenter/kwok``, what its
own end-to-end suite runs): for each NodeClaim it launches, it creates a Node object annotated
``kwok.x-k8s.io/node: fake`` with the instance type's capacity, which the plane's KWOK then plays
as it plays the plane's own nodes (Ready at once, pods Running). So Karpenter here provisions,
registers, initializes and consolidates nodes exactly as in a cloud, only faster.

:class:`Karpenter` installs what ``hack/build-k8s --with karpenter`` copied out of the module
(:func:`berth.realcluster.binaries.extra`): the CRDs (NodePool, NodeClaim, NodeOverlay, the
``autoscaling.x-k8s.io`` CapacityBuffer, and KWOKNodeClass), one KWOKNodeClass and the
NodePools it is given (:func:`node_pool`: by default one of :data:`INSTANCE_TYPES`, GPU ones
included), then runs the controller as a local process, as the plane runs kube-scheduler:

- it authenticates with a client certificate (user ``karpenter``, group ``system:masters``:
  the chart's RBAC is not what is tested here);
- no leader election; the ``CapacityBuffer`` feature gate on (the API Berth's reservations
  will ask headroom through); the instance types are :data:`INSTANCE_TYPES` (a file it reads
  at start: ``INSTANCE_TYPES_FILE_PATH``), each offered on demand in one zone;
- its metrics and health ports are free ports. Karpenter binds them on every interface (its
  operator formats them as ``:PORT`` and offers no address to bind): the one listener of the
  plane not on 127.0.0.1; they serve only metrics and probes.

A failure names Karpenter and its log (:class:`~berth.realcluster.processes.ComponentFailed`).
:meth:`ControlPlane.stop` stops it with the rest of the plane.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import json
import os
import pathlib
import typing
import urllib.error
import urllib.request

import yaml

from berth.api import core, objects
from berth.emulator import kubelets
from berth.realcluster import binaries, controlplane, processes

__all__ = [
    "API_GROUP",
    "INSTANCE_TYPES",
    "NODE_CLASS",
    "NODE_POOL_LABEL",
    "Disruption",
    "InstanceType",
    "Karpenter",
    "NodeClaimTemplate",
    "NodeClaimTemplateSpec",
    "NodeClassReference",
    "NodePool",
    "NodePoolSpec",
    "instance_types_document",
    "node_class",
    "node_pool",
]

API_GROUP = "karpenter.sh"
NODE_POOL_LABEL = f"{API_GROUP}/nodepool"
"""The label Karpenter puts on the nodes of a NodePool (``karpenter.sh/nodepool``)."""
NODE_CLASS = "default"
"""The KWOKNodeClass every NodePool here refers to."""
ZONE = "zone-a"
GPU = "nvidia.com/gpu"
_READY_TIMEOUT = 180.0


# Karpenter's NodePool (karpenter.sh/v1): the fields written here.


class NodeClassReference(typing.TypedDict):
    group: str
    kind: str
    name: str


class NodeClaimTemplateSpec(typing.TypedDict, total=False):
    nodeClassRef: NodeClassReference
    requirements: list[core.NodeSelectorRequirement]
    expireAfter: str  # a duration, or "Never"


class NodeClaimTemplate(typing.TypedDict, total=False):
    """What the NodePool's nodes are made from: their labels and how they are launched."""

    metadata: objects.ObjectMeta
    spec: NodeClaimTemplateSpec


class Disruption(typing.TypedDict, total=False):
    consolidationPolicy: str  # WhenEmpty, WhenEmptyOrUnderutilized
    consolidateAfter: str


class NodePoolSpec(typing.TypedDict, total=False):
    template: NodeClaimTemplate
    disruption: Disruption
    limits: dict[str, str]  # the most the pool's nodes may have in all, per resource


class NodePool(objects.KubeObject, total=False):
    spec: NodePoolSpec


@dataclasses.dataclass(frozen=True)
class InstanceType:
    """A machine shape Karpenter may launch (its capacity; 110 pods like a kubelet)."""

    name: str
    cpu: int
    memory: str
    gpus: int = 0
    price: float = 0.1  # per hour, on demand; Karpenter launches the cheapest that fits

    def capacity(self) -> dict[str, str]:
        out = {"cpu": str(self.cpu), "memory": self.memory, "pods": "110"}
        if self.gpus:
            out[GPU] = str(self.gpus)
        return out


INSTANCE_TYPES: tuple[InstanceType, ...] = (
    InstanceType("cpu-4", cpu=4, memory="16Gi", price=0.17),
    InstanceType("cpu-16", cpu=16, memory="64Gi", price=0.68),
    InstanceType("gpu-4x", cpu=32, memory="256Gi", gpus=4, price=12.0),
    InstanceType("gpu-8x", cpu=64, memory="512Gi", gpus=8, price=24.0),
)
"""The shapes the harness's NodePool offers: two CPU machines and 4- and 8-GPU machines."""


def instance_types_document(types: collections.abc.Sequence[InstanceType]) -> str:
    """The KWOK provider's instance-types file (a JSON list) for ``types``."""
    return json.dumps(
        [
            {
                "name": it.name,
                "architecture": "amd64",
                "operatingSystems": ["linux"],
                "resources": it.capacity(),
                "offerings": [
                    {
                        "Price": it.price,
                        "Available": True,
                        "Requirements": [
                            {
                                "key": "karpenter.sh/capacity-type",
                                "operator": "In",
                                "values": ["on-demand"],
                            },
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": [ZONE],
                            },
                        ],
                    }
                ],
            }
            for it in types
        ],
        indent=1,
    )


def node_class(name: str = NODE_CLASS) -> objects.KubeObject:
    """A KWOKNodeClass (nodes register at once: no startup delay)."""
    return {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": name},
    }


def node_pool(
    name: str,
    *,
    instance_types: collections.abc.Sequence[InstanceType] = INSTANCE_TYPES,
    consolidate_after: str = "30s",
    labels: collections.abc.Mapping[str, str] | None = None,
    limits: collections.abc.Mapping[str, str] | None = None,
) -> NodePool:
    """A NodePool launching ``instance_types`` on demand, consolidating a node that has been
    empty or underused for ``consolidate_after``. Its nodes carry ``labels`` and those the
    plane's own nodes carry (``type: kwok``, the pool label ``name``)."""
    spec: NodePoolSpec = {
        "template": {
            "metadata": {
                "labels": {"type": "kwok", kubelets.POOL_LABEL: name, **dict(labels or {})}
            },
            "spec": {
                "nodeClassRef": {
                    "group": "karpenter.kwok.sh",
                    "kind": "KWOKNodeClass",
                    "name": NODE_CLASS,
                },
                "requirements": [
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": [it.name for it in instance_types],
                    },
                    {
                        "key": "karpenter.sh/capacity-type",
                        "operator": "In",
                        "values": ["on-demand"],
                    },
                ],
                "expireAfter": "Never",
            },
        },
        "disruption": {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": consolidate_after,
        },
    }
    if limits:
        spec["limits"] = dict(limits)
    return {
        "apiVersion": f"{API_GROUP}/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": spec,
    }


class Karpenter:
    """Karpenter on ``plane`` (see the module docstring); :meth:`start` once the plane runs."""

    def __init__(
        self,
        plane: controlplane.ControlPlane,
        *,
        node_pools: collections.abc.Sequence[NodePool] = (),
        instance_types: collections.abc.Sequence[InstanceType] = INSTANCE_TYPES,
        directory: pathlib.Path | None = None,
    ) -> None:
        self.plane = plane
        self.node_pools = tuple(node_pools) or (node_pool("autoscaled"),)
        self.instance_types = tuple(instance_types)
        self.directory = directory if directory is not None else binaries.extra("karpenter")
        self.process: processes.Process | None = None
        self.ports = (processes.free_port(), processes.free_port())  # metrics, health

    def start(self) -> Karpenter:
        """Install the CRDs, the node class and pools; run the controller until it is ready."""
        plane = self.plane
        plane.progress("installing Karpenter's CRDs")
        documents = [
            document
            for path in sorted((self.directory / "config" / "crd").glob("*.yaml"))
            for document in yaml.safe_load_all(path.read_text())
            if document
        ]
        # Server-side: NodePool's schema is too large for client-side apply's annotation.
        body = yaml.safe_dump_all(documents, sort_keys=False)
        plane.kubectl("apply", "--server-side", "-f", "-", input=body, timeout=300.0)
        names = [f"crd/{d['metadata']['name']}" for d in documents]
        plane.kubectl("wait", "--for=condition=Established", "--timeout=120s", *names)
        plane.apply([node_class(), *self.node_pools])
        types_file = plane.directory / "karpenter-instance-types.json"
        types_file.write_text(instance_types_document(self.instance_types))
        kubeconfig = plane.kubeconfig_for("karpenter", user="karpenter", groups=["system:masters"])
        metrics, health = self.ports
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "DISABLE_LEADER_ELECTION": "true",
            "METRICS_PORT": str(metrics),
            "HEALTH_PROBE_PORT": str(health),
            "INSTANCE_TYPES_FILE_PATH": str(types_file),
            "FEATURE_GATES": "CapacityBuffer=true",
            "LOG_LEVEL": "debug",
            "KUBE_CLIENT_QPS": "200",
            "KUBE_CLIENT_BURST": "300",
        }
        plane.progress("starting Karpenter")
        binary = self.directory / "bin" / "karpenter"
        self.process = plane.spawn("karpenter", [str(binary)], env=env)
        processes.wait_until(
            "Karpenter",
            functools.partial(_ready, f"http://127.0.0.1:{health}/readyz"),
            timeout=_READY_TIMEOUT,
            watch=[self.process],
        )
        return self


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False
