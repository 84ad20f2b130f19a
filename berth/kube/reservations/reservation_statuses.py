"""A Reservation's status from the scheduler's facts: the facts' inbox and the writes.

:class:`ReservationFacts` is where the binder (:class:`~berth.kube.binder.decisions.ApiSink`)
publishes a cycle's Reservation facts, in order, per Reservation; Berth's Kopf handler for
Reservations (:mod:`berth.controllers.reservation_statuses`) takes them from there and has
them written. A newer ``Unschedulable`` replaces one not written yet (only the latest reason
matters). Both sides run on the operator's one event loop.

:class:`ReservationStatuses` turns the Reservation decisions of a cycle
(``SetReservationAvailable``, ``AllocateReservation``, ``EndReservation`` and a Reservation's
``Unschedulable``) into status changes: phase, node, allocatable; owners and allocated;
``Scheduled``/``Ready`` conditions. What the status becomes is
:func:`berth.status.reservations.reservation_status` (the one owner ``berth sim`` uses too);
each write goes through Berth's write primitive (:class:`berth.kube.transport.writes.Writer`): it
reads the Reservation, computes its status and writes it back at the version read (a 409 reads
again, with backoff, a bounded number of times); an Event says what happened. An availability write
never revives a reservation that has ended already. Writes carry the ``fieldManager`` of the writer
their caller gives (the Kopf handler's); failures are logged by the writer (throttled), never
raised.
"""

from __future__ import annotations

import collections.abc
import logging

from berth.api import custom_objects, keys, objects
from berth.kube.transport import events, writes
from berth.scheduler.framework import decisions
from berth.status import conditions
from berth.status import reservations as reservation_owner
from berth.util import clocks

__all__ = ["ReservationFacts", "ReservationStatuses", "key_of"]

logger = logging.getLogger(__name__)


def key_of(fact: reservation_owner.ReservationFact) -> str:
    """``namespace/name`` of the Reservation ``fact`` is about."""
    return fact.key


class ReservationFacts:
    """Reservation facts waiting to be written, in order per Reservation; see the module
    docstring. ``listener`` is called after every offer."""

    def __init__(self) -> None:
        self._pending: dict[str, list[reservation_owner.ReservationFact]] = {}
        self.listener: collections.abc.Callable[[], None] | None = None

    def offer(self, fact: reservation_owner.ReservationFact) -> None:
        key = key_of(fact)
        queued = self._pending.setdefault(key, [])
        if (
            queued
            and isinstance(fact, decisions.Unschedulable)
            and isinstance(queued[-1], decisions.Unschedulable)
        ):
            queued[-1] = fact  # the older reason was never written: only the latest counts
        else:
            queued.append(fact)
        listener = self.listener
        if listener is not None:
            listener()

    def waiting(self) -> list[str]:
        """Reservations with facts waiting."""
        return list(self._pending)

    def take(self, key: str) -> list[reservation_owner.ReservationFact]:
        """The facts waiting for ``key``, oldest first; they are no longer waiting."""
        return self._pending.pop(key, [])

    def __len__(self) -> int:
        return sum(len(facts) for facts in self._pending.values())


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

    async def apply(self, fact: reservation_owner.ReservationFact) -> bool:
        """Write what ``fact`` changes (the method of its kind below)."""
        if isinstance(fact, decisions.SetReservationAvailable):
            return await self.available(fact)
        if isinstance(fact, decisions.AllocateReservation):
            return await self.allocated(fact)
        if isinstance(fact, decisions.EndReservation):
            return await self.ended(fact)
        return await self.unschedulable(fact)

    async def drop_condition(self, namespace: str, name: str, *, kind: str) -> bool:
        """Remove the condition of type ``kind`` (a failure that is over), if it is there."""

        def change(status: custom_objects.ReservationStatus) -> custom_objects.ReservationStatus:
            listed = status.get("conditions")
            if not isinstance(listed, list):
                return status
            kept: list[objects.Condition] = [
                c for c in listed if not (isinstance(c, dict) and c.get("type") == kind)
            ]
            return {**status, "conditions": kept} if len(kept) != len(listed) else status

        return await self._update(namespace, name, change) is not None

    async def set_condition(
        self, namespace: str, name: str, *, kind: str, value: str, reason: str, message: str
    ) -> bool:
        """Set one condition of the Reservation's status (its handler failing, say)."""
        now = self._clock.now()

        def change(status: custom_objects.ReservationStatus) -> custom_objects.ReservationStatus:
            listed = conditions.updated(
                status, kind=kind, value=value, reason=reason, message=message, now=now
            )
            return {**status, "conditions": listed}

        return await self._update(namespace, name, change) is not None

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
        self, fact: reservation_owner.ReservationFact
    ) -> custom_objects.Reservation | None:
        """Write the status :func:`~berth.kube.reservation_owner.reservation_status` gives."""
        if isinstance(fact, decisions.Unschedulable):
            namespace, _, name = fact.key.partition("/")
        else:
            namespace, name = fact.namespace, fact.name
        now = self._clock.now()
        return await self._update(
            namespace,
            name,
            lambda status: reservation_owner.reservation_status(status, fact, now=now),
        )

    async def _update(
        self,
        namespace: str,
        name: str,
        change: collections.abc.Callable[
            [custom_objects.ReservationStatus], custom_objects.ReservationStatus
        ],
    ) -> custom_objects.Reservation | None:
        """Read the Reservation, ``change`` its status, write it back at the version read
        (:meth:`berth.kube.transport.writes.Writer.update`); the Reservation as written (None:
        gone, or it could not be written)."""
        path = f"/apis/{keys.API_VERSION}/namespaces/{namespace}/reservations/{name}"

        def patch(current: custom_objects.Reservation) -> custom_objects.Reservation | None:
            before = current.get("status")
            known: custom_objects.ReservationStatus = before if isinstance(before, dict) else {}
            status = change(known)
            return None if status == before else {"status": status}

        written = await self._writer.update(
            path, patch, subresource="status", what=f"reservation {namespace}/{name}"
        )
        # The API server answers the Reservation as written.
        return written.object if written.ok else None

    def _event(
        self,
        reservation: custom_objects.Reservation,
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
