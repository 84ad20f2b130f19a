"""Decisions: what a scheduling cycle asks the outside world to do, as plain values.

The core never does I/O. Binding-cycle plugins (Bind, PreBind, PostBind) and statements record
``Decision`` values; the loop hands the session's :class:`CycleResult` to a ``DecisionSink``
(``berth.kube.binder.decisions`` against the API server, ``berth.sim.cluster`` in memory), which
applies them in order.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import types
import typing

from berth.api import dra, resources
from berth.api import reservations as api_reservations
from berth.scheduler.framework import pending, reasons

__all__ = [
    "AllocateReservation",
    "AnnotatePod",
    "BindClaimVolume",
    "BindPod",
    "CycleResult",
    "DeallocateClaim",
    "Decision",
    "DecisionRecorder",
    "EndReservation",
    "EvictPod",
    "MarkPending",
    "NOT_TRIED",
    "NominatePod",
    "QueueStatusSummary",
    "ReserveClaim",
    "SelectClaimNode",
    "SetReservationAvailable",
    "Subject",
    "Unschedulable",
]


NOT_TRIED = reasons.new(reasons.ReasonCode.NOT_TRIED, "not tried this cycle")
"""The reason of a pending pod no action looked at this cycle: no news about why it waits."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Addressed:
    """What every object decision shares: the object's namespace and name."""

    namespace: str
    name: str

    @property
    def key(self) -> str:
        """``namespace/name``, the cache's key of the object."""
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class BindPod(_Addressed):
    """Bind the pod to ``node`` (``POST pods/{name}/binding``), once every claim in ``claims``
    (``namespace/name`` of PersistentVolumeClaims its volumes use) is bound: kube-scheduler's
    VolumeBinding PreBind wait, done by the sink. ``resource_claims`` are the ResourceClaims
    (``namespace/name``) the pod uses: the sink binds only once each lists the pod in its
    ``status.reservedFor`` (the :class:`ReserveClaim` decisions recorded before this one), and
    releases what those wrote when the binding fails."""

    uid: str
    node: str
    claims: tuple[str, ...] = ()
    resource_claims: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReserveClaim(_Addressed):
    """Reserve the ResourceClaim for the pod ``pod`` (same namespace) before it is bound:
    kube-scheduler's DynamicResources PreBind. The sink adds ``{resource: pods, name: pod,
    uid: pod_uid}`` to ``status.reservedFor``, first writing ``allocation`` into
    ``status.allocation`` (with the ``resource.kubernetes.io/delete-protection`` finalizer)
    when it is given. The write is conditional on the claim being the one the scheduler saw
    (``uid``) and, with an allocation, still unallocated: a claim allocated meanwhile (by
    kube-scheduler or another leader) is never overwritten, and the pod is then not bound.
    ``after`` names the pod (same namespace) whose ReserveClaim earlier in the same cycle's
    decisions writes the claim's allocation (gang members sharing a claim the cycle
    allocated): this reservation is made only if that write succeeded."""

    uid: str  # the claim's
    pod: str
    pod_uid: str
    allocation: dra.AllocationResult | None = None
    after: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeallocateClaim(_Addressed):
    """Clear the ResourceClaim's ``status.allocation`` and ``status.reservedFor``:
    kube-scheduler's DynamicResources PostFilter. The pod ``pod`` (same namespace) fits no
    node, and the claim, allocated where it cannot go, is reserved by no other pod: freed, it
    can be allocated again where the pod fits. The sink clears it only if it still is the
    claim decided on (``uid``), still allocated, and reserved by nobody but that pod
    (``pod_uid``)."""

    uid: str  # the claim's
    pod: str
    pod_uid: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class SelectClaimNode(_Addressed):
    """Annotate the PersistentVolumeClaim with the node its delayed-binding (WaitForFirstConsumer)
    volume is to be provisioned or bound for (``volume.kubernetes.io/selected-node``), placing
    the pod ``pod`` (``namespace/name``) there."""

    node: str
    pod: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class BindClaimVolume(_Addressed):
    """Reserve the PersistentVolume ``volume`` for the claim (its ``spec.claimRef``): the
    pre-binding kube-scheduler's volume binder does for a delayed-binding claim it matched to
    a static volume; kube-controller-manager's PV binder then completes the binding. For the
    pod ``pod`` (``namespace/name``). Written only onto the volume at ``version`` (its
    ``resourceVersion`` when chosen): a volume changed since may be another claim's."""

    uid: str  # the claim's
    volume: str
    version: str
    pod: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvictPod(_Addressed):
    """Evict the pod from ``node`` (reclaim, preempt, a maximum execution time passed);
    ``reason`` goes into the Event's message, ``cause`` (None: preemption) is its reason."""

    uid: str
    node: str
    reason: str
    cause: reasons.ReasonCode | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class AnnotatePod(_Addressed):
    """Merge ``annotations`` into the pod's metadata (e.g. the reservation it was placed in)."""

    uid: str
    annotations: collections.abc.Mapping[str, str]


@dataclasses.dataclass(frozen=True, kw_only=True)
class SetReservationAvailable(_Addressed):
    """Mark the Reservation ``Available`` on ``node`` holding ``allocatable``, and the DRA
    ``devices`` allocated for its template's claims (``status.devices``)."""

    node: str
    allocatable: resources.ResourceList
    devices: tuple[api_reservations.ReservedDevice, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class AllocateReservation(_Addressed):
    """Record that the owner pod ``owner`` was placed into the Reservation.

    The pod joins ``status.currentOwners`` and ``requests`` (its requests, limited to what the
    reservation holds) add to ``status.allocated``; ``succeeded`` ends an ``allocateOnce``
    reservation (phase ``Succeeded``), whose remainder is then free. Owners are always in the
    reservation's namespace.
    """

    owner: str  # the pod's name
    owner_uid: str
    requests: resources.ResourceList
    succeeded: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class EndReservation(_Addressed):
    """End the Reservation: ``phase`` is ``Expired`` (its time ran out while it held capacity)
    or ``Failed`` (it can never be held: expired before it was placed, its node is gone).
    ``reason`` (CamelCase) and ``message`` go into its ``Ready`` condition and an Event."""

    phase: str
    reason: str
    message: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExceedExecutionTime(_Addressed):
    """The PodGroup ran past its maximum execution time and its pods are evicted (the
    ``EvictPod`` decisions beside it): a Warning Event of ``reason``'s code on the group and,
    with ``fail``, the mark that keeps it Failed (the annotation
    ``scheduling.berth.io/maximum-execution-time-exceeded``, with ``reason``'s message)."""

    uid: str
    reason: reasons.Reason
    fail: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class NominatePod(_Addressed):
    """Record that the pod is expected on ``node`` once capacity frees (a pipelined pod)."""

    uid: str
    node: str


class Subject(enum.Enum):
    """What an :class:`Unschedulable` decision is about."""

    POD = "Pod"
    GROUP = "PodGroup"
    RESERVATION = "Reservation"  # a Pending Reservation: its reserve pod found no node


@dataclasses.dataclass(frozen=True, kw_only=True)
class Unschedulable:
    """The pod or group stays pending, and ``reason`` tells its owner why."""

    subject: Subject
    key: str  # "namespace/name" of the pod, PodGroup or Reservation
    reason: reasons.Reason


MarkPending = pending.MarkPending
"""The waiting pods of one gang and what autoscalers should make of them
(:mod:`berth.scheduler.framework.pending`)."""

Decision = (
    BindPod
    | EvictPod
    | AnnotatePod
    | SetReservationAvailable
    | AllocateReservation
    | EndReservation
    | ExceedExecutionTime
    | NominatePod
    | SelectClaimNode
    | BindClaimVolume
    | ReserveClaim
    | DeallocateClaim
    | Unschedulable
    | MarkPending
)
"""Everything a cycle can ask for."""

_DecisionT = typing.TypeVar("_DecisionT", bound=Decision)


@dataclasses.dataclass(frozen=True, kw_only=True)
class QueueStatusSummary:
    """One queue as a session left it: what the Queue controller and metrics write.

    Published by the queue plugin (Proportion) at session close. Amounts are milli-units;
    ``allocated`` counts placed pods after the session's bindings and evictions, ``requested``
    the pods still pending, ``fair_share`` the entitlement the session computed. ``problem``
    is why the queue's work waits (a cycle, a missing parent, ``limit`` below ``guaranteed``),
    ``None`` for a usable queue; ``held`` what the starvation guard keeps idle for it.
    """

    allocated: resources.ResourceList
    requested: resources.ResourceList
    fair_share: resources.ResourceList
    pending: int  # PodGroups of the queue with pods waiting and none placed
    running: int  # PodGroups of the queue with pods placed
    children: tuple[str, ...] = ()
    problem: str | None = None
    held: resources.ResourceList = dataclasses.field(default_factory=resources.ResourceList)
    """Free capacity the starvation guard holds idle for the queue's starving jobs and
    Reservations booked for later as the session leaves the nodes (what backfill took is not
    idle): what draining costs now."""


class DecisionRecorder:
    """An append-only list of decisions, handed to binding-cycle plugins and statements."""

    __slots__ = ("_decisions",)

    def __init__(self) -> None:
        self._decisions: list[Decision] = []

    def record(self, decision: Decision) -> None:
        """Append ``decision``; the sink applies decisions in recording order."""
        self._decisions.append(decision)

    def extend(self, decisions: collections.abc.Iterable[Decision]) -> None:
        """Append several decisions in order."""
        self._decisions.extend(decisions)

    def __len__(self) -> int:
        return len(self._decisions)

    def decisions(self) -> tuple[Decision, ...]:
        """What was recorded so far, in order."""
        return tuple(self._decisions)

    def drop_nominations(self, keys: collections.abc.Collection[str]) -> None:
        """Forget the :class:`NominatePod` decisions of the pods ``keys`` (nominations a
        later statement of the same session took back)."""
        self._decisions = [
            d for d in self._decisions if not (isinstance(d, NominatePod) and d.key in keys)
        ]

    def truncate(self, length: int) -> None:
        """Forget everything recorded after the first ``length`` decisions (a rollback)."""
        del self._decisions[length:]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CycleResult:
    """What one session decided, for the sink, metrics and the operator's debug API.

    ``pod_why`` and ``group_why`` hold the "why pending" :class:`~reasons.Reason` of every
    pod and group that stayed pending (also present as :class:`Unschedulable` decisions, which
    is how the sink sees them); ``pod_reasons`` and ``group_reasons`` are their messages, for
    rendering. Timings are in seconds, keyed by action name and by plugin name.
    """

    session_id: str
    decisions: tuple[Decision, ...] = ()
    pod_why: collections.abc.Mapping[str, reasons.Reason] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )
    group_why: collections.abc.Mapping[str, reasons.Reason] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )
    action_seconds: collections.abc.Mapping[str, float] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )
    plugin_seconds: collections.abc.Mapping[str, float] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )
    attempt_seconds: tuple[float, ...] = ()  # one entry per pod placement attempt, in order
    errors: tuple[str, ...] = ()  # one line per plugin that raised this session
    waiting: collections.abc.Mapping[str, tuple[str, ...]] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )
    """Per queue, the groups (keys) still waiting after the session, in the order the
    scheduler tries them: a group's place in line is its index + 1."""
    queues: collections.abc.Mapping[str, QueueStatusSummary] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )  # by queue name, when a queue plugin published them
    revisit_at: float | None = None
    """When something changes by time alone (a running group reaches its maximum execution
    time, a Reservation's drain begins, a waiting job passes its starvation threshold or a
    victim its minimum runtime): the loop looks again then even if nothing else happens."""
    cut_short: bool = False
    """Whether the session stopped at its placement limit with pods left untried (they wait
    with :data:`NOT_TRIED`, which is no news): the loop runs the next session at once."""

    @property
    def pod_reasons(self) -> dict[str, str]:
        """Pod key -> the message of its reason (what users read)."""
        return {key: why.message for key, why in self.pod_why.items()}

    @property
    def group_reasons(self) -> dict[str, str]:
        """Group key -> the message of its reason (what users read)."""
        return {key: why.message for key, why in self.group_why.items()}

    def of_kind(self, kind: type[_DecisionT]) -> list[_DecisionT]:
        """The decisions of one type, in order: ``result.of_kind(decisions.BindPod)``."""
        return [d for d in self.decisions if isinstance(d, kind)]

    def bindings(self) -> dict[str, str]:
        """Pod key -> node for every :class:`BindPod` (handy in tests and reports)."""
        return {d.key: d.node for d in self.decisions if isinstance(d, BindPod)}
