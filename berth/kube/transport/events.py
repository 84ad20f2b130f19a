"""Kubernetes Events explaining Berth's decisions: one Event per object and reason, counted.

:class:`EventRecorder` posts ``core/v1`` Events (``kubectl get events``, ``kubectl describe``)
about pods (``Scheduled``, ``FailedScheduling`` with the why-pending reason, ``Preempted``),
PodGroups, Queues and Reservations, the way kube-scheduler's recorder does:

- ``involvedObject`` is complete (``apiVersion``, ``kind``, ``namespace``, ``name``, ``uid``,
  ``resourceVersion``): ``kubectl describe`` selects an object's Events by its uid;
- ``source.component``/``reportingComponent`` name the scheduler, ``reportingInstance`` the
  replica;
- repeats are aggregated, not posted again: an object has one Event per ``(type, reason)``
  (a *series*). The same reason again after ``repeat_seconds`` (or with a new message) counts
  as a repeat: the series' Event is patched with the new ``count``, ``lastTimestamp`` and
  message, so ``kubectl describe`` reads ``(x7 over 6m)``. The same reason and message again
  sooner is not counted at all (every cycle repeats the reason of everything still waiting);
- writes are rate-limited per object: a token bucket (``burst`` writes, then one per
  ``refill_seconds``). A repeat held back by it stays counted and is written with the next
  one let through.

Recording never blocks and never raises: :meth:`record` updates the series and queues the
write; worker tasks post it. Events are explanations, not state, so when the API server is slow
or the queue is full they are dropped (counted in :attr:`dropped`) rather than slowing down
binding. Everything runs on the operator's one event loop (Kopf's handlers record from it too).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import socket
import time

import kubernetes_asyncio.client

from berth.api import core
from berth.kube.transport import errors, rest
from berth.status import conditions
from berth.util import clocks, wakeups

__all__ = ["NORMAL", "WARNING", "EventRecorder", "ObjectRef"]

logger = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
_CLUSTER_EVENTS_NAMESPACE = "default"  # where Events about cluster-scoped objects (Queues) go
_MAX_MESSAGE = 1024  # the API server truncates longer messages anyway


@dataclasses.dataclass(frozen=True)
class ObjectRef:
    """The object an Event is about (its ``involvedObject``)."""

    kind: str
    name: str
    namespace: str = ""  # empty for cluster-scoped objects
    uid: str = ""
    api_version: str = "v1"
    resource_version: str = ""  # the version the Event speaks about

    @property
    def key(self) -> str:
        """What the limits and series are kept by: the uid (a recreated object of the same
        name starts afresh), else kind, namespace and name."""
        return self.uid or f"{self.kind}/{self.namespace}/{self.name}"

    def wire(self) -> core.ObjectReference:
        """The ``involvedObject`` of an Event."""
        out: core.ObjectReference = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
        }
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        if self.resource_version:
            out["resourceVersion"] = self.resource_version
        return out


@dataclasses.dataclass
class _Series:
    """One object's Event for one ``(type, reason)``, as it should read in the API."""

    ref: ObjectRef
    type: str
    reason: str
    message: str
    first: float
    last: float
    name: str  # the Event object's name
    count: int = 1
    posted: bool = False  # the Event object exists in the API
    written: tuple[int, str] | None = None  # (count, message) the API has
    busy: bool = False  # queued or being written by a worker

    def state(self) -> tuple[int, str]:
        return (self.count, self.message)


@dataclasses.dataclass
class _Object:
    tokens: float
    updated: float
    seen: float = 0.0  # when an Event about it was last recorded
    series: dict[tuple[str, str], _Series] = dataclasses.field(default_factory=dict)


class EventRecorder:
    """Posts and aggregates Events through ``api``; see the module docstring."""

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        clock: clocks.Clock,
        component: str = "berth-scheduler",
        instance: str = "",
        burst: int = 10,
        refill_seconds: float = 10.0,
        repeat_seconds: float = 60.0,
        queue_size: int = 10_000,
        workers: int = 4,
        max_objects: int = 50_000,
    ) -> None:
        self._api = api
        self._clock = clock
        self._component = component
        self._instance = instance or socket.gethostname()
        self._burst = burst
        self._refill = refill_seconds
        self._repeat = repeat_seconds
        self._workers = workers
        self._max_objects = max_objects
        self._objects: collections.OrderedDict[str, _Object] = collections.OrderedDict()
        self._queue: asyncio.Queue[_Series] = asyncio.Queue(maxsize=queue_size)
        self._running = False  # whether run() posts (a record before it is dropped)
        self.posted = 0
        """Event objects the API server created."""
        self.updated = 0
        """Repeats written into an existing Event (its count and lastTimestamp)."""
        self.dropped = 0
        """Writes not done: queue full, or the API server refused them."""
        self.suppressed = 0
        """Records not written now: a repeat too soon to count, or held by the rate limit."""
        self._failing = False
        self._last_name_ns = 0  # the time in the newest Event name given

    def record(self, ref: ObjectRef, *, type: str, reason: str, message: str) -> bool:
        """Count an Event about ``ref`` and queue its write unless a limit holds it back;
        True if a write was queued."""
        now = self._clock.now()
        message = message[:_MAX_MESSAGE]
        series = self._count(ref, type=type, reason=reason, message=message, now=now)
        if series is None or not self._admit(ref.key, now=now):
            self.suppressed += 1
            return False
        if not self._running:
            self.dropped += 1
            return False
        series.busy = True
        return self._enqueue(series)

    @property
    def repeat_seconds(self) -> float:
        """How long the same reason and message again is not counted as a repeat."""
        return self._repeat

    def series(self, ref: ObjectRef) -> list[tuple[str, str, int]]:
        """``(reason, message, count)`` of every series about ``ref`` (tests, debugging)."""
        held = self._objects.get(ref.key)
        return [(s.reason, s.message, s.count) for s in (held.series if held else {}).values()]

    def _count(
        self, ref: ObjectRef, *, type: str, reason: str, message: str, now: float
    ) -> _Series | None:
        """The series to write after counting this record, or None (nothing new to write)."""
        self._expire(now)
        held = self._objects.get(ref.key)
        if held is None:
            held = _Object(tokens=float(self._burst), updated=now)
            self._objects[ref.key] = held
            while len(self._objects) > self._max_objects:
                self._objects.popitem(last=False)  # the least recently seen object
        else:
            self._objects.move_to_end(ref.key)
        held.seen = now
        series = held.series.get((type, reason))
        if series is None:
            name = self._new_name(ref)
            series = _Series(ref, type, reason, message, first=now, last=now, name=name)
            held.series[(type, reason)] = series
        elif message != series.message or now - series.last >= self._repeat:
            series.count += 1
            series.last = now
            series.message = message
            series.ref = ref
        elif series.written == series.state() or series.busy:
            return None  # the same again, too soon to count
        if series.busy:
            return None  # the worker writing it picks up the change
        return series

    def _new_name(self, ref: ObjectRef) -> str:
        """A new Event's name: the object's, then the wall clock in nanoseconds in hex, as
        client-go's recorder names them (a random suffix cost a read of the kernel's random
        source per Event); strictly increasing here, so two Events never share one."""
        self._last_name_ns = max(time.time_ns(), self._last_name_ns + 1)
        return f"{ref.name}.{self._last_name_ns:x}"

    def _expire(self, now: float) -> None:
        """Forget objects idle long enough that a fresh start would decide the same (tokens
        refilled, no repeat within the window): the map holds only recently active objects,
        not every pod the scheduler ever placed. A later Event about one starts a new series."""
        idle = max(self._repeat, self._burst * self._refill)
        while self._objects:
            key, oldest = next(iter(self._objects.items()))
            if now - oldest.seen < idle or any(s.busy for s in oldest.series.values()):
                return
            del self._objects[key]

    @property
    def tracked(self) -> int:
        """Objects whose recent Events are remembered (bounded; tests, the soak)."""
        return len(self._objects)

    def _admit(self, key: str, *, now: float) -> bool:
        held = self._objects[key]
        held.tokens = min(float(self._burst), held.tokens + (now - held.updated) / self._refill)
        held.updated = now
        if held.tokens < 1:
            return False
        held.tokens -= 1
        return True

    def _enqueue(self, series: _Series) -> bool:
        try:
            self._queue.put_nowait(series)
        except asyncio.QueueFull:
            series.busy = False
            self.dropped += 1
            return False
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Post queued Events until ``stop`` is set (what is still queued then is dropped)."""
        self._running = True
        workers = [
            asyncio.create_task(self._work(), name=f"events: poster {i}")
            for i in range(self._workers)
        ]
        try:
            await wakeups.first_set(stop)
        finally:
            self._running = False
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _work(self) -> None:
        while True:
            series = await self._queue.get()
            try:
                await self._write(series)
            finally:
                self._queue.task_done()

    async def drain(self) -> None:
        """Wait until every queued Event has been posted or dropped (tests, demos)."""
        await self._queue.join()

    async def _write(self, series: _Series) -> None:
        """Bring ``series``' Event up to date: post it, or patch its count; again if it was
        counted meanwhile."""
        while True:
            state = series.state()
            if series.written == state:
                series.busy = False
                return
            ref, posted, last = series.ref, series.posted, series.last
            done = (
                await self._patch(series, ref=ref, state=state, last=last)
                if posted
                else await self._post(series, ref=ref, state=state, last=last)
            )
            if not done:
                series.busy = False
                return
            series.written = state

    async def _post(
        self, series: _Series, *, ref: ObjectRef, state: tuple[int, str], last: float
    ) -> bool:
        namespace = ref.namespace or _CLUSTER_EVENTS_NAMESPACE
        count, message = state
        body: core.Event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": series.name, "namespace": namespace},
            "involvedObject": ref.wire(),
            "reason": series.reason,
            "message": message,
            "type": series.type,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": conditions.timestamp(series.first),
            "lastTimestamp": conditions.timestamp(last),
            "count": count,
        }
        path = f"/api/v1/namespaces/{namespace}/events"
        if not await self._send("POST", path, body, content_type="application/json"):
            return False
        series.posted = True
        self.posted += 1
        return True

    async def _patch(
        self, series: _Series, *, ref: ObjectRef, state: tuple[int, str], last: float
    ) -> bool:
        namespace = ref.namespace or _CLUSTER_EVENTS_NAMESPACE
        count, message = state
        body: core.Event = {  # a merge patch: the fields that change
            "count": count,
            "message": message,
            "lastTimestamp": conditions.timestamp(last),
            "involvedObject": ref.wire(),
        }
        path = f"/api/v1/namespaces/{namespace}/events/{series.name}"
        try:
            sent = await self._send("PATCH", path, body, content_type=rest.MERGE_PATCH)
        except errors.NotFound:
            # Deleted (the API server's Event TTL, or somebody): a new object carries on.
            series.name = self._new_name(ref)
            return await self._post(series, ref=ref, state=state, last=last)
        if sent:
            self.updated += 1
        return sent

    async def _send(self, method: str, path: str, body: core.Event, *, content_type: str) -> bool:
        try:
            await rest.request(
                self._api,
                method=method,
                path=path,
                body=body,
                content_type=content_type,
                timeout=10.0,
            )
        except errors.NotFound:
            if method == "PATCH":
                raise
            self._refused(f"{method} {path}: not found")
            return False
        except errors.KubeError as exc:
            self._refused(str(exc))
            return False
        if self._failing:
            logger.info("posting Events works again")
        self._failing = False
        return True

    def _refused(self, why: str) -> None:
        self.dropped += 1
        if not self._failing:
            logger.warning("cannot post Events (dropping them until it works): %s", why)
        self._failing = True
