"""``ClusterCache``: the incremental cluster state snapshots are taken from.

A thin router: each watch event goes to the store of its kind, and a change that reaches other
kinds (a pod joins a group, is charged to a queue, counts on a node, owns a Reservation) is
passed on to theirs; :meth:`ClusterCache.snapshot` assembles a cycle's view from the stores'.
One store per kind, each with its own module:

- :mod:`.nodestore` — Nodes, what their placed pods request, the node table;
- :mod:`.podstore` — Pods, Berth's waiting ones, the bindings in flight (*assumed*: they count
  as placed until the API confirms the binding or the binder forgets them), run times;
- :mod:`.groupstore` — PodGroups and their members;
- :mod:`.queuestore` — Queues, Namespaces, and what each queue is charged (the rules that keep
  queue accounting from being squatted are there);
- :mod:`.reservationstore` — Reservations, their owners, their *reserve pods*
  (docs/architecture.md): a Pending Reservation is a pending pod of its queue, an Available one a
  placed pod holding what its owners do not use;
- :mod:`.volumestore` — PersistentVolumeClaims, PersistentVolumes (assumed while the binder's
  ``claimRef`` write is in flight: kube-scheduler's assume cache), StorageClasses, CSINodes;
- :mod:`.devicestore` — the DRA kinds (DeviceClasses, ResourceSlices, ResourceClaims and their
  templates);
- :mod:`.prioritystore` — PriorityClasses;
- :mod:`.gpustore` — the pods holding a share of a GPU, by node, and the GPU workload mix.

The cache itself owns how a pod resolves: its priority (PriorityClasses), its queue (its label,
else its group's; a plain pod of Berth's joins its namespace's default queue, else
``plain_pods_queue``, as a group of one) and, for other schedulers' pods Berth claims, its
scheduler. Every change moves the :class:`~berth.scheduler.snapshot.changes.Counter` a snapshot
carries (whether the world changed since the last cycle).

Pure and synchronous: ``berth.kube`` drives it from informers, ``berth.sim`` from its in-memory
cluster. Methods take the objects as the API returns them (dicts; ``berth.api`` models for
Berth's kinds) and are idempotent: adding an object twice is an update.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

from berth.api import keys, resources
from berth.scheduler.snapshot import (
    changes,
    devicestore,
    gpushare,
    gpustore,
    groupstore,
    ids,
    nodes,
    nodestore,
    podgroups,
    pods,
    podstore,
    prioritystore,
    queues,
    queuestore,
    reservations,
    reservationstore,
    resourceclaims,
    snapshots,
    volumes,
    volumestore,
    wire,
)

__all__ = ["ClusterCache"]


@dataclasses.dataclass(frozen=True)
class _Profile:
    """Whose pods the cache counts as Berth's, and how those with no queue or group resolve."""

    names: tuple[str, ...]  # the profile's name first (it schedules reservations), then claimed
    plain_pods_queue: str | None
    group_by_owner: bool
    ours: frozenset[str]  # every name in ``names``
    claimed: frozenset[str]  # other schedulers' names, whose pods Berth claims


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
        names = tuple(scheduler_names)
        profile = self._profile = _Profile(
            names=names,
            plain_pods_queue=plain_pods_queue,
            group_by_owner=group_by_owner,
            ours=frozenset(names),
            claimed=frozenset(names[1:]),
        )
        self._changes = changes.Counter()
        self._nodes = nodestore.NodeStore(self._changes)
        self._pods = podstore.PodStore(scheduler_names=profile.ours)
        self._groups = groupstore.GroupStore()
        self._queues = queuestore.QueueStore(scheduler_names=profile.ours)
        self._reservations = reservationstore.ReservationStore()
        self._volumes = volumestore.VolumeStore()
        self._devices = devicestore.DeviceStore(watched=dynamic_resources)
        self._priorities = prioritystore.PriorityClassStore()
        self._gpus = gpustore.GpuShareStore()

    @property
    def seq(self) -> int:
        """The running count of the cache's changes (a snapshot's ``changes.seq``): the same
        before and after an update, the update changed nothing a session reads."""
        return self._changes.seq

    # Nodes --------------------------------------------------------------------------------
    def add_node(self, raw: typing.Any, /) -> None:
        """Add or update a node."""
        info = nodes.node_info(raw)
        if self._nodes.add(info):
            self._changes.world_changed()
            self._gpu_memory_changed(info.name, gpushare.device_memory(info.labels))
        else:
            self._changes.touch()

    update_node = add_node

    def remove_node(self, node: typing.Any, /) -> None:
        """Remove a node (by name or object); pods still bound to it keep their counts."""
        name = wire.name_of(node)
        if self._nodes.remove(name):
            self._changes.world_changed()
            self._gpu_memory_changed(name, None)

    def _gpu_memory_changed(self, name: str, memory: int | None) -> None:
        """The pods asking GPU memory are charged again where node ``name``'s change of the
        memory its devices hold changes what they take."""
        for key in self._gpus.node_memory_changed(name, memory):
            info = self._pods.infos.get(key)
            if info is not None:
                self._store_pod(info, from_api=False)

    # Pods ---------------------------------------------------------------------------------
    def add_pod(self, raw: typing.Any, /) -> None:
        """Add or update a pod."""
        obj = wire.as_raw(raw)
        profile = self._profile
        info = pods.pod_info(
            obj,
            priority_classes=self._priorities.values,
            group_by_owner=profile.group_by_owner,
            # Most events change only a pod's status: what it derived from the rest is reused.
            previous=self._pods.infos.get(wire.key_of(obj)),
        )
        if info.scheduler_name in profile.claimed:
            # Another scheduler's pod Berth claims is Berth's own from here on: the profile's
            # checks (fields it does not implement) apply to it as to any pod Berth binds.
            info = pods.replace(info, scheduler_name=profile.names[0])
        old = self._pods.infos.get(info.key)
        if old is not None and info.uid and old.uid and old.uid != info.uid:
            # A new pod under an old name (deleted and recreated before the deletion was
            # seen): nothing of the old one, its assumed binding above all, carries over.
            self.remove_pod(info.key)
            old = None
        if old is None and not info.terminal:
            self._gpus.arrived(info)
        self._store_pod(self._resolved(info), from_api=True)

    update_pod = add_pod

    def remove_pod(self, pod: typing.Any, /) -> None:
        """Remove a pod (by ``namespace/name`` key or object)."""
        key = wire.key_of(pod)
        old = self._pods.remove(key)
        if old is None:
            return
        self._changes.touch()
        self._devices.pod_changed(key, None)
        self._gpus.pod_gone(key)
        self._nodes.uncount(key)
        self._queues.pod_gone(key)
        if old.pod_group is not None:
            self._groups.leave(old.pod_group, key)
        owned = self._reservations.owner_gone(key)
        if owned is not None:
            self._refresh_reserve_pod(owned)

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
        info = self._pods.infos.get(key)
        if info is None:
            raise KeyError(f"cannot assume unknown pod {key!r}")
        if annotations and info.gpu_share is not None:
            devices = gpushare.devices_of(annotations)
            if devices is not None:
                info = pods.replace(info, gpu_devices=devices)
        self._pods.assume(key, node=node)
        self._queues.placed(key, uid=info.uid)
        # Until the API says when it started, it counts as started when the caller bound it
        # (fair-share reclaim spares pods that have not run their minimum yet).
        if info.start_time is not None:
            started = info.start_time
        self._store_pod(
            pods.replace(info, node_name=ids.NodeName(node), start_time=started),
            from_api=False,
        )

    def assumed_node(self, key: str, /) -> str | None:
        """The node the pod ``key``'s binding in flight names (``None``: none in flight)."""
        return self._pods.assumed_node(key)

    def forget_pod(self, key: str, /) -> bool:
        """Undo :meth:`assume_pod` (the binding failed); False when it was not assumed."""
        if not self._pods.forget_assumed(key):
            return False
        self._queues.unplaced(key)
        info = self._pods.infos.get(key)
        if info is not None:
            # A pod whose binding failed never started (the API gives no startTime to one),
            # nor holds the devices its binding would have recorded.
            devices = gpushare.devices_of(info.annotations) if info.gpu_share is not None else None
            self._store_pod(
                pods.replace(info, node_name=None, start_time=None, gpu_devices=devices),
                from_api=False,
            )
        return True

    def disown(self, key: str, /, *, uid: str) -> None:
        """The pod ``key`` (of ``uid``) carries Berth's ``admitted-node`` marker, but Berth did
        not admit it (admission saw someone else write it): never charge it to a queue."""
        self._queues.disown(key, uid=uid, assumed=self._pods.is_assumed(key))
        info = self._pods.infos.get(key)
        if info is not None:
            self._charge(info)
            self._changes.touch()

    def _resolved(self, info: pods.PodInfo) -> pods.PodInfo:
        group = self._groups.get(info.pod_group) if info.pod_group is not None else None
        namespace_queue = self._queues.own_queue(info.namespace)
        profile = self._profile
        ours = info.scheduler_name in profile.ours
        return pods.resolve(
            info,
            priority_classes=self._priorities.values,
            default_priority=self._priorities.default,
            group_queue=group.queue if group is not None else None,
            namespace_queue=namespace_queue,
            plain_queue=(namespace_queue or profile.plain_pods_queue) if ours else None,
        )

    def _resolve_again(self, keys: collections.abc.Iterable[str]) -> None:
        """Store again those of the pods ``keys`` that resolve differently now."""
        infos = self._pods.infos
        for key in keys:
            info = infos[key]
            resolved = self._resolved(info)
            if resolved is not info:
                self._store_pod(resolved, from_api=False)

    def _store_pod(self, info: pods.PodInfo, /, *, from_api: bool) -> None:
        """Record ``info`` in every store it touches; ``from_api`` says it came from a watch
        event (not an assumption)."""
        if from_api:
            info = self._pods.landed(info)
        info = self._gpus.charged(info)
        old = self._pods.put(info, from_api=from_api, now=self._reservations.now)
        self._changes.touch()
        key = info.key
        self._devices.pod_changed(key, info)
        self._nodes.count(info)
        self._gpus.pod_changed(info)
        if old is not None and old.pod_group is not None and old.pod_group != info.pod_group:
            self._groups.leave(old.pod_group, key)
        if info.pod_group is not None:
            self._groups.join(info.pod_group, key)
        self._charge(info)
        if not info.reserve:
            for reservation in self._reservations.owner_changed(info):
                self._refresh_reserve_pod(reservation)

    def _charge(self, info: pods.PodInfo, /) -> None:
        self._queues.charge(info, pending=self._pods.is_pending(info.key))

    def _recharge(self) -> None:
        """Move every pod's charge again: a queue's selector or a namespace's labels changed."""
        infos = self._pods.infos
        for key in sorted(infos):
            self._charge(infos[key])

    # PodGroups ----------------------------------------------------------------------------
    def add_pod_group(self, raw: typing.Any, /) -> None:
        """Add or update a PodGroup (a ``berth.api`` model or its wire dict)."""
        info = podgroups.pod_group_info(
            raw,
            priority_classes=self._priorities.values,
            default_priority=self._priorities.default,
        )
        self._groups.written(info)
        self._store_group(info)

    update_pod_group = add_pod_group

    def _store_group(self, info: podgroups.PodGroupInfo) -> None:
        """Store ``info`` in its namespace's default queue when it names ``default``."""
        own = self._queues.own_queue(info.namespace)
        stored = self._groups.in_namespace_queue(info, namespace_queue=own)
        if self._groups.get(info.key) == stored:
            # Nothing a session reads changed (Berth's own status write, say): a parked gang
            # is not to be tried again for it.
            return
        requeued = self._groups.put(stored)
        self._changes.touch()
        if requeued:
            self._resolve_again(self._groups.members(info.key))

    def remove_pod_group(self, group: typing.Any, /) -> None:
        """Remove a PodGroup (by key or object); its pods stay, without a group object."""
        key = wire.key_of(group)
        if self._groups.remove(key):
            self._changes.touch()
            self._resolve_again(self._groups.members(key))

    # Queues -------------------------------------------------------------------------------
    def add_queue(self, raw: typing.Any, /) -> None:
        """Add or update a Queue."""
        changed, selector_changed = self._queues.add_queue(queues.queue_info(raw))
        if changed:
            self._changes.world_changed()
        if selector_changed:
            self._recharge()

    update_queue = add_queue

    def remove_queue(self, queue: typing.Any, /) -> None:
        """Remove a Queue (by name or object)."""
        removed = self._queues.remove_queue(wire.name_of(queue))
        if removed is not None:
            self._changes.world_changed()
            if removed.namespaces is not None:
                self._recharge()

    # Reservations -------------------------------------------------------------------------
    def add_reservation(self, raw: typing.Any, /) -> None:
        """Add or update a Reservation (its reserve pod follows). An update still ``Pending``
        keeps an assumed placement (:meth:`assume_reservation`): it was written before the
        status, and taking it at its word would place the reservation a second time."""
        info = reservations.reservation_info(raw)
        self._reservations.add(info)
        self._changes.world_changed()
        self._refresh_reserve_pod(info.key)

    update_reservation = add_reservation

    def remove_reservation(self, reservation: typing.Any, /) -> None:
        """Remove a Reservation (by key or object): what it held is free at once; owners
        already placed keep their own requests counted."""
        key = wire.key_of(reservation)
        if self._reservations.remove(key):
            self._changes.world_changed()
            self._refresh_reserve_pod(key)

    def assume_reservation(
        self,
        key: str,
        /,
        *,
        node: str,
        allocatable: resources.ResourceList,
        devices: tuple[tuple[str, resourceclaims.AllocatedDevice], ...] = (),
    ) -> None:
        """Count the reservation ``key`` as Available on ``node`` while its status write is in
        flight (the sink calls this when it applies ``SetReservationAvailable``), so the next
        cycle does not place it again. The assumption holds until an update shows the status
        moved on (any phase but ``Pending``), or the Reservation is replaced (another UID) or
        removed. ``devices`` (template entry, device) are what it holds for its template's
        claims."""
        self._reservations.assume(key, node=node, allocatable=allocatable, devices=devices)
        self._changes.world_changed()
        self._refresh_reserve_pod(key)

    def _refresh_reserve_pod(self, key: str) -> None:
        """Make the reserve pod of the reservation ``key`` what it should be now."""
        pod_key = reservations.reserve_pod_key(key)
        wanted = self._reservations.reserve_pod(
            key,
            infos=self._pods.infos,
            scheduler_names=self._profile.names,
            priority_classes=self._priorities.values,
            default_priority=self._priorities.default,
        )
        held = self._reservations.held_claims(key, holds=wanted is not None)
        if self._devices.set_held_claims(pod_key, held):
            self._changes.world_changed()  # devices held or given back
        if wanted is None:
            self.remove_pod(pod_key)
            return
        current = self._pods.infos.get(pod_key)
        if current is not None and current == wanted and current.requests == wanted.requests:
            return
        self._store_pod(wanted, from_api=False)

    # Storage ------------------------------------------------------------------------------
    def _storage_change(self, changed: bool) -> None:
        if changed:
            self._changes.world_changed()  # a claim bound, a volume freed: a pod may fit now

    def add_claim(self, raw: typing.Any, /) -> None:
        """Add or update a PersistentVolumeClaim."""
        self._storage_change(self._volumes.add_claim(raw))

    update_claim = add_claim

    def remove_claim(self, claim: typing.Any, /) -> None:
        """Remove a PersistentVolumeClaim (by ``namespace/name`` key or object)."""
        self._storage_change(self._volumes.remove_claim(claim))

    def claim(self, key: str, /) -> volumes.ClaimInfo | None:
        """The claim ``namespace/name`` as last seen (the binder waits on it)."""
        return self._volumes.claim(key)

    def add_volume(self, raw: typing.Any, /) -> None:
        """Add or update a PersistentVolume; a newer version ends its assumption."""
        self._storage_change(self._volumes.add_volume(raw))

    update_volume = add_volume

    def remove_volume(self, volume: typing.Any, /) -> None:
        """Remove a PersistentVolume (by name or object)."""
        self._storage_change(self._volumes.remove_volume(volume))

    def assume_volume(self, name: str, /, *, claim: str, version: str) -> bool:
        """Count the PersistentVolume ``name`` as reserved for ``claim`` (``namespace/name``)
        while the sink's write of its ``claimRef`` is in flight, decided on the volume at
        ``version``. False (nothing assumed) when the cache holds another version of it, or
        none: the decision was made on a view the API has already moved past."""
        return self._volumes.assume_volume(name, claim=claim, version=version)

    def forget_volume(self, name: str, /, *, version: str) -> bool:
        """Undo :meth:`assume_volume` (its write was refused): the volume is as the informer
        last showed it again. False when that assumption is not held (any more)."""
        forgot = self._volumes.forget_volume(name, version=version)
        self._storage_change(forgot)  # free again: a pod waiting for it may fit now
        return forgot

    def add_storage_class(self, raw: typing.Any, /) -> None:
        """Add or update a StorageClass."""
        self._storage_change(self._volumes.add_storage_class(raw))

    update_storage_class = add_storage_class

    def remove_storage_class(self, cls: typing.Any, /) -> None:
        """Remove a StorageClass (by name or object)."""
        self._storage_change(self._volumes.remove_storage_class(cls))

    def add_csi_node(self, raw: typing.Any, /) -> None:
        """Add or update a CSINode: its node's attach limit per CSI driver."""
        self._storage_change(self._volumes.add_csi_node(raw))

    update_csi_node = add_csi_node

    def remove_csi_node(self, csi_node: typing.Any, /) -> None:
        """Remove a CSINode (by name or object)."""
        self._storage_change(self._volumes.remove_csi_node(csi_node))

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
        name = wire.name_of(obj)
        labels = {
            str(k): str(v)
            for k, v in wire.part(wire.part(obj.get("metadata")).get("labels")).items()
        }
        relabelled, requeued = self._queues.add_namespace(name, labels)
        if relabelled:
            self._changes.world_changed()
            if self._queues.selectors_in_use():
                self._recharge()
        if requeued:
            self._namespace_requeued(name)

    update_namespace = add_namespace

    def remove_namespace(self, namespace: typing.Any, /) -> None:
        """Remove a Namespace (by name or object)."""
        name = wire.name_of(namespace)
        known, requeued = self._queues.remove_namespace(name)
        if known:
            self._changes.world_changed()
            if self._queues.selectors_in_use():
                self._recharge()
        if requeued:
            self._namespace_requeued(name)

    def namespace_labels(self, namespace: str, /) -> collections.abc.Mapping[str, str]:
        """The labels of the Namespace ``namespace`` (empty when not seen)."""
        return self._queues.namespace_labels(namespace)

    def namespace_queue(self, namespace: str, /) -> str:
        """The queue a pod of ``namespace`` naming none joins: the Namespace's, else
        ``default``."""
        return self._queues.own_queue(namespace) or keys.DEFAULT_QUEUE

    def _namespace_requeued(self, name: str) -> None:
        """The default queue the Namespace ``name`` names changed: its groups and pods move."""
        for key in self._groups.in_namespace(name):
            static = self._groups.get(key)
            if static is not None:
                self._store_group(static)
        infos = self._pods.infos
        self._resolve_again(sorted(k for k, p in infos.items() if p.namespace == name))

    # PriorityClasses ----------------------------------------------------------------------
    def add_priority_class(self, raw: typing.Any, /) -> None:
        """Add or update a PriorityClass (``scheduling.k8s.io/v1``)."""
        self._priorities.add(raw)
        self._classes_changed()

    update_priority_class = add_priority_class

    def remove_priority_class(self, priority_class: typing.Any, /) -> None:
        """Remove a PriorityClass (by name or object)."""
        if self._priorities.remove(priority_class):
            self._classes_changed()

    def _classes_changed(self) -> None:
        self._changes.world_changed()
        self._resolve_again(sorted(self._pods.infos))
        self._groups.touch_all()

    # Snapshots ----------------------------------------------------------------------------
    def snapshot(self, now: float, /) -> snapshots.Snapshot:
        """The cluster at ``now``: a private node table copy and views of every mapping that
        later changes do not reach (copy-on-write, :mod:`.cowmaps`: the cost is what changed
        since the last snapshot, not the size of the cluster).

        Reservations whose time ran out by ``now`` stop holding capacity here.
        """
        for key in self._reservations.expired(now):
            self._refresh_reserve_pod(key)
        table, node_infos, refreshed_nodes = self._nodes.freeze()
        self._gpus.nodes_changed(refreshed_nodes)
        infos = self._pods.infos
        refreshed = self._groups.refresh(
            infos,
            priority_classes=self._priorities.values,
            default_priority=self._priorities.default,
        )
        for key, view in refreshed.items():
            self._queues.group_changed(key, view)
        pod_views = self._pods.view()
        queue_views, namespaces = self._queues.view()
        taken = snapshots.Snapshot(
            now=now,
            nodes=table,
            node_infos=node_infos,
            pods=pod_views.pods,
            constraining=pod_views.constraining,
            namespace_labels=namespaces,
            pending=pod_views.pending,
            gated=pod_views.gated,
            awaiting_group=pod_views.awaiting_group,
            stopped_waiting=pod_views.stopped_waiting,
            pod_groups=self._groups.view(),
            queues=queue_views,
            reservations=self._reservations.view(),
            priority_classes=self._priorities.view(),
            queue_usage=self._queues.usage_view(),
            namespaces=namespaces,
            volumes=self._volumes.view(),
            devices=self._devices.view(),
            changes=self._changes.freeze(groups=frozenset(refreshed), pods=pod_views.changed),
            priority_floor=pod_views.priority_floor,
            run_times=pod_views.run_times,
            shared_gpus=self._gpus.view(infos, self._nodes),
            gpu_mix=self._gpus.mix(),
        )
        return taken.with_pending_index(
            pod_views.pending_index, changed=pod_views.pending_changed
        ).with_placed_groups(self._groups.placed_view())
