"""VolumeBinding: a pod's PersistentVolumeClaims decide which nodes it may use.

Kubernetes' ``VolumeBinding`` plugin, vectorised over the node table (the snapshot's
:class:`~berth.scheduler.snapshot.volumes.Volumes`):

- PreFilter resolves each claim the pod's volumes use (``persistentVolumeClaim``, and the claim
  a generic ephemeral volume gets). The pod waits, ``UNSCHEDULABLE_AND_UNRESOLVABLE``, its
  reason naming the field, when a claim does not exist (yet), is being deleted, names a
  StorageClass that does not exist, or is not bound while its binding is ``Immediate`` (or it
  has no class): the PV binder, not the scheduler, must bind those first.
- Filter: a bound claim's PersistentVolume's required node affinity must match the node. An
  unbound claim of a ``WaitForFirstConsumer`` class needs, on the node, an available volume of
  its class (capacity, access modes, node affinity), or a provisioner whose
  ``allowedTopologies`` include the node; once another pod using it is placed (earlier in the
  session too: gang members sharing a claim), only the nodes such pods are on, and still only
  where a volume is found for it; once annotated with a selected node, only that node.
- Reserve chooses, for each such claim, the volume it gets on the node: the static volume
  already reserved for it (``spec.claimRef``, or assumed so by the cache while the sink writes
  it) if any, else the smallest fitting available one, else a provisioner's. The choice is the
  session's (kube-scheduler's ``AssumePodVolumes``): a volume chosen for one claim is no other
  claim's for the rest of the session, Filter included, and a claim chosen for once (gang
  members, or two pods sharing it) keeps that volume; Unreserve gives it back.
- PreBind does what kube-scheduler's volume binder does for each chosen claim, once (the first
  pod that chose it): it reserves the chosen static volume for it (``spec.claimRef``,
  :class:`~berth.scheduler.framework.decisions.BindClaimVolume`, carrying the volume's
  ``resourceVersion`` so that the write lands only on the volume as it was when chosen), which
  kube-controller-manager's PV binder then completes, or, to be provisioned, annotates it with
  the node (``volume.kubernetes.io/selected-node``,
  :class:`~berth.scheduler.framework.decisions.SelectClaimNode`); the binder then holds the
  pod's binding until its claims are bound (``BindPod.claims``).

Across sessions the cache holds a volume the sink reserves as the claim's until the API shows
a newer version of it (:meth:`~berth.scheduler.snapshot.cache.ClusterCache.assume_volume`), and
the sink's write is refused (409) if the volume changed since it was chosen: the pod is then
tried again on a fresh view. So one volume never goes to two claims.

Not done (kube-scheduler does): storage capacity tracking (CSIStorageCapacity) is not read.
"""

from __future__ import annotations

import dataclasses
import typing

import numpy as np

from berth.scheduler.framework import (
    cyclestate,
    decisions,
    filtering,
    handles,
    interfaces,
    reasons,
    registries,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import nodetable, podconstraints, pods, selectors, volumes

if typing.TYPE_CHECKING:
    from berth.scheduler.framework import sessions

__all__ = [
    "NAME",
    "REASON_BIND_CONFLICT",
    "REASON_NODE_CONFLICT",
    "REASON_NOT_SELECTED",
    "REASON_UNBOUND_IMMEDIATE",
    "VolumeBinding",
    "claim_problem",
    "new",
]

NAME = names.VOLUME_BINDING
REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NOT_SELECTED = "node(s) were not the node selected for the pod's claims"
REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
_STATE = cyclestate.StateKey(f"{NAME}/claims")


def claim_problem(
    claim: podconstraints.PodClaim,
    info: volumes.ClaimInfo | None,
    *,
    key: str,
    storage: volumes.Volumes,
) -> str | None:
    """Why ``claim`` (``key`` in the API) keeps the pod waiting whatever the node, if it does."""
    if info is None:
        if claim.ephemeral:
            return (
                f"waiting for the ephemeral volume controller to create the"
                f' persistentvolumeclaim "{key}" ({claim.field})'
            )
        return f'persistentvolumeclaim "{key}" not found ({claim.field})'
    if info.deleting:
        return f'persistentvolumeclaim "{key}" is being deleted ({claim.field})'
    if info.problem is not None:
        return f'persistentvolumeclaim "{key}": {info.problem}'
    if info.volume_name:
        if info.volume_name not in storage.volumes:
            return f'persistentvolume "{info.volume_name}" of claim "{key}" not found'
        return None
    if not info.storage_class:
        return f"{REASON_UNBOUND_IMMEDIATE} ({key} names no storage class)"
    cls = storage.classes.get(info.storage_class)
    if cls is None:
        return (
            f'storageclass.storage.k8s.io "{info.storage_class}" not found'
            f" (spec.storageClassName of persistentvolumeclaim {key})"
        )
    if not cls.wait_for_first_consumer:
        return f"{REASON_UNBOUND_IMMEDIATE} ({key}, StorageClass {cls.name})"
    return None


@dataclasses.dataclass(frozen=True)
class _Claims:
    """The pod's claims, resolved by PreFilter."""

    bound: tuple[volumes.VolumeInfo, ...]
    delayed: tuple[tuple[volumes.ClaimInfo, volumes.ClassInfo], ...]  # WaitForFirstConsumer

    def clone(self) -> _Claims:
        return self  # frozen


def _claim_keys(pod: pods.PodInfo) -> tuple[str, ...]:
    return pod.claim_keys


def _terms_mask(
    terms: tuple[selectors.SelectorTerm, ...] | None, nodes: nodetable.NodeTable
) -> filtering.BoolArray:
    if terms is None:
        return np.ones(len(nodes), dtype=np.bool_)
    found = np.zeros(len(nodes), dtype=np.bool_)
    for term in terms:
        found |= nodes.term_mask(term)
    return found


@dataclasses.dataclass
class _Choice:
    """The volume a claim gets this session (None: one its class provisions on ``node``), and
    the pods placed with it, first the one whose PreBind writes the choice."""

    volume: str | None
    node: str
    users: list[str]


class _Chosen:
    """The session's choices (kube-scheduler's assumed volumes): claim -> choice, and the
    volumes they take."""

    def __init__(self) -> None:
        self.claims: dict[str, _Choice] = {}
        self.volumes: dict[str, str] = {}  # volume -> the claim that took it
        self.of_pod: dict[str, tuple[str, ...]] = {}  # pod -> claims it is a user of

    def holder(self, volume: volumes.VolumeInfo) -> str | None:
        """The claim ``volume`` is reserved for, this session's choices included."""
        return self.volumes.get(volume.name, volume.claim)


def _fits(volume: volumes.VolumeInfo, claim: volumes.ClaimInfo, *, chosen: _Chosen) -> bool:
    """Whether the PV binder could bind ``claim`` to ``volume`` (free or reserved for it, class,
    size, modes), with the session's choices counted."""
    holder = chosen.holder(volume)
    return (
        (holder == claim.key or (holder is None and volume.available))
        and volume.storage_class == claim.storage_class
        and volume.capacity >= claim.request
        and claim.access_modes <= volume.access_modes
    )


def _ordered(
    claim: volumes.ClaimInfo, storage: volumes.Volumes, *, chosen: _Chosen
) -> list[volumes.VolumeInfo]:
    """The volumes ``claim`` could get, in the order the PV binder matches them: one reserved
    for it first (``FindMatchingVolume`` returns a pre-bound volume at once), then the smallest."""
    found = [v for v in storage.candidates(claim) if _fits(v, claim, chosen=chosen)]
    found.sort(key=lambda v: chosen.holder(v) != claim.key)  # stable: smallest first after
    return found


def _bindable(
    claims: list[tuple[volumes.ClaimInfo, volumes.ClassInfo]],
    *,
    storage: volumes.Volumes,
    nodes: nodetable.NodeTable,
    chosen: _Chosen,
) -> filtering.BoolArray:
    """Rows where every one of ``claims`` gets a volume of its own: a claim chosen for earlier
    in the session where its volume is (or its provisioner, for one to be provisioned); else,
    per row, each claim in turn takes the first volume in the binder's order that no earlier
    claim took there, else one its class's provisioner creates there."""
    size = len(nodes)
    every = np.ones(size, dtype=np.bool_)
    if not claims:
        return every
    taken: dict[str, filtering.BoolArray] = {}  # volume -> rows where an earlier claim took it
    for claim, cls in claims:
        choice = chosen.claims.get(claim.key)
        if choice is not None:
            volume = storage.volumes.get(choice.volume) if choice.volume is not None else None
            if volume is not None:
                every &= _terms_mask(volume.node_affinity, nodes)
            elif cls.provisions:
                every &= _terms_mask(cls.allowed_topologies, nodes)
            continue
        got = np.zeros(size, dtype=np.bool_)
        for volume in _ordered(claim, storage, chosen=chosen):
            free = _terms_mask(volume.node_affinity, nodes) & ~got
            used = taken.get(volume.name)
            if used is not None:
                free &= ~used
            if free.any():
                taken[volume.name] = free if used is None else used | free
                got |= free
        if cls.provisions:
            got |= _terms_mask(cls.allowed_topologies, nodes)
        every &= got
    return every


class VolumeBinding(
    interfaces.PreFilterPlugin,
    interfaces.FilterPlugin,
    interfaces.ReservePlugin,
    interfaces.PreBindPlugin,
    interfaces.SessionPlugin,
    interfaces.ConstraintPlugin,
):
    """PreFilter, Filter, Reserve, PreBind; see the module docstring."""

    name = NAME
    understands = frozenset(
        {podconstraints.Field.PERSISTENT_VOLUME_CLAIM, podconstraints.Field.EPHEMERAL_VOLUME}
    )

    def __init__(self, handle: handles.ExtendedHandle) -> None:
        self._handle = handle
        self._chosen = _Chosen()  # the open session's; empty between sessions (R8)

    def on_session_open(self, session: sessions.Session) -> None:
        self._chosen = _Chosen()

    def on_session_close(self, session: sessions.Session) -> None:
        self._chosen = _Chosen()

    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        if not pod.claims:
            return statuses.SKIP
        storage = self._handle.snapshot().volumes
        bound: list[volumes.VolumeInfo] = []
        delayed: list[tuple[volumes.ClaimInfo, volumes.ClassInfo]] = []
        for claim, key in zip(pod.claims, pod.claim_keys, strict=True):
            info = storage.claims.get(key)
            problem = claim_problem(claim, info, key=key, storage=storage)
            if problem is not None:
                return statuses.new(
                    statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    problem,
                    reason_code=reasons.ReasonCode.VOLUME_CLAIM_PROBLEM,
                    details={"claim": key},
                )
            assert info is not None  # claim_problem says why otherwise
            if info.volume_name:
                bound.append(storage.volumes[info.volume_name])
            else:
                delayed.append((info, storage.classes[info.storage_class]))
        state.write(_STATE, _Claims(tuple(bound), tuple(delayed)))
        return statuses.SUCCESS

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        found = state.read_as(_STATE, kind=_Claims)
        if isinstance(found, statuses.Status):
            raise RuntimeError(found.message())
        size = len(nodes)
        affinity = np.ones(size, dtype=np.bool_)
        for volume in found.bound:
            affinity &= _terms_mask(volume.node_affinity, nodes)
        selected = np.ones(size, dtype=np.bool_)
        storage = self._handle.snapshot().volumes
        waiting: list[tuple[volumes.ClaimInfo, volumes.ClassInfo]] = []
        users = self._handle.placements().grouped((NAME, "claims"), extract=_claim_keys)
        for claim, cls in found.delayed:
            # A pod already placed with this claim (bound, assumed, or earlier in this session:
            # a gang's members sharing it) decided its node: the claim gets one volume. That
            # narrows where the volume may be, it does not vouch for one: the volume is still
            # chosen where the pod lands, so its node must also offer one (users may sit on
            # nodes no volume of the claim admits, and the first pod's pick binds them all).
            placed = users.get(claim.key)
            if placed is not None and placed.any():
                selected &= placed > 0
            if claim.selected_node is None:
                waiting.append((claim, cls))
                continue
            only = np.zeros(size, dtype=np.bool_)
            row = nodes.index.get(claim.selected_node)
            if row is not None:
                only[row] = True
            selected &= only
        bindable = _bindable(waiting, storage=storage, nodes=nodes, chosen=self._chosen)
        passed = affinity & selected & bindable

        def explain() -> filtering.Reasons:
            return {
                REASON_NODE_CONFLICT: ~affinity,
                REASON_NOT_SELECTED: affinity & ~selected,
                REASON_BIND_CONFLICT: affinity & selected & ~bindable,
            }

        return filtering.NodeFilter(
            passed=passed,
            code=statuses.Code.UNSCHEDULABLE,
            explain=explain,
            reason_code=reasons.ReasonCode.VOLUME_NODE_CONFLICT,
        )

    def reserve(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str
    ) -> statuses.Status:
        if not pod.claims:
            return statuses.SUCCESS
        # From the snapshot, not the cycle state: an action may place a pod without PreFilter.
        snapshot = self._handle.snapshot()
        storage = snapshot.volumes
        info = snapshot.node_infos.get(node)
        labels = info.labels if info is not None else {}
        chosen = self._chosen
        mine: list[str] = []
        for key in pod.claim_keys:
            claim = storage.claims.get(key)
            if claim is None or claim.volume_name or key in mine:
                continue
            mine.append(key)
            choice = chosen.claims.get(key)
            if choice is not None:
                choice.users.append(pod.key)
                continue
            volume = next(
                (
                    v
                    for v in _ordered(claim, storage, chosen=chosen)
                    if v.node_affinity is None
                    or any(
                        selectors.matches(t, labels=labels, node_name=node) for t in v.node_affinity
                    )
                ),
                None,
            )
            if volume is not None:
                chosen.volumes[volume.name] = key
            chosen.claims[key] = _Choice(
                volume.name if volume is not None else None, node, [pod.key]
            )
        chosen.of_pod[pod.key] = tuple(mine)
        return statuses.SUCCESS

    def unreserve(self, state: cyclestate.CycleState, pod: pods.PodInfo, node: str) -> None:
        chosen = self._chosen
        for key in chosen.of_pod.pop(pod.key, ()):
            choice = chosen.claims.get(key)
            if choice is None or pod.key not in choice.users:
                continue
            choice.users.remove(pod.key)
            if not choice.users:
                del chosen.claims[key]
                if choice.volume is not None:
                    chosen.volumes.pop(choice.volume, None)

    def pre_bind(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        node: str,
        *,
        recorder: decisions.DecisionRecorder,
    ) -> statuses.Status:
        chosen = self._chosen
        storage = self._handle.snapshot().volumes
        for key in chosen.of_pod.get(pod.key, ()):
            choice = chosen.claims.get(key)
            claim = storage.claims.get(key)
            if choice is None or claim is None or choice.users[0] != pod.key:
                continue  # the first pod placed with the claim writes its choice
            namespace, _, name = key.partition("/")
            volume = storage.volumes.get(choice.volume) if choice.volume is not None else None
            if volume is not None:
                if volume.claim != key:
                    recorder.record(
                        decisions.BindClaimVolume(
                            namespace=namespace,
                            name=name,
                            uid=claim.uid,
                            volume=volume.name,
                            version=volume.version,
                            pod=pod.key,
                        )
                    )
            elif claim.selected_node != node:
                recorder.record(
                    decisions.SelectClaimNode(
                        namespace=namespace, name=name, node=node, pod=pod.key
                    )
                )
        return statuses.SUCCESS


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> VolumeBinding:
    """Build the plugin (it takes no arguments)."""
    return VolumeBinding(handle)
