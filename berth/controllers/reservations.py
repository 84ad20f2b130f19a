"""The Reservation controller: validity, ``expiresAt``, expiry on time, owners, garbage.

The scheduler places a Reservation and charges owners to it (the Reservation plugin; the
decision sink writes ``Available``, ``allocated``, ``currentOwners``, ``Succeeded``). This
controller keeps the rest of its status true over time:

- **validity**: a template without requests, or owners of which none can ever match a pod,
  make the ``Valid`` condition ``False`` with the exact reason (and a Warning Event); the
  scheduler keeps such a reservation Pending and says so in ``Scheduled``;
- ``status.expiresAt`` from ``expires``, else creation time plus ``ttl`` (``0``: never; unset
  ``ttl`` and ``expires``: 24 h); ``status.ownerSelector``, the owners worded as selectors
  (:func:`berth.status.reservations.owner_selector`: the ``OWNER`` column);
- **expiry on time**: when ``expiresAt`` passes, an Available reservation becomes ``Expired``,
  a Pending one ``Failed`` (it never held anything), with a ``Ready`` condition and an Event —
  what the Reservation plugin also does at the next cycle, whichever comes first;
- **owners**: ``currentOwners`` and ``allocated`` follow the owner pods in the scheduler's last
  snapshot — an owner that finished, was deleted or replaced leaves; an owner Berth placed
  (annotated ``scheduling.berth.io/reservation-allocated`` with this reservation, running on
  its node) is listed even if the sink's write was lost; an allocate-once reservation with an
  owner is ``Succeeded``;
- **garbage collection**: an ended reservation (``Succeeded``, ``Expired``, ``Failed``) is
  deleted ``retention`` after it ended (24 h by default, as Koordinator's collector; the
  operator passes ``Settings.reservation_retention``).

How: Kopf's indexing handler of Reservations (:mod:`berth.controllers.indexing`) records
every Reservation into :class:`~berth.controllers.observed.ObservedObjects`.
Conditions and timestamps follow :mod:`berth.status.conditions`, as the facts' writes do.
:class:`ReservationController` runs inside Kopf, as part of the Reservation status handler
(:mod:`berth.controllers.reservation_statuses`): it plans every reservation purely
(:func:`plan`) and writes what differs through Berth's write primitive
(:meth:`berth.kube.transport.writes.Writer.update`: read, change, write back at the version read; a
409 reads again; the leader's fence checked before sending), through the operator's fenced
client, with the handler's field manager; garbage is
deleted with :meth:`~berth.kube.transport.writes.Writer.delete` (a ``uid`` precondition). It sleeps
until the earliest moment some reservation is due — its expiry or its deletion — or until
:meth:`ReservationController.kick` (after a scheduling cycle, or when Kopf saw a change), with
``interval`` as a safety net; it never polls objects one by one.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import logging
import typing

from berth.api import custom_objects, keys, resources
from berth.api import reservations as reservation_api
from berth.controllers import observed, statuses
from berth.kube.transport import clients, events, fencing, writes
from berth.scheduler.snapshot import pods, snapshots, wire
from berth.scheduler.snapshot import reservations as resv
from berth.status import conditions, observations
from berth.status import reservations as reservation_status
from berth.util import clocks, reporting, wakeups

__all__ = [
    "DEFAULT_RETENTION_SECONDS",
    "KIND",
    "Board",
    "Plan",
    "ReservationController",
    "live_owners",
    "plan",
]

logger = logging.getLogger(__name__)

KIND = reservation_api.KIND
DEFAULT_RETENTION_SECONDS = 24 * 3600.0
"""How long an ended reservation is kept before it is deleted: a day, long enough to read what
happened to it (``kubectl get resv``), short enough that finished ones do not pile up."""

_VALID, _READY = "Valid", "Ready"


class Board(typing.Protocol):
    """What the scheduler last saw: its latest snapshot (None before the first cycle)."""

    def snapshot(self) -> snapshots.Snapshot | None: ...


# Planning (pure) ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one reservation needs now: a new status (or None), Events, deletion, next wake."""

    status: custom_objects.ReservationStatus | None
    events: tuple[tuple[str, str, str], ...] = ()  # (type, reason, message)
    delete: bool = False
    wake_at: float | None = None  # when this reservation is next due (expiry, deletion)


def _info(obj: observations.ObservedObject) -> resv.ReservationInfo:
    return resv.reservation_info(
        {
            "metadata": {
                "namespace": obj.namespace,
                "name": obj.name,
                "uid": obj.uid,
                "creationTimestamp": conditions.timestamp(obj.created) if obj.created else None,
            },
            "spec": obj.spec,
            "status": obj.status,
        }
    )


def _set_condition(
    status: custom_objects.ReservationStatus,
    kind: str,
    value: str,
    reason: str,
    message: str,
    *,
    now: float,
) -> bool:
    """Set one condition (:func:`berth.status.conditions.updated`: the transition time moves only
    with ``value``); True when it changed, False (``status`` untouched) when it already said so."""
    old = conditions.find(status, kind)
    if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (
        value,
        reason,
        message,
    ):
        return False
    status["conditions"] = conditions.updated(
        status, kind=kind, value=value, reason=reason, message=message, now=now
    )
    return True


def live_owners(
    info: resv.ReservationInfo,
    *,
    status: custom_objects.ReservationStatus,
    snapshot: snapshots.Snapshot,
) -> list[pods.PodInfo]:
    """The reservation's owners that still hold what they were charged, sorted by key.

    Listed owners stay while their pod exists with the same UID, is not finished and not being
    deleted; pods its owners select that are annotated as placed into this reservation and
    running on its node join.
    """
    out: dict[str, pods.PodInfo] = {}
    for entry in status.get("currentOwners") or []:
        if not isinstance(entry, collections.abc.Mapping):
            continue
        key = f"{entry.get('namespace') or info.namespace}/{entry.get('name')}"
        pod = snapshot.pods.get(key)
        uid = entry.get("uid")
        if pod is None or pod.terminal or pod.deleting or (uid and pod.uid != uid):
            continue
        out[pod.key] = pod
    for pod in snapshot.pods.values():
        if pod.namespace != info.namespace or pod.reserve or pod.terminal or pod.deleting:
            continue
        found = resv.allocated_to(pod)
        if found is None or found[0] != info.key or found[1] not in (None, info.uid):
            continue
        if not resv.is_owner(info, pod):
            continue  # the annotation on a pod its owners do not select is no one's word
        if info.node_name is not None and pod.node_name == info.node_name:
            out[pod.key] = pod
    return [out[key] for key in sorted(out)]


def _owners_status(
    info: resv.ReservationInfo, owners: list[pods.PodInfo]
) -> tuple[list[custom_objects.CurrentOwner], dict[str, str]]:
    held = resv.held(info)
    allocated = resources.ResourceList()
    for pod in owners:
        allocated += resources.ResourceList(
            {k: v for k, v in pod.requests.items() if k in held and k != resources.PODS}
        )
    listed: list[custom_objects.CurrentOwner] = [
        {"namespace": p.namespace, "name": p.name, "uid": p.uid} for p in owners
    ]
    return listed, allocated.to_api()


def _ended_at(status: custom_objects.ObjectStatus, *, created: float) -> float:
    """When an ended reservation ended: its ``Ready`` condition's last transition."""
    ready = conditions.find(status, _READY) or {}
    return wire.parse_time(ready.get("lastTransitionTime")) or created


def plan(
    obj: observations.ObservedObject,
    *,
    snapshot: snapshots.Snapshot | None,
    now: float,
    retention: float,
) -> Plan:
    """What ``obj`` needs at ``now`` (see the module docstring); pure.

    ``snapshot`` is the scheduler's latest; without one, owners are left as they are.
    """
    info = _info(obj)
    current = typing.cast(
        custom_objects.ReservationStatus, {**obj.status}
    )  # a Reservation's, as observed
    status: custom_objects.ReservationStatus = {**current}
    found: list[tuple[str, str, str]] = []
    phase = str(status.get("phase") or resv.PENDING)
    # Lifetime: filled whatever the phase, since the sink may end a reservation (Succeeded)
    # before this controller has seen it once.
    ends = resv.deadline(info)
    expires_at = conditions.timestamp(ends) if ends is not None else None
    # Who it holds for, worded for the OWNER column (whatever the phase, as expiresAt).
    owner_selector = reservation_status.owner_selector(info.owners)
    if status.get("ownerSelector") != owner_selector:
        status["ownerSelector"] = owner_selector
    if status.get("expiresAt") != expires_at:
        if expires_at is None:
            status.pop("expiresAt", None)
        else:
            status["expiresAt"] = expires_at
    if info.terminal:
        gone_at = _ended_at(current, created=obj.created) + retention
        if now >= gone_at:
            return Plan(status=None, delete=True)
        owners = live_owners(info, status=current, snapshot=snapshot) if snapshot else None
        if owners is not None:
            listed, allocated = _owners_status(info, owners)
            status.update({"currentOwners": listed, "allocated": allocated})
        return Plan(status=status if status != current else None, wake_at=gone_at)
    # Validity.
    problem = info.invalid or resv.template_problem(info) or resv.owners_problem(info)
    if problem is not None:
        if _set_condition(status, _VALID, "False", "Invalid", problem, now=now):
            found.append((events.WARNING, "Invalid", problem))
    else:
        _set_condition(status, _VALID, "True", "Valid", "the reservation can be held", now=now)
    expired = resv.expiry(info, now=now)
    if expired is not None:
        status["phase"] = expired.phase
        reason, message = resv.EXPIRED_REASON, expired.message
        _set_condition(status, _READY, "False", reason, message, now=now)
        kind = events.WARNING if expired.phase == resv.FAILED else events.NORMAL
        found.append((kind, reason, message))
        return Plan(status=status, events=tuple(found), wake_at=now + retention)
    # Owners.
    if phase == resv.AVAILABLE and snapshot is not None:
        owners = live_owners(info, status=current, snapshot=snapshot)
        listed, allocated = _owners_status(info, owners)
        if listed or current.get("currentOwners"):
            status["currentOwners"] = listed
        if allocated or current.get("allocated"):
            status["allocated"] = allocated
        if info.allocate_once and owners:
            status["phase"] = resv.SUCCEEDED
            message = f"used by its owner {owners[0].name}"
            _set_condition(status, _READY, "False", "Succeeded", message, now=now)
            found.append((events.NORMAL, "Succeeded", message))
            return Plan(status=status, events=tuple(found), wake_at=now + retention)
    return Plan(status=status if status != current else None, events=tuple(found), wake_at=ends)


# Writing ------------------------------------------------------------


class ReservationController:
    """Plans every observed reservation and writes what differs; see the module docstring."""

    def __init__(
        self,
        api: clients.AsyncApiClient,
        *,
        objects: observed.ObservedObjects,
        board: Board,
        clock: clocks.Clock,
        recorder: events.EventRecorder | None = None,
        retention: float = DEFAULT_RETENTION_SECONDS,
        interval: float = 2.0,
        field_manager: str | None = None,
        fence: fencing.Fence | None = None,
    ) -> None:
        self._writer = writes.Writer(api, fence=fence, field_manager=field_manager)
        self._objects = objects
        self._board = board
        self._clock = clock
        self._recorder = recorder
        self._retention = retention
        self._interval = interval
        self._kicked = wakeups.Wakeup()
        self.writes = 0
        """Status writes the API server accepted."""
        self.deletions = 0
        self._planning = reporting.OncePerWindow(logger, what="planning reservation")
        """Reservations deleted after their retention."""

    def kick(self) -> None:
        """Ask for a pass soon (a cycle ended, Kopf saw a change)."""
        self._kicked.wake()

    async def run(self, stop: asyncio.Event) -> None:
        """Pass, then sleep until the next reservation is due or a kick, until ``stop``."""
        while not stop.is_set():
            self._kicked.clear()
            try:
                wake_at = await self.run_once()
            except Exception:
                logger.exception("reservation pass failed; retrying at the next one")
                wake_at = None
            timeout = self._interval
            if wake_at is not None:
                timeout = min(timeout, max(wake_at - self._clock.now(), 0.0))
            await self._kicked.sleep(stop=stop, timeout=timeout)

    async def run_once(self) -> float | None:
        """One pass over every observed reservation; the earliest time one is due next."""
        snapshot = self._board.snapshot()
        now = self._clock.now()
        wake_at: float | None = None
        for obj in self._objects.of_kind(KIND):
            try:
                planned = plan(obj, snapshot=snapshot, now=now, retention=self._retention)
            except Exception as exc:  # a bug one object triggers must not stop the others
                self._planning.report(f"{obj.namespace}/{obj.name}", exc, now=now)
                continue
            due = await self._carry_out(obj, planned, now=now, snapshot=snapshot)
            if due is not None:
                wake_at = due if wake_at is None else min(wake_at, due)
        return wake_at

    async def reconcile(self, obj: observations.ObservedObject) -> None:
        """Plan ``obj`` alone and write what differs (Kopf's change handler); raises what
        planning raised."""
        snapshot = self._board.snapshot()
        now = self._clock.now()
        planned = plan(obj, snapshot=snapshot, now=now, retention=self._retention)
        await self._carry_out(obj, planned, now=now, snapshot=snapshot)
        if planned.wake_at is not None:
            self.kick()  # the pass keeps the time it is due

    async def _carry_out(
        self,
        obj: observations.ObservedObject,
        planned: Plan,
        *,
        now: float,
        snapshot: snapshots.Snapshot | None,
    ) -> float | None:
        if planned.delete:
            await self._delete(obj)
            return None
        if planned.status is not None and await self._write(obj, now=now, snapshot=snapshot):
            self._tell(obj, planned.events)
        return planned.wake_at

    def _path(self, obj: observations.ObservedObject) -> str:
        return (
            f"/apis/{keys.API_VERSION}/namespaces/{obj.namespace}/"
            f"{reservation_api.PLURAL}/{obj.name}"
        )

    async def _write(
        self, obj: observations.ObservedObject, *, now: float, snapshot: snapshots.Snapshot | None
    ) -> bool:
        """Plan again on the object as the API has it now, and write that at its version (the
        write primitive reads again on a conflict)."""

        def change(live: custom_objects.Reservation) -> collections.abc.Mapping[str, object] | None:
            fresh = observations.observe(KIND, body=live, parse_time=wire.parse_time)
            if fresh is None or fresh.uid != obj.uid:
                return None  # another reservation of that name now
            planned = plan(fresh, snapshot=snapshot, now=now, retention=self._retention)
            if planned.status is None:
                return None
            # A merge patch of the difference: what left the status is written as null.
            difference = statuses.merge_patch(fresh.status, planned.status)
            return {"status": difference} if difference else None

        written = await self._writer.update(
            self._path(obj), change, subresource="status", what=f"reservation {obj.key}"
        )
        if written.outcome is not writes.Outcome.WRITTEN:
            return False  # unchanged, gone, or failed (the write primitive logged why)
        self.writes += 1
        return True

    async def _delete(self, obj: observations.ObservedObject) -> None:
        written = await self._writer.delete(
            self._path(obj), uid=obj.uid, what=f"reservation {obj.key}"
        )
        if written.outcome is not writes.Outcome.WRITTEN:
            return  # gone already, a new reservation of that name, or failed (logged)
        self.deletions += 1
        logger.info("deleted reservation %s, ended more than %ss ago", obj.key, self._retention)

    def _tell(
        self, obj: observations.ObservedObject, found: tuple[tuple[str, str, str], ...]
    ) -> None:
        if self._recorder is None:
            return
        ref = events.ObjectRef(
            KIND, obj.name, obj.namespace, obj.uid, keys.API_VERSION, obj.resource_version
        )
        for kind, reason, message in found:
            self._recorder.record(ref, type=kind, reason=reason, message=message)
