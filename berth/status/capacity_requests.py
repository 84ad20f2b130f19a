"""Which capacity requests Berth keeps with the cluster's autoscaler, and what their status says.

Autoscalers act on pods marked ``Unschedulable`` (docs/autoscaling.md); some of Berth's waiting
work cannot be shown that way, or wants more than that signal gives, so Berth asks the
autoscaler with a pod-less request (a **want**, :class:`Want`):

- **A gang in admission mode** whose pods wait gated for capacity only (their
  ``MarkPending`` is a capacity one): gated pods are invisible to autoscalers. It asks with a
  ProvisioningRequest where one is served (its queue's class, else
  ``best-effort-atomic-scale-up``), else with a CapacityBuffer.
- **A gang in scheduler mode** whose queue (or the nearest ancestor that says) names a
  ProvisioningRequest class (``spec.autoscaling.provisioningRequest``) and which waits for
  capacity only: all of its nodes in one request, as Kueue's ProvisioningRequest admission
  check asks for a workload's.
- **A Reservation** that opted in (``spec.capacityBuffer``, or its queue's
  ``autoscaling.reservationBuffers``) and cannot fit for lack of capacity (its reason's code
  is a capacity one): a CapacityBuffer of its template. The buffer stays with the reservation
  (it is emptied, ``replicas: 0``, once the reservation holds its node: the node's
  scale-down opt-outs keep it from then on, and a buffer still asking would buy a second node
  once owners fill the first) and goes when the reservation ends.

A gang in scheduler mode without a class asks with its pods' ``Unschedulable`` condition
alone: no want, but a **signal** (:attr:`Planner.signals`: its waiting members and since when
they wait), so that what the autoscaler did for it can be read from its Events
(:mod:`berth.status.scale_up`).

A gang's want lasts while any of its members still waits; a later ``MarkPending`` that waits
for something other than capacity (its queue's limit, missing members) ends it, as do its
members being placed (bound, assumed or admitted) or gone. Pods nothing looked at in a cycle
(parked, ``NotTried``) keep their want. A signal ends the same way; in scheduler mode every
waiting gang has one, and looking at all of them every cycle would make a cycle's cost grow
with the standing backlog, so a cycle looks only at the signals of the pods the cache says
stopped waiting and of the groups it says changed since its previous snapshot (all of them, at
most every :data:`SIGNALS_SETTLE_EVERY`, after a snapshot that did not follow the last one
seen).

:class:`Planner` keeps the wants across cycles (pure: the operator's writer,
:mod:`berth.kube.autoscaling.capacity_requests`, feeds it each cycle and makes the API objects);
:func:`verdict` reads a request's status conditions into what Berth tells the group: not
answered yet, provisioned, still pending (with the autoscaler's own words), or refused;
:func:`fit` reads a CapacityBuffer's ``Provisioning`` condition into where its virtual pods
fit, from which :func:`berth.status.scale_up.judge_buffers` tells a gang the autoscaler can
only partly fit.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import hashlib
import math
import re
import typing

from berth.api import autoscaler_objects, autoscaling
from berth.scheduler.framework import decisions, pending
from berth.scheduler.snapshot import queues

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import changes, snapshots

__all__ = [
    "Fit",
    "Kind",
    "Owner",
    "Planner",
    "Purpose",
    "SIGNALS_SETTLE_EVERY",
    "Signalled",
    "State",
    "Verdict",
    "Want",
    "fit",
    "object_name",
    "policy_of",
    "told",
    "verdict",
]

_MAX_NAME = 253


class Kind(enum.Enum):
    """The autoscaler API a request is made with."""

    PROVISIONING_REQUEST = "ProvisioningRequest"
    CAPACITY_BUFFER = "CapacityBuffer"


class Purpose(enum.Enum):
    """Why Berth asks (decides the kinds it may use)."""

    ADMISSION = "gated gang"  # any served kind, a ProvisioningRequest first
    QUEUE = "queue's provisioning class"  # a ProvisioningRequest only
    RESERVATION = "reservation"  # a CapacityBuffer only


@dataclasses.dataclass(frozen=True)
class Owner:
    """The object a request is made for, and owned by (garbage-collected with it)."""

    kind: str  # PodGroup, Pod or Reservation
    api_version: str
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        """``namespace/name`` of the object (a PodGroup's or a Reservation's key)."""
        return f"{self.namespace}/{self.name}"

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"


@dataclasses.dataclass(frozen=True)
class Want:
    """One request Berth keeps: for whom, why, and for which pods."""

    owner: Owner
    purpose: Purpose
    group: str  # the gang's key in the scheduler's reasons, or the Reservation's key
    members: tuple[str, ...] = ()  # a gang's waiting pods (keys), sorted; () for a Reservation
    policy: queues.ProvisioningPolicy | None = None  # the class asked for (Purpose.QUEUE: set)
    active: bool = True  # a Reservation's buffer asks (False once placed: replicas 0)

    @property
    def kinds(self) -> tuple[Kind, ...]:
        """The kinds it may be made with, preferred first."""
        if self.purpose is Purpose.ADMISSION:
            return (Kind.PROVISIONING_REQUEST, Kind.CAPACITY_BUFFER)
        if self.purpose is Purpose.QUEUE:
            return (Kind.PROVISIONING_REQUEST,)
        return (Kind.CAPACITY_BUFFER,)

    def kind_in(self, served: collections.abc.Collection[Kind] | None) -> Kind | None:
        """The kind it is made with where ``served`` are (None: not known yet): the first
        of :attr:`kinds` among them, else None."""
        return next((kind for kind in self.kinds if served is not None and kind in served), None)

    @property
    def class_name(self) -> str:
        """The ProvisioningRequest class it asks with."""
        if self.policy is not None:
            return self.policy.class_name
        return autoscaling.BEST_EFFORT_ATOMIC_SCALE_UP


@dataclasses.dataclass(frozen=True)
class Signalled:
    """A gang whose pods' ``Unschedulable`` condition is its only ask of an autoscaler (see
    :attr:`Planner.signals`): its owner, waiting members (key -> uid), since when."""

    owner: Owner
    members: collections.abc.Mapping[str, str]
    since: float


def policy_of(snapshot: snapshots.Snapshot, queue: str | None) -> queues.ProvisioningPolicy | None:
    """The ProvisioningRequest policy that holds for ``queue``'s work: its own, else the
    nearest ancestor's that sets one."""
    seen: set[str] = set()
    name = queue
    while name is not None and name not in seen:
        seen.add(name)
        info = snapshot.queues.get(name)
        if info is None:
            return None
        if info.provisioning is not None:
            return info.provisioning
        name = info.parent
    return None


def _reservation_buffers(snapshot: snapshots.Snapshot, queue: str | None) -> bool:
    seen: set[str] = set()
    name = queue
    while name is not None and name not in seen:
        seen.add(name)
        info = snapshot.queues.get(name)
        if info is None:
            return False
        if info.reservation_buffers:
            return True
        name = info.parent
    return False


SIGNALS_SETTLE_EVERY = 1.0
"""Seconds (of the snapshots' time) between two looks at every signal's members, when the
cache cannot say which pods stopped waiting (a snapshot missed, or one built by hand)."""


class Planner:
    """The wants, kept across cycles (see the module docstring)."""

    def __init__(self) -> None:
        self._wants: dict[str, Want] = {}  # by owner (str)
        # Gangs whose pods' Unschedulable condition is their only ask (scheduler mode, no
        # request): group key -> (owner, members key -> uid, since when they wait).
        self._signals: dict[str, Signalled] = {}
        self._signals_settled = -math.inf  # the snapshot time every signal was last looked at
        self._gangs_of: dict[str, set[str]] = {}  # a signalled member's key -> its gangs
        self._seen: changes.Changes | None = None  # the last snapshot's change counters
        self._look_at_all = True  # a snapshot did not follow the last: look at every signal
        self._signalled = 0  # counts changes of which gangs are signalled

    @property
    def signalled(self) -> int:
        """A count that moves whenever a gang starts or stops being signalled."""
        return self._signalled

    @property
    def wants(self) -> collections.abc.Mapping[str, Want]:
        """Every want, by ``str(owner)``."""
        return self._wants

    def cycle(
        self,
        snapshot: snapshots.Snapshot,
        *,
        marks: collections.abc.Iterable[pending.MarkPending],
        gated: collections.abc.Collection[str],
        reservations: collections.abc.Iterable[decisions.Unschedulable] = (),
    ) -> collections.abc.Mapping[str, Want]:
        """Take one cycle's decisions: ``marks`` (every ``MarkPending`` of the cycle, gated
        pods' included), ``gated`` (the pods admission mode holds), ``reservations`` (the
        cycle's ``Unschedulable`` decisions about Reservations); the wants after it."""
        for mark in marks:
            self._gang(snapshot, mark, gated=gated)
        for told in reservations:
            if told.subject is decisions.Subject.RESERVATION:
                self._reservation(snapshot, told)
        self._settle(snapshot)
        return self._wants

    @property
    def signals(self) -> collections.abc.Mapping[str, Signalled]:
        """The gangs (by group key) whose pods' ``Unschedulable`` condition is their only ask
        of an autoscaler: scheduler mode, waiting for capacity alone, no request made."""
        return self._signals

    def forget(self, key: str) -> None:
        """Drop the want of ``key`` (``str(owner)``) now: its pods are being admitted, and
        its request was withdrawn before they are (a later cycle that marks them waiting for
        capacity again makes a new one)."""
        self._wants.pop(key, None)

    def _gang(
        self,
        snapshot: snapshots.Snapshot,
        mark: pending.MarkPending,
        *,
        gated: collections.abc.Collection[str],
    ) -> None:
        owner = _gang_owner(snapshot, mark)
        if owner is None:
            return
        key = str(owner)
        if not mark.capacity:
            self._wants.pop(key, None)  # it waits for something more nodes cannot give
            self._unsignal(mark.group)
            return
        members = tuple(sorted(p.key for p in mark.pods))
        first = snapshot.pods.get(members[0]) if members else None
        group = snapshot.group_of(first) if first is not None else None
        policy = policy_of(snapshot, group.queue if group is not None else None)
        if any(m in gated for m in members):
            purpose = Purpose.ADMISSION
        elif policy is not None:
            purpose = Purpose.QUEUE
        else:
            self._wants.pop(key, None)  # scheduler mode: the pods' condition is the signal
            self._signal(snapshot, mark, owner=owner, members=members)
            return
        self._unsignal(mark.group)
        had = self._wants.get(key)
        if had is not None and set(members) <= set(had.members):
            members = had.members  # a want never shrinks while its members wait
        self._wants[key] = Want(
            owner=owner, purpose=purpose, group=mark.group, members=members, policy=policy
        )

    def _signal(
        self,
        snapshot: snapshots.Snapshot,
        mark: pending.MarkPending,
        *,
        owner: Owner,
        members: tuple[str, ...],
    ) -> None:
        had = self._signals.get(mark.group)
        uids = {m: snapshot.pods[m].uid for m in members if m in snapshot.pods}
        if had is not None and had.owner == owner:
            # Still waiting: the clock keeps running (a member added or placed does not
            # restart it), and members once marked stay until placed or gone.
            uids = {**had.members, **uids}
            self._signals[mark.group] = dataclasses.replace(had, members=uids)
        else:
            self._signalled += had is None
            if had is not None:
                self._unindex(mark.group, had.members)
            self._signals[mark.group] = Signalled(owner, uids, since=snapshot.now)
        for member in uids:
            self._gangs_of.setdefault(member, set()).add(mark.group)

    def _unsignal(self, gang: str) -> None:
        signalled = self._signals.pop(gang, None)
        if signalled is not None:
            self._signalled += 1
            self._unindex(gang, signalled.members)

    def _unindex(self, gang: str, members: collections.abc.Iterable[str]) -> None:
        for member in members:
            gangs = self._gangs_of.get(member)
            if gangs is not None:
                gangs.discard(gang)
                if not gangs:
                    del self._gangs_of[member]

    def _reservation(self, snapshot: snapshots.Snapshot, told: decisions.Unschedulable) -> None:
        info = snapshot.reservations.get(told.key)
        if info is None:
            return
        owner = Owner(
            "Reservation", "scheduling.berth.io/v1alpha1", info.namespace, info.name, info.uid
        )
        key = str(owner)
        asks = info.capacity_buffer or _reservation_buffers(snapshot, info.queue)
        capacity = pending.needs_capacity(told.reason.code)
        if not asks:
            self._wants.pop(key, None)
        elif capacity:
            self._wants[key] = Want(owner=owner, purpose=Purpose.RESERVATION, group=told.key)
        elif key in self._wants:
            # Waiting for something nodes cannot give (not due yet, no owner): ask for nothing.
            self._wants[key] = dataclasses.replace(self._wants[key], active=False)

    def _settle(self, snapshot: snapshots.Snapshot) -> None:
        """End the wants whose work no longer waits (placed, gone, ended)."""
        for key, want in list(self._wants.items()):
            if want.purpose is Purpose.RESERVATION:
                info = snapshot.reservations.get(want.group)
                if info is None or info.terminal or info.uid != want.owner.uid:
                    del self._wants[key]
                elif info.available and want.active:
                    self._wants[key] = dataclasses.replace(want, active=False)
                continue
            if want.owner.kind == "PodGroup":
                group = snapshot.pod_groups.get(want.group)
                if group is None or group.uid != want.owner.uid:
                    del self._wants[key]
                    continue
            waiting = [m for m in want.members if _waits(snapshot, m)]
            if not waiting:
                del self._wants[key]
        self._settle_signals(snapshot)

    def _settle_signals(self, snapshot: snapshots.Snapshot) -> None:
        """End the signals none of whose members waits any more, and drop the members that
        stopped waiting from the others (see the module docstring for which are looked at)."""
        last, self._seen = self._seen, snapshot.changes
        stopped, current = snapshot.stopped_waiting, snapshot.changes
        gangs: set[str] = set()
        if stopped is None or current is None or last is None or not current.follows(last):
            self._look_at_all = True
        else:
            for key in stopped:
                gangs.update(self._gangs_of.get(key, ()))
            gangs.update(group for group in current.groups if group in self._signals)
        if self._look_at_all and snapshot.now >= self._signals_settled + SIGNALS_SETTLE_EVERY:
            self._look_at_all = False
            self._signals_settled = snapshot.now
            gangs = set(self._signals)
        for gang in sorted(gangs):
            signalled = self._signals.get(gang)
            if signalled is None:
                continue
            if signalled.owner.kind == "PodGroup":
                found = snapshot.pod_groups.get(gang)
                if found is None or found.uid != signalled.owner.uid:
                    self._unsignal(gang)
                    continue
            members = {
                m: uid
                for m, uid in signalled.members.items()
                if _waits(snapshot, m) and snapshot.pods[m].uid == uid
            }
            if not members:
                self._unsignal(gang)
            elif members != signalled.members:
                self._signals[gang] = dataclasses.replace(signalled, members=members)
                self._unindex(gang, signalled.members.keys() - members.keys())


def _waits(snapshot: snapshots.Snapshot, key: str) -> bool:
    pod = snapshot.pods.get(key)
    return pod is not None and pod.node_name is None and not pod.terminal and not pod.deleting


def _gang_owner(snapshot: snapshots.Snapshot, mark: pending.MarkPending) -> Owner | None:
    group = snapshot.pod_groups.get(mark.group)
    if group is not None and not group.implicit:
        return Owner(
            "PodGroup", "scheduling.berth.io/v1alpha1", group.namespace, group.name, group.uid
        )
    if len(mark.pods) != 1:
        return None
    pod = snapshot.pods.get(mark.pods[0].key)
    if pod is None:
        return None
    return Owner("Pod", "v1", pod.namespace, pod.name, pod.uid)


_PREFIX = {"PodGroup": "pg", "Pod": "pod", "Reservation": "resv"}
_UNSAFE = re.compile(r"[^a-z0-9.-]")


def object_name(owner: Owner, *, attempt: int, part: str = "") -> str:
    """The name of a request's object: ``berth-<pg|pod|resv>-<owner's name>-<attempt>`` (and
    ``-<part>`` for its PodTemplates and a buffer per pod shape), shortened with a hash of the
    whole when it would exceed 253 characters."""
    suffix = f"-{attempt}" + (f"-{part}" if part else "")
    base = f"berth-{_PREFIX.get(owner.kind, 'x')}-{_UNSAFE.sub('-', owner.name.lower())}"
    if len(base) + len(suffix) <= _MAX_NAME:
        return base + suffix
    digest = hashlib.sha256(base.encode()).hexdigest()[:10]
    return base[: _MAX_NAME - len(suffix) - 11] + "-" + digest + suffix


# Reading a request's status ------------------------------------------------------------------


class State(enum.Enum):
    """Where a request stands, as Berth reads its conditions."""

    UNANSWERED = "Unanswered"  # no autoscaler has written a condition yet
    PENDING = "Pending"  # answered, capacity not there yet (launching, retrying, accepted)
    PROVISIONED = "Provisioned"  # the capacity is there (or booked)
    REFUSED = "Refused"  # the autoscaler cannot or will not provide it: retry later


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a request's status says, for the group's reason and Events."""

    state: State
    detail: str  # the autoscaler's condition, as it wrote it ("" when none)


def _conditions(status: autoscaler_objects.RequestStatus) -> dict[str, dict[str, str]]:
    found = status.get("conditions")
    out: dict[str, dict[str, str]] = {}
    for condition in found if isinstance(found, list) else []:
        if isinstance(condition, dict) and isinstance(condition.get("type"), str):
            out[condition["type"]] = {k: str(v) for k, v in condition.items() if v is not None}
    return out


def _told(condition: collections.abc.Mapping[str, str]) -> str:
    reason, message = condition.get("reason", ""), condition.get("message", "")
    said = ": ".join(part for part in (reason, message) if part)
    return f"{condition.get('type')}={condition.get('status')}" + (f" ({said})" if said else "")


def verdict(kind: Kind, status: autoscaler_objects.RequestStatus) -> Verdict:
    """What the status of a request of ``kind`` says.

    A ProvisioningRequest (Cluster Autoscaler's conditions): ``Failed``, ``BookingExpired``
    or ``CapacityRevoked`` true: refused; ``Provisioned`` true: provisioned; any other
    condition: pending, with the autoscaler's words. A CapacityBuffer (Karpenter's and
    Cluster Autoscaler's): ``ReadyForProvisioning`` false (its template cannot be read):
    refused; ``Provisioning`` true: the capacity is there; else pending.
    """
    conditions = _conditions(status)
    if not conditions:
        return Verdict(State.UNANSWERED, "")
    if kind is Kind.PROVISIONING_REQUEST:
        for name in (
            autoscaling.PR_FAILED,
            autoscaling.PR_BOOKING_EXPIRED,
            autoscaling.PR_CAPACITY_REVOKED,
        ):
            if conditions.get(name, {}).get("status") == "True":
                return Verdict(State.REFUSED, _told(conditions[name]))
        provisioned = conditions.get(autoscaling.PR_PROVISIONED)
        if provisioned is not None and provisioned.get("status") == "True":
            return Verdict(State.PROVISIONED, _told(provisioned))
        shown = (
            provisioned
            or conditions.get(autoscaling.PR_ACCEPTED)
            or next(iter(conditions.values()))
        )
        return Verdict(State.PENDING, _told(shown))
    ready = conditions.get(autoscaling.BUFFER_READY)
    if ready is not None and ready.get("status") == "False":
        return Verdict(State.REFUSED, _told(ready))
    provisioning = conditions.get(autoscaling.BUFFER_PROVISIONING)
    if provisioning is not None and provisioning.get("status") == "True":
        return Verdict(State.PROVISIONED, _told(provisioning))
    shown = provisioning or ready or next(iter(conditions.values()))
    return Verdict(State.PENDING, _told(shown))


class Fit(enum.Enum):
    """Where a CapacityBuffer's virtual pods fit, as its ``Provisioning`` condition says (by
    status and reason, never by its words)."""

    FITS = "fits"
    """``True``: on nodes that exist, or that the autoscaler is launching (Karpenter counts
    a NodeClaim it launched as a node its next round can fill)."""

    SHORT = "short"
    """``False``: some need new capacity, or fit no node it could add (Karpenter v1.15 says
    ``RequiresNewCapacity`` for both)."""

    INFEASIBLE = "infeasible"
    """``False``, reason ``Infeasible``: no node the autoscaler could add takes them."""

    UNKNOWN = "unknown"
    """No ``Provisioning`` condition yet, or one about the buffer itself (not ready, empty)."""


def fit(status: autoscaler_objects.RequestStatus) -> Fit:
    """Where the virtual pods of a CapacityBuffer with ``status`` fit (:class:`Fit`)."""
    provisioning = _conditions(status).get(autoscaling.BUFFER_PROVISIONING)
    if provisioning is None:
        return Fit.UNKNOWN
    if provisioning.get("status") == "True":
        return Fit.FITS
    if provisioning.get("status") != "False":
        return Fit.UNKNOWN
    return _FIT_WHEN_FALSE.get(str(provisioning.get("reason", "")), Fit.SHORT)


_FIT_WHEN_FALSE: dict[str, Fit] = {
    autoscaling.BUFFER_INFEASIBLE: Fit.INFEASIBLE,
    **dict.fromkeys(autoscaling.BUFFER_NOT_ASKING, Fit.UNKNOWN),
}
"""A ``False`` ``Provisioning`` condition's reason (the autoscaler's code, never its words) ->
where the buffer's virtual pods fit; any other reason: :attr:`Fit.SHORT`."""


def told(status: autoscaler_objects.RequestStatus, kind: str) -> str:
    """The condition ``kind`` of ``status`` as the autoscaler wrote it (``""``: none)."""
    found = _conditions(status).get(kind)
    return _told(found) if found is not None else ""
