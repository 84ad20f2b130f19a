"""Where on a GPU node, and on which of its devices: the scoring policies of GpuSharing.

Each policy scores the candidate rows for a pod asking GPUs (whole devices, or a share of
some) and picks the devices of a shared pod on the row chosen. Berth's default is
``FragmentationGradient``; the others are the baselines of FGD's published simulator
(``hkust-adsl/kubernetes-scheduler-simulator``), kept so that ``berth bench gpu-sharing``
measures them side by side on the same arrivals:

- ``FragmentationGradient`` (FGD, Weng et al., ATC '23): the row whose fragmentation
  (:mod:`.fragmentation`, against the mix of pods seen arriving) grows least, or shrinks
  most; for a share, the device that does so. Scores are spread over 0..100 between the worst
  and the best candidate, so the measure decides and the profile's other scores break ties.
- ``BestFit``: the row left with the least capacity, cpu and GPU weighted equally, each
  relative to the largest node's (the simulator's BestFit); a share goes to the fitting
  device with the least left.
- ``Packing``: the simulator's GpuPacking: a share on devices already shared first (the
  fuller the better), then devices of nodes already used, empty nodes last; the device with
  the least left.
- ``Random``: any fitting row and device, uniformly (seeded by the pod, so runs repeat).

All work on the rows given (the feasible GPU rows), as NumPy arrays; nothing here looks at
rows without GPUs, so cpu-only nodes cost nothing.
"""

from __future__ import annotations

import dataclasses
import enum
import zlib

import numpy as np
import numpy.typing as npt

from berth.scheduler.framework import interfaces
from berth.scheduler.plugins.gpu_sharing import fragmentation
from berth.scheduler.snapshot import gpushare

__all__ = [
    "LEVEL",
    "Ask",
    "Inputs",
    "Policy",
    "choose",
    "gains",
    "left_after",
    "ranked",
    "scores",
    "spread",
]

IntArray = npt.NDArray[np.int64]
WHOLE = gpushare.WHOLE
MAX = interfaces.MAX_NODE_SCORE


class Policy(enum.StrEnum):
    """How GpuSharing scores GPU placements (module docstring)."""

    FRAGMENTATION_GRADIENT = "FragmentationGradient"
    BEST_FIT = "BestFit"
    PACKING = "Packing"
    RANDOM = "Random"


@dataclasses.dataclass(frozen=True)
class Ask:
    """What one pod takes of a node: a share (``share``, with ``need`` thousandths per device
    on each row) or ``whole`` devices, and ``cpu`` milli-cpu."""

    key: str
    share: gpushare.ShareRequest | None
    whole: int
    cpu: int
    need: IntArray  # per row of the node table (share pods; -1 where it cannot go)

    @property
    def devices(self) -> int:
        """Devices it uses."""
        return self.share.devices if self.share is not None else self.whole

    def rng(self) -> np.random.Generator:
        """The pod's own random numbers (the same on every try)."""
        return np.random.default_rng(zlib.crc32(self.key.encode()))


@dataclasses.dataclass(frozen=True)
class Inputs:
    """The candidate rows and their state."""

    rows: IntArray  # node table rows, ascending
    free: IntArray  # [rows, slots] thousandths left per device (Devices.free_matrix)
    cpu_free: IntArray  # [rows] milli-cpu left
    cpu_capacity: int  # the largest node's cpu (BestFit's scale)
    gpu_capacity: int  # the largest node's GPUs in thousandths (BestFit's scale)


LEVEL = 10
"""Points between two ranks of FGD's order (:func:`ranked`)."""


def ranked(gain: IntArray, left: IntArray, cpu_left: IntArray) -> IntArray:
    """FGD's scores: rows ordered by ``gain`` (higher first), then by the GPU capacity
    ``left`` and the cpu ``cpu_left`` after the pod (lower first: the fuller node, so that
    equal steps of the descent pack instead of spreading), equal rows sharing a rank; the best
    rank scores 100, each next one :data:`LEVEL` less, down to 0.

    The ranking keeps FGD's order, not its magnitudes: the steepest descent is the best rank
    whatever its size, and with the profile's weight one rank outweighs every other score,
    which then decide only between rows FGD cannot tell apart.
    """
    keys = np.stack([-gain, left, cpu_left], axis=1)
    _, rank = np.unique(keys, axis=0, return_inverse=True)
    rank = rank.reshape(-1).astype(np.int64)
    return np.maximum(MAX - LEVEL * rank, 0).astype(np.int64)


def spread(raw: npt.NDArray[np.float64] | IntArray) -> IntArray:
    """``raw`` mapped onto 0..100, the worst candidate 0 and the best 100 (all 100 if equal)."""
    low, high = raw.min(), raw.max()
    if high == low:
        return np.full(raw.shape, MAX, dtype=np.int64)
    return np.asarray(np.floor((raw - low) * MAX / (high - low)), dtype=np.int64)


def gains(ask: Ask, inputs: Inputs, classes: fragmentation.Classes) -> IntArray:
    """FGD's gain per row: fragmentation before the pod minus after (the higher the better; a
    cpu-only pod's is at most 0: its cpu can only leave GPUs without the cpu to use them)."""
    gain, _ = _fgd(ask, inputs, classes)
    return gain


def _fgd(ask: Ask, inputs: Inputs, classes: fragmentation.Classes) -> tuple[IntArray, IntArray]:
    """FGD's gain (fragmentation before minus after) per row, and the best device of each row
    for a single-device share (-1 otherwise)."""
    rows, free = inputs.rows, inputs.free
    before = fragmentation.measure(free, inputs.cpu_free, rows, classes)
    cpu_after = inputs.cpu_free - ask.cpu
    best = np.full(len(rows), -1, dtype=np.int64)
    if ask.share is None:
        after = fragmentation.measure(
            fragmentation.after_whole(free, ask.whole), cpu_after, rows, classes
        )
    elif ask.share.devices == 1:
        need = ask.need[rows]
        states, room = fragmentation.after_share(free, need)
        candidates = fragmentation.measure(
            states, np.broadcast_to(cpu_after[:, None], room.shape), rows, classes
        )
        candidates = np.where(room, candidates, np.iinfo(np.int64).max)
        best = np.argmin(candidates, axis=1).astype(np.int64)
        after = candidates[np.arange(len(rows)), best]
    else:
        taken = _tightest(free, ask.need[rows], ask.share.devices)
        after = fragmentation.measure(
            free - taken * ask.need[rows][:, None], cpu_after, rows, classes
        )
    return before - after, best


def left_after(ask: Ask, inputs: Inputs) -> IntArray:
    """GPU capacity (thousandths) each row would have left after the pod: FGD's tie-break
    (the fuller node first; a node without GPUs leaves none)."""
    taken = ask.devices * (ask.need[inputs.rows] if ask.share is not None else WHOLE)
    return np.asarray(inputs.free.sum(axis=1) - taken, dtype=np.int64)


def _tightest(free: IntArray, need: IntArray, count: int) -> IntArray:
    """``[rows, slots]`` 0/1: the ``count`` devices with room and the least left per row."""
    room = free >= need[:, None]
    order = np.argsort(np.where(room, free, WHOLE + 1), axis=1, kind="stable")
    taken = np.zeros_like(free)
    np.put_along_axis(taken, order[:, :count], 1, axis=1)
    return taken * room


def scores(
    policy: Policy,
    ask: Ask,
    inputs: Inputs,
    *,
    classes: fragmentation.Classes | None,
) -> IntArray:
    """Each candidate row's score, 0..100."""
    if policy is Policy.FRAGMENTATION_GRADIENT:
        assert classes is not None
        gain, _ = _fgd(ask, inputs, classes)
        return ranked(gain, left_after(ask, inputs), inputs.cpu_free - ask.cpu)
    if policy is Policy.BEST_FIT:
        taken = ask.devices * (ask.need[inputs.rows] if ask.share is not None else WHOLE)
        gpu_left = inputs.free.sum(axis=1) - taken
        cpu_left = inputs.cpu_free - ask.cpu
        waste = 0.5 * cpu_left / max(inputs.cpu_capacity, 1) + 0.5 * gpu_left / max(
            inputs.gpu_capacity, 1
        )
        return spread(-waste)
    if policy is Policy.PACKING:
        return _packing(ask, inputs)
    return ask.rng().integers(0, MAX + 1, size=len(inputs.rows), dtype=np.int64)


def _packing(ask: Ask, inputs: Inputs) -> IntArray:
    """The simulator's GpuPacking: shared devices first, then used nodes, empty nodes last."""
    free = inputs.free
    count = ask.devices
    need = ask.need[inputs.rows] if ask.share is not None else np.full(len(free), WHOLE)
    taken = _tightest(free, need, count)
    fresh = (taken * (free == WHOLE)).sum(axis=1)
    existing = (free > 0).sum(axis=1)
    empty = (free == WHOLE).sum(axis=1) == existing
    on_shared = (taken * free * 100 // WHOLE).sum(axis=1)
    shared_score = np.maximum(MAX - on_shared // 10, MAX // 2)
    used_score = np.maximum(MAX // 2 - fresh, MAX // 3)
    empty_score = np.maximum(MAX // 3 - (free == WHOLE).sum(axis=1), 0)
    result: IntArray = np.where(
        empty, empty_score, np.where(fresh > 0, used_score, shared_score)
    ).astype(np.int64)
    return result


def choose(
    policy: Policy,
    ask: Ask,
    inputs: Inputs,
    *,
    slots: tuple[int, ...],
    classes: fragmentation.Classes | None,
) -> tuple[int, ...]:
    """The devices a share takes on the one candidate row of ``inputs``, among ``slots``
    (those with room, in slot order: :meth:`~gpudevices.Devices.slots_for`)."""
    assert ask.share is not None and len(inputs.rows) == 1
    free = inputs.free[0]
    count = ask.share.devices
    if policy is Policy.RANDOM:
        picked = ask.rng().choice(np.array(slots), size=count, replace=False)
        return tuple(sorted(int(s) for s in picked))
    if policy is Policy.FRAGMENTATION_GRADIENT and count == 1:
        assert classes is not None
        _, best = _fgd(ask, inputs, classes)
        if int(best[0]) in slots:
            return (int(best[0]),)
    # The least left first (ties to the lowest slot): BestFit's, Packing's, and FGD's choice
    # for several devices.
    tightest = sorted(slots, key=lambda s: (int(free[s]), s))
    return tuple(sorted(tightest[:count]))
