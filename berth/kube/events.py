"""Kubernetes Events explaining Berth's decisions, rate-limited per object.

:class:`EventRecorder` posts ``core/v1`` Events (``kubectl get events``, ``kubectl describe``)
about pods (``Scheduled``, ``FailedScheduling`` with the why-pending reason, ``Preempted``),
PodGroups and Reservations. Recording never blocks and never raises: :meth:`record` applies the
limits and queues the Event; worker tasks post it. Events are explanations, not state, so when
the API server is slow or the queue is full they are dropped (counted in :attr:`dropped`)
rather than slowing down binding.

Limits, per involved object: the same reason and message again within ``repeat_seconds`` is
suppressed (every cycle repeats the reasons of everything still waiting), and a token bucket
(``burst`` Events, then one per ``refill_seconds``) caps everything else — kube-scheduler's
EventCorrelator does the same job with aggregation. :meth:`record` may be called from any
thread (the Kopf controllers run on their own loop); the posting happens on the loop that runs
:meth:`run`.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import threading
import uuid

import kubernetes_asyncio.client

from berth.kube import conditions, errors, rest
from berth.util import clocks

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

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclasses.dataclass
class _Bucket:
    tokens: float
    updated: float
    recent: dict[tuple[str, str], float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class _Pending:
    ref: ObjectRef
    type: str
    reason: str
    message: str
    when: float


class EventRecorder:
    """Posts Events through ``api``; see the module docstring."""

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        clock: clocks.Clock,
        component: str = "berth-scheduler",
        instance: str = "",
        burst: int = 10,
        refill_seconds: float = 10.0,
        repeat_seconds: float = 300.0,
        queue_size: int = 10_000,
        workers: int = 4,
        max_objects: int = 50_000,
    ) -> None:
        self._api = api
        self._clock = clock
        self._component = component
        self._instance = instance
        self._burst = burst
        self._refill = refill_seconds
        self._repeat = repeat_seconds
        self._workers = workers
        self._max_objects = max_objects
        self._lock = threading.Lock()
        self._buckets: collections.OrderedDict[str, _Bucket] = collections.OrderedDict()
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(maxsize=queue_size)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = -1  # the thread running that loop
        self.posted = 0
        """Events the API server accepted."""
        self.dropped = 0
        """Events not posted: queue full, or the API server refused them."""
        self.suppressed = 0
        """Events held back by the per-object limits."""
        self._failing = False

    def record(self, ref: ObjectRef, *, type: str, reason: str, message: str) -> bool:
        """Queue an Event about ``ref`` unless a limit holds it back; True if queued."""
        now = self._clock.now()
        with self._lock:
            if not self._admit(ref, reason=reason, message=message, now=now):
                self.suppressed += 1
                return False
        pending = _Pending(ref, type, reason, message[:_MAX_MESSAGE], now)
        loop = self._loop
        if loop is None:
            self.dropped += 1
            return False
        if threading.get_ident() == self._loop_thread:
            return self._enqueue(pending)
        loop.call_soon_threadsafe(self._enqueue, pending)
        return True

    def _expire(self, now: float) -> None:
        """Forget objects idle long enough that a fresh bucket would decide the same (tokens
        refilled, no repeat within the window): the map holds only recently active objects,
        not every pod the scheduler ever placed."""
        idle = max(self._repeat, self._burst * self._refill)
        while self._buckets:
            key, oldest = next(iter(self._buckets.items()))
            if now - oldest.updated < idle:
                return
            del self._buckets[key]

    @property
    def tracked(self) -> int:
        """Objects whose recent Events are remembered (bounded; tests, the soak)."""
        return len(self._buckets)

    def _admit(self, ref: ObjectRef, *, reason: str, message: str, now: float) -> bool:
        bucket = self._buckets.get(ref.key)
        if bucket is None:
            bucket = _Bucket(tokens=float(self._burst), updated=now)
            self._buckets[ref.key] = bucket
            while len(self._buckets) > self._max_objects:
                self._buckets.popitem(last=False)  # the least recently seen object
        else:
            self._buckets.move_to_end(ref.key)
        self._expire(now)
        last = bucket.recent.get((reason, message))
        if last is not None and now - last < self._repeat:
            return False
        bucket.tokens = min(
            float(self._burst), bucket.tokens + (now - bucket.updated) / self._refill
        )
        bucket.updated = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        bucket.recent = {k: t for k, t in bucket.recent.items() if now - t < self._repeat}
        bucket.recent[(reason, message)] = now
        return True

    def _enqueue(self, pending: _Pending) -> bool:
        try:
            self._queue.put_nowait(pending)
        except asyncio.QueueFull:
            self.dropped += 1
            return False
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Post queued Events until ``stop`` is set (what is still queued then is dropped)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        workers = [
            asyncio.create_task(self._work(), name=f"events: poster {i}")
            for i in range(self._workers)
        ]
        try:
            await stop.wait()
        finally:
            self._loop = None
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _work(self) -> None:
        while True:
            pending = await self._queue.get()
            try:
                await self._post(pending)
            finally:
                self._queue.task_done()

    async def drain(self) -> None:
        """Wait until every queued Event has been posted or dropped (tests, demos)."""
        await self._queue.join()

    async def _post(self, pending: _Pending) -> None:
        ref = pending.ref
        namespace = ref.namespace or _CLUSTER_EVENTS_NAMESPACE
        stamp = conditions.timestamp(pending.when)
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{ref.name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {
                "apiVersion": ref.api_version,
                "kind": ref.kind,
                "name": ref.name,
                **({"namespace": ref.namespace} if ref.namespace else {}),
                **({"uid": ref.uid} if ref.uid else {}),
            },
            "reason": pending.reason,
            "message": pending.message,
            "type": pending.type,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            await rest.request(
                self._api,
                method="POST",
                path=f"/api/v1/namespaces/{namespace}/events",
                body=body,
                timeout=10.0,
            )
        except errors.KubeError as exc:
            self.dropped += 1
            if not self._failing:
                logger.warning("cannot post Events (dropping them until it works): %s", exc)
            self._failing = True
            return
        if self._failing:
            logger.info("posting Events works again")
        self._failing = False
        self.posted += 1
