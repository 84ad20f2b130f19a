"""Reservation statuses, written by Berth's Kopf handler from the facts each cycle publishes.

The binder publishes every cycle's Reservation facts (placed, an owner allocated, ended, why it
cannot be placed) into :class:`~berth.kube.reservations.reservation_statuses.ReservationFacts`;
:func:`register` adds the Kopf handlers that own the status from there
(docs/architecture.md, "Status owners"):

- ``reservation-status``, a Kopf change handler (on create, on resume after a restart or a
  new leadership term, on a change of the spec): writes the facts waiting for that
  Reservation and what its lifetime needs now (:meth:`berth.controllers.reservations.
  ReservationController.reconcile`: validity, ``expiresAt``, owners), and leaves Kopf's
  handling mark on it;
- on Kopf's startup, two passes: the *cycle pass*, woken whenever facts are offered (and at
  least every ``interval`` seconds), writes the facts waiting for every Reservation — one
  Reservation's facts in order, under a lock per Reservation shared with the change handler,
  a bounded number of Reservations at a time; and the *lifetime pass*
  (:class:`~berth.controllers.reservations.ReservationController`: expiry on time, owners,
  garbage collection), which sleeps until the next Reservation is due.

Each fact becomes the status :func:`berth.status.reservations.reservation_status` gives (the
owner ``berth sim`` uses too), read and written back at the version read by
:class:`~berth.kube.reservations.reservation_statuses.ReservationStatuses`, through the operator's
fenced client (:mod:`berth.kube.transport.fencing`), with the field manager :data:`MANAGER`. A
change handler that fails says so in the ``StatusHandled`` condition and a Warning Event, and Kopf
retries it with its backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import typing

import kopf

from berth.api import keys
from berth.api import reservations as reservation_api
from berth.controllers import reservations, statuses
from berth.kube.reservations import reservation_statuses as reservation_writes
from berth.kube.transport import clients, events, fencing, writes
from berth.scheduler.snapshot import wire
from berth.status import observations
from berth.util import aiotasks, clocks, keylocks, wakeups

__all__ = ["MANAGER", "ReservationStatusWriter", "register"]

logger = logging.getLogger(__name__)

MANAGER = "berth-kopf/reservation-status"
"""The field manager (and Kopf handler id, after the slash) writing Reservations' statuses."""


class ReservationStatusWriter:
    """Writes the facts waiting in ``facts``; see the module docstring."""

    def __init__(
        self,
        api: clients.AsyncApiClient,
        *,
        facts: reservation_writes.ReservationFacts,
        clock: clocks.Clock,
        recorder: events.EventRecorder | None = None,
        interval: float = 2.0,
        concurrency: int = 8,
        fence: fencing.Fence | None = None,
    ) -> None:
        self._facts = facts
        self._recorder = recorder
        self._statuses = reservation_writes.ReservationStatuses(
            writes.Writer(api, fence=fence, field_manager=MANAGER), clock=clock, recorder=recorder
        )
        self._interval = interval
        self._concurrency = concurrency
        self._kicked = wakeups.Wakeup()
        self._limit: asyncio.Semaphore | None = None
        self._locks = keylocks.KeyLocks()  # one Reservation's facts are written in order
        self.writes = 0
        """Facts written (or found written already)."""

    def kick(self) -> None:
        """Facts were offered: a pass soon."""
        self._kicked.wake()

    async def run(self, stop: asyncio.Event) -> None:
        """Write waiting facts until ``stop`` is set (started by Kopf: see :func:`register`)."""
        kicked = self._kicked
        self._facts.listener = self.kick
        try:
            while not stop.is_set():
                kicked.clear()
                try:
                    await self.write_once()
                except Exception:
                    logger.exception("reservation status pass failed; retrying at the next one")
                await kicked.sleep(stop=stop, timeout=self._interval)
        finally:
            self._facts.listener = None

    async def write_once(self) -> int:
        """Write the facts waiting for every Reservation; how many were written."""
        done = await asyncio.gather(*(self.write(key) for key in self._facts.waiting()))
        return sum(done)

    async def write(self, key: str) -> int:
        """Write the facts waiting for the Reservation ``key`` (``namespace/name``), in order;
        how many were written. Raises what writing raised (the facts not written are lost:
        the next cycle publishes the Reservation's state again)."""
        if self._limit is None:
            self._limit = asyncio.Semaphore(self._concurrency)
        written = 0
        async with self._locks.hold(key), self._limit:
            for fact in self._facts.take(key):
                if await self._statuses.apply(fact):
                    written += 1
        self.writes += written
        return written

    async def recovered(self, obj: observations.ObservedObject) -> None:
        """The handler works again: drop the ``StatusHandled`` condition a failure left."""
        listed = obj.status.get("conditions")
        if isinstance(listed, list) and any(
            isinstance(c, dict) and c.get("type") == statuses.CONDITION_HANDLED for c in listed
        ):
            await self._statuses.drop_condition(
                obj.namespace, obj.name, kind=statuses.CONDITION_HANDLED
            )

    async def report_failure(self, obj: observations.ObservedObject, error: BaseException) -> None:
        """Say that the Reservation's status handler failed: a Warning Event and its
        ``StatusHandled`` condition False (``HandlerFailed``)."""
        message = statuses.failure_message(MANAGER, error)
        statuses.report_failure_event(self._recorder, obj, message)
        await self._statuses.set_condition(
            obj.namespace,
            obj.name,
            kind=statuses.CONDITION_HANDLED,
            value="False",
            reason=statuses.HANDLER_FAILED,
            message=message,
        )


def register(
    registry: kopf.OperatorRegistry,
    *,
    writer: ReservationStatusWriter,
    controller: reservations.ReservationController | None = None,
    backoff: float = statuses.RETRY_BACKOFF,
) -> None:
    """Add the Reservation status handler and its passes (the lifetime pass with a
    ``controller``) to ``registry``."""
    where = (keys.GROUP, keys.VERSION, reservation_api.PLURAL)
    handler_id = MANAGER.rpartition("/")[2]

    @kopf.on.resume(*where, id=handler_id, backoff=backoff, registry=registry)
    @kopf.on.create(*where, id=handler_id, backoff=backoff, registry=registry)
    @kopf.on.update(*where, id=handler_id, backoff=backoff, registry=registry)
    async def write_status(body: kopf.Body, **_: typing.Any) -> None:
        obj = observations.observe(reservations.KIND, body=body, parse_time=wire.parse_time)
        if obj is None:
            return
        key = f"{obj.namespace}/{obj.name}"
        try:
            await writer.write(key)
            if controller is not None:
                await controller.reconcile(obj)
            await writer.recovered(obj)
        except Exception as exc:
            with contextlib.suppress(Exception):
                await writer.report_failure(obj, exc)
            raise kopf.TemporaryError(f"writing the status failed: {exc}", delay=backoff) from exc

    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    @kopf.on.startup(id="reservation-status-pass-start", registry=registry)
    async def start_pass(**_: typing.Any) -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(writer.run(stop), name="kopf: reservation status pass")
        running.append((stop, task))
        if controller is not None:
            stop = asyncio.Event()
            task = asyncio.create_task(controller.run(stop), name="kopf: reservation lifetimes")
            running.append((stop, task))

    @kopf.on.cleanup(id="reservation-status-pass-stop", registry=registry)
    async def stop_pass(**_: typing.Any) -> None:
        while running:
            stop, task = running.pop()
            stop.set()
            await aiotasks.cancel_and_wait(task, timeout=5.0)
