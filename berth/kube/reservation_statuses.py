"""The scheduler's writes to a Reservation's status, for the binder.

:class:`ReservationStatuses` turns the Reservation decisions of a cycle
(``SetReservationAvailable``, ``AllocateReservation``, ``EndReservation`` and a Reservation's
``Unschedulable``) into status changes: phase, node, allocatable; owners and allocated;
``Scheduled``/``Ready`` conditions. What the status becomes is
:func:`berth.kube.status_owners.reservation_status` (the one owner ``berth sim`` uses too);
each write goes through Berth's write primitive (:class:`berth.kube.writes.Writer`): it reads
the Reservation, computes its status and writes it back at the version read (a 409 reads again,
with backoff, a bounded number of times); an Event says what happened. An availability write never
revives a reservation that has ended already.

The binder (:class:`~berth.kube.decisions.ApiSink`) owns the queueing (one worker, so that a
cycle's changes to one Reservation land in order) and the bookkeeping of which reason was last
written; this module only writes. Failures are logged by the writer (throttled), never raised.
"""

from __future__ import annotations

import collections.abc
import logging
import typing

from berth.api import keys
from berth.kube import events, rest, status_owners, writes
from berth.scheduler.framework import decisions
from berth.util import clocks

__all__ = ["ReservationStatuses"]

logger = logging.getLogger(__name__)


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
        written = await self._apply(decision)
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
        written = await self._apply(decision)
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
        written = await self._apply(decision)
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
        written = await self._apply(decision)
        if written is None:
            return False
        self._event(
            written,
            type=events.WARNING,
            reason="FailedScheduling",
            message=decision.reason.message,
        )
        return True

    async def _apply(
        self, fact: status_owners.ReservationFact
    ) -> collections.abc.Mapping[str, typing.Any] | None:
        """Write the status :func:`~berth.kube.status_owners.reservation_status` gives."""
        if isinstance(fact, decisions.Unschedulable):
            namespace, _, name = fact.key.partition("/")
        else:
            namespace, name = fact.namespace, fact.name
        now = self._clock.now()
        return await self._update(
            namespace, name, lambda status: status_owners.reservation_status(status, fact, now=now)
        )

    async def _update(
        self,
        namespace: str,
        name: str,
        change: collections.abc.Callable[[dict[str, typing.Any]], dict[str, typing.Any]],
    ) -> collections.abc.Mapping[str, typing.Any] | None:
        """Read the Reservation, ``change`` its status, write it back at the version read
        (:meth:`berth.kube.writes.Writer.update`); the Reservation as written (None: gone, or
        it could not be written)."""
        path = f"/apis/{keys.API_VERSION}/namespaces/{namespace}/reservations/{name}"

        def patch(current: rest.Body) -> rest.Body | None:
            before = current.get("status")
            status = change(before if isinstance(before, dict) else {})
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
