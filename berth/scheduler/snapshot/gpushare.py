"""GPU sharing on the device plugin, the way KAI-Scheduler's pods ask for it.

A pod asks for a share of one GPU with KAI-Scheduler's annotations, so pods written for KAI run
unchanged:

- ``gpu-fraction: "0.25"``: that share of one device (more than 0, less than 1; KAI's rule), at
  a resolution of a thousandth of a GPU (a finer share is rounded up, as quantities are);
- ``gpu-memory: "10000"``: that many MiB of one device's memory (a whole number above 0); on a
  node whose devices hold ``M`` MiB (the node label :data:`MEMORY_LABEL`, as GPU feature
  discovery writes it) it takes ``ceil(1000 * memory / M)`` thousandths of the device;
- ``gpu-fraction-num-devices: "2"``: that share on as many distinct devices of one node (KAI's
  multi-device form; it needs one of the two above).

Such a pod requests no ``nvidia.com/gpu`` in its containers (KAI refuses one that does). Berth
charges it, in its ``requests``, the thousandths of ``nvidia.com/gpu`` it takes (one thousandth
is one milli-unit), so queue quota and fair share count GPUs in fractions and a device's worth
never exceeds one GPU (:func:`charged`). A ``gpu-memory`` pod's share depends on the node: once
placed it is charged what it takes there, while it waits what it would take on the smallest
device it fits (:func:`reference_memory`; the cache keeps both current).

Where it runs is recorded on the pod as KAI's node-side tooling reads it: the annotation
:data:`INDEX_ANNOTATION` (``runai-gpu``) with the index of the device on its node (indices,
comma-separated, for several), written with the binding (:func:`format_devices`,
:func:`devices_of`).

On a real node the device plugin, not the scheduler, hands out devices: a shared device is
kept from whole-GPU pods (of any scheduler) by a *reservation pod*, as KAI-Scheduler's binder
does it: one pod per shared device, in the namespace :data:`RESERVATION_NAMESPACE`, bound to
the node, requesting one ``nvidia.com/gpu`` (the device plugin gives it one device, which
node tooling then names on it: :data:`RESERVED_DEVICE_ANNOTATION`), and linked to the shares on
that device by the label :data:`GROUP_LABEL` (:func:`group_of`). Berth's reservation pods also
carry the device's index (:data:`INDEX_ANNOTATION`), so the cache knows which device each
holds (:func:`reserved_device`) and counts it once: its ``nvidia.com/gpu`` is the device its
shares are on (:func:`berth.scheduler.snapshot.gpudevices.node_shares`).

Bad input never raises: :func:`parse` returns a request with a :class:`Problem` naming the
annotation, and the pod waits with that reason (the GpuSharing plugin's PreFilter). Used by
:mod:`.pods` (parsing), :mod:`.cache` (charges) and the GpuSharing plugin.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import fractions
import math
import re
import uuid

from berth.api import resources

__all__ = [
    "DEVICES_ANNOTATION",
    "FRACTION_ANNOTATION",
    "GROUP_LABEL",
    "INDEX_ANNOTATION",
    "MULTI_GROUP_LABEL_PREFIX",
    "RESERVATION_NAMESPACE",
    "RESERVATION_POD_PREFIX",
    "RESERVED_DEVICE_ANNOTATION",
    "MEMORY_ANNOTATION",
    "MEMORY_LABEL",
    "PRODUCT_LABEL",
    "WHOLE",
    "Problem",
    "ShareRequest",
    "charged",
    "device_memory",
    "devices_of",
    "format_devices",
    "group_of",
    "parse",
    "reference_memory",
    "reserved_device",
    "without_gpu",
]

FRACTION_ANNOTATION = "gpu-fraction"
"""KAI-Scheduler's annotation: the share of one GPU a pod asks for (``"0.25"``)."""
MEMORY_ANNOTATION = "gpu-memory"
"""KAI-Scheduler's annotation: the MiB of one GPU's memory a pod asks for (``"10000"``)."""
DEVICES_ANNOTATION = "gpu-fraction-num-devices"
"""KAI-Scheduler's annotation: on how many devices the pod takes its share (``"2"``)."""
INDEX_ANNOTATION = "runai-gpu"
"""Where a shared pod runs: Berth's index of its device on the node (``"3"``; ``"1,4"`` for
two), Run:ai's annotation; also on Berth's reservation pods, the device each holds. Node tooling
finds the physical GPU through the reservation pod (:data:`GROUP_LABEL`)."""
RESERVATION_NAMESPACE = "runai-reservation"
"""Where KAI-Scheduler (and Berth) keep the reservation pods of shared devices."""
RESERVATION_POD_PREFIX = "gpu-reservation-"
"""How a reservation pod's name starts (KAI's; node tooling recognises them by it)."""
GROUP_LABEL = "runai-gpu-group"
"""KAI's label linking a shared device's reservation pod and the shares on that device."""
MULTI_GROUP_LABEL_PREFIX = "runai-gpu-group/"
"""KAI's label prefix for a share on several devices: ``runai-gpu-group/<group>: <group>``
for each of them (the plain label names the first)."""
RESERVED_DEVICE_ANNOTATION = "run.ai/reserve_for_gpu_index"
"""On a reservation pod: the device it holds, written on the node side (the GPU's UUID by
KAI's reservation image, by the fake GPU operator's status updater)."""
MEMORY_LABEL = "nvidia.com/gpu.memory"
"""Node label: MiB of memory of each of the node's GPUs (GPU feature discovery's)."""
PRODUCT_LABEL = "nvidia.com/gpu.product"
"""Node label: the GPU model (GPU feature discovery's), what pods select models by."""
WHOLE = 1000
"""Thousandths of a GPU in one device (a milli-unit of ``nvidia.com/gpu`` each)."""

_DECIMAL = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?$")
_COUNT = re.compile(r"^[0-9]{1,9}$")
_GROUP_NAMESPACE = uuid.UUID("8f0c7f4e-5a1b-4c51-9b0e-6f2f3d1b9a70")  # Berth's groups
_MAX_DEVICES = 64  # more than any node has: a larger count is a typo, refused with a reason


@dataclasses.dataclass(frozen=True)
class Problem:
    """Why a pod's GPU-sharing annotations cannot be honoured; ``annotation`` names the one."""

    annotation: str
    message: str


@dataclasses.dataclass(frozen=True)
class ShareRequest:
    """What a pod asks of shared GPUs: ``milli`` thousandths (``gpu-fraction``) or
    ``memory_mib`` MiB (``gpu-memory``) of each of ``devices`` devices. ``problem``: the request
    cannot be honoured as written (the other fields are then meaningless)."""

    milli: int = 0
    memory_mib: int = 0
    devices: int = 1
    problem: Problem | None = None

    @property
    def by_memory(self) -> bool:
        """Asked in MiB (``gpu-memory``): its share depends on the device."""
        return self.memory_mib > 0

    def per_device(self, memory: int | None, /) -> int | None:
        """Thousandths of one device of ``memory`` MiB it takes (``None``: it does not fit a
        device of that memory, or the memory is unknown and it asks in MiB)."""
        if not self.by_memory:
            return self.milli
        if memory is None or memory <= 0 or self.memory_mib > memory:
            return None
        return -(-self.memory_mib * WHOLE // memory)

    @property
    def amount(self) -> str:
        """What it takes of each device, for messages: ``0.25``, ``10000 MiB``."""
        return f"{self.memory_mib} MiB" if self.by_memory else f"{self.milli / WHOLE:g}"

    def describe(self) -> str:
        """What it asks, for messages: ``0.25 of a GPU``, ``10000 MiB of each of 2 GPUs``."""
        if self.devices == 1:
            return f"{self.amount} of a GPU"
        return f"{self.amount} of each of {self.devices} GPUs"


def _problem(annotation: str, message: str) -> ShareRequest:
    return ShareRequest(problem=Problem(annotation=annotation, message=message))


def _fraction(text: str) -> int | str:
    """Thousandths of a GPU from a ``gpu-fraction`` value, or why it is not one."""
    if not _DECIMAL.match(text.strip()):
        return f"annotation {FRACTION_ANNOTATION}: {text!r} is not a number"
    value = fractions.Fraction(text.strip().lower())
    if value <= 0 or value >= 1:
        return (
            f"annotation {FRACTION_ANNOTATION}: {text!r} must be more than 0 and less than 1 "
            f"(a share of one GPU; ask whole GPUs with nvidia.com/gpu)"
        )
    milli = math.ceil(value * WHOLE)
    if milli >= WHOLE:
        return (
            f"annotation {FRACTION_ANNOTATION}: {text!r} rounds to a whole GPU (shares are "
            f"counted in thousandths); ask nvidia.com/gpu: 1"
        )
    return milli


def _count(text: str, *, annotation: str, what: str) -> int | str:
    if not _COUNT.match(text.strip()) or int(text) <= 0:
        return f"annotation {annotation}: {text!r} must be a whole number above 0 ({what})"
    return int(text)


def parse(
    annotations: collections.abc.Mapping[str, str], /, *, whole_gpus: int = 0
) -> ShareRequest | None:
    """The pod's share request, ``None`` when it carries none of the annotations.

    ``whole_gpus`` is the ``nvidia.com/gpu`` its containers request (milli-units): a pod asking
    both a share and whole GPUs gets a problem, as KAI-Scheduler refuses it.
    """
    fraction_text = annotations.get(FRACTION_ANNOTATION)
    memory_text = annotations.get(MEMORY_ANNOTATION)
    devices_text = annotations.get(DEVICES_ANNOTATION)
    if fraction_text is None and memory_text is None:
        if devices_text is None:
            return None
        return _problem(
            DEVICES_ANNOTATION,
            f"annotation {DEVICES_ANNOTATION}: {devices_text!r} needs {FRACTION_ANNOTATION} or "
            f"{MEMORY_ANNOTATION} (the share to take on each device)",
        )
    if fraction_text is not None and memory_text is not None:
        return _problem(
            MEMORY_ANNOTATION,
            f"annotations {FRACTION_ANNOTATION} ({fraction_text!r}) and {MEMORY_ANNOTATION} "
            f"({memory_text!r}) ask for the same share twice: keep one (KAI-Scheduler refuses "
            f"both)",
        )
    annotation = FRACTION_ANNOTATION if fraction_text is not None else MEMORY_ANNOTATION
    if whole_gpus > 0:
        return _problem(
            annotation,
            f"annotation {annotation} asks for a share of a GPU, and the containers also request "
            f"{resources.GPU} ({whole_gpus / WHOLE:g}): ask one or the other",
        )
    devices = 1
    if devices_text is not None:
        counted = _count(devices_text, annotation=DEVICES_ANNOTATION, what="devices")
        if isinstance(counted, str):
            return _problem(DEVICES_ANNOTATION, counted)
        if counted > _MAX_DEVICES:
            return _problem(
                DEVICES_ANNOTATION,
                f"annotation {DEVICES_ANNOTATION}: {devices_text!r} is more devices than any "
                f"node has (at most {_MAX_DEVICES})",
            )
        devices = counted
    if fraction_text is not None:
        milli = _fraction(fraction_text)
        if isinstance(milli, str):
            return _problem(FRACTION_ANNOTATION, milli)
        return ShareRequest(milli=milli, devices=devices)
    assert memory_text is not None
    memory = _count(memory_text, annotation=MEMORY_ANNOTATION, what="MiB of GPU memory")
    if isinstance(memory, str):
        return _problem(MEMORY_ANNOTATION, memory)
    return ShareRequest(memory_mib=memory, devices=devices)


def device_memory(labels: collections.abc.Mapping[str, str], /) -> int | None:
    """MiB of memory of each of a node's GPUs (:data:`MEMORY_LABEL`), ``None`` when unknown."""
    text = labels.get(MEMORY_LABEL)
    if text is None or not _COUNT.match(text.strip()):
        return None
    value = int(text)
    return value if value > 0 else None


def reference_memory(
    share: ShareRequest, /, *, memories: collections.abc.Sequence[int]
) -> int | None:
    """The device memory a waiting ``gpu-memory`` pod is charged by: the smallest of
    ``memories`` (sorted; the cluster's GPU memories) it fits, so that its charge is the
    largest share it may take; ``None`` when it fits none."""
    for memory in memories:
        if memory >= share.memory_mib:
            return memory
    return None


def charged(
    requests: resources.ResourceList, share: ShareRequest, /, *, memory: int | None
) -> resources.ResourceList:
    """``requests`` (which hold no ``nvidia.com/gpu``) with the share's GPU charge: its
    thousandths on each device times the devices, on a device of ``memory`` MiB. A ``gpu-memory``
    share that fits no known device is charged whole devices (it waits anyway)."""
    per_device = share.per_device(memory)
    milli = (per_device if per_device is not None else WHOLE) * share.devices
    return resources.ResourceList({**requests, resources.GPU: milli})


def devices_of(annotations: collections.abc.Mapping[str, str], /) -> tuple[int, ...] | None:
    """The device indices recorded on a placed pod (:data:`INDEX_ANNOTATION`); ``None`` when
    absent or unreadable (the pod is then put on devices where it fits)."""
    text = annotations.get(INDEX_ANNOTATION)
    if not text:
        return None
    parts = [part.strip() for part in text.split(",")]
    if not all(_COUNT.match(part) for part in parts):
        return None
    indices = tuple(int(part) for part in parts)
    return indices if len(set(indices)) == len(indices) else None


def format_devices(indices: collections.abc.Iterable[int], /) -> str:
    """The :data:`INDEX_ANNOTATION` value for ``indices`` (``"1,4"``)."""
    return ",".join(str(index) for index in sorted(indices))


def group_of(node: str, device: int, /) -> str:
    """The :data:`GROUP_LABEL` value of device ``device`` of ``node``: a UUID derived from
    both, so every Berth replica names the same group without writing it down first."""
    return str(uuid.uuid5(_GROUP_NAMESPACE, f"{node}/{device}"))


def reserved_device(
    namespace: str, name: str, annotations: collections.abc.Mapping[str, str], /
) -> int | None:
    """The device a reservation pod holds on its node (``None``: not a reservation pod with a
    device index Berth recorded, such as KAI's own: then it is an ordinary whole-GPU pod)."""
    if namespace != RESERVATION_NAMESPACE or not name.startswith(RESERVATION_POD_PREFIX):
        return None
    devices = devices_of(annotations)
    return devices[0] if devices is not None and len(devices) == 1 else None


def without_gpu(requests: resources.ResourceList, /) -> resources.ResourceList:
    """``requests`` without ``nvidia.com/gpu`` (a reservation pod's, counted by its shares)."""
    return resources.ResourceList({k: v for k, v in requests.items() if k != resources.GPU})
