"""PodGroup and Queue statuses, written by Berth's Kopf handlers, only when they change.

Kopf owns these kinds' statuses (docs/architecture.md, "Status owners"). :func:`register` adds,
per kind, a Kopf change handler (``podgroup-status``, ``queue-status``: on create and on a
change of the spec) and, on Kopf's startup, the kind's *cycle pass*: after a scheduling cycle
(:meth:`StatusWriter.kick`; at most one pass per :data:`PASS_SPACING`) and at least every
``interval`` seconds, one pass computes the
status every observed PodGroup and Queue should have from the scheduler's last snapshot and
cycle result (the :class:`Board`) with :func:`berth.status.cycles.desired` — the owners
:mod:`berth.status.podgroups` and :mod:`berth.status.queues`, which ``berth sim`` uses too —
compares it with the live status Kopf observed (:mod:`berth.controllers.observed`), and sends
one JSON merge patch to the ``status`` subresource of each object that differs, a bounded number at
a time. A change that only rewords an object's conditions (a starving gang's reason counts its
seconds) waits until :data:`~berth.status.conditions.MESSAGE_REFRESH` has passed since the object's
last write, as a pod's does, and then the newest words are written: a waiting group is not
rewritten, with an Event, after every cycle. A pass coalesces everything that changed since the
previous one, so a burst of cycles costs one write per object, and thousands of objects need no task
(nor finalizer) each, which a Kopf daemon or timer per object would. The Events a change is worth
(placed, why it waits, timed out, finished; a queue's tree becoming invalid) are recorded with it.

No handler runs on Kopf's *resume* of these kinds (a restart, a new leadership term): nothing
could be written then (no cycle has run yet), the pass writes every status after the first
cycle, and a resume handler per object would only make a new leader's Kopf handle every PodGroup
at once on the loop its Lease renewals share (docs/architecture.md).


Every write is sent through Berth's write primitive
(:class:`berth.kube.transport.writes.Writer`: the leader's fence checked before sending and by the
fenced API client at the socket, so nothing lands once the Lease may be another replica's; a 409
tried again, bounded; failures logged once per object per window) with the field manager
naming the handler (:data:`MANAGERS`: ``berth-kopf/podgroup-status``,
``berth-kopf/queue-status``), so an audit log shows who wrote it. A change handler that fails
says so on the object (the :data:`CONDITION_HANDLED` condition and a Warning Event, both
``HandlerFailed``) and Kopf retries it with its backoff, counting retries in its progress
annotation.
"""

from __future__ import annotations

import asyncio
import collections
import collections.abc
import contextlib
import dataclasses
import logging
import typing

import kopf

from berth.api import custom_objects, keys
from berth.api import podgroups as podgroup_api
from berth.api import queues as queue_api
from berth.controllers import observed
from berth.kube.transport import clients, errors, events, fencing, writes
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import snapshots, wire
from berth.status import conditions, cycles, observations, podgroups, queues, scale_up
from berth.util import aiotasks, clocks, reporting, wakeups

__all__ = [
    "CONDITION_HANDLED",
    "HANDLER_FAILED",
    "MANAGERS",
    "PASS_SPACING",
    "Board",
    "StatusWriter",
    "failure_message",
    "merge_patch",
    "register",
    "report_failure_event",
    "without_failure",
]

logger = logging.getLogger(__name__)

_Observed = observations.ObservedObject

MANAGERS: typing.Final[collections.abc.Mapping[str, str]] = {
    podgroups.KIND: "berth-kopf/podgroup-status",
    queues.KIND: "berth-kopf/queue-status",
}
"""The field manager (and Kopf handler id, after the slash) writing each kind's status."""
CONDITION_HANDLED = "StatusHandled"
"""Condition set False (reason ``HandlerFailed``) while a status handler keeps failing."""
HANDLER_FAILED = "HandlerFailed"
"""The reason of that condition and of the Warning Event saying so."""
RETRY_BACKOFF = 5.0
"""Seconds Kopf waits before retrying a failed status handler."""
PASS_SPACING = 1.0
"""Seconds at least between two passes: a pass reads the cycle's facts (every queue's pods,
each waiting group's place in its line, the parked backlog's reasons), which grow with the
standing backlog, and cycles run many times a second while pods stream in. Volcano writes
its PodGroups' statuses once per one-second scheduling period too."""


class Board(typing.Protocol):
    """What the scheduler last saw and decided."""

    def snapshot(self) -> snapshots.Snapshot | None: ...

    def result(self) -> decisions.CycleResult | None: ...


def merge_patch(
    old: collections.abc.Mapping[str, object], new: collections.abc.Mapping[str, object]
) -> dict[str, object]:
    """The RFC 7386 merge patch turning ``old`` into ``new`` (empty when they are equal).

    Nested objects are diffed key by key; keys only ``old`` has become ``null``; lists and
    scalars that differ are replaced whole.
    """
    patch: dict[str, object] = {}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, collections.abc.Mapping) and isinstance(
            before, collections.abc.Mapping
        ):
            nested = merge_patch(before, value)
            if nested:
                patch[key] = nested
        elif before != value or key not in old:
            patch[key] = value
    for key in old:
        if key not in new:
            patch[key] = None
    return patch


@dataclasses.dataclass(slots=True)
class _Computed:
    """An object's status as a pass computed it, and from what."""

    inputs: tuple[object, ...] | None  # cycles.inputs (None: not kept; computed every pass)
    desired: custom_objects.ObjectStatus | None
    settled: bool = False  # the observed status is this one: nothing to compare or write


class StatusWriter:
    """Writes PodGroup and Queue statuses for Kopf's handlers; see the module docstring."""

    def __init__(
        self,
        api: clients.AsyncApiClient,
        *,
        objects: observed.ObservedObjects,
        board: Board,
        clock: clocks.Clock,
        recorder: events.EventRecorder | None = None,
        interval: float = 2.0,
        concurrency: int = 8,
        on_podgroup_phases: collections.abc.Callable[[collections.abc.Mapping[str, int]], None]
        | None = None,
        fence: fencing.Fence | None = None,
        scale_ups: collections.abc.Callable[[], collections.abc.Mapping[str, scale_up.ScaleUp]]
        | None = None,
    ) -> None:
        # The write primitive, one per kind: each names its Kopf handler as field manager.
        self._writers = {
            kind: writes.Writer(api, fence=fence, field_manager=manager)
            for kind, manager in MANAGERS.items()
        }
        self._objects = objects
        self._board = board
        self._scale_ups = scale_ups  # what the autoscaler did per group (None: not watched)
        self._clock = clock
        self._recorder = recorder
        self._interval = interval
        self._concurrency = concurrency
        self._on_phases = on_podgroup_phases
        self._kicked = wakeups.Wakeup()
        self._limit: asyncio.Semaphore | None = None
        # (id(snapshot), id(result), the facts derived from them): derived once per cycle.
        self._facts: tuple[int, int, cycles.CycleFacts] | None = None
        # key -> (the observed object the write was based on, the status written): until Kopf
        # observes the result, the same write is not sent again.
        self._written: dict[tuple[str, str], tuple[_Observed, custom_objects.ObjectStatus]] = {}
        self._written_at: dict[tuple[str, str], float] = {}  # key -> when last written
        # key -> the status last computed and what it was computed from: equal inputs give it
        # again (cycles.inputs), so a pass computes only the objects a cycle changed.
        self._computed: dict[tuple[str, str], _Computed] = {}
        self._computing = reporting.OncePerWindow(logger, what="computing the status of")
        self.writes = 0
        """Status patches the API server accepted."""
        self.passes = 0

    def kick(self) -> None:
        """Ask for a pass soon (a cycle ended)."""
        self._kicked.wake()

    async def run(self, stop: asyncio.Event) -> None:
        """Write statuses until ``stop`` is set (started by Kopf: see :func:`register`)."""
        while not stop.is_set():
            self._kicked.clear()
            try:
                await self.write_once()
            except Exception:
                logger.exception("status pass failed; retrying at the next one")
            await self._kicked.sleep(stop=stop, timeout=self._interval)
            # A kick right after a pass waits, so a burst of cycles is one pass.
            if await wakeups.sleep_or_stop(min(PASS_SPACING, self._interval), stop=stop):
                return

    def _current(self) -> cycles.CycleFacts | None:
        """The last cycle's facts, derived once per cycle (not once per object)."""
        snapshot = self._board.snapshot()
        if snapshot is None:
            return None
        result = self._board.result()
        cached = self._facts
        if cached is not None and cached[0] == id(snapshot) and cached[1] == id(result):
            return cached[2]
        facts = cycles.facts_of(
            snapshot, result, scale_ups=self._scale_ups() if self._scale_ups else None
        )
        self._facts = (id(snapshot), id(result), facts)
        return facts

    def desired(
        self, obj: observations.ObservedObject, facts: cycles.CycleFacts, *, now: float
    ) -> custom_objects.ObjectStatus | None:
        """The status ``obj`` should have (None: none to write yet); a
        :data:`CONDITION_HANDLED` condition left by a failure goes (its handler works).

        While a write of ``obj`` is in flight (Kopf has not observed it yet), the status is
        derived from the one being written, not the stale one observed: a condition written a
        second ago keeps its ``lastTransitionTime``, so the same status is not sent again
        with a newer time on every pass until Kopf catches up."""
        previous = self._written.get((obj.kind, obj.key))
        if previous is not None and previous[0] is obj:
            obj = dataclasses.replace(obj, status=previous[1])
        return without_failure(cycles.desired(obj, facts, now=now))

    async def write_one(self, obj: observations.ObservedObject) -> bool:
        """Write ``obj``'s status if it differs (a Kopf change handler's work); whether a
        patch was sent. Raises what computing or sending it raised."""
        facts = self._current()
        if facts is None:
            return False
        desired = self.desired(obj, facts, now=self._clock.now())
        if desired is None:
            return False
        patch = self._changed(obj, desired)
        if patch is None:
            return False
        await self._write(obj, desired, patch, raising=True)
        return True

    async def write_once(self) -> int:
        """One pass over every observed object; the number of patches sent."""
        facts = self._current()
        if facts is None:
            return 0
        now = self._clock.now()
        writes: list[collections.abc.Awaitable[None]] = []
        phases: collections.Counter[str] = collections.Counter()
        kept: dict[tuple[str, str], _Computed] = {}
        for obj in [*self._objects.of_kind(podgroups.KIND), *self._objects.of_kind(queues.KIND)]:
            key = (obj.kind, obj.key)
            inputs = cycles.inputs(obj, facts)
            computed = self._computed.get(key)
            if computed is None or inputs is None or computed.inputs != inputs:
                try:
                    computed = _Computed(inputs, self.desired(obj, facts, now=now))
                except Exception as exc:  # one object's bug must not stop the others' statuses
                    self._computing.report(f"{obj.kind} {obj.key}", exc, now=now)
                    continue
            kept[key] = computed
            desired = computed.desired
            if desired is None:
                continue
            if obj.kind == podgroups.KIND:
                phases[str(typing.cast(custom_objects.PodGroupStatus, desired)["phase"])] += 1
            if computed.settled:
                continue  # the same inputs gave the status it has
            found = self._changed(obj, desired)
            if found is None:
                computed.settled = obj.status == desired
            elif not self._rewords_too_soon(obj, desired, now=now):
                writes.append(self._write(obj, desired, found, raising=False))
        self._computed = kept  # deleted objects' go
        # A write older than the refresh holds nothing back (nor does a deleted object's).
        self._written_at = {
            key: at for key, at in self._written_at.items() if now < at + conditions.MESSAGE_REFRESH
        }
        if self._on_phases is not None:
            self._on_phases(dict(phases))
        self.passes += 1
        if writes:
            await asyncio.gather(*writes)
        return len(writes)

    def _changed(
        self, obj: observations.ObservedObject, desired: custom_objects.ObjectStatus
    ) -> dict[str, object] | None:
        """The patch ``obj`` needs, or None (up to date, or the same write is in flight)."""
        patch = merge_patch(obj.status, desired)
        if not patch:
            self._written.pop((obj.kind, obj.key), None)
            return None
        previous = self._written.get((obj.kind, obj.key))
        if previous is not None and previous[0] is obj and previous[1] == desired:
            return None  # written already; Kopf has not observed the result yet
        return patch

    def _rewords_too_soon(
        self,
        obj: observations.ObservedObject,
        desired: custom_objects.ObjectStatus,
        *,
        now: float,
    ) -> bool:
        """Whether ``desired`` only rewords the conditions of ``obj``'s status (the one being
        written, while Kopf has not observed it) within ``MESSAGE_REFRESH`` of its last write:
        the words wait for a later pass."""
        key = (obj.kind, obj.key)
        at = self._written_at.get(key)
        if at is None or now >= at + conditions.MESSAGE_REFRESH:
            return False
        previous = self._written.get(key)
        base = previous[1] if previous is not None and previous[0] is obj else obj.status
        return conditions.words_only(base, desired)

    async def _write(
        self,
        obj: observations.ObservedObject,
        desired: custom_objects.ObjectStatus,
        patch: dict[str, object],
        *,
        raising: bool,
    ) -> None:
        if self._limit is None:
            self._limit = asyncio.Semaphore(self._concurrency)
        async with self._limit:
            outcome = await self._send(obj, desired, patch)
        if outcome is writes.Outcome.GONE:
            return  # deleted meanwhile
        if outcome is not writes.Outcome.WRITTEN:
            # The write primitive logged why (throttled); a handler fails, so Kopf retries it.
            if raising:
                raise errors.KubeError(
                    f"the status of {obj.kind} {obj.key} was not written ({outcome.value})"
                )
            return
        self.writes += 1
        self._written[(obj.kind, obj.key)] = (obj, desired)
        self._written_at[(obj.kind, obj.key)] = self._clock.now()

    async def report_failure(self, obj: observations.ObservedObject, error: BaseException) -> None:
        """Say that ``obj``'s status handler failed: a Warning Event and the
        :data:`CONDITION_HANDLED` condition (False, ``HandlerFailed``), which the next status
        written drops again."""
        message = failure_message(MANAGERS[obj.kind], error)
        report_failure_event(self._recorder, obj, message)
        listed = conditions.updated(
            obj.status,
            kind=CONDITION_HANDLED,
            value="False",
            reason=HANDLER_FAILED,
            message=message,
            now=self._clock.now(),
        )
        patch = {"conditions": listed}
        await self._send(obj, None, patch)

    async def _send(
        self,
        obj: observations.ObservedObject,
        desired: custom_objects.ObjectStatus | None,
        patch: collections.abc.Mapping[str, object],
    ) -> writes.Outcome:
        """The status patch through the write primitive (fenced, named for its Kopf handler),
        and the Events the change is worth once it is written."""
        plural = podgroup_api.PLURAL if obj.kind == podgroups.KIND else queue_api.PLURAL
        where = f"namespaces/{obj.namespace}/" if obj.namespace else ""
        written = await self._writers[obj.kind].patch(
            f"/apis/{keys.API_VERSION}/{where}{plural}/{obj.name}/status",
            {"status": patch},
            what=f"the status of {obj.kind} {obj.key}",
        )
        if not written.ok or self._recorder is None or desired is None:
            return written.outcome
        explain = (
            podgroups.transition_events if obj.kind == podgroups.KIND else queues.transition_events
        )
        ref = events.ObjectRef(
            obj.kind, obj.name, obj.namespace, obj.uid, keys.API_VERSION, obj.resource_version
        )
        for kind, reason, message in explain(obj.status, desired):
            self._recorder.record(ref, type=kind, reason=reason, message=message)
        return written.outcome


def without_failure(
    status: custom_objects.ObjectStatus | None,
) -> custom_objects.ObjectStatus | None:
    """``status`` without the :data:`CONDITION_HANDLED` condition (a failure that is over)."""
    if status is None:
        return None
    listed = status.get("conditions")
    if isinstance(listed, list) and any(
        isinstance(c, dict) and c.get("type") == CONDITION_HANDLED for c in listed
    ):
        kept = [
            c for c in listed if not (isinstance(c, dict) and c.get("type") == CONDITION_HANDLED)
        ]
        return {**status, "conditions": kept}
    return status


def failure_message(manager: str, error: BaseException) -> str:
    """What a failed status handler's condition and Event say."""
    return f"{manager} failed, retrying with backoff: {type(error).__name__}: {error}"[:1000]


def report_failure_event(
    recorder: events.EventRecorder | None, obj: observations.ObservedObject, message: str
) -> None:
    """The Warning Event saying ``obj``'s status handler failed."""
    if recorder is None:
        return
    ref = events.ObjectRef(
        obj.kind, obj.name, obj.namespace, obj.uid, keys.API_VERSION, obj.resource_version
    )
    recorder.record(ref, type=events.WARNING, reason=HANDLER_FAILED, message=message)


def register(
    registry: kopf.OperatorRegistry, *, writer: StatusWriter, backoff: float = RETRY_BACKOFF
) -> None:
    """Add the status handlers of PodGroups and Queues and the cycle pass (between Kopf's
    startup and cleanup) to ``registry``; see the module docstring."""
    for kind, plural in ((podgroups.KIND, podgroup_api.PLURAL), (queues.KIND, queue_api.PLURAL)):
        _register_kind(registry, writer=writer, kind=kind, plural=plural, backoff=backoff)
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    @kopf.on.startup(id="status-pass-start", registry=registry)
    async def start_pass(**_: typing.Any) -> None:
        stop = asyncio.Event()
        running.append((stop, asyncio.create_task(writer.run(stop), name="kopf: status pass")))

    @kopf.on.cleanup(id="status-pass-stop", registry=registry)
    async def stop_pass(**_: typing.Any) -> None:
        while running:
            stop, task = running.pop()
            stop.set()
            await aiotasks.cancel_and_wait(task, timeout=5.0)


def _register_kind(
    registry: kopf.OperatorRegistry,
    *,
    writer: StatusWriter,
    kind: str,
    plural: str,
    backoff: float,
) -> None:
    handler_id = MANAGERS[kind].rpartition("/")[2]
    where = (keys.GROUP, keys.VERSION, plural)

    @kopf.on.create(*where, id=handler_id, backoff=backoff, registry=registry)
    @kopf.on.update(*where, id=handler_id, backoff=backoff, registry=registry)
    async def write_status(body: kopf.Body, **_: typing.Any) -> None:
        obj = observations.observe(kind, body=body, parse_time=wire.parse_time)
        if obj is None:
            return
        try:
            await writer.write_one(obj)
        except Exception as exc:
            with contextlib.suppress(Exception):
                await writer.report_failure(obj, exc)
            raise kopf.TemporaryError(f"writing the status failed: {exc}", delay=backoff) from exc
