"""Which reservation pods shared GPUs need, and the group labels of the shares on them.

On a node of NVIDIA's device plugin a pod gets a GPU only by requesting ``nvidia.com/gpu``, and
the plugin, not the scheduler, picks the device. A share (``gpu-fraction``, ``gpu-memory``)
requests none, so KAI-Scheduler keeps each shared device with a *reservation pod*: a pod in
the namespace ``runai-reservation``, bound to the node, requesting one ``nvidia.com/gpu``, so
the device plugin gives it a device that no whole-GPU pod (of any scheduler) then gets. Node
tooling finds the shares of that device by KAI's label ``runai-gpu-group``, the same on the
reservation pod and on its shares, and names the physical GPU on the reservation pod
(``run.ai/reserve_for_gpu_index``: KAI's reservation image writes the GPU's UUID, the fake GPU
operator of KWOK clusters the GPU it assigned). Berth does the same for the shares it binds:

- **A reservation pod per device Berth's shares use** (:func:`plan`): named
  ``gpu-reservation-<node>-<device>`` (KAI's prefix, which node tooling recognises), labelled
  with the device's group (:func:`berth.scheduler.snapshot.gpushare.group_of`: derived from the
  node and Berth's device index, so no replica has to remember it), annotated with that index
  (``runai-gpu``, so the cache counts it on that device and never as one more GPU:
  :mod:`berth.scheduler.snapshot.gpudevices`), requesting ``nvidia.com/gpu: 1`` and almost no
  cpu or memory, tolerating every taint (it must stay while its shares run), and carrying
  Karpenter's ``do-not-disrupt`` (as KAI's do). Its container only waits (:data:`IMAGE`).
- **Gone once no share of Berth's uses its device** (a reservation pod Berth made is deleted;
  one of KAI's, without Berth's device index, is never touched). Until it is gone, the cache
  counts the device taken: a whole-GPU pod never reaches a kubelet whose device plugin still
  has the device reserved.
- **The shares' labels**: each of Berth's shares carries ``runai-gpu-group: <group>`` of its
  (first) device, and ``runai-gpu-group/<group>: <group>`` for each of its devices when it has
  several (KAI's multi-device form) (:func:`labels_patch`).

Only the shares of the pods Berth schedules are looked at: another scheduler's shares (KAI's)
have that scheduler's reservation pods. Pure: the operator's writer
(:mod:`berth.kube.devices.gpu_reservations`) applies the plan.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import hashlib
import typing

from berth.api import core, keys, resources
from berth.scheduler.snapshot import gpushare

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import snapshots

__all__ = ["IMAGE", "Plan", "labels_patch", "plan", "pod_name", "reservation_pod"]

IMAGE = "registry.k8s.io/pause:3.10"
"""What a reservation pod runs: nothing (it only holds a device); the image every kubelet has."""

_NAME_LIMIT = 253
_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"

LabelsPatch = dict[str, dict[str, dict[str, str | None]]]
"""A merge patch of a pod's labels: ``{"metadata": {"labels": {key: value or None}}}``."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to write: reservation pods to create (by ``(node, device)``), reservation pods to
    delete (``(name, uid)``), and label patches of shares (pod key -> merge patch)."""

    create: tuple[tuple[str, int], ...] = ()
    delete: tuple[tuple[str, str], ...] = ()
    labels: collections.abc.Mapping[str, LabelsPatch] = dataclasses.field(default_factory=dict)


def pod_name(node: str, device: int, /) -> str:
    """The reservation pod of ``device`` of ``node`` (a long node name is hashed)."""
    name = f"{gpushare.RESERVATION_POD_PREFIX}{node}-{device}"
    if len(name) <= _NAME_LIMIT:
        return name
    digest = hashlib.sha256(node.encode()).hexdigest()[:16]
    return f"{gpushare.RESERVATION_POD_PREFIX}{digest}-{device}"


def reservation_pod(node: str, device: int, /, *, image: str = IMAGE) -> core.Pod:
    """The reservation pod holding ``device`` of ``node`` (see the module docstring)."""
    group = gpushare.group_of(node, device)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(node, device),
            "namespace": gpushare.RESERVATION_NAMESPACE,
            "labels": {
                gpushare.GROUP_LABEL: group,
                "app.kubernetes.io/managed-by": keys.DEFAULT_SCHEDULER_NAME,
            },
            "annotations": {
                gpushare.INDEX_ANNOTATION: str(device),
                _DO_NOT_DISRUPT: "true",
            },
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "resource-reservation",
                    "image": image,
                    "resources": {
                        "requests": {resources.GPU: "1", "cpu": "1m", "memory": "10Mi"},
                        "limits": {resources.GPU: "1", "cpu": "50m", "memory": "100Mi"},
                    },
                }
            ],
        },
    }


def _group_labels(node: str, devices: tuple[int, ...]) -> dict[str, str]:
    groups = [gpushare.group_of(node, device) for device in sorted(devices)]
    wanted = {gpushare.GROUP_LABEL: groups[0]}
    if len(groups) > 1:
        wanted.update({f"{gpushare.MULTI_GROUP_LABEL_PREFIX}{g}": g for g in groups})
    return wanted


def labels_patch(
    labels: collections.abc.Mapping[str, str], *, node: str, devices: tuple[int, ...]
) -> LabelsPatch | None:
    """The merge patch giving a share on ``devices`` of ``node`` its group labels (``None``:
    it has them); a group label of a device it no longer uses is removed."""
    wanted = _group_labels(node, devices)
    patch: dict[str, str | None] = {k: v for k, v in wanted.items() if labels.get(k) != v}
    for key in labels:
        if key.startswith(gpushare.MULTI_GROUP_LABEL_PREFIX) and key not in wanted:
            patch[key] = None
    return {"metadata": {"labels": patch}} if patch else None


def plan(snapshot: snapshots.Snapshot, *, schedulers: collections.abc.Container[str]) -> Plan:
    """What to write for the reservation pods and shares of ``snapshot`` (Berth's shares are
    the pods of ``schedulers``)."""
    create: list[tuple[str, int]] = []
    delete: list[tuple[str, str]] = []
    labels: dict[str, LabelsPatch] = {}
    pods = snapshot.pods
    for node, shares in sorted(snapshot.shared_gpus.items()):
        used: set[int] = set()
        for key, (devices, _, _) in shares.placements.items():
            pod = pods.get(key)
            if pod is None or pod.reserve or pod.scheduler_name not in schedulers:
                continue  # a Reservation's reserve pod is no pod; another scheduler's its own
            if pod.gpu_devices is None:
                continue  # not recorded yet: the binding will record it
            used.update(devices)
            patch = labels_patch(pod.labels, node=node, devices=devices)
            if patch is not None:
                labels[key] = patch
        held = set(shares.held)
        create += [(node, device) for device in sorted(used - held)]
        for device in sorted(held - used):
            holder = pods.get(f"{gpushare.RESERVATION_NAMESPACE}/{pod_name(node, device)}")
            if holder is not None and holder.node_name == node:
                delete.append((holder.name, holder.uid))
    return Plan(create=tuple(create), delete=tuple(delete), labels=labels)
