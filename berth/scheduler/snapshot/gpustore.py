"""``GpuShareStore``: the cache's view of shared GPUs (:mod:`.gpushare`).

Owns the placed pods holding a share of a GPU, indexed by node (the snapshot's ``shared_gpus``:
where they are on its devices, from which a session builds its devices, :mod:`.gpudevices`),
the GPU memory each node's devices offer, the pods asking ``gpu-memory`` (charged what they take
of their node's devices; a waiting one: of the smallest device it fits, so they are charged
again when the memories offered change), and the GPU workload mix learnt from the pods seen
arrive (:mod:`.gpumix`). KAI-Scheduler's reservation pods of shared devices
(:func:`~berth.scheduler.snapshot.gpushare.reserved_device`) are indexed by node too: the
device each holds is the one its shares are charged for, so its own GPU is not charged again.

Pure and synchronous; :class:`berth.scheduler.snapshot.cache.ClusterCache` routes to it.
"""

from __future__ import annotations

import collections.abc
import types

from berth.api import resources
from berth.scheduler.snapshot import gpudevices, gpumix, gpushare, nodestore, pods

__all__ = ["GpuShareStore"]


class GpuShareStore:
    """Shared GPUs by node; :meth:`view` gives a snapshot its ``shared_gpus``."""

    def __init__(self) -> None:
        self._on: dict[str, set[str]] = {}  # node -> the placed pods holding a share there
        self._node_of: dict[str, str] = {}
        self._view: dict[str, gpudevices.NodeShares] = {}
        self._dirty: set[str] = set()
        # Reservation pods of shared devices: node -> pod -> device, and pod -> node.
        self._held_on: dict[str, dict[str, int]] = {}
        self._held_node: dict[str, str] = {}
        self._node_memory: dict[str, int] = {}
        self._memories: tuple[int, ...] = ()  # the memories nodes offer, sorted
        self._memory_pods: set[str] = set()
        self._mix = gpumix.Mix()

    def arrived(self, info: pods.PodInfo, /) -> None:
        """A pod arrived: the mix GPU scoring expects learns its shape."""
        self._mix.observe(info)

    def node_memory_changed(self, name: str, memory: int | None, /) -> list[str]:
        """Node ``name``'s devices now hold ``memory`` MiB (``None``: unknown, or it is gone):
        the keys of the pods asking GPU memory, sorted, to be charged again (none when it did
        not change)."""
        if self._node_memory.get(name) == memory:
            return []
        if memory is None:
            del self._node_memory[name]
        else:
            self._node_memory[name] = memory
        self._memories = tuple(sorted(set(self._node_memory.values())))
        return sorted(self._memory_pods)

    def charged(self, info: pods.PodInfo, /) -> pods.PodInfo:
        """``info`` as charged: a ``gpu-memory`` pod the share of a GPU it takes, a reservation
        pod of a shared device no GPU of its own (the device is its shares')."""
        share = info.gpu_share
        if share is not None and share.by_memory and share.problem is None:
            info = self._memory_charged(info, share)
        if (
            info.namespace == gpushare.RESERVATION_NAMESPACE
            and resources.GPU in info.requests
            and gpushare.reserved_device(info.namespace, info.name, info.annotations) is not None
        ):
            # Its GPU is the device its shares are charged for (gpudevices: held).
            nonzero = info.nonzero_requests
            info = pods.replace(
                info,
                requests=gpushare.without_gpu(info.requests),
                nonzero_requests=gpushare.without_gpu(nonzero) if nonzero is not None else None,
            )
        return info

    def _memory_charged(self, info: pods.PodInfo, share: gpushare.ShareRequest, /) -> pods.PodInfo:
        """``info`` charged the share of a GPU its ``gpu-memory`` takes: on its node's devices
        once placed, else on the smallest device it fits (the most it may take)."""
        self._memory_pods.add(info.key)
        memory = self._node_memory.get(info.node_name) if info.node_name is not None else None
        if memory is None:
            memory = gpushare.reference_memory(share, memories=self._memories)
        requests = gpushare.charged(info.requests, share, memory=memory)
        if requests == info.requests:
            return info
        nonzero = info.nonzero_requests
        if nonzero is not None:
            nonzero = gpushare.charged(nonzero, share, memory=memory)
        return pods.replace(info, requests=requests, nonzero_requests=nonzero)

    def pod_changed(self, info: pods.PodInfo, /) -> None:
        """Index ``info`` on its node while it holds a share there."""
        share = info.gpu_share
        if share is not None or info.key in self._node_of:
            placed = share is not None and share.problem is None and not info.terminal
            self._track(info.key, node=info.node_name if placed else None)
        if info.namespace == gpushare.RESERVATION_NAMESPACE or info.key in self._held_node:
            device = gpushare.reserved_device(info.namespace, info.name, info.annotations)
            holds = device is not None and info.node_name is not None and not info.terminal
            self._track_held(info.key, node=info.node_name if holds else None, device=device)

    def pod_gone(self, key: str, /) -> None:
        """The pod ``key`` is gone."""
        self._memory_pods.discard(key)
        self._track(key, node=None)
        self._track_held(key, node=None, device=None)

    def nodes_changed(self, names: collections.abc.Iterable[str], /) -> None:
        """Anything on the nodes ``names`` changed: their shared GPUs are placed again (what
        their other pods hold decides where a share with no recorded device goes)."""
        self._dirty.update(n for n in names if n in self._on)

    def _track(self, key: str, *, node: str | None) -> None:
        """Index the shared-GPU pod ``key`` on ``node`` (``None``: on none); its node's view
        is rebuilt at the next snapshot (its info may have changed even if the node did not)."""
        before = self._node_of.pop(key, None)
        if before is not None:
            self._dirty.add(before)
            members = self._on[before]
            members.discard(key)
            if not members:
                del self._on[before]
        if node is not None:
            self._node_of[key] = node
            self._on.setdefault(node, set()).add(key)
            self._dirty.add(node)

    def _track_held(self, key: str, *, node: str | None, device: int | None) -> None:
        """Index the reservation pod ``key`` holding ``device`` of ``node`` (``None``: none)."""
        before = self._held_node.pop(key, None)
        if before is not None:
            self._dirty.add(before)
            held = self._held_on[before]
            held.pop(key, None)
            if not held:
                del self._held_on[before]
        if node is not None and device is not None:
            self._held_node[key] = node
            self._held_on.setdefault(node, {})[key] = device
            self._dirty.add(node)

    def view(
        self,
        infos: collections.abc.Mapping[str, pods.PodInfo],
        nodes: nodestore.NodeStore,
        /,
    ) -> collections.abc.Mapping[str, gpudevices.NodeShares]:
        """The snapshot's ``shared_gpus``, rebuilt for the nodes that changed."""
        for name in self._dirty:
            members = self._on.get(name)
            node = nodes.get(name)
            held = self._held_on.get(name)
            if not (members or held) or node is None:
                self._view.pop(name, None)
                continue
            allocatable = node.allocatable.get(resources.GPU, 0)
            requested = nodes.requested(name).get(resources.GPU, 0)
            self._view[name] = gpudevices.node_shares(
                [infos[k] for k in sorted(members or ())],
                count=allocatable // gpushare.WHOLE,
                memory=self._node_memory.get(name),
                column_free=allocatable - requested,
                held=tuple(held.values()) if held else (),
            )
        self._dirty.clear()
        return types.MappingProxyType(dict(self._view))

    def mix(self) -> gpumix.View:
        """The GPU workload mix for a snapshot."""
        return self._mix.view()
