"""``Devices``: each GPU node's devices as shared pods use them, beside the node table.

The node table counts ``nvidia.com/gpu`` per node in thousandths of a GPU (milli-units): whole
GPU pods a thousand per device, shared pods (:mod:`.gpushare`) their charge. That sum cannot
say whether a pod fits *one device*: four devices half used leave two GPUs free in the column
and no whole device. This table keeps what the column cannot, per row of the node table:

- ``count``: the node's devices (its ``nvidia.com/gpu`` allocatable, whole);
- ``memory``: MiB of each device (node label ``nvidia.com/gpu.memory``; 0 unknown);
- ``used[row, slot]``: thousandths of device ``slot`` its shared pods take (0: no shared pod
  there). A device some shared pod uses is *open*: no whole-GPU pod may have it;
- ``charged[row]``: what the row's shared pods add to the node table's GPU column;
- ``held[row, slot]``: a reservation pod holds device ``slot`` (:mod:`.gpushare`). The cache
  leaves its ``nvidia.com/gpu`` out of the node table (the shares on its device are charged
  there already), so a held device is taken here: shares may use it, whole-GPU pods may not,
  also while no share is on it (its last share left, the reservation pod not gone yet).

So a row has ``whole_free`` devices no pod uses: ``(column free + charged - 1000 * taken) //
1000``, ``taken`` the devices open or held (:meth:`Devices.whole_free`), computed from whichever
node table the caller holds, so a FilterHook's view (a reservation handing its room back to an
owner) counts as it should. A share of ``d`` thousandths fits a row when enough devices have
``d`` left: open ones (``1000 - used``) or whole free ones (:meth:`Devices.free_matrix`).
Whole-GPU pods are never tied to a slot: the device plugin picks their devices; slots are the
indices Berth records for shared pods (``runai-gpu``), the lowest one not open when a device is
opened.

Built per session from the snapshot (:func:`build`) out of what the cache keeps per node as its
shared pods change (:func:`node_shares`, ``Snapshot.shared_gpus``); a pod whose devices were
not recorded goes where it fits best. The GpuSharing plugin owns the session's copy and
changes it as statements place and evict (:meth:`Devices.place`, :meth:`Devices.remove`), so
no device is ever given more than one device's worth.
"""

from __future__ import annotations

import collections.abc
import dataclasses

import numpy as np
import numpy.typing as npt

from berth.api import resources
from berth.scheduler.snapshot import gpushare, nodetable, pods

__all__ = ["Devices", "Placement", "build"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
WHOLE = gpushare.WHOLE


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one shared pod is: its row, the slots it uses, what it takes of each and what it
    adds to the node table's GPU column."""

    row: int
    slots: tuple[int, ...]
    per_device: int
    charge: int


class Devices:
    """The session's devices; see the module docstring."""

    __slots__ = ("charged", "column", "count", "held", "memory", "placements", "used")

    def __init__(
        self,
        *,
        count: IntArray,
        memory: IntArray,
        used: IntArray,
        charged: IntArray,
        column: int,
        placements: dict[str, Placement] | None = None,
        held: BoolArray | None = None,
    ) -> None:
        self.count = count
        self.memory = memory
        self.used = used
        self.charged = charged
        self.column = column
        self.held: BoolArray = held if held is not None else np.zeros(used.shape, dtype=np.bool_)
        """``[row, slot]``: a reservation pod holds the device (not in the column)."""
        """The node table's ``nvidia.com/gpu`` column."""
        self.placements: dict[str, Placement] = placements if placements is not None else {}
        """Shared pods by key: where they are."""

    @property
    def width(self) -> int:
        """Slots per row (the most devices a node has)."""
        return int(self.used.shape[1])

    def any_open(self) -> bool:
        """Whether some device is shared now (else whole GPUs are counted exactly by the
        node table alone)."""
        return bool(self.placements) or bool(self.held.any())

    def open_count(self) -> IntArray:
        """Devices per row taken by shares: open, or held by a reservation pod."""
        opened: IntArray = np.count_nonzero((self.used > 0) | self.held, axis=1).astype(np.int64)
        return opened

    def whole_free(self, nodes: nodetable.NodeTable, /, *, counted: int = 0) -> IntArray:
        """Devices per row no pod uses, by ``nodes``' GPU column (never below 0). ``counted``:
        a charge the column already holds for a pod not on its devices yet (a statement
        counts a pod in the table before its devices are chosen)."""
        col = self.column
        free = nodes.allocatable[:, col] - nodes.requested[:, col] + counted
        whole = (free + self.charged - WHOLE * self.open_count()) // WHOLE
        result: IntArray = np.clip(np.minimum(whole, self.count), 0, None)
        return result

    def per_device(self, share: gpushare.ShareRequest, /) -> IntArray:
        """Per row, the thousandths of a device ``share`` takes there (-1: it cannot use the
        row's devices: memory unknown or too small)."""
        if not share.by_memory:
            return np.full(len(self.count), share.milli, dtype=np.int64)
        memory = self.memory
        fits = (memory > 0) & (memory >= share.memory_mib)
        need = -(-share.memory_mib * WHOLE // np.maximum(memory, 1))
        return np.where(fits, need, -1).astype(np.int64)

    def free_matrix(self, nodes: nodetable.NodeTable, /, *, counted: int = 0) -> IntArray:
        """``[rows, slots]``: thousandths free on each device: ``1000 - used`` on open ones,
        1000 on as many others as are whole free, 0 on the rest (devices whole-GPU pods hold,
        slots past the node's devices). ``counted`` as for :meth:`whole_free`."""
        used = self.used
        open_ = (used > 0) | self.held
        slot = np.arange(self.width, dtype=np.int64)[None, :]
        closed = ~open_ & (slot < self.count[:, None])
        rank = np.cumsum(closed, axis=1)
        whole = closed & (rank <= self.whole_free(nodes, counted=counted)[:, None])
        result: IntArray = np.where(
            open_, np.clip(WHOLE - used, 0, None), np.where(whole, WHOLE, 0)
        ).astype(np.int64)
        return result

    def per_device_on(self, share: gpushare.ShareRequest, row: int, /) -> int:
        """:meth:`per_device` of one row."""
        taken = share.per_device(int(self.memory[row]) or None)
        return taken if taken is not None else -1

    def fitting(self, share: gpushare.ShareRequest, nodes: nodetable.NodeTable, /) -> BoolArray:
        """Rows where ``share`` fits: enough devices with its thousandths left."""
        need = self.per_device(share)
        free = self.free_matrix(nodes)
        usable = np.count_nonzero(free >= need[:, None], axis=1)
        result: BoolArray = (need > 0) & (usable >= share.devices)
        return result

    def slots_for(
        self,
        row: int,
        share: gpushare.ShareRequest,
        nodes: nodetable.NodeTable,
        /,
        *,
        counted: int = 0,
    ) -> tuple[int, ...] | None:
        """The devices of ``row`` ``share`` may use: the open ones with room, then slots to open
        (the lowest not open), as many as whole devices are free; ``None``: it does not fit.
        ``counted`` as for :meth:`whole_free`."""
        need = self.per_device_on(share, row)
        if need <= 0:
            return None
        used = self.used[row]
        count = int(self.count[row])
        held = self.held[row]
        open_room = [
            s for s in range(count) if (used[s] > 0 or held[s]) and used[s] <= WHOLE - need
        ]
        whole = int(self.whole_free(nodes, counted=counted)[row])
        to_open = [s for s in range(count) if used[s] == 0 and not held[s]][:whole]
        candidates = tuple(open_room + to_open)
        return candidates if len(candidates) >= share.devices else None

    def place(self, key: str, placement: Placement, /) -> None:
        """Count the shared pod ``key`` on its devices."""
        self.remove(key)
        for slot in placement.slots:
            self.used[placement.row, slot] += placement.per_device
        self.charged[placement.row] += placement.charge
        self.placements[key] = placement

    def remove(self, key: str, /) -> Placement | None:
        """Stop counting the shared pod ``key``; what it held (``None``: it was not counted)."""
        placement = self.placements.pop(key, None)
        if placement is None:
            return None
        for slot in placement.slots:
            self.used[placement.row, slot] -= placement.per_device
        self.charged[placement.row] -= placement.charge
        return placement


@dataclasses.dataclass(frozen=True)
class NodeShares:
    """The shared pods of one node on its devices: ``used`` per device, their ``charged``
    total, and where each is (slots, per device, charge) by pod key. Computed by the cache
    when the node's shared pods change (:func:`node_shares`), assembled per session."""

    used: tuple[int, ...]
    charged: int
    placements: collections.abc.Mapping[str, tuple[tuple[int, ...], int, int]]
    held: tuple[int, ...] = ()


def node_shares(
    shared: collections.abc.Sequence[pods.PodInfo],
    /,
    *,
    count: int,
    memory: int | None,
    column_free: int,
    held: collections.abc.Collection[int] = (),
) -> NodeShares:
    """Where the shared pods ``shared`` placed on a node of ``count`` devices of ``memory``
    MiB are, the node's ``nvidia.com/gpu`` column having ``column_free`` thousandths free (all
    its pods counted), reservation pods holding the devices ``held``.

    Recorded devices are honoured (a device past the node's count is not); a pod without a
    record goes, in key order, where it fits tightest (open devices with room, then devices
    no pod uses), so it is counted somewhere and no device is offered twice.
    """
    used = [0] * count
    charged = 0
    holders = {slot for slot in held if 0 <= slot < count}
    placements: dict[str, tuple[tuple[int, ...], int, int]] = {}
    unrecorded: list[pods.PodInfo] = []
    for pod in shared:
        share = pod.gpu_share
        assert share is not None
        recorded = pod.gpu_devices
        if (
            recorded is None
            or len(recorded) != share.devices
            or any(slot >= count for slot in recorded)
        ):
            unrecorded.append(pod)
            continue
        per_device, charge = _share_of(pod, memory=memory)
        for slot in recorded:
            used[slot] += per_device
        charged += charge
        placements[pod.key] = (tuple(recorded), per_device, charge)
    # The column counts every pod: the unrecorded ones' charges are added back while they are
    # fitted, so that the devices they do not hold yet count as free.
    pending = sum(pod.requests.get(resources.GPU, 0) for pod in unrecorded)
    for pod in unrecorded:
        share = pod.gpu_share
        assert share is not None
        per_device, charge = _share_of(pod, memory=memory)
        opened = sum(1 for s in range(count) if used[s] > 0 or s in holders)
        whole = max((column_free + charged + pending - WHOLE * opened) // WHOLE, 0)
        roomy = sorted(
            (s for s in range(count)
             if (used[s] > 0 or s in holders) and used[s] <= WHOLE - per_device),
            key=lambda s: -used[s],
        )  # fmt: skip
        fresh = [s for s in range(count) if used[s] == 0 and s not in holders][:whole]
        chosen = (roomy + fresh)[: share.devices]
        if len(chosen) < share.devices:  # over-committed by others: the least used then
            rest = sorted((s for s in range(count) if s not in chosen), key=lambda s: used[s])
            chosen = (chosen + rest)[: share.devices]
        for slot in chosen:
            used[slot] += per_device
        charged += charge
        pending -= charge
        placements[pod.key] = (tuple(sorted(chosen)), per_device, charge)
    return NodeShares(
        used=tuple(used), charged=charged, placements=placements, held=tuple(sorted(holders))
    )


def _share_of(pod: pods.PodInfo, *, memory: int | None) -> tuple[int, int]:
    """What ``pod`` takes of each of its devices, and its charge in the GPU column."""
    share = pod.gpu_share
    assert share is not None
    charge = pod.requests.get(resources.GPU, 0)
    per_device = share.per_device(memory)
    if per_device is None or pod.reserve:
        # Placed where it cannot fit (memory unknown), or a reservation's reserve pod, which holds
        # what its owners have not taken yet: count what it is charged.
        per_device = charge // max(share.devices, 1)
    return per_device, charge


def build(
    nodes: nodetable.NodeTable,
    /,
    *,
    labels: collections.abc.Sequence[collections.abc.Mapping[str, str]],
    shared: collections.abc.Mapping[str, NodeShares],
) -> Devices | None:
    """The devices of ``nodes`` (``labels`` per row) with the shared pods of ``shared`` (by
    node name) on them; ``None`` when no node offers ``nvidia.com/gpu``. Costs the nodes
    holding shared pods, not the cluster."""
    col = nodes.column.get(resources.GPU)
    if col is None:
        return None
    count = (nodes.allocatable[:, col] // WHOLE).astype(np.int64)
    if not count.any():
        return None
    width = max(int(count.max()), 1)
    memory = nodes.cached(("GpuSharing", "memory"), compute=lambda: _memories(labels))
    devices = Devices(
        count=count,
        memory=memory.copy(),
        used=np.zeros((len(count), width), dtype=np.int64),
        charged=np.zeros(len(count), dtype=np.int64),
        column=col,
        held=np.zeros((len(count), width), dtype=np.bool_),
    )
    for name, node in shared.items():
        row = nodes.index.get(name)
        if row is None:
            continue
        devices.used[row, : min(len(node.used), width)] = node.used[:width]
        devices.charged[row] = node.charged
        for slot in node.held:
            if slot < width:
                devices.held[row, slot] = True
        for key, (slots, per_device, charge) in node.placements.items():
            devices.placements[key] = Placement(
                row=row, slots=slots, per_device=per_device, charge=charge
            )
    return devices


def _memories(labels: collections.abc.Sequence[collections.abc.Mapping[str, str]]) -> IntArray:
    memory = np.array([gpushare.device_memory(row) or 0 for row in labels], dtype=np.int64)
    memory.setflags(write=False)
    return memory
