"""Admission mode: Berth decides, kube-scheduler binds — pending allocations over scheduling gates.

:class:`Admission` sits between the scheduling loop and the usual source and sink (the informers'
:class:`~berth.kube.informers.snapshots.CacheSource` and the binder
:class:`~berth.kube.binder.decisions.ApiSink`) and is both a ``SnapshotSource`` and a
``DecisionSink``:

- **The view.** A pod held by Berth's gate ``scheduling.berth.io/admission`` — and by no other
  gate: the others' owners go first — is offered to the session as a pending pod, whatever its
  ``schedulerName`` (the informers keep such pods in the cache through :meth:`observe_pod`).
  The session runs unchanged, so queues, gangs, reservations, reclaim and preemption, and the
  why-pending reasons of PodGroups, are those of scheduler mode.
- **Admitting.** A ``BindPod`` for such a pod becomes a *pending allocation* pod → node: the
  cache assumes the pod on the node at once (the next cycle counts the capacity as used); the
  pods the cycle admitted of one group are then pinned and ungated together, a gang whole or not
  at all, once the victims evicted from their nodes are gone (:mod:`berth.kube.admission.pinning`).
  kube-scheduler then binds. A pod that names Berth's own scheduler is ungated and bound by Berth
  (POST binding) instead.
- **Devices.** The session places a gated pod only where its ResourceClaims can be met, as any
  pod; kube-scheduler allocates them when it binds the pod, so the cycle's ``ReserveClaim``
  decisions for admitted pods are not written — the devices found are assumed in the cache
  for as long as the pending allocation lives (the next cycles count them taken), and forgotten
  when it ends unbound; once kube-scheduler's allocation shows in the claim, that is the word.
  A gated pod naming Berth's own scheduler and using claims is handed over to the binder
  (:mod:`berth.kube.admission.ungating`).
- **Watching.** Bound to the allocated node: done (the cache's assumption turns into the real
  thing). Bound elsewhere, reported ``Unschedulable`` by its scheduler, or still unbound
  ``bind_timeout`` seconds after the gate went: the allocation is *rejected* and the pod sent
  back to wait gated, the node remembered for it and its gang
  (:mod:`berth.kube.admission.rejecting`).
- **Restarts and mode switches.** The allocation lives in the pod (the annotations), so a new
  leader adopts ungated, unbound pods it admitted earlier (assumed on their node again, the
  timeout running from ``admitted-at``), and gated pods are simply pending. Both executors are
  always on — pods naming Berth's scheduler are bound by the inner sink in either mode — so a
  restart with the other ``--mode`` loses no pod: the mode decides what new pods look like
  (the webhook), not what happens to the ones already there.
- **Bad input.** A pod with the gate but neither group nor queue is not Berth's: the gate is
  removed with a Warning Event saying so (:mod:`berth.kube.admission.ungating`).

Why-pending reasons of pods held by the gate become Normal ``NotAdmitted`` Events, never a
``PodScheduled=False/Unschedulable`` condition (:mod:`berth.kube.admission.not_admitted`); what
they tell autoscalers instead is in docs/autoscaling.md.

This class is the thin asynchronous part of admission. What a pod's observation means, and
every transition of a pending allocation, is the pure state machine of
:mod:`berth.kube.admission.admission_states`; the pending allocations, mirrored in the cache, are
:mod:`berth.kube.admission.allocations`; the snapshot offered and the decisions sorted,
:mod:`berth.kube.admission.through_gate`; the requests, :mod:`berth.kube.admission.pod_requests`.
Everything but the requests runs on the event loop and never blocks: :meth:`Admission.apply` and
:meth:`Admission.observe_pod` record and queue; :meth:`Admission.run` does the requests.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import functools
import logging
import typing

import kubernetes_asyncio.client

from berth.api import core, keys
from berth.kube.admission import admission_states as states
from berth.kube.admission import (
    allocations,
    not_admitted,
    pinning,
    pod_requests,
    refusals,
    rejecting,
    rejections,
    through_gate,
    ungating,
)
from berth.kube.binder import victim_waits
from berth.kube.transport import events, writes
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import pods, snapshots, wire
from berth.util import clocks, wakeups

__all__ = ["Admission", "Sink", "Source"]

logger = logging.getLogger(__name__)

_GATE = keys.ADMISSION_GATE


class Source(typing.Protocol):
    """The snapshot source admission wraps (``CacheSource``)."""

    def snapshot(self) -> snapshots.Snapshot: ...


class Sink(typing.Protocol):
    """The decision sink admission wraps (``ApiSink``): it binds, evicts, annotates, explains."""

    def apply(self, result: decisions.CycleResult) -> None: ...

    def pod_removed(self, key: str) -> None: ...


class Admission:
    """``SnapshotSource`` and ``DecisionSink`` of admission mode; see the module docstring."""

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        cache: cluster_cache.ClusterCache,
        source: Source,
        sink: Sink,
        clock: clocks.Clock,
        scheduler_names: collections.abc.Collection[str] = (keys.DEFAULT_SCHEDULER_NAME,),
        recorder: events.EventRecorder | None = None,
        bind_timeout: float = 60.0,
        concurrency: int = 16,
        request_timeout: float = 30.0,
        victims: victim_waits.VictimWaits | None = None,
        writer: writes.Writer | None = None,
        before_pin: collections.abc.Callable[
            [collections.abc.Collection[str]], collections.abc.Awaitable[None]
        ]
        | None = None,
    ) -> None:
        self._cache = cache
        self._source = source
        self._sink = sink
        self._clock = clock
        self._ours = frozenset(scheduler_names)
        self._recorder = recorder
        self._bind_timeout = bind_timeout
        self._concurrency = concurrency
        self._objects: dict[str, core.Pod] = {}  # raw pods Berth may patch
        self._requests = pod_requests.PodRequests(
            api,
            writer=writer or writes.Writer(api, timeout=request_timeout),
            clock=clock,
            objects=self._objects,
            recorder=recorder,
            timeout=request_timeout,
        )
        self._gated: set[str] = set()  # pods held by Berth's gate (and maybe others)
        self._view: set[str] = set()  # pods the last snapshot offered through the gate
        # What the last snapshot offered through the gate, and how often that changed.
        self._offered: tuple[tuple[pods.PodInfo, ...], tuple[str, ...]] = ((), ())
        self._offer_changes = 0
        self._recreating: dict[str, wakeups.Wakeup] = {}  # pod key -> woken when the old one goes
        # Refused pods to send back later (no pod is deleted twice within the resend interval):
        # pod key -> (when, UID, node).
        self._due: dict[str, tuple[float, str, str]] = {}
        self._seen: snapshots.Snapshot | None = None  # the inner source's last snapshot
        # Pod key -> UID of the pods this process wrote the admitted-node marker on (any other
        # marker it sees was forged).
        self._pinned: dict[str, str] = {}
        self._jobs = asyncio.Queue[collections.abc.Callable[[], collections.abc.Awaitable[None]]]()
        self._active = 0
        self._ungating = ungating.Ungating(
            cache=cache, requests=self._requests, objects=self._objects, jobs=self._jobs
        )
        self.allocations = allocations.Allocations(cache)
        """Pending allocations by pod key."""
        self.rejections = rejections.Rejections()
        """kube-scheduler's refusals: the nodes avoided, the pods' backoff and send-backs."""
        self.not_admitted = not_admitted.NotAdmitted(
            rejections=self.rejections, requests=self._requests
        )
        """What gated pods were told of why they wait, and the groups' notes."""
        self._pinning = pinning.Pinning(
            allocations=self.allocations,
            requests=self._requests,
            move=self._move,
            clock=clock,
            objects=self._objects,
            pinned=self._pinned,
            victims=victims,
            before_pin=before_pin,
        )
        self._rejecting = rejecting.Rejecting(
            allocations=self.allocations,
            rejections=self.rejections,
            not_admitted=self.not_admitted,
            requests=self._requests,
            clock=clock,
            objects=self._objects,
            due=self._due,
            recreating=self._recreating,
            jobs=self._jobs,
            seen=lambda: self._seen,
            group_of=self._group_of,
            recorder=recorder,
            bind_timeout=bind_timeout,
        )

    @property
    def gate_bypasses(self) -> int:
        """Pods whose admission gate someone other than Berth removed (tests, metrics)."""
        return self._ungating.gate_bypasses

    @property
    def forged_markers(self) -> int:
        """Pods seen with an ``admitted-node`` marker Berth did not write (tests, metrics)."""
        return self._ungating.forged_markers

    @property
    def rejected(self) -> int:
        """Allocations rejected so far."""
        return self._rejecting.rejected

    @property
    def sent_back(self) -> int:
        """Refused pods deleted to send them back (evicted or recreated; tests, metrics)."""
        return self._rejecting.sent_back

    @property
    def through_gate(self) -> frozenset[str]:
        """The gated pods the last snapshot offered as pending (admission decides them; their
        capacity is asked for by :mod:`berth.kube.autoscaling.capacity_requests`)."""
        return frozenset(self._view)

    @property
    def pinned(self) -> dict[str, str]:
        """Pod key -> the node of its pending allocation (pinned or pinning, not bound yet):
        the node writer keeps such nodes from scale-down."""
        return {key: allocation.node for key, allocation in self.allocations.items()}

    # Informer side -----------------------------------------------------------------------
    def observe_pod(self, obj: core.Pod) -> bool:
        """Told every pod the informer sees (before it is cached); True keeps a pod of another
        scheduler in the cache: gated by Berth, or admitted by it. What the pod means is
        decided by :mod:`berth.kube.admission.admission_states`; this only records and acts."""
        key = states.unmarked_key(obj)  # None: the pod has a gate or the admitted-node marker
        if key and key not in self._gated and key not in self._due and key not in self.allocations:
            # None of admission's business: all the full reading below would do is forget it.
            self._ungating.bad.discard(key)
            self._objects.pop(key, None)
            return key in self._recreating
        seen = states.Observation.of(obj)
        key = seen.key
        allocation = self.allocations.get(key)
        event = (
            states.observed(seen, node=allocation.node, uid=allocation.uid, state=allocation.state)
            if allocation is not None
            else None
        )
        if allocation is not None and event is states.Event.RECREATED:
            # Another pod under the name: the old allocation is moot; judge the new pod.
            self._move(allocation, event)
            allocation, event = None, None
        holding = (
            states.classify(
                seen,
                was_held=key in self._gated,
                recreating=key in self._recreating or key in self._due,
                opted_in=self._cache.namespace_labels(seen.namespace).get(keys.ADMISSION_LABEL)
                == "enabled",
                admitted=bool(seen.uid) and self._pinned.get(key) == seen.uid,
            )
            if allocation is None
            else None
        )
        if holding is states.Holding.BYPASSED:
            self._ungating.gate_removed(key, obj)
        elif holding is states.Holding.FORGED:
            self._ungating.marker_forged(key, obj, uid=seen.uid, node=seen.admitted_node or "")
        if seen.held:
            self._gated.add(key)
            if not seen.belongs:
                # (A pod Berth may still group by its owners is judged by the snapshot: with
                # grouping on it waits for its group, with grouping off it is plain there.)
                self._ungating.bad.add(key)
        else:
            self._gated.discard(key)
            self._ungating.bad.discard(key)
        if seen.held or seen.admitted_node is not None or allocation is not None:
            self._objects[key] = obj
        else:
            self._objects.pop(key, None)
        if key in self._due and (seen.node is not None or seen.finished):
            del self._due[key]  # bound after all (the cause went), or ending: nothing to send
        if allocation is not None and event is not None:  # (no holding with an allocation)
            self._move(allocation, event, seen=seen)
        elif holding is states.Holding.ADOPT:
            assert seen.admitted_node is not None
            since = seen.admitted_at
            self.allocations.adopt(
                key,
                uid=seen.uid,
                node=seen.admitted_node,
                since=since if since is not None else self._clock.now(),
            )
            logger.info("adopted the pending allocation of pod %s on %s", key, seen.admitted_node)
        ours = seen.held or seen.admitted_node is not None or key in self.allocations
        return ours or key in self._recreating

    def _move(
        self,
        allocation: allocations.Allocation,
        event: states.Event,
        *,
        seen: states.Observation | None = None,
    ) -> None:
        """Apply ``event`` to ``allocation`` as :func:`~.admission_states.advance`
        says: its next state, or its end (bound: done; dropped: capacity released; rejected:
        :meth:`_reject`, ``seen`` being what the informer saw of the pod)."""
        if self.allocations.get(allocation.key) is not allocation:
            return  # ended already (a late answer for an allocation that is gone)
        moved = states.advance(allocation.state, event)
        if moved.state is not None:
            allocation.state = moved.state
        elif moved.ending is states.Ending.BOUND:
            self.allocations.bound(allocation.key)
            self.rejections.bound(allocation.key)
        elif moved.ending is states.Ending.DROPPED:
            self.allocations.drop(allocation)
        else:
            self._rejecting.reject(
                allocation, refusal=self._rejecting.refusal(allocation, event, seen)
            )

    def pod_removed(self, key: str) -> None:
        """The pod left the cluster (the informer's removal callback)."""
        self._pinned.pop(key, None)
        self._gated.discard(key)
        self._ungating.forget(key)
        self._objects.pop(key, None)
        self.not_admitted.forget(key)
        self._due.pop(key, None)
        allocation = self.allocations.get(key)
        if allocation is not None:
            self._move(allocation, states.Event.GONE)
        if key not in self._recreating:  # Berth's own recreation keeps the memory
            self.rejections.forget_pod(key)
        gone = self._recreating.get(key)
        if gone is not None:
            gone.wake()
        self._sink.pod_removed(key)

    # SnapshotSource ----------------------------------------------------------------------
    def snapshot(self) -> snapshots.Snapshot:
        """The inner source's snapshot, with pods held only by Berth's gate offered as pending."""
        self.allocations.assume_adopted()
        base = self._source.snapshot()
        self._seen = base
        # A node whose refusal's cause may have gone (a taint removed, a device freed, the node
        # changed) is tried again, as kube-scheduler's queueing hints requeue its pods.
        for forgot in self.rejections.forget_changed(
            functools.partial(refusals.mark, base), now=base.now
        ):
            logger.info("%s may go again where it was refused: the node changed", forgot)
        candidates = set(self._gated) | {p.key for p in base.gated if _GATE in p.scheduling_gates}
        admitted: list[pods.PodInfo] = []
        still_gated: list[pods.PodInfo] = []
        for key in sorted(candidates):
            info = base.pods.get(key)
            if (
                info is None
                or key in self.allocations
                or info.node_name is not None
                or info.terminal
                or info.deleting
                or _GATE not in info.scheduling_gates
            ):
                continue
            if info.plain:
                self._ungating.bad.add(key)
                continue
            if info.resource_claims and info.scheduler_name in self._ours:
                # Bound by Berth: its claims are written before its binding, which the binder
                # does for the pods it schedules (ungated, it is one).
                self._ungating.hand_over(key)
                continue
            if info.scheduling_gates == (_GATE,):
                retry = self.rejections.retry_at(key, group=info.pod_group, now=base.now)
                if retry is not None:
                    self.not_admitted.backing_off(info, until=retry)
                    continue  # stays gated (in base.gated) until its backoff ends
                offered = self.rejections.avoiding(info, now=base.now)
                admitted.append(dataclasses.replace(offered, scheduling_gates=()))
            elif key not in {p.key for p in base.gated}:
                still_gated.append(info)
        self._view = {p.key for p in admitted} | {p.key for p in still_gated}
        offering = (tuple(admitted), tuple(p.key for p in still_gated))
        if offering != self._offered:
            # Which gated pods are offered, and how, is admission's state, not the cache's:
            # parked work must see it change (an allocation given up, a rejection expired).
            self._offered = offering
            self._offer_changes += 1
        if base.changes is not None:
            base = base.but(changes=base.changes.plus_outside(self._offer_changes))
        return through_gate.offering(base, admitted=admitted, still_gated=still_gated)

    # DecisionSink ------------------------------------------------------------------------
    def apply(self, result: decisions.CycleResult) -> None:
        """Admit the gated pods ``result`` binds; hand everything else to the inner sink."""
        sorted_out = through_gate.sort_out(result, view=self._view, group_of=self._group_of)
        admits = sorted_out.admits
        for decision in sorted_out.unschedulable:
            self.not_admitted.explain(decision, seen=self._seen)
        for group_key in sorted(admits):
            self.not_admitted.notes.pop(group_key, None)
        group_why = self.not_admitted.group_why(result.group_why)
        self._sink.apply(
            dataclasses.replace(result, decisions=sorted_out.passed, group_why=group_why)
        )
        evicted = victim_waits.victims_by_node(result)
        for group_key, binds in sorted(admits.items()):
            self._start(group_key, binds, evicted=evicted)
        self.allocations.assume_devices(sorted_out.reserving)
        self._ungating.release_bad()
        self.check_timeouts()

    def _start(
        self,
        group_key: str,
        binds: list[decisions.BindPod],
        *,
        evicted: collections.abc.Mapping[str, tuple[decisions.EvictPod, ...]],
    ) -> None:
        """Record the pending allocations of one group's admitted pods and queue their release."""
        now = self._clock.now()
        accepted: list[decisions.BindPod] = []
        ours: set[str] = set()
        for bind in binds:
            group = self._group_of(bind.key)
            if not self.allocations.start(
                bind.key, uid=bind.uid, node=bind.node, group=group, now=now
            ):
                continue  # gone while the session ran
            self.not_admitted.forget(bind.key)
            obj = self._objects.get(bind.key)
            if obj is not None and wire.part(obj.get("spec")).get("schedulerName") in self._ours:
                ours.add(bind.key)
            accepted.append(bind)
        if accepted:
            nodes = sorted({bind.node for bind in accepted})
            victims = tuple(v for node in nodes for v in evicted.get(node, ()))
            admit = pinning.Batch(group_key, tuple(accepted), frozenset(ours), victims)
            self._jobs.put_nowait(lambda: self._pinning.admit(admit))

    def check_timeouts(self) -> None:
        """Reject allocations whose pod is still unbound ``bind_timeout`` after its gate went;
        send back the refused pods whose turn came."""
        now = self._clock.now()
        for allocation in self.allocations.overdue(now, timeout=self._bind_timeout):
            self._move(allocation, states.Event.BIND_TIMEOUT)
        self._rejecting.send_due(now)

    # Workers -------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Do the queued requests and check the bind timeout until ``stop`` is set."""
        workers = [
            asyncio.create_task(self._work(), name=f"admission worker {i}")
            for i in range(self._concurrency)
        ]
        try:
            tick = min(1.0, self._bind_timeout / 4)
            while not await wakeups.sleep_or_stop(tick, stop=stop):
                self.check_timeouts()
        finally:
            waiting = list(self._pinning.waiting)
            for task in [*workers, *waiting]:
                task.cancel()
            await asyncio.gather(*workers, *waiting, return_exceptions=True)

    async def drain(self) -> None:
        """Wait until every queued request is done (tests), batches waiting for victims
        included."""
        while True:
            await self._jobs.join()
            if not self._pinning.waiting:
                return
            # A job may have left a batch waiting, and the wait ends in requests of its own.
            await asyncio.gather(*self._pinning.waiting, return_exceptions=True)

    @property
    def in_flight(self) -> int:
        return self._jobs.qsize() + self._active + len(self._pinning.waiting)

    async def _work(self) -> None:
        while True:
            job = await self._jobs.get()
            self._active += 1
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("an admission request failed")
            finally:
                self._active -= 1
                self._jobs.task_done()

    def _group_of(self, key: str) -> str | None:
        """The pod's group key as the cache forms it (explicit group, or the queue's group of
        one); None when the pod is not known here."""
        obj = self._objects.get(key)
        return pods.pod_info(obj).pod_group if obj is not None else None
