"""The GPU workload mix arriving at the cluster: what fragmentation-aware scoring expects next.

Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation", USENIX ATC '23) scores
a placement by how much GPU capacity it leaves unusable *to the tasks that will come*. Berth
learns that mix from the pods it sees arrive: every new pod asking for GPUs (whole, several, or
a share) adds one to its :class:`Shape`'s count, and older arrivals fade (each arrival weighs
:data:`HORIZON` times less after ``HORIZON`` more have come, an exponential window), so the mix
follows the workload as it changes. A small prior (:data:`PRIOR`, eight pseudo-arrivals: mostly
1-GPU pods, some halves and quarters of a GPU, 2-, 4- and 8-GPU pods) stands in until enough
pods were seen, and stays a few per mille of the mix afterwards.

A shape is what decides whether a pod fits the capacity a node has left: the thousandths of a
GPU it takes on each device (1000: whole devices) or the MiB of device memory, how many
devices, the cpu it needs (rounded up to whole cores, so shapes stay few) and where it may run
(its node selector and required node affinity: a pod asking for one GPU model cannot use
another's leftovers). :meth:`Mix.view` gives the :data:`TOP` most frequent shapes with their
probabilities.

Kept by the cache's :class:`~berth.scheduler.snapshot.gpustore.GpuShareStore` (it sees every
pod arrive) and
published in each snapshot; read by the GpuSharing plugin's scoring.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import math

from berth.api import resources
from berth.scheduler.snapshot import gpushare, pods, selectors

__all__ = ["HORIZON", "PRIOR", "TOP", "Mix", "Shape", "View", "shape_of"]

HORIZON = 2000
"""Arrivals after which an arrival's weight has fallen to 1/e of a new one's."""
TOP = 24
"""Shapes the mix keeps (the most frequent; the rest's weight is dropped, the others
renormalised). FGD's simulator keeps the shapes making up most arrivals, likewise."""
_RESCALE = 1e150  # the running weight of a new arrival is rescaled before floats overflow
_FORGET = 1e-6  # shapes whose weight fell below this (relative to a new arrival) are dropped


@dataclasses.dataclass(frozen=True)
class Shape:
    """What a GPU pod needs of a node, for the fragmentation measure."""

    milli: int  # thousandths of each device (1000: whole devices); 0 when asked in MiB
    devices: int
    memory_mib: int = 0  # a gpu-memory share: MiB of each device
    cpu: int = 0  # milli-cpu, rounded up to whole cores
    node_selector: tuple[selectors.Requirement, ...] = ()
    required_affinity: tuple[selectors.SelectorTerm, ...] | None = None

    def per_device(self, memory: int | None, /) -> int | None:
        """Thousandths of a device of ``memory`` MiB it takes (``None``: it cannot use it)."""
        if not self.memory_mib:
            return self.milli
        if memory is None or memory <= 0 or self.memory_mib > memory:
            return None
        return -(-self.memory_mib * gpushare.WHOLE // memory)


View = tuple[tuple[Shape, float], ...]
"""Shapes with their probabilities (summing to 1), most frequent first."""


def _prior() -> tuple[tuple[Shape, float], ...]:
    whole = gpushare.WHOLE
    return (
        (Shape(milli=whole, devices=1, cpu=8000), 3.0),
        (Shape(milli=whole // 2, devices=1, cpu=4000), 1.0),
        (Shape(milli=whole // 4, devices=1, cpu=2000), 1.0),
        (Shape(milli=whole, devices=2, cpu=16000), 1.0),
        (Shape(milli=whole, devices=4, cpu=32000), 1.0),
        (Shape(milli=whole, devices=8, cpu=64000), 1.0),
    )


PRIOR = _prior()
"""Pseudo-arrivals standing in for the mix before pods were seen (shape, weight)."""


def shape_of(pod: pods.PodInfo, /) -> Shape | None:
    """The pod's shape, ``None`` for a pod asking no GPU (or asking one it cannot get)."""
    share = pod.gpu_share
    cpu = -(-pod.requests.get(resources.CPU, 0) // 1000) * 1000
    if share is not None:
        if share.problem is not None:
            return None
        return Shape(
            milli=share.milli,
            devices=share.devices,
            memory_mib=share.memory_mib,
            cpu=cpu,
            node_selector=pod.node_selector,
            required_affinity=pod.required_affinity,
        )
    gpus = pod.requests.get(resources.GPU, 0)
    if gpus <= 0:
        return None
    return Shape(
        milli=gpushare.WHOLE,
        devices=-(-gpus // gpushare.WHOLE),
        cpu=cpu,
        node_selector=pod.node_selector,
        required_affinity=pod.required_affinity,
    )


class Mix:
    """Arrival counts per shape, fading over :data:`HORIZON` arrivals; see the module."""

    __slots__ = ("_counts", "_step", "_unit", "_view")

    def __init__(self, *, horizon: int = HORIZON) -> None:
        self._counts: dict[Shape, float] = {}
        self._unit = 1.0  # the weight of the next arrival; earlier ones weigh less by comparison
        self._step = math.exp(1.0 / horizon)
        self._view: View | None = None

    def observe(self, pod: pods.PodInfo, /) -> None:
        """Count a pod seen for the first time (nothing for a pod asking no GPU)."""
        shape = shape_of(pod)
        if shape is None:
            return
        self._counts[shape] = self._counts.get(shape, 0.0) + self._unit
        self._unit *= self._step
        if self._unit > _RESCALE:
            unit = self._unit
            self._counts = {s: c / unit for s, c in self._counts.items() if c / unit > _FORGET}
            self._unit = 1.0
        self._view = None

    def view(self) -> View:
        """The :data:`TOP` most frequent shapes (prior included) and their probabilities."""
        if self._view is None:
            self._view = _normalised(self._weights())
        return self._view

    def _weights(self) -> dict[Shape, float]:
        # In units of "one arrival now": the latest observed weighs 1, the prior its counts.
        scale = self._unit / self._step
        weights = {shape: count / scale for shape, count in self._counts.items()}
        for shape, count in PRIOR:
            weights[shape] = weights.get(shape, 0.0) + count
        return weights


def _normalised(weights: collections.abc.Mapping[Shape, float]) -> View:
    ranked = sorted(weights.items(), key=lambda item: (-item[1], repr(item[0])))[:TOP]
    total = sum(weight for _, weight in ranked)
    return tuple((shape, weight / total) for shape, weight in ranked)
