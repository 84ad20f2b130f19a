"""The scheduler's writes to a Reservation's status, for the binder.

:class:`ReservationStatuses` turns the Reservation decisions of a cycle
(``SetReservationAvailable``, ``AllocateReservation``, ``EndReservation`` and a Reservation's
``Unschedulable``) into status changes: phase, node, allocatable; owners and allocated;
``Scheduled``/``Ready`` conditions. Each write goes through Berth's write primitive
(:class:`berth.kube.writes.Writer`): it reads the Reservation, changes its status and writes it
back at the version read (a 409 reads again, with backoff, a bounded number of times); an Event
says what happened. An availability write never revives a reservation that has ended already.

The binder (:class:`~berth.kube.decisions.ApiSink`) owns the queueing (one worker, so that a
cycle's changes to one Reservation land in order) and the bookkeeping of which reason was last
written; this module only writes. Failures are logged by the writer (throttled), never raised.
"""

from __future__ import annotations

import collections.abc
import copy
import logging
import typing

from berth.api import keys, resources
from berth.kube import conditions, events, rest, writes
from berth.scheduler.framework import decisions
from berth.util import clocks

__all__ = ["ReservationStatuses"]

logger = logging.getLogger(__name__)

_ENDED_PHASES = frozenset({"Succeeded", "Expired", "Failed"})


class ReservationStatuses:
    """Writes the scheduler's decisions into Reservations' statuses; see the module docstring.

    Every method returns whether the status was written (or already said so): False when the
    Reservation is gone or the write failed.
    """

    def __init__(
        self,
        writer: writes.Writer,
        *,
        clock: clocks.Clock,
        recorder: events.EventRecorder | None = None,
    ) -> None:
        self._writer = writer
        self._clock = clock
        self._recorder = recorder

    async def available(self, decision: decisions.SetReservationAvailable) -> bool:
        """The reservation holds ``decision.allocatable`` on ``decision.node``."""
        now = self._clock.now()

        def change(status: dict[str, typing.Any]) -> None:
            status.update(nodeName=decision.node, allocatable=decision.allocatable.to_api())
            _set_condition(
                status, "Scheduled", "True", "Scheduled", f"placed on {decision.node}", now=now
            )
            # An owner placed in the same cycle may have ended it already (its write can land
            # first): never turn a Succeeded reservation back into an Available one.
            if status.get("phase") not in _ENDED_PHASES:
                status["phase"] = "Available"
                _set_condition(
                    status, "Ready", "True", "Available", "holding capacity for its owners", now=now
                )

        written = await self._update(decision.namespace, decision.name, change)
        if written is None:
            return False
        held = ", ".join(f"{k}={v}" for k, v in decision.allocatable.to_api().items())
        self._event(
            written,
            type=events.NORMAL,
            reason="Scheduled",
            message=f"Reserved {held} on {decision.node}",
        )
        return True

    async def allocated(self, decision: decisions.AllocateReservation) -> bool:
        """An owner was placed into the reservation (which may end it: allocate-once)."""
        now = self._clock.now()

        def change(status: dict[str, typing.Any]) -> None:
            owners = [
                o
                for o in status.get("currentOwners") or []
                if isinstance(o, dict) and o.get("uid") != decision.owner_uid
            ]
            owners.append(
                {"namespace": decision.namespace, "name": decision.owner, "uid": decision.owner_uid}
            )
            try:
                allocated = resources.ResourceList.parse(status.get("allocated"))
            except Exception:
                allocated = resources.ResourceList()  # unreadable: start again from this owner
            status.update(currentOwners=owners, allocated=(allocated + decision.requests).to_api())
            if decision.succeeded:
                status["phase"] = "Succeeded"
                _set_condition(
                    status,
                    "Ready",
                    "False",
                    "Succeeded",
                    f"used by its owner {decision.owner}",
                    now=now,
                )

        written = await self._update(decision.namespace, decision.name, change)
        if written is None:
            return False
        self._event(
            written,
            type=events.NORMAL,
            reason="Allocated",
            message=f"Pod {decision.owner} placed into the reservation",
        )
        return True

    async def ended(self, decision: decisions.EndReservation) -> bool:
        """The reservation ended (``decision.phase``) and holds nothing any more."""
        now = self._clock.now()

        def change(status: dict[str, typing.Any]) -> None:
            status["phase"] = decision.phase
            _set_condition(status, "Ready", "False", decision.reason, decision.message, now=now)

        written = await self._update(decision.namespace, decision.name, change)
        if written is None:
            return False
        self._event(
            written,
            type=events.WARNING if decision.phase == "Failed" else events.NORMAL,
            reason=decision.reason,
            message=decision.message,
        )
        return True

    async def unschedulable(self, decision: decisions.Unschedulable) -> bool:
        """The reservation could not be placed: its ``Scheduled`` condition says why."""
        namespace, _, name = decision.key.partition("/")
        now = self._clock.now()

        def change(status: dict[str, typing.Any]) -> None:
            _set_condition(status, "Scheduled", "False", "Unschedulable", decision.reason, now=now)

        written = await self._update(namespace, name, change)
        if written is None:
            return False
        self._event(
            written,
            type=events.WARNING,
            reason="FailedScheduling",
            message=decision.reason,
        )
        return True

    async def _update(
        self,
        namespace: str,
        name: str,
        change: collections.abc.Callable[[dict[str, typing.Any]], None],
    ) -> collections.abc.Mapping[str, typing.Any] | None:
        """Read the Reservation, ``change`` its status, write it back at the version read
        (:meth:`berth.kube.writes.Writer.update`); the Reservation as written (None: gone, or
        it could not be written)."""
        path = f"/apis/{keys.API_VERSION}/namespaces/{namespace}/reservations/{name}"

        def patch(current: rest.Body) -> rest.Body | None:
            before = current.get("status")
            status = copy.deepcopy(before) if isinstance(before, dict) else {}
            change(status)
            return None if status == before else {"status": status}

        written = await self._writer.update(
            path, patch, subresource="status", what=f"reservation {namespace}/{name}"
        )
        return written.object if written.ok else None

    def _event(
        self,
        reservation: collections.abc.Mapping[str, typing.Any],
        *,
        type: str,
        reason: str,
        message: str,
    ) -> None:
        if self._recorder is not None:
            meta = reservation.get("metadata") or {}
            ref = events.ObjectRef(
                "Reservation",
                str(meta.get("name") or ""),
                str(meta.get("namespace") or ""),
                str(meta.get("uid") or ""),
                keys.API_VERSION,
                str(meta.get("resourceVersion") or ""),
            )
            self._recorder.record(ref, type=type, reason=reason, message=message)


def _set_condition(
    status: dict[str, typing.Any], kind: str, value: str, reason: str, message: str, *, now: float
) -> None:
    """Set one condition in ``status``; the transition time moves only when ``value`` does."""
    status["conditions"] = conditions.updated(
        status, kind=kind, value=value, reason=reason, message=message, now=now
    )
