"""``InMemoryCluster``: the simulator's stand-in for the API server and the kubelets.

It holds the objects of a simulated cluster (Nodes, Pods, PodGroups, Queues, Reservations,
PriorityClasses, storage, and DRA's DeviceClasses, ResourceSlices, ResourceClaims and their
templates) as API dicts, feeds every change to a
:class:`~berth.scheduler.snapshot.cache.ClusterCache`, and implements both ports of the
scheduling loop: ``snapshot()`` (a ``SnapshotSource``) and ``apply(result)`` (a
``DecisionSink``), applying what a cycle decided to its own objects:

- ``BindPod``: the pod gets ``spec.nodeName`` and starts at once (phase ``Running``);
- ``EvictPod``: the pod is deleted (no grace period in virtual time);
- ``AnnotatePod``: annotations are merged;
- ``SetReservationAvailable``: the Reservation's status becomes ``Available`` on the node,
  with ``Scheduled`` and ``Ready`` conditions;
- ``AllocateReservation``: the owner joins ``currentOwners``, its requests add to
  ``allocated``, and an allocate-once reservation becomes ``Succeeded``;
- ``EndReservation``: the Reservation becomes ``Expired`` or ``Failed``, ``Ready`` says why;
- ``NominatePod``: ``status.nominatedNodeName`` is set;
- ``ExceedExecutionTime`` (``fail``): the PodGroup gets the annotation that keeps it Failed;
- ``ReserveClaim``: the ResourceClaim gets the allocation (only if it has none) and the pod in
  ``reservedFor``; a ``BindPod`` whose ResourceClaims do not all list the pod is not done, and
  what was reserved for it is released. Playing the resourceclaim controller
  (:mod:`berth.sim.claims`), a pod's claims are made from its templates when it is put, and a
  pod that is deleted or finishes leaves its claims (deallocated once nobody reserves them;
  the claims made for it deleted);
- ``DeallocateClaim``: the ResourceClaim's allocation is cleared, if nobody but the pod
  reserves it;
- ``BindClaimVolume``: the volume is reserved for the claim and, playing kube-controller-manager's
  PV binder at once, both are bound — refused, as the API server refuses the conditional write,
  when the volume is not at the ``resourceVersion`` it was chosen at (it changed since, e.g.
  another claim has it): the claim stays unbound and the refusal is kept in
  :attr:`InMemoryCluster.refused_volumes`;
- ``SelectClaimNode``: the claim is annotated with the node and, when its class has a
  provisioner, bound at once to a new volume provisioned for that node; a ``BindPod`` whose
  claims are not all bound leaves the pod pending (kube-scheduler's PreBind wait, which cannot
  end in virtual time);
- ``Unschedulable``: the Reservation's ``Scheduled`` condition says why;
- ``MarkPending``: each waiting pod's ``PodScheduled`` condition says why, with reason
  ``Unschedulable`` only where more nodes would place its gang, else the code of what it waits
  for (:mod:`berth.scheduler.framework.pending`), as the binder writes it.

PodGroup and Queue statuses are the live operator's: the same owners
(:func:`berth.status.cycles.desired` from :func:`~berth.status.cycles.facts_of` the last
cycle's snapshot and result) give phase, counts, the ``Scheduled`` condition with the reason's
code, queue usage, shares and positions. As the operator's status pass coalesces a burst of
cycles into one write, they are written when they are read (:meth:`InMemoryCluster.get`,
:meth:`~InMemoryCluster.objects`, :meth:`~InMemoryCluster.write_statuses`) from the newest
facts, timed at that snapshot, so a long run pays nothing per cycle for them. The runner
takes a :meth:`~InMemoryCluster.settled_snapshot` at the end, so the counts show what the
last cycle's decisions did, as the operator's next periodic snapshot would.

Like the API server it gives every created object a uid (sortable, in creation order), a
``creationTimestamp`` from the clock and a ``resourceVersion``. Changes reach the cache when
the next snapshot is taken (as watch events would), in a fixed order (deletions first), and an
object that changed several times since the last snapshot is parsed once. What it applied is
kept in an outbox (:meth:`drain`) for the runner, which plays the workload controllers and the
kubelets' clock: :meth:`succeed_pod` ends a pod's run. A job whose pods have all finished is
deleted at once (a Job with ``ttlSecondsAfterFinished: 0``), so snapshots stay the size of the
live work.

Also the cluster the scheduler's scenario tests run on (STYLE R15): build one, ``put`` objects,
run ``Scheduler.run_once(cluster, cluster)``, read the pods back.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import datetime
import typing

from berth.api import core, custom_objects, dra, keys, objects, storage
from berth.scheduler.framework import decisions, reasons
from berth.scheduler.snapshot import cache, snapshots, volumes, wire
from berth.sim import claims
from berth.status import cycles, observations
from berth.status import reservations as reservation_owner
from berth.util import clocks

__all__ = [
    "KINDS",
    "Applied",
    "Bound",
    "Evicted",
    "InMemoryCluster",
    "ReservationPlaced",
    "Waiting",
    "object_key",
]

KINDS = (
    "Node",
    "Pod",
    "PodGroup",
    "Queue",
    "Reservation",
    "PriorityClass",
    "Namespace",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaim",
    "ResourceClaimTemplate",
)
"""The kinds the in-memory cluster stores."""
# The order changes reach the cache: what pods refer to before the pods (deletions the other
# way round).
_FLUSH_ORDER = {
    "Namespace": 0,
    "PriorityClass": 0,
    "StorageClass": 0,
    "PersistentVolume": 0,
    "PersistentVolumeClaim": 0,
    "CSINode": 0,
    "DeviceClass": 0,
    "ResourceSlice": 0,
    "ResourceClaimTemplate": 0,
    "ResourceClaim": 0,
    "Queue": 1,
    "Node": 2,
    "PodGroup": 3,
    "Reservation": 4,
    "Pod": 5,
}
_CLUSTER_SCOPED = frozenset(
    {
        "Node",
        "Queue",
        "PriorityClass",
        "Namespace",
        "PersistentVolume",
        "StorageClass",
        "CSINode",
        "DeviceClass",
        "ResourceSlice",
    }
)
_HOSTNAME = "kubernetes.io/hostname"
_TERMINAL = frozenset({"Succeeded", "Failed"})

Object = objects.KubeObject
"""An object of any kind, stored as the API server's JSON, as the live cache sees it;
:meth:`InMemoryCluster.get` and :meth:`~InMemoryCluster.objects` give each kind's record."""
ObjectKey = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name
_O = typing.TypeVar("_O", bound=Object)


class _Owned(objects.KubeObject, total=False):
    """A PodGroup or a Queue as the status pass writes it: its status is its owner's."""

    status: custom_objects.PodGroupStatus | custom_objects.QueueStatus


def object_key(obj: Object) -> ObjectKey:
    """``(kind, namespace, name)`` of an object; namespaced kinds default to ``default``."""
    kind = str(obj.get("kind", ""))
    metadata = obj.get("metadata") or {}
    namespace = "" if kind in _CLUSTER_SCOPED else str(metadata.get("namespace") or "default")
    return kind, namespace, str(metadata.get("name") or "")


# The outbox: what applying a cycle's decisions did, for the runner. -------------------------


@dataclasses.dataclass(frozen=True)
class Bound:
    """The pod ``key`` (uid ``uid``) was bound to ``node`` and is running."""

    key: str
    uid: str
    node: str


@dataclasses.dataclass(frozen=True)
class Evicted:
    """The pod ``key`` was evicted from ``node`` and deleted."""

    key: str
    uid: str
    node: str
    reason: str
    cause: reasons.ReasonCode | None = None  # the decision's: None for preemption, reclaim


@dataclasses.dataclass(frozen=True)
class ReservationPlaced:
    """The Reservation ``key`` became Available on ``node``."""

    key: str
    node: str


@dataclasses.dataclass(frozen=True)
class Waiting:
    """The pod or group ``key`` stays pending because of ``reason``."""

    subject: decisions.Subject
    key: str
    reason: reasons.Reason


Applied = Bound | Evicted | ReservationPlaced | Waiting


class InMemoryCluster:
    """Objects in memory, a cache over them, and the scheduler's two ports."""

    def __init__(
        self,
        *,
        clock: clocks.Clock,
        scheduler_names: collections.abc.Iterable[str] = (keys.DEFAULT_SCHEDULER_NAME,),
    ) -> None:
        self._clock = clock
        self._stamp: tuple[float, str] | None = None  # the last time stamped, and its text
        names = tuple(scheduler_names)
        self._scheduler_name = names[0] if names else keys.DEFAULT_SCHEDULER_NAME
        self._cache = cache.ClusterCache(scheduler_names=names, dynamic_resources=True)
        self._dirty: dict[ObjectKey, Object | None] = {}  # changed since the last flush
        self._cached: set[ObjectKey] = set()  # what the cache has been told about
        self._assumed: set[ObjectKey] = set()  # bound pods the cache only assumed
        self._ended: dict[ObjectKey, Object] = {}  # finished pods deleted since the last flush
        self._objects: dict[ObjectKey, Object] = {}
        self._by_kind: dict[str, set[ObjectKey]] = {kind: set() for kind in KINDS}
        self._group_pods: dict[ObjectKey, set[ObjectKey]] = {}
        self._outbox: list[Applied] = []
        self._reasons: dict[tuple[decisions.Subject, str], reasons.Reason] = {}  # last told
        # pod key -> the PodScheduled (reason, message) last written for it
        self._conditions: dict[str, tuple[str, str]] = {}
        # The newest facts for PodGroup and Queue statuses: the last snapshot and the last
        # cycle's result, and whether statuses were written from them since they changed.
        self._seen: snapshots.Snapshot | None = None
        self._result: decisions.CycleResult | None = None
        self._statuses_current = True
        self._uids = 0
        self._version = 0
        self._claims = claims.ClaimController(self)
        self.refused_volumes: list[decisions.BindClaimVolume] = []
        """Volume reservations refused because the volume changed since it was chosen."""

    # Objects ------------------------------------------------------------------------------
    def put(self, obj: _O) -> _O:
        """Create or replace an object, as ``kubectl apply`` would; returns the stored object.

        ``obj`` itself is not changed, but the stored object shares its nested values: do not
        mutate them afterwards. A replaced object keeps its uid and creation time; a pod keeps
        its node and phase unless the new manifest says otherwise.
        """
        key = object_key(obj)
        kind = key[0]
        if kind not in self._by_kind:
            raise ValueError(f"the in-memory cluster does not store {kind or 'kindless'} objects")
        if not key[2]:
            raise ValueError(f"a {kind} needs metadata.name")
        old = self._objects.get(key)
        given: Object = obj
        metadata: objects.ObjectMeta = {**(given.get("metadata") or {})}
        if key[1]:
            metadata["namespace"] = key[1]
        if old is not None:
            metadata["uid"] = old["metadata"]["uid"]
            metadata["creationTimestamp"] = old["metadata"]["creationTimestamp"]
        else:
            metadata.setdefault("uid", self._next_uid())
            metadata.setdefault("creationTimestamp", self._timestamp())
        metadata["resourceVersion"] = self._next_version()
        obj = copy.copy(obj)
        obj["metadata"] = metadata
        if kind == "Pod":
            pod = self._pod_defaults(typing.cast(core.Pod, obj), typing.cast(core.Pod | None, old))
            obj = typing.cast(_O, self._claims.pod_with_claims(pod))  # _O is core.Pod here
        elif kind in cycles.KINDS and old is not None and "status" not in obj:
            # Applying a manifest leaves the status subresource, which its owner writes.
            owned = typing.cast(_Owned, obj)
            owned["status"] = typing.cast(_Owned, old).get("status") or {}
        if kind in cycles.KINDS:
            self._statuses_current = False
        self._store(key, obj)
        if kind == claims.TEMPLATE:
            for pod in self._claims.template_added(obj):
                self._store(object_key(pod), pod)
        return obj

    def delete(self, kind: str, *, namespace: str | None, name: str) -> Object | None:
        """Delete an object; returns it, or ``None`` when there was none. Deleting a PodGroup
        leaves its pods (as Kubernetes does without owner references)."""
        key = (kind, "" if kind in _CLUSTER_SCOPED else (namespace or "default"), name)
        obj = self._objects.pop(key, None)
        if obj is None:
            return None
        self._by_kind[kind].discard(key)
        self._assumed.discard(key)
        if kind in ("Pod", "PodGroup"):
            subject = decisions.Subject.POD if kind == "Pod" else decisions.Subject.GROUP
            self._reasons.pop((subject, f"{key[1]}/{name}"), None)
        if kind == "Pod":
            pod = typing.cast(core.Pod, obj)
            self._conditions.pop(f"{key[1]}/{name}", None)
            group = self._group_of(pod)
            if group is not None:
                members = self._group_pods.get(group)
                if members is not None:
                    members.discard(key)
                    if not members:
                        del self._group_pods[group]
            self._claims.pod_done(pod)
            if key in self._cached and pod["status"].get("phase") in _TERMINAL:
                # The kubelet's report that it finished reaches the cache before the deletion,
                # as watch events would (run times are learned from it), however soon after.
                self._ended[key] = pod
        self._dirty[key] = None
        return obj

    # Each kind the simulator reads comes back as its record; any other as an object.
    @typing.overload
    def get(
        self, kind: typing.Literal["Pod"], *, namespace: str | None = None, name: str
    ) -> core.Pod | None: ...
    @typing.overload
    def get(
        self, kind: typing.Literal["Node"], *, namespace: str | None = None, name: str
    ) -> core.Node | None: ...
    @typing.overload
    def get(
        self, kind: typing.Literal["PodGroup"], *, namespace: str | None = None, name: str
    ) -> custom_objects.PodGroup | None: ...
    @typing.overload
    def get(
        self, kind: typing.Literal["Reservation"], *, namespace: str | None = None, name: str
    ) -> custom_objects.Reservation | None: ...
    @typing.overload
    def get(
        self,
        kind: typing.Literal["PersistentVolumeClaim"],
        *,
        namespace: str | None = None,
        name: str,
    ) -> storage.PersistentVolumeClaim | None: ...
    @typing.overload
    def get(
        self, kind: typing.Literal["PersistentVolume"], *, namespace: str | None = None, name: str
    ) -> storage.PersistentVolume | None: ...
    @typing.overload
    def get(
        self, kind: typing.Literal["StorageClass"], *, namespace: str | None = None, name: str
    ) -> storage.StorageClass | None: ...
    @typing.overload
    def get(
        self, kind: typing.Literal["ResourceClaim"], *, namespace: str | None = None, name: str
    ) -> dra.ResourceClaim | None: ...
    @typing.overload
    def get(
        self,
        kind: typing.Literal["ResourceClaimTemplate"],
        *,
        namespace: str | None = None,
        name: str,
    ) -> dra.ResourceClaimTemplate | None: ...
    @typing.overload
    def get(self, kind: str, *, namespace: str | None = None, name: str) -> Object | None: ...
    def get(self, kind: str, *, namespace: str | None = None, name: str) -> Object | None:
        """The stored object, or ``None`` (a PodGroup's or Queue's status up to date)."""
        if kind in cycles.KINDS:
            self.write_statuses()
        key = (kind, "" if kind in _CLUSTER_SCOPED else (namespace or "default"), name)
        return self._objects.get(key)

    @typing.overload
    def objects(self, kind: typing.Literal["Pod"]) -> list[core.Pod]: ...
    @typing.overload
    def objects(self, kind: typing.Literal["PodGroup"]) -> list[custom_objects.PodGroup]: ...
    @typing.overload
    def objects(self, kind: typing.Literal["Queue"]) -> list[custom_objects.Queue]: ...
    @typing.overload
    def objects(self, kind: typing.Literal["Reservation"]) -> list[custom_objects.Reservation]: ...
    @typing.overload
    def objects(self, kind: str) -> list[Object]: ...
    def objects(self, kind: str) -> collections.abc.Sequence[Object]:
        """Every stored object of ``kind``, by namespace and name (PodGroups' and Queues'
        statuses up to date)."""
        if kind in cycles.KINDS:
            self.write_statuses()
        return [self._objects[key] for key in sorted(self._by_kind[kind])]

    def write_statuses(self) -> int:
        """Give every PodGroup and Queue the status the live operator would write from the
        newest facts (the last snapshot, the last cycle's result); the number changed. Nothing
        before the first snapshot, as the operator writes nothing before its first cycle."""
        snapshot = self._seen
        if self._statuses_current or snapshot is None:
            return 0
        self._statuses_current = True
        facts = cycles.facts_of(snapshot, self._result)
        changed = 0
        for kind in cycles.KINDS:
            for key in sorted(self._by_kind[kind]):
                obj = self._objects[key]
                seen = observations.observe(kind, body=obj, parse_time=wire.parse_time)
                if seen is None:
                    continue
                status = cycles.desired(seen, facts, now=snapshot.now)
                if status is None or status == seen.status:
                    continue
                # Written in place, like a condition: the scheduler never reads these statuses
                # back, so the cache need not parse the object again.
                typing.cast(_Owned, obj)["status"] = status
                changed += 1
        return changed

    def pods_of_group(self, namespace: str, *, name: str) -> list[core.Pod]:
        """The pods labelled with the PodGroup ``namespace/name``, by name."""
        members = self._group_pods.get(("PodGroup", namespace, name), set())
        return [self._stored_pod(key) for key in sorted(members)]

    # The kubelet's part -------------------------------------------------------------------
    def succeed_pod(self, key: str, *, uid: str) -> bool:
        """The pod ``key`` has run its course; False when it is gone or is another pod now.

        A pod of a group whose pods have all finished takes the group (and its pods) with it;
        a plain pod is deleted at once.
        """
        namespace, _, name = key.partition("/")
        obj = self._pod_at(namespace, name)
        if obj is None or obj["metadata"]["uid"] != uid or obj["status"].get("phase") in _TERMINAL:
            return False
        finished = self._timestamp()
        containers = [
            core.ContainerStatus(
                name=str(c.get("name") or "main"),
                state=core.ContainerState(
                    terminated=core.ContainerStateTerminated(
                        exitCode=0, reason="Completed", finishedAt=finished
                    )
                ),
            )
            for c in obj["spec"].get("containers") or [core.Container()]
        ]
        status: core.PodStatus = {
            **obj["status"],
            "phase": "Succeeded",
            "containerStatuses": containers,
        }
        obj = {**obj, "status": status}
        self._store(object_key(obj), obj)
        self._claims.pod_done(obj)
        group = self._group_of(obj)
        if group is None:
            self.delete("Pod", namespace=namespace, name=name)
            return True
        members = [self._stored_pod(k) for k in sorted(self._group_pods.get(group, ()))]
        if all(m["status"].get("phase") in _TERMINAL for m in members):
            for member in members:
                self.delete("Pod", namespace=namespace, name=member["metadata"]["name"])
            self.delete("PodGroup", namespace=namespace, name=group[2])
        return True

    # Ports --------------------------------------------------------------------------------
    @property
    def cache(self) -> cache.ClusterCache:
        """The cache behind the snapshots, up to date with every object."""
        self._flush()
        return self._cache

    def settled_snapshot(self) -> snapshots.Snapshot:
        """A snapshot of every object as stored, the pods whose bindings the cache only
        assumed included (running now): the cluster as the applied decisions left it, for the
        statuses at the end of a run. It costs a parse of those pods."""
        for key in sorted(self._assumed):
            obj = self._objects.get(key)
            if obj is not None and key not in self._dirty:
                self._dirty[key] = obj
        self._assumed.clear()
        return self.snapshot()

    def snapshot(self) -> snapshots.Snapshot:
        """The cluster now, for one scheduling cycle (``SnapshotSource``)."""
        self._seen = self.cache.snapshot(self._clock.now())
        self._statuses_current = False
        return self._seen

    def apply(self, result: decisions.CycleResult) -> None:
        """Apply a cycle's decisions in order (``DecisionSink``)."""
        self._claims.begin()
        for decision in result.decisions:
            if isinstance(decision, decisions.BindPod):
                self._bind(decision)
            elif isinstance(decision, decisions.EvictPod):
                self._evict(decision)
            elif isinstance(decision, decisions.AnnotatePod):
                self._annotate(decision)
            elif isinstance(decision, decisions.SetReservationAvailable):
                self._reservation_available(decision)
            elif isinstance(decision, decisions.AllocateReservation):
                self._reservation_allocated(decision)
            elif isinstance(decision, decisions.EndReservation):
                self._reservation_ended(decision)
            elif isinstance(decision, decisions.NominatePod):
                self._nominate(decision)
            elif isinstance(decision, decisions.SelectClaimNode):
                self._select_claim_node(decision)
            elif isinstance(decision, decisions.BindClaimVolume):
                self._bind_claim_volume(decision)
            elif isinstance(decision, decisions.ReserveClaim):
                self._claims.reserve(decision)
            elif isinstance(decision, decisions.MarkPending):
                self._mark_pending(decision)
            elif isinstance(decision, decisions.DeallocateClaim):
                self._claims.deallocate(decision)
            elif isinstance(decision, decisions.ExceedExecutionTime):
                self._exceed_execution_time(decision)
            else:
                self._unschedulable(decision)
        self._result = result
        self._statuses_current = False

    def drain(self) -> list[Applied]:
        """What :meth:`apply` did since the last call, in order."""
        out, self._outbox = self._outbox, []
        return out

    # Decisions ----------------------------------------------------------------------------
    def _stored_pod(self, key: ObjectKey) -> core.Pod:
        return typing.cast(core.Pod, self._objects[key])  # stored under kind Pod: a pod

    def _pod_at(self, namespace: str, name: str) -> core.Pod | None:
        return typing.cast(core.Pod | None, self._objects.get(("Pod", namespace, name)))

    def _pod(self, namespace: str, name: str, uid: str) -> core.Pod | None:
        obj = self._pod_at(namespace, name)
        return obj if obj is not None and obj["metadata"]["uid"] == uid else None

    def _bind(self, decision: decisions.BindPod) -> None:
        obj = self._pod(decision.namespace, decision.name, decision.uid)
        if obj is None or obj["spec"].get("nodeName"):
            return  # deleted or already bound: the API server would refuse the binding
        if not all(self._claim_bound(key) for key in decision.claims):
            return  # the binder waits for the claims (PreBind); it stays pending meanwhile
        if decision.resource_claims and not self._claims.bindable(decision):
            return  # a ResourceClaim could not be reserved for it: the API refused the write
        status: core.PodStatus = {
            **obj["status"],
            "phase": "Running",
            "startTime": self._timestamp(),
        }
        status.pop("nominatedNodeName", None)
        status.pop("conditions", None)
        self._reasons.pop((decisions.Subject.POD, decision.key), None)
        self._conditions.pop(decision.key, None)
        key = object_key(obj)
        was_dirty = key in self._dirty
        bound: core.Pod = {
            **obj,
            "spec": {**obj["spec"], "nodeName": decision.node},
            "status": status,
        }
        self._replace(bound)
        if not was_dirty and key in self._cached:
            # As in the operator, the cache assumes the bound pod at once; the object itself
            # reaches the cache with its next change (nothing the scheduler reads differs),
            # which spares parsing every pod a second time.
            del self._dirty[key]
            self._cache.assume_pod(decision.key, node=decision.node, started=self._clock.now())
            self._assumed.add(key)
        self._outbox.append(Bound(key=decision.key, uid=decision.uid, node=decision.node))

    def _evict(self, decision: decisions.EvictPod) -> None:
        obj = self._pod(decision.namespace, decision.name, decision.uid)
        if obj is None:
            return
        self.delete("Pod", namespace=decision.namespace, name=decision.name)
        self._outbox.append(
            Evicted(
                key=decision.key,
                uid=decision.uid,
                node=decision.node,
                reason=decision.reason,
                cause=decision.cause,
            )
        )

    def _exceed_execution_time(self, decision: decisions.ExceedExecutionTime) -> None:
        if not decision.fail:
            return  # the live binder posts an Event; the simulator keeps none
        obj = self._objects.get(("PodGroup", decision.namespace, decision.name))
        if obj is None or obj["metadata"].get("uid") != decision.uid:
            return
        self._annotate_object(
            obj, {keys.EXECUTION_TIME_EXCEEDED_ANNOTATION: decision.reason.message}
        )

    def _claim_bound(self, key: str) -> bool:
        namespace, _, name = key.partition("/")
        claim = self.get("PersistentVolumeClaim", namespace=namespace, name=name)
        return (
            claim is not None
            and bool((claim.get("spec") or {}).get("volumeName"))
            and (claim.get("status") or {}).get("phase") == "Bound"
        )

    def _select_claim_node(self, decision: decisions.SelectClaimNode) -> None:
        claim = self.get("PersistentVolumeClaim", namespace=decision.namespace, name=decision.name)
        if claim is None:
            return
        self._annotate_object(claim, {volumes.SELECTED_NODE: decision.node})
        claim = typing.cast(storage.PersistentVolumeClaim, self._objects[object_key(claim)])
        cls = self.get("StorageClass", name=volumes.claim_info(claim).storage_class)
        provisioner = volumes.class_info(cls) if cls is not None else None
        if provisioner is None or not provisioner.provisions:
            return  # nothing provisions it: the pod's binding keeps waiting
        provisioned = self.put(
            self._provisioned(claim, node=decision.node, provisioner=provisioner.provisioner)
        )
        self._bind_claim(claim, volume=provisioned)

    def _bind_claim_volume(self, decision: decisions.BindClaimVolume) -> None:
        claim = self.get("PersistentVolumeClaim", namespace=decision.namespace, name=decision.name)
        volume = self.get("PersistentVolume", name=decision.volume)
        if claim is None or volume is None or claim["metadata"]["uid"] != decision.uid:
            return
        if volume["metadata"].get("resourceVersion") != decision.version:
            self.refused_volumes.append(decision)  # 409: it changed since it was chosen
            return
        self._bind_claim(claim, volume=volume)

    def _provisioned(
        self,
        claim: storage.PersistentVolumeClaim,
        *,
        node: str,
        provisioner: str,
    ) -> storage.PersistentVolume:
        spec = claim.get("spec") or {}
        size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        name = f"pvc-{claim['metadata']['uid']}"
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "storageClassName": spec.get("storageClassName"),
                "capacity": {"storage": size},
                "accessModes": list(spec.get("accessModes") or []),
                "csi": {"driver": provisioner, "volumeHandle": name},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": _HOSTNAME, "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    }
                },
            },
        }

    def _bind_claim(
        self, claim: storage.PersistentVolumeClaim, *, volume: storage.PersistentVolume
    ) -> None:
        meta = claim["metadata"]
        ref = storage.ClaimReference(
            namespace=meta["namespace"], name=meta["name"], uid=meta["uid"]
        )
        bound_volume: storage.PersistentVolume = {
            **volume,
            "spec": {**(volume.get("spec") or {}), "claimRef": ref},
            "status": {**(volume.get("status") or {}), "phase": "Bound"},
        }
        self._replace(bound_volume)
        bound_claim: storage.PersistentVolumeClaim = {
            **claim,
            "spec": {**(claim.get("spec") or {}), "volumeName": volume["metadata"]["name"]},
            "status": {**(claim.get("status") or {}), "phase": "Bound"},
        }
        self._replace(bound_claim)

    def _annotate(self, decision: decisions.AnnotatePod) -> None:
        obj = self._pod(decision.namespace, decision.name, decision.uid)
        if obj is None:
            return
        self._annotate_object(obj, decision.annotations)

    def _reservation_available(self, decision: decisions.SetReservationAvailable) -> None:
        if self._reservation(decision, decision.namespace, decision.name):
            self._reasons.pop((decisions.Subject.RESERVATION, decision.key), None)
            self._outbox.append(ReservationPlaced(key=decision.key, node=decision.node))

    def _reservation_allocated(self, decision: decisions.AllocateReservation) -> None:
        self._reservation(decision, decision.namespace, decision.name)

    def _reservation_ended(self, decision: decisions.EndReservation) -> None:
        self._reservation(decision, decision.namespace, decision.name)

    def _reservation(
        self, fact: reservation_owner.ReservationFact, namespace: str, name: str
    ) -> bool:
        """Give the Reservation the status the live operator would write (False: gone)."""
        obj = self.get("Reservation", namespace=namespace, name=name)
        if obj is None:
            return False
        current = obj.get("status") or custom_objects.ReservationStatus()
        status = reservation_owner.reservation_status(current, fact, now=self._clock.now())
        updated: custom_objects.Reservation = {**obj, "status": {**status}}
        self._replace(updated)
        return True

    def _nominate(self, decision: decisions.NominatePod) -> None:
        obj = self._pod(decision.namespace, decision.name, decision.uid)
        if obj is None or obj["status"].get("nominatedNodeName") == decision.node:
            return
        nominated: core.Pod = {
            **obj,
            "status": {**obj["status"], "nominatedNodeName": decision.node},
        }
        self._replace(nominated)

    def _unschedulable(self, decision: decisions.Unschedulable) -> None:
        subject = (decision.subject, decision.key)
        if self._reasons.get(subject) == decision.reason:
            return  # every cycle repeats the reasons of everything still waiting
        self._reasons[subject] = decision.reason
        namespace, _, name = decision.key.partition("/")
        if decision.subject is decisions.Subject.RESERVATION:
            self._reservation(decision, namespace, name)
            self._outbox.append(
                Waiting(subject=decision.subject, key=decision.key, reason=decision.reason)
            )
            return
        # A group's Scheduled condition is its status owner's (write_statuses); a pod's is
        # written from its gang's MarkPending.
        self._outbox.append(
            Waiting(subject=decision.subject, key=decision.key, reason=decision.reason)
        )

    def _mark_pending(self, decision: decisions.MarkPending) -> None:
        for waiting in decision.pods:
            written = (waiting.condition, waiting.reason.message)
            if self._conditions.get(waiting.key) == written:
                continue  # every cycle repeats the decisions of everything still waiting
            namespace, _, name = waiting.key.partition("/")
            obj = self.get("Pod", namespace=namespace, name=name)
            if obj is None or obj["spec"].get("nodeName"):
                continue
            self._conditions[waiting.key] = written
            # Written in place: the scheduler never reads these conditions back, so the cache
            # need not re-parse a pod for every cycle it keeps waiting.
            status = obj.get("status") or {}
            status["conditions"] = [
                *(c for c in status.get("conditions", []) if c.get("type") != "PodScheduled"),
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": waiting.condition,  # "Unschedulable" is what autoscalers act on
                    "message": waiting.reason.message,
                    "lastTransitionTime": self._timestamp(),
                },
            ]
            obj["status"] = status

    # Internals ----------------------------------------------------------------------------
    def _replace(self, new: Object) -> None:
        """Store ``new``, a changed copy of a stored object (a new dict: the cache may hold the
        old one), at the next ``resourceVersion``."""
        new["metadata"] = {**new["metadata"], "resourceVersion": self._next_version()}
        self._store(object_key(new), new)

    def _annotate_object(self, obj: Object, annotations: collections.abc.Mapping[str, str]) -> None:
        """Merge ``annotations`` into a stored object's."""
        new = copy.copy(obj)
        new["metadata"] = {
            **obj["metadata"],
            "annotations": {**(obj["metadata"].get("annotations") or {}), **annotations},
        }
        self._replace(new)

    def _store(self, key: ObjectKey, obj: Object) -> None:
        old = self._objects.get(key)
        self._objects[key] = obj
        self._by_kind[key[0]].add(key)
        if key[0] == "Pod":
            old_group = self._group_of(old) if old is not None else None
            group = self._group_of(obj)
            if old_group is not None and old_group != group:
                self._group_pods.get(old_group, set()).discard(key)
            if group is not None:
                self._group_pods.setdefault(group, set()).add(key)
        self._dirty[key] = obj

    def _pod_defaults(self, obj: core.Pod, old: core.Pod | None) -> core.Pod:
        # There is no other scheduler in the simulator: a pod naming none is Berth's.
        spec: core.PodSpec = {"schedulerName": self._scheduler_name, **(obj.get("spec") or {})}
        status: core.PodStatus = {**(obj.get("status") or {})}
        if old is not None:
            node = spec.get("nodeName", old["spec"].get("nodeName"))
            if node is None:  # a manifest's null, or neither binds it
                spec.pop("nodeName", None)
            else:
                spec["nodeName"] = node
            status = {**old["status"], **status}
        status.setdefault("phase", "Running" if spec.get("nodeName") else "Pending")
        return {**obj, "spec": spec, "status": status}

    @staticmethod
    def _group_of(obj: Object) -> ObjectKey | None:
        labels = obj["metadata"].get("labels") or {}
        name = labels.get(keys.POD_GROUP_LABEL)
        return ("PodGroup", obj["metadata"]["namespace"], name) if name else None

    def _flush(self) -> None:
        """Tell the cache what changed since the last flush, in a fixed order."""
        if not self._dirty:
            return
        # Deletions first, each before what it refers to (a finished job's pods before its
        # group, so the cache does not re-resolve pods on their way out); then additions,
        # what pods refer to before the pods.
        changed = sorted(
            self._dirty,
            key=lambda k: (
                (1, _FLUSH_ORDER[k[0]], k)
                if self._dirty[k] is not None
                else (0, -_FLUSH_ORDER[k[0]], k)
            ),
        )
        for key in changed:
            obj = self._dirty[key]
            if obj is not None:
                self._cache_add(key[0], obj)
                self._cached.add(key)
            elif key in self._cached:
                self._cached.discard(key)
                ended = self._ended.get(key)
                if ended is not None:
                    self._cache_add(key[0], ended)
                self._cache_remove(key)
        self._dirty.clear()
        self._ended.clear()

    def _cache_add(self, kind: str, obj: Object) -> None:
        target = self._cache
        if kind == "Node":
            target.add_node(obj)
        elif kind == "Pod":
            target.add_pod(obj)
        elif kind == "PodGroup":
            target.add_pod_group(obj)
        elif kind == "Queue":
            target.add_queue(obj)
        elif kind == "Reservation":
            target.add_reservation(obj)
        elif kind == "Namespace":
            target.add_namespace(obj)
        elif kind == "PersistentVolumeClaim":
            target.add_claim(obj)
        elif kind == "PersistentVolume":
            target.add_volume(obj)
        elif kind == "StorageClass":
            target.add_storage_class(obj)
        elif kind == "CSINode":
            target.add_csi_node(obj)
        elif kind == "DeviceClass":
            target.add_device_class(obj)
        elif kind == "ResourceSlice":
            target.add_resource_slice(obj)
        elif kind == claims.CLAIM:
            target.add_resource_claim(obj)
        elif kind == claims.TEMPLATE:
            target.add_resource_claim_template(obj)
        else:
            target.add_priority_class(obj)

    def _cache_remove(self, key: ObjectKey) -> None:
        kind, namespace, name = key
        target = self._cache
        if kind == "Node":
            target.remove_node(name)
        elif kind == "Pod":
            target.remove_pod(f"{namespace}/{name}")
        elif kind == "PodGroup":
            target.remove_pod_group(f"{namespace}/{name}")
        elif kind == "Queue":
            target.remove_queue(name)
        elif kind == "Reservation":
            target.remove_reservation(f"{namespace}/{name}")
        elif kind == "Namespace":
            target.remove_namespace(name)
        elif kind == "PersistentVolumeClaim":
            target.remove_claim(f"{namespace}/{name}")
        elif kind == "PersistentVolume":
            target.remove_volume(name)
        elif kind == "StorageClass":
            target.remove_storage_class(name)
        elif kind == "CSINode":
            target.remove_csi_node(name)
        elif kind == "DeviceClass":
            target.remove_device_class(name)
        elif kind == "ResourceSlice":
            target.remove_resource_slice(name)
        elif kind == claims.CLAIM:
            target.remove_resource_claim(f"{namespace}/{name}")
        elif kind == claims.TEMPLATE:
            target.remove_resource_claim_template(f"{namespace}/{name}")
        else:
            target.remove_priority_class(name)

    def _next_uid(self) -> str:
        # Sortable uids in creation order: the scheduler's last tie-break is the uid.
        self._uids += 1
        return f"00000000-0000-4000-8000-{self._uids:012x}"

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def _timestamp(self) -> str:
        now = self._clock.now()
        if self._stamp is not None and self._stamp[0] == now:
            return self._stamp[1]  # a cycle stamps many objects at one instant
        # Exact to the millisecond: no float rounding decides an order between objects.
        when = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(
            milliseconds=round(now * 1000)
        )
        text = when.strftime("%Y-%m-%dT%H:%M:%S")
        if when.microsecond:
            text += f".{when.microsecond // 1000:03d}"
        self._stamp = (now, text + "Z")
        return self._stamp[1]
