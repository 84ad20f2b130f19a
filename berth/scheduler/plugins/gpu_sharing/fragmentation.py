"""The fragmentation measure of Fragmentation Gradient Descent, vectorised over nodes.

Weng et al. ("Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent", USENIX ATC '23) measure how much of a node's idle GPU capacity the coming
workload cannot use. For one task shape ``m`` of the workload mix:

- if ``m`` cannot run on the node at all (too little cpu, too few devices with its share left,
  a GPU model it does not accept), every idle thousandth of the node's GPUs is a fragment to
  it;
- otherwise the idle capacity on devices with less than ``m``'s share left is.

A node's fragmentation is the expectation over the mix: ``F(node) = sum_m p_m * F_m(node)``
(:func:`measure`). Berth's default measure (:attr:`Measure.FILL`) asks, instead of whether one
task of the shape fits, how much of the idle capacity copies of it could fill, as many as the
devices and the cpu left allow: it sees a node running short of cpu for its GPUs, or a device
left with less than a multiple of the common shares, before the last task is refused
(``berth bench gpu-sharing`` measures both). FGD places each task where it makes ``F`` grow
least (the steepest descent): the score of a placement is ``F(before) - F(after)``
(:func:`after_share`, :func:`after_whole` give the node after it). The mix is the one the cache
learned from the pods seen arriving (:mod:`berth.scheduler.snapshot.gpumix`).

Everything is integer arithmetic in thousandths of a GPU times the shapes' weights (parts per
million), so equal nodes score exactly equal and ties go to the framework's rule.
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np
import numpy.typing as npt

from berth.scheduler.snapshot import gpudevices, gpumix, nodetable

__all__ = ["Classes", "Measure", "after_share", "after_whole", "classes_of", "measure"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
WEIGHT_SCALE = 1_000_000
"""A shape's probability is carried as an integer weight in parts per million."""


class Measure(enum.StrEnum):
    """What counts as a fragment of a node's idle GPU capacity, to one shape of the mix."""

    FILL = "Fill"
    """Berth's: what copies of the shape cannot fill. As many copies as the node takes (each
    needs its share on its own devices and its cpu) fill the idle capacity; the rest (a
    device's remainder below the share, devices the cpu left cannot feed) is stranded for
    that shape. It sees a node running short of cpu for its GPUs before the last copy is
    refused, and a 0.3 left on a device by a 0.5 share."""
    FIT = "Fit"
    """The paper's: if one copy of the shape does not fit, all idle capacity; otherwise the
    capacity of the devices with less than the shape's share left."""


@dataclasses.dataclass(frozen=True)
class Classes:
    """The mix over one node table: per row and shape, what each shape needs."""

    need: IntArray  # [rows, shapes]: thousandths per device it takes there (-1: cannot use)
    devices: IntArray  # [shapes]
    cpu: IntArray  # [shapes], milli
    eligible: BoolArray  # [rows, shapes]: its node selector and required affinity allow the row
    weight: IntArray  # [shapes], parts per million
    kind: Measure = Measure.FILL


def _allowed(shape: gpumix.Shape, nodes: nodetable.NodeTable) -> BoolArray:
    mask = np.ones(len(nodes), dtype=np.bool_)
    for req in shape.node_selector:
        mask &= nodes.requirement_mask(req)
    if shape.required_affinity is not None:
        any_term = np.zeros(len(nodes), dtype=np.bool_)
        for term in shape.required_affinity:
            any_term |= nodes.term_mask(term)
        mask &= any_term
    return mask


def classes_of(
    mix: gpumix.View,
    /,
    *,
    nodes: nodetable.NodeTable,
    devices: gpudevices.Devices,
    kind: Measure = Measure.FILL,
) -> Classes:
    """The shapes of ``mix`` prepared over ``nodes`` (masks come from the table's caches),
    measured the ``kind`` way."""
    rows = len(nodes)
    need = np.empty((rows, len(mix)), dtype=np.int64)
    eligible = np.empty((rows, len(mix)), dtype=np.bool_)
    for index, (shape, _) in enumerate(mix):
        if shape.memory_mib:
            memory = devices.memory
            fits = (memory > 0) & (memory >= shape.memory_mib)
            per_device = -(-shape.memory_mib * gpudevices.WHOLE // np.maximum(memory, 1))
            need[:, index] = np.where(fits, per_device, -1)
        else:
            need[:, index] = shape.milli
        eligible[:, index] = _rows_of(shape, nodes)
    weights = np.array([round(p * WEIGHT_SCALE) for _, p in mix], dtype=np.int64)
    return Classes(
        need=need,
        devices=np.array([shape.devices for shape, _ in mix], dtype=np.int64),
        cpu=np.array([shape.cpu for shape, _ in mix], dtype=np.int64),
        eligible=eligible,
        weight=weights,
        kind=kind,
    )


def _rows_of(shape: gpumix.Shape, nodes: nodetable.NodeTable) -> BoolArray:
    """The rows ``shape`` may use (cached with the table's static part)."""

    def compute() -> BoolArray:
        return _frozen(_allowed(shape, nodes))

    key = ("GpuSharing", "shape-rows", shape.node_selector, shape.required_affinity)
    return nodes.cached(key, compute=compute)


def _frozen(mask: BoolArray) -> BoolArray:
    mask.setflags(write=False)
    return mask


def measure(free: IntArray, cpu_free: IntArray, rows: IntArray, classes: Classes) -> IntArray:
    """Each node's fragmentation (thousandths of a GPU times parts per million).

    ``free`` is ``[nodes, slots]``: thousandths left on each device (0 for devices held whole
    and slots past the node's devices); ``cpu_free`` the milli-cpu left; ``rows`` the node
    table rows they are (for the shapes' per-row needs). ``free`` may have a leading batch of
    candidate states: ``[nodes, candidates, slots]`` gives ``[nodes, candidates]``. The
    classes say how fragments are counted (:class:`Measure`).
    """
    need = classes.need[rows]  # [n, m]
    eligible = classes.eligible[rows]
    if free.ndim == 3:
        need = need[:, None, :]
        eligible = eligible[:, None, :]
    total = free.sum(axis=-1)  # [...]
    usable_shape = eligible & (need > 0)
    if classes.kind is Measure.FILL:
        share = np.maximum(need, 1)
        units = (free[..., :, None] // share[..., None, :]).sum(axis=-2)  # shares on devices
        by_cpu = cpu_free[..., None] // np.maximum(classes.cpu, 1)
        copies = np.minimum(units // classes.devices, np.where(classes.cpu > 0, by_cpu, units))
        filled = copies * classes.devices * share
        per_shape = np.where(usable_shape, total[..., None] - filled, total[..., None])
    else:
        # [..., slots, shapes]: which devices have the shape's share left
        enough = free[..., :, None] >= need[..., None, :]
        usable = np.count_nonzero(enough, axis=-2)  # [..., shapes]
        fits = usable_shape & (usable >= classes.devices) & (cpu_free[..., None] >= classes.cpu)
        stranded = np.where(enough, 0, free[..., :, None]).sum(axis=-2)  # [..., shapes]
        per_shape = np.where(fits, stranded, total[..., None])
    result: IntArray = (per_shape * classes.weight).sum(axis=-1)
    return result


def after_whole(free: IntArray, count: int, /) -> IntArray:
    """``free`` after ``count`` whole devices are taken (devices left whole, lowest slots
    first; which ones does not change the measure)."""
    whole = free == gpudevices.WHOLE
    taken = whole & (np.cumsum(whole, axis=-1) <= count)
    return np.where(taken, 0, free)


def after_share(free: IntArray, need: IntArray, /) -> tuple[IntArray, BoolArray]:
    """Every way to take one device's ``need`` (per node) from ``free``: ``[nodes, slots,
    slots]`` (candidate slot, then the devices), and which candidates have room."""
    slots = free.shape[-1]
    room = free >= need[:, None]
    take = np.eye(slots, dtype=np.int64)[None, :, :] * need[:, None, None]
    return free[:, None, :] - take, room
