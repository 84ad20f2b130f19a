"""One session's queue accounting (its *books*): the tree's layout as arrays, usage and demand
per queue, the fair shares, the ratios queue order follows, the room left in each queue's
share, and the allocate/deallocate handlers that keep usage current while statements place,
pipeline and evict (ancestors count their subtree).

:class:`Accounting` is a value the rule families hold (:mod:`.admission`, :mod:`.ordering`,
:mod:`.reclaim`, :mod:`.starvation`, :mod:`.publishing`): they read it; only its event
handlers move it. The plugin builds one per session (:mod:`.plugin`)."""

from __future__ import annotations

import collections.abc
import dataclasses
import math

import numpy as np
import numpy.typing as npt

from berth.api import dra, resources
from berth.scheduler.framework import jobs, sessions
from berth.scheduler.plugins import names
from berth.scheduler.plugins.proportion import shares as fair_shares
from berth.scheduler.plugins.proportion import tree as trees
from berth.scheduler.snapshot import pods, queues

__all__ = ["NAME", "Accounting", "IntArray", "build_layout"]

NAME = names.PROPORTION
IntArray = trees.IntArray
_INF = math.inf


@dataclasses.dataclass(frozen=True, eq=False)
class _Layout:
    """What depends only on the queues and the resource columns: the tree, and each usable
    queue's row, path and quota as arrays (read-only). The same from cycle to cycle until a
    queue or a node changes, so it is memoised on the node table's static part (keyed by the
    queues themselves), not rebuilt every session — and not kept by the plugin (R8)."""

    tree: trees.QueueTree
    order: list[str]  # usable queues by name: the rows below
    index: dict[str, int]
    paths: dict[str, npt.NDArray[np.intp]]  # queue and its ancestors, as rows
    rows: dict[str, tuple[int, ...]]  # the same as plain ints, for per-event loops
    limit: IntArray  # [queues, resources]
    guaranteed: IntArray
    limited: dict[str, bool]  # a limit somewhere on its path
    not_pods: npt.NDArray[np.bool_]  # [resources]


def build_layout(
    infos: collections.abc.Iterable[queues.QueueInfo], *, resource_names: tuple[str, ...]
) -> _Layout:
    tree = trees.build_tree(infos, resource_names=resource_names)
    order = list(tree.nodes)
    index = {name: i for i, name in enumerate(order)}
    paths = {name: np.array([index[a] for a in tree.path(name)], dtype=np.intp) for name in order}
    shape = (len(order), len(resource_names))  # one row per usable queue, one per resource
    limit = np.array([tree.nodes[n].limit for n in order], dtype=np.int64).reshape(shape)
    guaranteed = np.array([tree.nodes[n].guaranteed for n in order], dtype=np.int64).reshape(shape)
    not_pods = np.array([r != resources.PODS for r in resource_names], dtype=np.bool_)
    for array in (limit, guaranteed, not_pods, *paths.values()):
        array.setflags(write=False)
    return _Layout(
        tree=tree,
        order=order,
        index=index,
        paths=paths,
        rows={name: tuple(int(i) for i in path) for name, path in paths.items()},
        limit=limit,
        guaranteed=guaranteed,
        limited={name: bool((limit[paths[name]] < trees.UNLIMITED).any()) for name in order},
        not_pods=not_pods,
    )


class Accounting:
    """One session's queue accounting; built at open, dropped at close. The rule families
    hold it and read it (module docstring)."""

    def __init__(
        self,
        session: sessions.Session,
        *,
        usage: collections.abc.Mapping[str, float] | None = None,
    ) -> None:
        snapshot = session.snapshot
        table = session.nodes
        self.session = session
        infos = tuple(snapshot.queues.values())
        # Devices (DRA) count per DeviceClass in columns of their own after the node table's
        # (``deviceclass/<name>``): the classes quotas name, claims hold or ask for, or exist.
        devices = snapshot.devices
        held = devices.queue_usage(snapshot.pods) if devices.claimants else {}
        device_capacity = devices.catalog.class_capacity()
        named = {
            name
            for info in infos
            for name in (*info.guaranteed, *(info.limit or {}))
            if name.startswith(dra.DEVICE_CLASS_RESOURCE_PREFIX)
        }
        named.update(device_capacity, *(n for pair in held.values() for n in pair))
        self.device_columns: tuple[str, ...] = tuple(sorted(named))
        self._plain_vectors: dict[str, IntArray] = {}
        self.resources = resources_ = table.resources + self.device_columns
        layout = table.cached(
            (NAME, "layout", infos, self.device_columns),
            compute=lambda: build_layout(infos, resource_names=resources_),
        )
        self.tree = layout.tree
        order = self.order = layout.order
        self.index = layout.index
        self.paths = layout.paths
        self.rows = layout.rows
        self.limit = layout.limit
        self.guaranteed = layout.guaranteed
        self.limited = layout.limited
        self.not_pods = layout.not_pods
        width = len(self.resources)
        shape = (len(order), width)  # one row per usable queue, one column per resource
        # Usage: placed pods count until they finish; pending pods are demand. The cache
        # keeps both summed per queue, so opening costs the queues, not the pods (the devices'
        # claims are summed per queue by the snapshot, each claim once).
        self.used_at_open = {
            name: self.vector_of(
                used.allocated + (held[name][0] if name in held else resources.ResourceList())
            )
            for name, used in snapshot.queue_usage.items()
            if used.allocated or name in held
        }
        self.waiting_at_open = {
            name: self.vector_of(
                used.requested + (held[name][1] if name in held else resources.ResourceList())
            )
            for name, used in snapshot.queue_usage.items()
            if used.requested or name in held
        }
        self.allocated = np.zeros(shape, dtype=np.int64)
        self.pending = np.zeros_like(self.allocated)
        self.pipelined = np.zeros_like(self.allocated)
        for name, path in self.paths.items():
            if name in self.used_at_open:
                self.allocated[path] += self.used_at_open[name]
            if name in self.waiting_at_open:
                self.pending[path] += self.waiting_at_open[name]
        # Cordoned nodes offer nothing new, but what runs there still counts.
        cordoned = table.unschedulable
        if cordoned.any():
            capacity = table.allocatable[~cordoned].sum(axis=0) + table.requested[cordoned].sum(0)
        else:
            capacity = table.allocatable.sum(axis=0)
        if self.device_columns:
            capacity = np.concatenate(
                (capacity, [device_capacity.get(name, 0) for name in self.device_columns])
            )
        self.capacity = np.asarray(capacity, dtype=np.int64).reshape(width)
        demand = {
            name: self.allocated[self.index[name]] + self.pending[self.index[name]]
            for name in order
            if self.tree.nodes[name].leaf
        }
        fair = fair_shares.fair_shares(
            self.tree, capacity=self.capacity, demand=demand, usage=usage
        )
        self.share = np.array([fair[n] for n in order], dtype=np.int64).reshape(shape)
        # The guarantee the tree honours: all of it, unless the guarantees of higher-priority
        # siblings took the level's budget first (then the share is all that is left of it).
        self.honored = np.minimum(self.guaranteed, self.share)
        # What each queue asks for (runs or waits for): the resources its ratio looks at.
        asked = (self.allocated + self.pending) > 0
        self.inv_share = np.divide(
            1.0,
            self.share,
            out=np.zeros(self.share.shape, dtype=np.float64),
            where=asked & (self.share > 0),
        )
        self.unshared = asked & (self.share <= 0)  # asked for, entitled to none of it
        self.promised = asked & (self.honored > 0)  # asked for, and guaranteed some of it
        self._ratios: list[float | None] = [None] * len(order)
        # Leaf queues that take work this session, with their jobs, for "others wait".
        by_queue: dict[str, list[jobs.Job]] = {}
        for key in sorted(session.jobs):
            job = session.jobs[key]
            node = self.tree.nodes.get(job.queue)
            if node is not None and node.leaf and node.open:
                by_queue.setdefault(job.queue, []).append(job)
        self.workers = [(self.index[q], by_queue[q]) for q in sorted(by_queue)]
        self._cursor = [0] * len(self.workers)
        self._needs: dict[str, IntArray] = {}
        self._rooms: list[IntArray | None] = [None] * len(order)
        self._rooms_cached = False
        self._full: list[npt.NDArray[np.bool_] | None] = [None] * len(order)
        self.evicted_from: dict[str, int] = {}  # group key -> members evicted this session
        self.evicted_vec: dict[str, IntArray] = {}  # group key -> requests evicted this session
        self.evictions = 0  # pods evicted by this session's statements (undone ones uncounted)
        self.moves = 0  # changes to the books so far: what was judged at an older count is stale

    # Vectors ---------------------------------------------------------------------------------
    def vector_of(self, amounts: collections.abc.Mapping[str, int]) -> IntArray:
        """``amounts`` over the books' columns: the node table's, then the device classes'."""
        base = self.session.nodes.vector(amounts, memo=False)
        if not self.device_columns:
            return base
        devices = [amounts.get(name, 0) for name in self.device_columns]
        return np.concatenate((base, np.asarray(devices, dtype=np.int64)))

    def dominant(self, vec: IntArray) -> float:
        """``vec``'s largest share of the cluster's capacity of one resource (pods aside):
        how big a job is, to compare it with another."""
        cols = self.not_pods & (self.capacity > 0)
        return float((vec[cols] / self.capacity[cols]).max(initial=0.0))

    def job_size(self, group: str | None, pod: pods.PodInfo) -> float:
        """:meth:`dominant` of what the job of running ``pod`` takes at quorum (its group's
        ``minMember`` or placed members, whichever is more, each like ``pod``)."""
        info = self.session.snapshot.pod_groups.get(group) if group is not None else None
        members = max(info.min_member, info.placed) if info is not None else 1
        return self.dominant(self.vector(pod) * members)

    def vector(self, pod: pods.PodInfo) -> IntArray:
        """What ``pod`` takes over the books' columns: its requests, and the devices its
        ResourceClaims take (``SessionHooks.device_requests``, asked each time: they are
        known exactly once its claims are allocated in the session)."""
        base = self.session.vector(pod)
        if not self.device_columns:
            return base
        if not pod.resource_claims:
            found = self._plain_vectors.get(pod.key)
            if found is None:
                zeros = np.zeros(len(self.device_columns), dtype=np.int64)
                found = self._plain_vectors[pod.key] = np.concatenate((base, zeros))
            return found
        taken: collections.abc.Mapping[str, int] = self.session.hooks.device_requests(pod) or {}
        devices = [taken.get(name, 0) for name in self.device_columns]
        return np.concatenate((base, np.asarray(devices, dtype=np.int64)))

    # Shares ---------------------------------------------------------------------------------
    def ratio(self, i: int) -> float:
        """How far the queue is through its entitlement: the largest ``allocated / share``
        over the resources it asks for (1.0: at it; a resource it asks for but is entitled
        to none of counts as 1.0 while it holds none of it, as infinity once it does)."""
        cached = self._ratios[i]
        if cached is not None:
            return cached
        held = self.allocated[i]
        value = float((held * self.inv_share[i]).max(initial=0.0))
        unshared = self.unshared[i]
        if unshared.any():
            value = max(value, _INF if (held[unshared] > 0).any() else 1.0)
        self._ratios[i] = value
        return value

    def holdings(self) -> dict[str, float]:
        """Every usable queue's dominant share of the capacity its placed pods hold now (the
        usage history's rate until the next cycle; ``pods`` aside)."""
        counted = self.not_pods & (self.capacity > 0)
        if not counted.any():
            return {}
        held = (self.allocated - self.pipelined)[:, counted] / self.capacity[counted]
        dominant = held.max(axis=1, initial=0.0)
        return {name: float(dominant[i]) for i, name in enumerate(self.order) if dominant[i] > 0}

    def others_wait(self, i: int) -> bool:
        """Whether a queue other than ``i``, below its entitlement, has a job still to try."""
        tried = self.session.group_why
        for slot, (j, waiting) in enumerate(self.workers):
            if j == i or self.ratio(j) >= 1.0:
                continue
            k = self._cursor[slot]
            while k < len(waiting) and (waiting[k].committed or waiting[k].key in tried):
                k += 1  # placed, or tried and failed this session: it no longer waits
            self._cursor[slot] = k
            if k < len(waiting):
                return True
        return False

    def below_guarantee(self, i: int) -> bool:
        """Queue ``i`` holds less than the guarantee the tree honours of a resource it asks
        for."""
        promised = self.promised[i]
        return bool(
            promised.any() and (self.allocated[i][promised] < self.honored[i][promised]).any()
        )

    def at_share(self, i: int) -> npt.NDArray[np.bool_]:
        """Per resource, whether queue ``i`` holds its whole fair share of it (kept until the
        books next move on its path)."""
        found = self._full[i]
        if found is None:
            found = self._full[i] = self.allocated[i] >= self.share[i]
        return found

    # Reclaim ---------------------------------------------------------------------------------
    def quorum_need(self, job: jobs.Job) -> IntArray:
        """What the job's pods up to quorum ask for (its highest-priority, oldest pods)."""
        need = self._needs.get(job.key)
        if need is None:
            group = job.group
            count = max(group.min_member - group.placed - group.succeeded, 1)
            ordered = sorted(job.pending, key=lambda p: (-p.priority, p.creation_timestamp, p.key))
            need = np.zeros(len(self.resources), dtype=np.int64)
            for pod in ordered[:count]:
                need += self.vector(pod)
            self._needs[job.key] = need
        return need

    def room_under(self, i: int, *, used: IntArray) -> IntArray:
        """What queue ``i`` may still take: its share and every limit on its path, less
        ``used`` (usage by queue, as rows like ``allocated``)."""
        path = self.paths[self.order[i]]
        room: IntArray = np.minimum(
            self.share[i] - used[i], (self.limit[path] - used[path]).min(axis=0)
        )
        return room

    def room(self, i: int) -> IntArray:
        """What queue ``i`` may still take now (:meth:`room_under` its usage; kept until the
        books next move: a long backlog asks it of the same queue job after job)."""
        found = self._rooms[i]
        if found is None:
            found = self._rooms[i] = self.room_under(i, used=self.allocated)
            self._rooms_cached = True
        return found

    # Events ----------------------------------------------------------------------------------
    def on_allocate(self, event: jobs.Event) -> None:
        self._move(event, sign=1)

    def on_deallocate(self, event: jobs.Event) -> None:
        self._move(event, sign=-1)

    def _move(self, event: jobs.Event, *, sign: int) -> None:
        # Called once per placement, pipelining, eviction and undo: plain loops over the
        # (short) path beat NumPy's fancy indexing here.
        pod = event.pod
        self.moves += 1
        # A placed pod evicted (-1), or its eviction undone (+1).
        vec = self.vector(pod)
        if pod.node_name is not None:
            self.evictions -= sign
            group = pod.pod_group
            if group is not None:
                self.evicted_from[group] = self.evicted_from.get(group, 0) - sign
                gone = self.evicted_vec.get(group)
                self.evicted_vec[group] = (-sign * vec) if gone is None else gone - sign * vec
        rows = self.rows.get(pod.queue) if pod.queue is not None else None
        if rows is None:
            return
        if sign < 0:
            vec = -vec
        placing = pod.node_name is None  # a pending pod placed or nominated, or undone
        nominated = placing and event.job is not None and pod.key in event.job.pipelined
        allocated, pending, ratios, full = self.allocated, self.pending, self._ratios, self._full
        for i in rows:
            allocated[i] += vec
            if placing:
                pending[i] -= vec
                if nominated:
                    self.pipelined[i] += vec
            ratios[i] = None
            full[i] = None
        if self._rooms_cached:
            # A change anywhere on a path changes the room of every queue below it.
            self._rooms = [None] * len(self._rooms)
            self._rooms_cached = False
