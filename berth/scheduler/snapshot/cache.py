"""``ClusterCache``: the incremental cluster state snapshots are taken from.

Owns the bookkeeping between watch events and cycles: infos parsed once per object change,
per-node requested sums and per-queue usage (:mod:`.usage`) kept incrementally (a cycle never
re-sums every pod), group membership, the resolution of pod priorities (PriorityClasses) and
queues (a pod's label, else its group's; a plain pod of Berth's joins its namespace's default
queue, else ``plain_pods_queue``, as a group of one), and pods assumed by the decision sink
while their binding is in flight (they count as placed until the API confirms the binding or
the sink forgets them). PersistentVolumes the sink reserves for a claim are assumed the same way
(kube-scheduler's assume cache): the volume counts as the claim's from the decision on, until the
informer brings a newer version of it (the API's word, whatever it says) or the sink forgets the
assumption because its write was refused. It also keeps the run times of pods seen placed and
then finished (:mod:`.runstats`).

GPU sharing (:mod:`.gpushare`): the cache indexes the placed pods holding a share of a GPU by
node (the snapshot's ``shared_gpus``: where they are on its devices, from which a session builds
its devices), charges a
``gpu-memory`` pod what it takes of its node's devices (a waiting one: of the smallest device
it fits), and learns the GPU workload mix from the pods it sees arrive (:mod:`.gpumix`).

Reservations become *reserve pods* here (docs/architecture.md, :mod:`.reservations`): a
Pending one is a pending pod of its queue, an Available one a placed pod holding what its
owners do not use — the owners are the pods its owners' selector matches that are annotated
``scheduling.berth.io/reservation-allocated`` with it, running on its node (the annotation on
any other pod is ignored: a tenant cannot end another's reservation by writing it). An allocate-once
reservation holds nothing once it has an owner; an ended, expired (by the time of the last
snapshot) or deleted one holds nothing at once.

Queue accounting cannot be squatted: a placed pod is charged to its queue (``allocated``) only
when the queue's ``namespaceSelector`` admits the pod's namespace and Berth placed it — a pod of
Berth's scheduler (Berth binds those), a pod Berth assumed (admission mode: admitted to that
node), or one carrying Berth's ``admitted-node`` annotation naming the node it runs on and not
disowned (:meth:`ClusterCache.disown`: admission saw the marker forged). Once charged so, a
pod stays charged while it lives, whatever is later written on it. Anyone else's pod with a
queue label — a foreign namespace's, one that skipped the gate, one labelled after creation —
takes room on its node like any pod and is charged to no queue; waiting pods likewise add to a
queue's demand only where its selector admits them.

Pure and synchronous: ``berth.kube`` drives it from informers, ``berth.sim`` from its in-memory
cluster. Methods take the objects as the API returns them (dicts; ``berth.api`` models for
Berth's kinds) and are idempotent: adding an object twice is an update.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import operator
import types
import typing

from berth.api import keys, resources
from berth.scheduler.snapshot import (
    changes,
    cowmaps,
    devicestore,
    gpudevices,
    gpumix,
    gpushare,
    ids,
    nodes,
    nodetable,
    podgroups,
    pods,
    queues,
    reservations,
    resourceclaims,
    runstats,
    snapshots,
    usage,
    volumes,
    wire,
)

__all__ = ["SYSTEM_PRIORITY_CLASSES", "ClusterCache"]

_by_key = operator.attrgetter("key")

SYSTEM_PRIORITY_CLASSES: collections.abc.Mapping[str, int] = types.MappingProxyType(
    {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
)
"""The classes every API server creates; known before the informer reports them."""


@dataclasses.dataclass(frozen=True)
class _PriorityClass:
    value: int
    global_default: bool


def _name_of(obj: typing.Any, /) -> str:
    if isinstance(obj, str):
        return obj
    return str(wire.sub(wire.as_raw(obj), "metadata").get("name") or "")


def _key_of(obj: typing.Any, /) -> str:
    if isinstance(obj, str):
        return obj
    meta = wire.sub(wire.as_raw(obj), "metadata")
    return ids.key_of(str(meta.get("namespace") or "default"), name=str(meta.get("name") or ""))


class ClusterCache:
    """Incremental cluster state; :meth:`snapshot` hands a cycle its private view."""

    def __init__(
        self,
        *,
        scheduler_names: collections.abc.Iterable[str] = (keys.DEFAULT_SCHEDULER_NAME,),
        plain_pods_queue: str | None = None,
        group_by_owner: bool = False,
        dynamic_resources: bool = False,
    ) -> None:
        """``scheduler_names``: the profile's name first, then the other schedulers' names whose
        pods Berth claims (setting ``interop_volcano_pods``...). ``plain_pods_queue``: the queue
        Berth's pods with neither a group nor a queue join as groups of one when their
        Namespace names no default queue (the operator's ``default``, setting
        ``admit_plain_pods``); ``None``: there they bypass queues and quota (in a namespace that
        names one they join it all the same). ``group_by_owner``: pods with owners and no group wait
        until Berth derived their group from the owners
        (:func:`~berth.scheduler.snapshot.pods.awaits_owner_group`). ``dynamic_resources``: the
        source feeds the cache DRA objects (DeviceClasses, ResourceSlices, ResourceClaims and
        their templates); without it, pods with ``spec.resourceClaims`` are left to
        kube-scheduler (admission mode) or refused (:attr:`Devices.watched
        <berth.scheduler.snapshot.devices.Devices.watched>`)."""
        ordered_names = tuple(scheduler_names)
        self._plain_pods_queue = plain_pods_queue
        self._group_by_owner = group_by_owner
        self._scheduler_names = frozenset(ordered_names)
        self._reserve_scheduler_names = ordered_names  # the first schedules reservations
        self._claimed_names = frozenset(ordered_names[1:])  # other schedulers' names, claimed
        self._nodes: dict[str, nodes.NodeInfo] = {}
        # Copy-on-write: a snapshot shares them, and later changes copy only what they touch.
        self._pods: cowmaps.CowMap[pods.PodInfo] = cowmaps.CowMap()
        self._assumed: dict[str, ids.NodeName] = {}
        # Pods whose constraints reach other pods (pod affinity, host ports): few, so a session
        # finds them without walking every pod.
        self._constraining: dict[str, pods.PodInfo] = {}
        # What each placed pod added to its node, so removal subtracts exactly that.
        self._counted: dict[str, tuple[str, resources.ResourceList]] = {}
        self._node_requested: dict[str, dict[str, int]] = {}
        self._node_pods: dict[str, set[str]] = {}
        # Waiting pods by key (what the snapshot's views list, sorted on demand).
        self._pending: dict[str, pods.PodInfo] = {}
        self._gated: dict[str, pods.PodInfo] = {}
        # Pending pods by group (None: plain pods), and the sorted tuples snapshots share,
        # refreshed for the groups whose pending pods changed.
        self._pending_groups: dict[str | None, dict[str, pods.PodInfo]] = {}
        self._pending_index: dict[str | None, tuple[pods.PodInfo, ...]] = {}
        self._pending_index_dirty: set[str | None] = set()
        # Per-queue sums and group counts, moved by each change (a cycle never re-sums pods).
        self._usage = usage.QueueTotals()
        self._groups: dict[str, podgroups.PodGroupInfo] = {}
        self._group_spec_queue: dict[str, ids.QueueName] = {}  # as written, before defaulting
        # Namespace -> labels, and -> the default queue its label names.
        self._namespaces: dict[str, dict[str, str]] = {}
        self._namespace_queues: dict[str, str] = {}
        # Storage (volume plugins): claims by key, volumes and classes by name, attach limits
        # by node; frozen into one Volumes view until the next change.
        self._claims: dict[str, volumes.ClaimInfo] = {}
        self._volumes: dict[str, volumes.VolumeInfo] = {}
        # Volumes reserved by the sink for a claim, not confirmed yet: name -> (claim key, the
        # resourceVersion the reservation was decided on). Shown as the claim's while the
        # informer's version is that one (kube-scheduler's passive assume cache).
        self._assumed_volumes: dict[str, tuple[str, str]] = {}
        self._storage_classes: dict[str, volumes.ClassInfo] = {}
        self._attach_limits: dict[str, dict[str, int]] = {}
        self._volumes_view: volumes.Volumes | None = volumes.EMPTY
        # DRA: DeviceClasses, ResourceSlices, ResourceClaims, templates, pods using claims.
        self._devices = devicestore.DeviceStore(watched=dynamic_resources)
        self._group_members: dict[str, set[str]] = {}
        self._queues: dict[str, queues.QueueInfo] = {}
        # Pods Berth placed (pod key -> UID): charged to their queue while they live, and pods
        # whose admitted-node marker admission found forged (never charged through it).
        self._placed_by_berth: dict[str, str] = {}
        self._disowned: dict[str, str] = {}
        self._reservations: dict[str, reservations.ReservationInfo] = {}
        self._assumed_reservations: set[str] = set()  # placed by the sink, status not seen yet
        # Owners: reservation key -> pods annotated as placed into it, and the reverse.
        self._charged: dict[str, set[str]] = {}
        self._charge_of: dict[str, str] = {}
        # Reservations whose reserve pod ends at a deadline, and the time of the last snapshot.
        self._deadlines: dict[str, float] = {}
        self._now: float | None = None
        # Run times of pods seen placed and then finished (estimates for pods declaring none).
        self._run_times = runstats.RunTimeStatistics()
        self._classes: dict[str, _PriorityClass] = {
            name: _PriorityClass(value, False) for name, value in SYSTEM_PRIORITY_CLASSES.items()
        }
        self._class_values: dict[str, int] = dict(SYSTEM_PRIORITY_CLASSES)
        self._default_priority = 0
        # The lowest priority any pod has had: no pod, now or earlier, is below it.
        self._priority_floor: int | None = None
        # Derived views, refreshed lazily at snapshot time.
        self._table: nodetable.NodeTable | None = None
        self._node_views: cowmaps.CowMap[nodes.NodeInfo] = cowmaps.CowMap()
        self._dirty_nodes: set[str] = set()
        self._group_views: cowmaps.CowMap[podgroups.PodGroupInfo] = cowmaps.CowMap()
        self._dirty_groups: set[str] = set()
        self._pending_view: cowmaps.SortedOnRead[pods.PodInfo] | None = None
        self._gated_view: tuple[pods.PodInfo, ...] | None = None
        self._changes = changes.Counter()
        # GPU sharing: node -> the placed pods holding a share there (and the reverse), the
        # snapshots' view of it, the GPU memories nodes offer (sorted), the pods asking memory.
        self._shared_on: dict[str, set[str]] = {}
        self._shared_node: dict[str, str] = {}
        self._shared_view: dict[str, gpudevices.NodeShares] = {}
        self._shared_dirty: set[str] = set()
        # Reservation pods of shared devices (gpushare.reserved_device): node -> pod -> device.
        self._held_on: dict[str, dict[str, int]] = {}
        self._held_node: dict[str, str] = {}
        self._node_memory: dict[str, int] = {}
        self._memories: tuple[int, ...] = ()
        self._memory_pods: set[str] = set()
        self._gpu_mix = gpumix.Mix()

    # Nodes --------------------------------------------------------------------------------
    def add_node(self, raw: typing.Any, /) -> None:
        """Add or update a node."""
        info = nodes.node_info(raw)
        old = self._nodes.get(info.name)
        self._nodes[info.name] = info
        self._dirty_nodes.add(info.name)
        if old is None or not old.static_equal(info):
            self._table = None
            self._changes.world_changed()
            self._gpu_memory_changed(info.name, gpushare.device_memory(info.labels))
        else:
            self._changes.touch()

    update_node = add_node

    def remove_node(self, node: typing.Any, /) -> None:
        """Remove a node (by name or object); pods still bound to it keep their counts."""
        name = ids.NodeName(_name_of(node))
        if self._nodes.pop(name, None) is not None:
            self._node_views.pop(name, None)
            self._dirty_nodes.discard(name)
            self._table = None
            self._changes.world_changed()
            self._gpu_memory_changed(name, None)

    def _gpu_memory_changed(self, name: str, memory: int | None) -> None:
        """Node ``name``'s devices now hold ``memory`` MiB (``None``: unknown, or it is gone):
        the pods asking GPU memory are charged again where that changes what they take."""
        if self._node_memory.get(name) == memory:
            return
        if memory is None:
            del self._node_memory[name]
        else:
            self._node_memory[name] = memory
        self._memories = tuple(sorted(set(self._node_memory.values())))
        for key in sorted(self._memory_pods):
            info = self._pods.get(key)
            if info is not None:
                self._store_pod(info, from_api=False)

    # Pods ---------------------------------------------------------------------------------
    def add_pod(self, raw: typing.Any, /) -> None:
        """Add or update a pod."""
        obj = wire.as_raw(raw)
        info = pods.pod_info(
            obj,
            priority_classes=self._class_values,
            group_by_owner=self._group_by_owner,
            # Most events change only a pod's status: what it derived from the rest is reused.
            previous=self._pods.get(ids.PodKey(_key_of(obj))),
        )
        if info.scheduler_name in self._claimed_names:
            # Another scheduler's pod Berth claims is Berth's own from here on: the profile's
            # checks (fields it does not implement) apply to it as to any pod Berth binds.
            info = pods.replace(info, scheduler_name=self._reserve_scheduler_names[0])
        old = self._pods.get(info.key)
        if old is not None and info.uid and old.uid and old.uid != info.uid:
            # A new pod under an old name (deleted and recreated before the deletion was
            # seen): nothing of the old one, its assumed binding above all, carries over.
            self.remove_pod(info.key)
            old = None
        if old is None and not info.terminal:
            self._gpu_mix.observe(info)  # an arrival: the mix GPU scoring expects
        self._store_pod(self._resolved(info), from_api=True)

    update_pod = add_pod

    def remove_pod(self, pod: typing.Any, /) -> None:
        """Remove a pod (by ``namespace/name`` key or object)."""
        key = ids.PodKey(_key_of(pod))
        old = self._pods.pop(key, None)
        if old is None:
            return
        self._changes.touch()
        self._assumed.pop(key, None)
        self._constraining.pop(key, None)
        self._devices.pod_changed(key, None)
        self._memory_pods.discard(key)
        self._track_shared(key, node=None)
        self._track_held(key, node=None, device=None)
        self._uncount(key)
        self._usage.set_pod(key, running=None, waiting=None)
        self._placed_by_berth.pop(key, None)
        self._disowned.pop(key, None)
        if key in self._pending:
            self._set_pending(key, None)
        if key in self._gated:
            del self._gated[key]
            self._gated_view = None
        if old.pod_group is not None:
            self._leave_group(old.pod_group, key)
        charged = self._charge_of.pop(key, None)
        if charged is not None:
            self._charged[charged].discard(key)
            if not self._charged[charged]:
                del self._charged[charged]
            self._refresh_reserve_pod(charged)

    def assume_pod(
        self,
        key: str,
        /,
        *,
        node: str,
        started: float | None = None,
        annotations: collections.abc.Mapping[str, str] | None = None,
    ) -> None:
        """Count the pod as placed on ``node`` while its binding is in flight (``started``:
        when it counts as started until the API says, if the caller knows). ``annotations``
        are those its binding carries (the API server sets them with ``spec.nodeName``, in one
        write): the devices of a shared GPU recorded there count at once, as the bound pod's
        will; the rest waits for the watch."""
        pod_key = ids.PodKey(key)
        info = self._pods.get(pod_key)
        if info is None:
            raise KeyError(f"cannot assume unknown pod {key!r}")
        if annotations and info.gpu_share is not None:
            devices = gpushare.devices_of(annotations)
            if devices is not None:
                info = pods.replace(info, gpu_devices=devices)
        self._assumed[pod_key] = ids.NodeName(node)
        if pod_key not in self._disowned:
            self._placed_by_berth[pod_key] = info.uid
        # Until the API says when it started, it counts as started when the caller bound it
        # (fair-share reclaim spares pods that have not run their minimum yet).
        if info.start_time is not None:
            started = info.start_time
        self._store_pod(
            pods.replace(info, node_name=ids.NodeName(node), start_time=started),
            from_api=False,
        )

    def forget_pod(self, key: str, /) -> bool:
        """Undo :meth:`assume_pod` (the binding failed); False when it was not assumed."""
        pod_key = ids.PodKey(key)
        if self._assumed.pop(pod_key, None) is None:
            return False
        self._placed_by_berth.pop(pod_key, None)
        info = self._pods.get(pod_key)
        if info is not None:
            # A pod whose binding failed never started (the API gives no startTime to one),
            # nor holds the devices its binding would have recorded.
            devices = gpushare.devices_of(info.annotations) if info.gpu_share is not None else None
            self._store_pod(
                pods.replace(info, node_name=None, start_time=None, gpu_devices=devices),
                from_api=False,
            )
        return True

    def _resolved(self, info: pods.PodInfo) -> pods.PodInfo:
        group = self._groups.get(info.pod_group) if info.pod_group is not None else None
        namespace_queue = self._namespace_queues.get(info.namespace)
        ours = info.scheduler_name in self._scheduler_names
        return pods.resolve(
            info,
            priority_classes=self._class_values,
            default_priority=self._default_priority,
            group_queue=group.queue if group is not None else None,
            namespace_queue=namespace_queue,
            plain_queue=(namespace_queue or self._plain_pods_queue) if ours else None,
        )

    def _store_pod(self, info: pods.PodInfo, /, *, from_api: bool) -> None:
        """Record ``info``; ``from_api`` says it came from a watch event (not an assumption)."""
        key = info.key
        assumed = self._assumed.get(key) if from_api else None
        if assumed is not None:
            if info.node_name is None and not info.terminal:
                info = pods.replace(info, node_name=assumed)  # the bind is in flight
            else:
                del self._assumed[key]  # the binding landed, or the API says otherwise
        share = info.gpu_share
        if share is not None and share.by_memory and share.problem is None:
            self._memory_pods.add(key)
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
        old = self._pods.get(key)
        if from_api and old is not None:
            self._run_times.finished(old, info, now=self._now)
        self._pods[key] = info
        self._changes.touch()
        if self._priority_floor is None or info.priority < self._priority_floor:
            self._priority_floor = info.priority
        if info.constrains_others:
            self._constraining[key] = info
        elif key in self._constraining:
            del self._constraining[key]
        self._devices.pod_changed(key, info)
        self._count(info)
        if share is not None or key in self._shared_node:
            placed = share is not None and share.problem is None and not info.terminal
            self._track_shared(key, node=info.node_name if placed else None)
        if info.namespace == gpushare.RESERVATION_NAMESPACE or key in self._held_node:
            device = gpushare.reserved_device(info.namespace, info.name, info.annotations)
            holds = device is not None and info.node_name is not None and not info.terminal
            self._track_held(key, node=info.node_name if holds else None, device=device)
        waiting = (
            info.node_name is None
            and not info.terminal
            and not info.deleting
            and info.scheduler_name in self._scheduler_names
        )
        was_pending, was_gated = key in self._pending, key in self._gated
        is_pending, is_gated = waiting and not info.gated, waiting and info.gated
        if is_pending or was_pending:
            self._set_pending(key, info if is_pending else None)
        if is_gated:
            self._gated[key] = info
        else:
            self._gated.pop(key, None)
        if is_pending or was_pending or is_gated != was_gated:
            self._pending_view = None
        if is_gated or was_gated:
            self._gated_view = None
        if old is not None and old.pod_group is not None and old.pod_group != info.pod_group:
            self._leave_group(old.pod_group, key)
        if info.pod_group is not None:
            self._group_members.setdefault(info.pod_group, set()).add(key)
            self._dirty_groups.add(info.pod_group)
        self._charge(info)
        if not info.reserve:
            self._track_charge(info)

    def _charge(self, info: pods.PodInfo, /) -> None:
        """Move ``info``'s part in its queue's sums (the module docstring says who is charged)."""
        key = info.key
        queue = info.queue
        if queue is not None and not self._queue_admits(queue, info.namespace):
            queue = None
        placed = info.node_name is not None and not info.terminal
        if placed and queue is not None and not self._berth_placed(info):
            queue = None
        self._usage.set_pod(
            key,
            running=(queue, info.requests) if placed and queue is not None else None,
            waiting=(queue, info.requests) if queue is not None and key in self._pending else None,
        )

    def _queue_admits(self, queue: str, namespace: str) -> bool:
        """Whether the queue ``queue`` admits pods of ``namespace`` (a queue not known yet, or
        without a ``namespaceSelector``, admits every namespace)."""
        info = self._queues.get(ids.QueueName(queue))
        if info is None or info.namespaces is None:
            return True
        return info.namespaces.admits(self._namespaces.get(namespace, {}))

    def _berth_placed(self, info: pods.PodInfo, /) -> bool:
        """Whether Berth placed the placed pod ``info`` (remembered from the first sight on)."""
        key = info.key
        known = self._placed_by_berth.get(key)
        if known is not None and (known == info.uid or not known or not info.uid):
            return True
        if info.reserve or info.scheduler_name in self._scheduler_names:
            return True
        disowned = self._disowned.get(key)
        if disowned is not None and (disowned == info.uid or not info.uid):
            return False
        if info.annotations.get(keys.ADMITTED_NODE_ANNOTATION) == info.node_name:
            self._placed_by_berth[key] = info.uid
            return True
        return False

    def disown(self, key: str, /, *, uid: str) -> None:
        """The pod ``key`` (of ``uid``) carries Berth's ``admitted-node`` marker, but Berth did
        not admit it (admission saw someone else write it): never charge it to a queue."""
        pod_key = ids.PodKey(key)
        self._disowned[pod_key] = uid
        if self._placed_by_berth.get(pod_key) in (uid, "") and pod_key not in self._assumed:
            del self._placed_by_berth[pod_key]
        info = self._pods.get(pod_key)
        if info is not None:
            self._charge(info)
            self._changes.touch()

    def _recharge(self) -> None:
        """Move every pod's charge again: a queue's selector or a namespace's labels changed."""
        for key in sorted(self._pods):
            self._charge(self._pods[key])

    def _memory_charged(self, info: pods.PodInfo, share: gpushare.ShareRequest) -> pods.PodInfo:
        """``info`` charged the share of a GPU its ``gpu-memory`` takes: on its node's devices
        once placed, else on the smallest device it fits (the most it may take)."""
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

    def _track_shared(self, key: str, *, node: str | None) -> None:
        """Index the shared-GPU pod ``key`` on ``node`` (``None``: on none); its node's view
        is rebuilt at the next snapshot (its info may have changed even if the node did not)."""
        before = self._shared_node.pop(key, None)
        if before is not None:
            self._shared_dirty.add(before)
            members = self._shared_on[before]
            members.discard(key)
            if not members:
                del self._shared_on[before]
        if node is not None:
            self._shared_node[key] = node
            self._shared_on.setdefault(node, set()).add(key)
            self._shared_dirty.add(node)

    def _track_held(self, key: str, *, node: str | None, device: int | None) -> None:
        """Index the reservation pod ``key`` holding ``device`` of ``node`` (``None``: none)."""
        before = self._held_node.pop(key, None)
        if before is not None:
            self._shared_dirty.add(before)
            held = self._held_on[before]
            held.pop(key, None)
            if not held:
                del self._held_on[before]
        if node is not None and device is not None:
            self._held_node[key] = node
            self._held_on.setdefault(node, {})[key] = device
            self._shared_dirty.add(node)

    def _refresh_shares(self, name: str) -> None:
        """The snapshots' view of node ``name``'s shared GPUs (:mod:`.gpudevices`)."""
        members = self._shared_on.get(name)
        node = self._nodes.get(name)
        held = self._held_on.get(name)
        if not (members or held) or node is None:
            self._shared_view.pop(name, None)
            return
        allocatable = node.allocatable.get(resources.GPU, 0)
        requested = self._node_requested.get(name, {}).get(resources.GPU, 0)
        self._shared_view[name] = gpudevices.node_shares(
            [self._pods[k] for k in sorted(members or ())],
            count=allocatable // gpushare.WHOLE,
            memory=self._node_memory.get(name),
            column_free=allocatable - requested,
            held=tuple(held.values()) if held else (),
        )

    def _track_charge(self, info: pods.PodInfo) -> None:
        """Keep the owners of reservations current for an owner pod that changed."""
        found = reservations.allocated_to(info)
        now = found[0] if found is not None else None
        before = self._charge_of.get(info.key)
        if before is None and now is None:
            return
        if before != now:
            if before is not None:
                self._charge_of.pop(info.key)
                self._charged[before].discard(info.key)
                if not self._charged[before]:
                    del self._charged[before]
                self._refresh_reserve_pod(before)
            if now is not None:
                self._charge_of[info.key] = now
                self._charged.setdefault(now, set()).add(info.key)
        if now is not None:
            self._refresh_reserve_pod(now)

    def _leave_group(self, group: str, key: str) -> None:
        members = self._group_members.get(group)
        if members is not None:
            members.discard(key)
            if not members:
                del self._group_members[group]
        self._dirty_groups.add(group)

    def _count(self, info: pods.PodInfo) -> None:
        """Make the node sums reflect ``info`` (placed and not finished counts)."""
        key = info.key
        counted = self._counted.get(key)
        target = (
            (info.node_name, info.requests)
            if info.node_name is not None and not info.terminal
            else None
        )
        if counted == target:
            return
        self._uncount(key)
        if target is None:
            return
        node, requests = target
        self._changes.pod_placed()
        self._counted[key] = target
        sums = self._node_requested.setdefault(node, {})
        for name, value in requests.items():
            sums[name] = sums.get(name, 0) + value
        self._node_pods.setdefault(node, set()).add(key)
        self._dirty_nodes.add(node)
        self._apply(node, requests, sign=1)

    def _uncount(self, key: str) -> None:
        counted = self._counted.pop(key, None)
        if counted is None:
            return
        self._changes.room_freed()
        node, requests = counted
        sums = self._node_requested[node]
        for name, value in requests.items():
            left = sums[name] - value
            if left:
                sums[name] = left
            else:
                del sums[name]
        members = self._node_pods[node]
        members.discard(key)
        if not members:
            del self._node_pods[node]
            del self._node_requested[node]
        self._dirty_nodes.add(node)
        self._apply(node, requests, sign=-1)

    def _apply(self, node: str, requests: resources.ResourceList, *, sign: int) -> None:
        """Keep the master table in step, or drop it when its columns no longer fit."""
        table = self._table
        if table is None:
            return
        row = table.index.get(node)
        if row is None:
            return
        if table.missing(requests):
            self._table = None
            return
        vec = table.vector(requests)
        if sign > 0:
            table.assume(row, vec)
        else:
            table.forget(row, vec)

    # PodGroups, queues, reservations ------------------------------------------------------
    def add_pod_group(self, raw: typing.Any, /) -> None:
        """Add or update a PodGroup (a ``berth.api`` model or its wire dict)."""
        info = podgroups.pod_group_info(
            raw, priority_classes=self._class_values, default_priority=self._default_priority
        )
        self._group_spec_queue[info.key] = info.queue
        self._store_group(self._group_in_namespace(info))

    update_pod_group = add_pod_group

    def _group_in_namespace(self, info: podgroups.PodGroupInfo) -> podgroups.PodGroupInfo:
        """``info`` in its namespace's default queue when it names ``default`` (or none)."""
        queue = self._group_spec_queue.get(info.key, info.queue)
        own = self._namespace_queues.get(info.namespace)
        if own and queue == keys.DEFAULT_QUEUE:
            queue = ids.QueueName(own)
        return info if queue == info.queue else dataclasses.replace(info, queue=queue)

    def _store_group(self, info: podgroups.PodGroupInfo) -> None:
        old = self._groups.get(info.key)
        self._groups[info.key] = info
        self._dirty_groups.add(info.key)
        self._changes.touch()
        if old is None or old.queue != info.queue:
            self._resolve_members(info.key)

    def remove_pod_group(self, group: typing.Any, /) -> None:
        """Remove a PodGroup (by key or object); its pods stay, without a group object."""
        key = ids.PodGroupKey(_key_of(group))
        self._group_spec_queue.pop(key, None)
        if self._groups.pop(key, None) is not None:
            self._changes.touch()
            self._dirty_groups.add(key)
            self._resolve_members(key)

    def _resolve_members(self, group: str) -> None:
        for key in sorted(self._group_members.get(group, ())):
            info = self._pods[key]
            resolved = self._resolved(info)
            if resolved is not info:
                self._store_pod(resolved, from_api=False)

    def add_queue(self, raw: typing.Any, /) -> None:
        """Add or update a Queue."""
        info = queues.queue_info(raw)
        before = self._queues.get(info.name)
        if before != info:
            self._changes.world_changed()
        self._queues[info.name] = info
        if (before.namespaces if before is not None else None) != info.namespaces:
            self._recharge()

    update_queue = add_queue

    def remove_queue(self, queue: typing.Any, /) -> None:
        """Remove a Queue (by name or object)."""
        removed = self._queues.pop(ids.QueueName(_name_of(queue)), None)
        if removed is not None:
            self._changes.world_changed()
            if removed.namespaces is not None:
                self._recharge()

    def add_reservation(self, raw: typing.Any, /) -> None:
        """Add or update a Reservation (its reserve pod follows). An update still ``Pending``
        keeps an assumed placement (:meth:`assume_reservation`): it was written before the
        status (Kopf's handling marks, a label), and taking it at its word would place the
        reservation a second time."""
        info = reservations.reservation_info(raw)
        assumed = self._reservations.get(info.key)
        if (
            assumed is not None
            and assumed.uid == info.uid
            and info.key in self._assumed_reservations
            and info.phase == reservations.PENDING
        ):
            info = dataclasses.replace(
                info,
                phase=assumed.phase,
                node_name=assumed.node_name,
                allocatable=assumed.allocatable,
            )
        else:
            self._assumed_reservations.discard(info.key)
        self._reservations[info.key] = info
        self._changes.world_changed()
        self._refresh_reserve_pod(info.key)

    update_reservation = add_reservation

    def remove_reservation(self, reservation: typing.Any, /) -> None:
        """Remove a Reservation (by key or object): what it held is free at once; owners
        already placed keep their own requests counted."""
        key = ids.ReservationKey(_key_of(reservation))
        self._assumed_reservations.discard(key)
        if self._reservations.pop(key, None) is not None:
            self._changes.world_changed()
            self._refresh_reserve_pod(key)

    def assume_reservation(
        self, key: str, /, *, node: str, allocatable: resources.ResourceList
    ) -> None:
        """Count the reservation ``key`` as Available on ``node`` while its status write is in
        flight (the sink calls this when it applies ``SetReservationAvailable``), so the next
        cycle does not place it again. The assumption holds until an update shows the status
        moved on (any phase but ``Pending``), or the Reservation is replaced (another UID) or
        removed."""
        info = self._reservations.get(key)
        if info is None:
            raise KeyError(f"cannot assume unknown reservation {key!r}")
        self._assumed_reservations.add(key)
        self._reservations[key] = dataclasses.replace(
            info,
            phase=reservations.AVAILABLE,
            node_name=ids.NodeName(node),
            allocatable=allocatable,
        )
        self._changes.world_changed()
        self._refresh_reserve_pod(key)

    def _owners_used(
        self, info: reservations.ReservationInfo
    ) -> tuple[int, resources.ResourceList]:
        """How many live owners run in ``info`` on its node, and what they request."""
        count, used = 0, resources.ResourceList()
        for key in sorted(self._charged.get(info.key, ())):
            pod = self._pods.get(key)
            found = reservations.allocated_to(pod) if pod is not None else None
            if pod is None or found is None or pod.terminal or pod.node_name != info.node_name:
                continue
            if not reservations.is_owner(info, pod):
                continue  # the annotation on a pod its owners do not select: not Berth's word
            if found[1] is not None and found[1] != info.uid:
                continue  # placed into an earlier reservation of the same name
            count += 1
            used += pod.requests
        return count, used

    def _reserve_pod_of(self, key: str) -> pods.PodInfo | None:
        """The reserve pod the reservation ``key`` should have now, or ``None``."""
        info = self._reservations.get(key)
        if info is None or info.terminal:
            return None
        ends = reservations.deadline(info)
        if ends is not None and self._now is not None and ends <= self._now:
            return None  # expired: free at once, whatever its status says yet
        pod = reservations.reserve_pod(
            info,
            scheduler_names=self._reserve_scheduler_names,
            priority_classes=self._class_values,
            default_priority=self._default_priority,
        )
        if pod.node_name is None:
            return pod
        owners, used = self._owners_used(info)
        if info.allocate_once and (owners or info.current_owners):
            return None  # used once: the remainder is free
        remaining = (pod.requests - used).clamp_negative()
        return dataclasses.replace(pod, requests=remaining) if remaining else None

    def _refresh_reserve_pod(self, key: str) -> None:
        """Make the reserve pod of the reservation ``key`` what it should be now."""
        pod_key = reservations.reserve_pod_key(key)
        wanted = self._reserve_pod_of(key)
        info = self._reservations.get(key)
        ends = reservations.deadline(info) if info is not None and wanted is not None else None
        if ends is not None:
            self._deadlines[key] = ends
        else:
            self._deadlines.pop(key, None)
        if wanted is None:
            self.remove_pod(pod_key)
            return
        current = self._pods.get(pod_key)
        if current is not None and current == wanted and current.requests == wanted.requests:
            return
        self._store_pod(wanted, from_api=False)

    # Storage ------------------------------------------------------------------------------
    def add_claim(self, raw: typing.Any, /) -> None:
        """Add or update a PersistentVolumeClaim."""
        info = volumes.claim_info(raw)
        if self._claims.get(info.key) != info:
            self._changes.world_changed()  # a claim bound or resized: a pod may fit now
        self._claims[info.key] = info
        self._volumes_view = None

    update_claim = add_claim

    def remove_claim(self, claim: typing.Any, /) -> None:
        """Remove a PersistentVolumeClaim (by ``namespace/name`` key or object)."""
        if self._claims.pop(_key_of(claim), None) is not None:
            self._changes.world_changed()
            self._volumes_view = None

    def claim(self, key: str, /) -> volumes.ClaimInfo | None:
        """The claim ``namespace/name`` as last seen (the binder waits on it)."""
        return self._claims.get(key)

    def add_volume(self, raw: typing.Any, /) -> None:
        """Add or update a PersistentVolume; a newer version ends its assumption."""
        info = volumes.volume_info(raw)
        if self._volumes.get(info.name) != info:
            self._changes.world_changed()
        self._volumes[info.name] = info
        assumed = self._assumed_volumes.get(info.name)
        if assumed is not None and assumed[1] != info.version:
            del self._assumed_volumes[info.name]  # the API has spoken since: its word stands
        self._volumes_view = None

    update_volume = add_volume

    def remove_volume(self, volume: typing.Any, /) -> None:
        """Remove a PersistentVolume (by name or object)."""
        name = _name_of(volume)
        self._assumed_volumes.pop(name, None)
        if self._volumes.pop(name, None) is not None:
            self._changes.world_changed()
            self._volumes_view = None

    def assume_volume(self, name: str, /, *, claim: str, version: str) -> bool:
        """Count the PersistentVolume ``name`` as reserved for ``claim`` (``namespace/name``)
        while the sink's write of its ``claimRef`` is in flight, decided on the volume at
        ``version``. False (nothing assumed) when the cache holds another version of it, or
        none: the decision was made on a view the API has already moved past."""
        info = self._volumes.get(name)
        if info is None or info.version != version:
            return False
        self._assumed_volumes[name] = (claim, version)
        self._volumes_view = None
        return True

    def forget_volume(self, name: str, /, *, version: str) -> bool:
        """Undo :meth:`assume_volume` (its write was refused): the volume is as the informer
        last showed it again. False when that assumption is not held (any more)."""
        assumed = self._assumed_volumes.get(name)
        if assumed is None or assumed[1] != version:
            return False
        del self._assumed_volumes[name]
        self._changes.world_changed()  # free again: a pod waiting for it may fit now
        self._volumes_view = None
        return True

    def add_storage_class(self, raw: typing.Any, /) -> None:
        """Add or update a StorageClass."""
        info = volumes.class_info(raw)
        if self._storage_classes.get(info.name) != info:
            self._changes.world_changed()
        self._storage_classes[info.name] = info
        self._volumes_view = None

    update_storage_class = add_storage_class

    def remove_storage_class(self, cls: typing.Any, /) -> None:
        """Remove a StorageClass (by name or object)."""
        if self._storage_classes.pop(_name_of(cls), None) is not None:
            self._changes.world_changed()
            self._volumes_view = None

    def add_csi_node(self, raw: typing.Any, /) -> None:
        """Add or update a CSINode: its node's attach limit per CSI driver."""
        node, limits = volumes.attach_limits(raw)
        if self._attach_limits.get(node) != limits:
            self._changes.world_changed()
        self._attach_limits[node] = limits
        self._volumes_view = None

    update_csi_node = add_csi_node

    def remove_csi_node(self, csi_node: typing.Any, /) -> None:
        """Remove a CSINode (by name or object)."""
        if self._attach_limits.pop(_name_of(csi_node), None) is not None:
            self._changes.world_changed()
            self._volumes_view = None

    def _storage(self) -> volumes.Volumes:
        if self._volumes_view is None:
            shown = dict(self._volumes)
            for name, (claim, _) in self._assumed_volumes.items():
                shown[name] = dataclasses.replace(shown[name], claim=claim)
            self._volumes_view = volumes.Volumes(
                claims=types.MappingProxyType(dict(self._claims)),
                volumes=types.MappingProxyType(shown),
                classes=types.MappingProxyType(dict(self._storage_classes)),
                attach_limits=types.MappingProxyType(
                    {n: types.MappingProxyType(dict(d)) for n, d in self._attach_limits.items()}
                ),
            )
        return self._volumes_view

    # Dynamic Resource Allocation (resource.k8s.io) -----------------------------------------
    def _device_change(self, changed: bool) -> None:
        if changed:
            self._changes.world_changed()  # devices appeared, freed or were allocated

    def add_device_class(self, raw: typing.Any, /) -> None:
        """Add or update a DeviceClass."""
        self._device_change(self._devices.add_device_class(raw))

    update_device_class = add_device_class

    def remove_device_class(self, obj: typing.Any, /) -> None:
        """Remove a DeviceClass (by name or object)."""
        self._device_change(self._devices.remove_device_class(obj))

    def add_resource_slice(self, raw: typing.Any, /) -> None:
        """Add or update a ResourceSlice."""
        self._device_change(self._devices.add_resource_slice(raw))

    update_resource_slice = add_resource_slice

    def remove_resource_slice(self, obj: typing.Any, /) -> None:
        """Remove a ResourceSlice (by name or object)."""
        self._device_change(self._devices.remove_resource_slice(obj))

    def add_resource_claim(self, raw: typing.Any, /) -> None:
        """Add or update a ResourceClaim."""
        self._device_change(self._devices.add_resource_claim(raw))

    update_resource_claim = add_resource_claim

    def remove_resource_claim(self, obj: typing.Any, /) -> None:
        """Remove a ResourceClaim (by ``namespace/name`` key or object)."""
        self._device_change(self._devices.remove_resource_claim(obj))

    def resource_claim(self, key: str, /) -> resourceclaims.ResourceClaimInfo | None:
        """The ResourceClaim ``namespace/name`` as last seen, with what is assumed of it."""
        return self._devices.claim(key)

    def resource_claim_seen(self, key: str, /) -> resourceclaims.ResourceClaimInfo | None:
        """The ResourceClaim ``namespace/name`` as the API last showed it (its version: the
        binder's first write of it is made at that version, without reading it again)."""
        return self._devices.seen(key)

    def watch_devices(self) -> None:
        """The source feeds DRA objects from now on (the informers found the API served):
        pods with claims are scheduled, no longer refused or left to kube-scheduler."""
        self._device_change(self._devices.watch())

    def assume_resource_claim(
        self,
        key: str,
        /,
        *,
        uid: str,
        pod: str,
        pod_uid: str,
        allocation: resourceclaims.AllocationInfo | None,
    ) -> bool:
        """Count the claim ``key`` as allocated (``allocation``, when it is not yet) and
        reserved for the pod ``pod`` (uid ``pod_uid``) while the write is in flight, as
        :meth:`assume_pod` counts a pod bound; False when the claim as last seen is not the
        one with ``uid``."""
        assumed = self._devices.assume_claim(
            key, uid=uid, pod=pod, pod_uid=pod_uid, allocation=allocation
        )
        if assumed:
            self._changes.touch()
        return assumed

    def settle_resource_claim(self, key: str, /, *, pod_uid: str, version: str) -> None:
        """The write of the assumed claim ``key`` for the pod ``pod_uid`` landed as
        ``version`` (the assumption goes once the informer shows it)."""
        self._devices.settle_claim(key, pod_uid=pod_uid, version=version)

    def forget_pod_resource_claims(self, key: str, /) -> bool:
        """Undo every :meth:`assume_resource_claim` made for the pod ``key`` (admission mode:
        its pending allocation ended unbound); whether any was assumed."""
        forgot = self._devices.forget_pod_claims(key)
        if forgot:
            self._changes.world_changed()
        return forgot

    def forget_resource_claim(self, key: str, /, *, pod_uid: str) -> bool:
        """Undo :meth:`assume_resource_claim` for the pod ``pod_uid`` (its write failed or
        it was released); whether anything was assumed."""
        forgot = self._devices.forget_claim(key, pod_uid=pod_uid)
        if forgot:
            self._changes.world_changed()  # devices the assumption held are free again
        return forgot

    def add_resource_claim_template(self, raw: typing.Any, /) -> None:
        """Add or update a ResourceClaimTemplate."""
        self._device_change(self._devices.add_resource_claim_template(raw))

    update_resource_claim_template = add_resource_claim_template

    def remove_resource_claim_template(self, obj: typing.Any, /) -> None:
        """Remove a ResourceClaimTemplate (by ``namespace/name`` key or object)."""
        self._device_change(self._devices.remove_resource_claim_template(obj))

    # Namespaces ---------------------------------------------------------------------------
    def add_namespace(self, raw: typing.Any, /) -> None:
        """Add or update a Namespace: its labels (queues' namespaceSelectors, pod affinity's
        namespaceSelector) and the default queue its label ``scheduling.berth.io/default-queue``
        names."""
        obj = wire.as_raw(raw)
        name = _name_of(obj)
        labels = {str(k): str(v) for k, v in wire.sub(wire.sub(obj, "metadata"), "labels").items()}
        queue = labels.get(keys.NAMESPACE_QUEUE_LABEL) or None
        before = self._namespace_queues.get(name)
        relabelled = self._namespaces.get(name) != labels
        if relabelled:
            self._changes.world_changed()
        self._namespaces[name] = labels
        if relabelled and any(q.namespaces is not None for q in self._queues.values()):
            self._recharge()
        if queue:
            self._namespace_queues[name] = queue
        else:
            self._namespace_queues.pop(name, None)
        if queue != before:
            self._namespace_changed(name)

    update_namespace = add_namespace

    def remove_namespace(self, namespace: typing.Any, /) -> None:
        """Remove a Namespace (by name or object)."""
        name = _name_of(namespace)
        if self._namespaces.pop(name, None) is not None:
            self._changes.world_changed()
            if any(q.namespaces is not None for q in self._queues.values()):
                self._recharge()
        if self._namespace_queues.pop(name, None) is not None:
            self._namespace_changed(name)

    def namespace_labels(self, namespace: str, /) -> collections.abc.Mapping[str, str]:
        """The labels of the Namespace ``namespace`` (empty when not seen)."""
        return types.MappingProxyType(self._namespaces.get(namespace, {}))

    def namespace_queue(self, namespace: str, /) -> str:
        """The queue a pod of ``namespace`` naming none joins: the Namespace's, else
        ``default``."""
        return self._namespace_queues.get(namespace, keys.DEFAULT_QUEUE)

    def _namespace_changed(self, name: str) -> None:
        for key in sorted(k for k, g in self._groups.items() if g.namespace == name):
            self._store_group(self._group_in_namespace(self._groups[key]))
        for key in sorted(k for k, p in self._pods.items() if p.namespace == name):
            info = self._pods[key]
            resolved = self._resolved(info)
            if resolved is not info:
                self._store_pod(resolved, from_api=False)

    # PriorityClasses ----------------------------------------------------------------------
    def add_priority_class(self, raw: typing.Any, /) -> None:
        """Add or update a PriorityClass (``scheduling.k8s.io/v1``)."""
        obj = wire.as_raw(raw)
        value = obj.get("value", 0)
        self._classes[_name_of(obj)] = _PriorityClass(
            value=value if isinstance(value, int) and not isinstance(value, bool) else 0,
            global_default=bool(obj.get("globalDefault")),
        )
        self._classes_changed()

    update_priority_class = add_priority_class

    def remove_priority_class(self, priority_class: typing.Any, /) -> None:
        """Remove a PriorityClass (by name or object)."""
        if self._classes.pop(_name_of(priority_class), None) is not None:
            self._classes_changed()

    def _classes_changed(self) -> None:
        self._changes.world_changed()
        self._class_values = {name: pc.value for name, pc in self._classes.items()}
        defaults = [pc.value for pc in self._classes.values() if pc.global_default]
        # Kubernetes' admission picks the lowest-valued class when several claim the default.
        self._default_priority = min(defaults, default=0)
        for key in sorted(self._pods):
            info = self._pods[key]
            resolved = self._resolved(info)
            if resolved is not info:
                self._store_pod(resolved, from_api=False)
        self._dirty_groups.update(self._groups)
        self._dirty_groups.update(self._group_members)

    # Snapshots ----------------------------------------------------------------------------
    def snapshot(self, now: float, /) -> snapshots.Snapshot:
        """The cluster at ``now``: a private node table copy and views of every mapping that
        later changes do not reach (copy-on-write, :mod:`.cowmaps`: the cost is what changed
        since the last snapshot, not the size of the cluster).

        Reservations whose time ran out by ``now`` stop holding capacity here.
        """
        self._now = now
        for key in sorted(k for k, ends in self._deadlines.items() if ends <= now):
            self._refresh_reserve_pod(key)
        table = self._master_table().fresh_copy()
        # A node's shared GPUs are placed again when anything on it changed (what its other
        # pods hold decides where a share with no recorded device goes).
        self._shared_dirty.update(n for n in self._dirty_nodes if n in self._shared_on)
        for name in self._dirty_nodes:
            static = self._nodes.get(name)
            if static is not None:
                self._node_views[name] = dataclasses.replace(
                    static,
                    pods=tuple(ids.PodKey(k) for k in sorted(self._node_pods.get(name, ()))),
                )
        self._dirty_nodes.clear()
        for key in self._dirty_groups:
            self._refresh_group(key)
        refreshed = frozenset(self._dirty_groups)
        self._dirty_groups.clear()
        if self._pending_view is None:
            # Sorted only if read: sessions take the pending pods by group, from the index.
            self._pending_view = cowmaps.SortedOnRead(tuple(self._pending.values()), key=_by_key)
        for group in self._pending_index_dirty:
            members = self._pending_groups.get(group)
            if members:
                self._pending_index[group] = tuple(map(members.__getitem__, sorted(members)))
            else:
                self._pending_index.pop(group, None)
        self._pending_index_dirty.clear()
        if self._gated_view is None:
            self._gated_view = tuple(map(self._gated.__getitem__, sorted(self._gated)))
        queue_views = dict(sorted(self._queues.items()))
        queue_views.setdefault(ids.QueueName(keys.DEFAULT_QUEUE), queues.default_queue())
        for name in self._shared_dirty:
            self._refresh_shares(name)
        self._shared_dirty.clear()
        return snapshots.Snapshot(
            now=now,
            nodes=table,
            node_infos=self._node_views.freeze(),
            pods=self._pods.freeze(),
            constraining=types.MappingProxyType(dict(self._constraining)),
            namespace_labels=types.MappingProxyType(dict(self._namespaces)),
            pending=self._pending_view,
            gated=self._gated_view,
            pod_groups=self._group_views.freeze(),
            queues=types.MappingProxyType(queue_views),
            reservations=types.MappingProxyType(dict(sorted(self._reservations.items()))),
            priority_classes=types.MappingProxyType(dict(sorted(self._class_values.items()))),
            queue_usage=self._usage.views(),
            namespaces=types.MappingProxyType(dict(sorted(self._namespaces.items()))),
            volumes=self._storage(),
            devices=self._devices.view(),
            changes=self._changes.freeze(groups=refreshed),
            priority_floor=self._priority_floor,
            run_times=self._run_times.freeze(),
            shared_gpus=types.MappingProxyType(dict(self._shared_view)),
            gpu_mix=self._gpu_mix.view(),
        ).with_pending_index(types.MappingProxyType(dict(self._pending_index)))

    def _set_pending(self, key: str, info: pods.PodInfo | None) -> None:
        """``info`` is now ``key``'s pending pod (``None``: the pod no longer waits)."""
        previous = self._pending.pop(key, None)
        if previous is not None:
            members = self._pending_groups[previous.pod_group]
            del members[key]
            if not members:
                del self._pending_groups[previous.pod_group]
            self._pending_index_dirty.add(previous.pod_group)
        if info is not None:
            self._pending[key] = info
            self._pending_groups.setdefault(info.pod_group, {})[key] = info
            self._pending_index_dirty.add(info.pod_group)
        self._pending_view = None

    def _master_table(self) -> nodetable.NodeTable:
        if self._table is None:
            self._table = nodetable.NodeTable.build(
                self._nodes.values(), requested=self._node_requested
            )
        return self._table

    def _refresh_group(self, key: str) -> None:
        members = [self._pods[k] for k in sorted(self._group_members.get(key, ()))]
        static = self._groups.get(key)
        if static is None and members and members[0].queue:
            implicit = key == pods.implicit_group_key(members[0].namespace, name=members[0].name)
            static = podgroups.implicit_group(members[0]) if implicit else None
        if static is None:
            self._group_views.pop(key, None)
            self._usage.set_group(key, queue=None, state=None)
            return
        view = self._group_views[key] = podgroups.with_members(
            static,
            members=members,
            priority_classes=self._class_values,
            default_priority=self._default_priority,
        )
        self._usage.set_group(key, queue=view.queue, state=usage.group_state(view))
