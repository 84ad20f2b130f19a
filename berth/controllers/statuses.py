"""The status writer: PodGroup and Queue statuses, batched, written only when they change.

After every scheduling cycle (:meth:`StatusWriter.kick`) and at least every ``interval``
seconds, one pass computes the status every observed PodGroup and Queue should have
(:func:`berth.controllers.podgroups.desired_status`, :func:`berth.controllers.queues.
desired_status`) from the scheduler's last snapshot and cycle result (the :class:`Board`),
compares it with the live status Kopf observed (:mod:`berth.controllers.observed`), and sends
one JSON merge patch to the ``status`` subresource of each object that differs, a bounded
number at a time. A pass coalesces everything that changed since the previous one, so a burst
of cycles costs one write per object. The Events a change is worth (placed, why it waits,
timed out, finished; a queue's tree becoming invalid) are recorded with it.

Runs on the operator's event loop and uses its API client; Kopf's handlers, on their own loop,
only observe.
"""

from __future__ import annotations

import asyncio
import collections
import collections.abc
import logging
import typing

from berth.api import keys
from berth.api import podgroups as podgroup_api
from berth.api import queues as queue_api
from berth.controllers import observed, podgroups, queues
from berth.kube import clients, errors, events, rest
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import snapshots
from berth.util import aiotasks, clocks

__all__ = ["Board", "StatusWriter", "merge_patch"]

logger = logging.getLogger(__name__)


class Board(typing.Protocol):
    """What the scheduler last saw and decided."""

    def snapshot(self) -> snapshots.Snapshot | None: ...

    def result(self) -> decisions.CycleResult | None: ...


def merge_patch(
    old: collections.abc.Mapping[str, typing.Any], new: collections.abc.Mapping[str, typing.Any]
) -> dict[str, typing.Any]:
    """The RFC 7386 merge patch turning ``old`` into ``new`` (empty when they are equal).

    Nested objects are diffed key by key; keys only ``old`` has become ``null``; lists and
    scalars that differ are replaced whole.
    """
    patch: dict[str, typing.Any] = {}
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


class StatusWriter:
    """Writes PodGroup and Queue statuses; see the module docstring."""

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
    ) -> None:
        self._api = api
        self._objects = objects
        self._board = board
        self._clock = clock
        self._recorder = recorder
        self._interval = interval
        self._limit = asyncio.Semaphore(concurrency)
        self._on_phases = on_podgroup_phases
        self._kicked = asyncio.Event()
        # key -> (the observed object the write was based on, the status written): until Kopf
        # observes the result, the same write is not sent again.
        self._written: dict[tuple[str, str], tuple[observed.ObservedObject, dict[str, typing.Any]]]
        self._written = {}
        self._failing = False
        self.writes = 0
        """Status patches the API server accepted."""
        self.passes = 0

    def kick(self) -> None:
        """Ask for a pass soon (a cycle ended)."""
        self._kicked.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Write statuses until ``stop`` is set."""
        while not stop.is_set():
            self._kicked.clear()
            try:
                await self.write_once()
            except Exception:
                logger.exception("status pass failed; retrying at the next one")
            if await self._wait(stop):
                return

    async def _wait(self, stop: asyncio.Event) -> bool:
        kicked = asyncio.ensure_future(self._kicked.wait())
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait(
                {kicked, stopping}, timeout=self._interval, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in (kicked, stopping):
                waiter.cancel()
            await asyncio.gather(kicked, stopping, return_exceptions=True)
        if not stop.is_set():
            # A kick right after a pass waits a little, so a burst of cycles is one pass.
            await aiotasks.sleep_or_stop(min(0.2, self._interval), stop=stop)
        return stop.is_set()

    async def write_once(self) -> int:
        """One pass over every observed object; the number of patches sent."""
        snapshot = self._board.snapshot()
        if snapshot is None:
            return 0
        result = self._board.result()
        now = self._clock.now()
        writes: list[collections.abc.Awaitable[None]] = []
        phases: collections.Counter[str] = collections.Counter()
        group_why = result.group_why if result is not None else {}
        places = podgroups.positions(result.waiting) if result is not None else {}
        for group in self._objects.of_kind(podgroups.KIND):
            desired = podgroups.desired_status(
                group,
                snapshot=snapshot,
                reason=group_why.get(group.key),
                now=now,
                position=places.get(group.key),
            )
            if desired is None:
                continue
            phases[str(desired["phase"])] += 1
            found = self._changed(group, desired)
            if found is not None:
                writes.append(
                    self._write(group, desired, found, explain=podgroups.transition_events)
                )
        summaries = result.queues if result is not None else {}
        usage = queues.usage_by_queue(snapshot) if not summaries else {}
        pods = queues.pods_by_queue(snapshot)
        for queue in self._objects.of_kind(queues.KIND):
            desired = queues.desired_status(
                queue,
                snapshot=snapshot,
                summary=summaries.get(queue.name),
                usage=usage,
                now=now,
                pods=pods,
            )
            found = self._changed(queue, desired)
            if found is not None:
                writes.append(self._write(queue, desired, found, explain=queues.transition_events))
        if self._on_phases is not None:
            self._on_phases(dict(phases))
        self.passes += 1
        if writes:
            await asyncio.gather(*writes)
        return len(writes)

    def _changed(
        self, obj: observed.ObservedObject, desired: dict[str, typing.Any]
    ) -> dict[str, typing.Any] | None:
        """The patch ``obj`` needs, or None (up to date, or the same write is in flight)."""
        patch = merge_patch(obj.status, desired)
        if not patch:
            self._written.pop((obj.kind, obj.key), None)
            return None
        previous = self._written.get((obj.kind, obj.key))
        if previous is not None and previous[0] is obj and previous[1] == desired:
            return None  # written already; Kopf has not observed the result yet
        return patch

    async def _write(
        self,
        obj: observed.ObservedObject,
        desired: dict[str, typing.Any],
        patch: dict[str, typing.Any],
        *,
        explain: collections.abc.Callable[
            [collections.abc.Mapping[str, typing.Any], collections.abc.Mapping[str, typing.Any]],
            list[tuple[str, str, str]],
        ],
    ) -> None:
        plural = podgroup_api.PLURAL if obj.kind == podgroups.KIND else queue_api.PLURAL
        where = f"namespaces/{obj.namespace}/" if obj.namespace else ""
        path = f"/apis/{keys.API_VERSION}/{where}{plural}/{obj.name}/status"
        async with self._limit:
            try:
                await rest.request(
                    self._api,
                    method="PATCH",
                    path=path,
                    body={"status": patch},
                    content_type=rest.MERGE_PATCH,
                    timeout=30.0,
                )
            except errors.NotFound:
                return  # deleted meanwhile
            except errors.KubeError as exc:
                if not self._failing:
                    logger.warning("cannot write the status of %s %s: %s", obj.kind, obj.key, exc)
                self._failing = True
                return
        if self._failing:
            logger.info("writing statuses works again")
        self._failing = False
        self.writes += 1
        self._written[(obj.kind, obj.key)] = (obj, desired)
        if self._recorder is not None:
            ref = events.ObjectRef(
                obj.kind, obj.name, obj.namespace, obj.uid, keys.API_VERSION, obj.resource_version
            )
            for kind, reason, message in explain(obj.status, desired):
                self._recorder.record(ref, type=kind, reason=reason, message=message)
