"""The scheduler's ``DecisionSink`` against the API server: bind, evict, annotate, explain.

:class:`ApiSink` receives each cycle's :class:`~berth.scheduler.framework.decisions.CycleResult`
on the event loop and must not block it, so :meth:`ApiSink.apply` only updates the cache and
queues work; worker tasks (:meth:`ApiSink.run`) do the requests, a bounded number at a time:

- ``BindPod``: the cache assumes the pod on its node at once (the next cycle already counts
  it there, on the GPU devices its binding records for a shared GPU); the binding waits for
  what it needs (its victims gone, its ResourceClaims reserved, its PersistentVolumeClaims
  bound: :mod:`berth.kube.binder.prebind`), then ``POST pods/{name}/binding``
  (:mod:`berth.kube.binder.binding`: what each answer means, the backoff of failed ones,
  which the snapshot source asks through :meth:`ApiSink.holding`).
- ``AnnotatePod``: carried by the pod's Binding when the same result binds the pod (the API
  server copies a Binding's annotations onto the pod, in the same write as ``spec.nodeName``:
  the reservation a pod is charged to lands atomically with its binding, and scheduler mode
  needs no ``pods: patch`` for it); otherwise a merge patch of the pod.
- ``NominatePod``: a small status patch, only when the node changed.
- ``BindClaimVolume``: the cache assumes the volume the claim's at once (no later cycle gives it
  to another claim) before the write.
- ``SetReservationAvailable``, ``AllocateReservation``, ``EndReservation``: published, in
  order, to :attr:`ApiSink.reservation_facts`, where Berth's Kopf handler for Reservations
  takes them and writes the status (:mod:`berth.controllers.reservation_statuses`); the sink
  writes no Reservation itself. An available reservation is assumed on its node in the cache
  at once, as a bound pod is.
- ``MarkPending``: a gang's (or a lone pod's) waiting pods get their ``PodScheduled=False``
  condition — reason ``Unschedulable`` only where more nodes would place them, else the code
  of what they wait for — and a ``FailedScheduling`` Event, the changed ones of a gang in one
  burst (:mod:`berth.kube.binder.pending_marks`; docs/autoscaling.md). A gang the autoscaler
  cannot fit is written off its list (``AutoscalerCannotFit``) while
  :meth:`ApiSink.hold_pending` says it is held.
- ``Unschedulable``: for a Reservation, published like the facts above, only when the reason
  changed (every cycle repeats the reasons of everything still waiting); a pod's is carried
  by its gang's ``MarkPending`` ("not tried this cycle" is in neither: no news). Group reasons
  are kept in :attr:`ApiSink.last_result` for the PodGroup controller, which owns the
  PodGroup's status.
- The other writes (evictions, patches, a claim's volume, deallocations, a group past its
  maximum execution time): :mod:`berth.kube.binder.decision_writes`.

Failures are counted and logged once per kind of trouble, never raised into the loop.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import logging

import kubernetes_asyncio.client

from berth.kube.binder import binding, decision_writes, pending_marks, prebind, victim_waits
from berth.kube.devices import claim_reservations
from berth.kube.reservations import reservation_statuses
from berth.kube.transport import events, writes
from berth.scheduler.framework import decisions, reasons
from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import reservations as snapshot_reservations
from berth.scheduler.snapshot import snapshots
from berth.util import clocks, wakeups

__all__ = ["ApiSink"]

logger = logging.getLogger(__name__)


def _binding_annotations(result: decisions.CycleResult) -> dict[str, dict[str, str]]:
    """The annotations of each pod ``result`` both annotates and binds, merged in order."""
    bound = {d.key for d in result.decisions if isinstance(d, decisions.BindPod)}
    folded: dict[str, dict[str, str]] = {}
    for decision in result.decisions:
        if isinstance(decision, decisions.AnnotatePod) and decision.key in bound:
            folded.setdefault(decision.key, {}).update(decision.annotations)
    return folded


def _pod_ref(key: str, *, uid: str, snapshot: snapshots.Snapshot | None) -> events.ObjectRef:
    """The ``involvedObject`` of a pod's Events: uid and resourceVersion from the snapshot."""
    namespace, _, name = key.partition("/")
    pod = snapshot.pods.get(key) if snapshot is not None else None
    if pod is None:
        return events.ObjectRef("Pod", name, namespace, uid)
    return events.ObjectRef("Pod", name, namespace, pod.uid or uid, "v1", pod.resource_version)


class ApiSink:
    """``DecisionSink`` writing decisions to the API server; see the module docstring."""

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        cache: cluster_cache.ClusterCache,
        clock: clocks.Clock,
        recorder: events.EventRecorder | None = None,
        observer: binding.BindingObserver | None = None,
        last_snapshot: collections.abc.Callable[[], snapshots.Snapshot | None] | None = None,
        concurrency: int = 64,
        write_concurrency: int = 8,
        bind_timeout: float = 10.0,
        retries_on_timeout: int = 2,
        backoff: tuple[float, float] = (1.0, 10.0),
        on_bound: collections.abc.Callable[[binding.BindOutcome], None] | None = None,
        presence: victim_waits.PodPresence | None = None,
        eviction_wait: float = 30.0,
        claim_wait: float = 600.0,
        writer: writes.Writer | None = None,
    ) -> None:
        self._writer = writer or writes.Writer(api)
        self._cache = cache
        self._last_snapshot = last_snapshot
        self._concurrency = concurrency
        self._write_concurrency = write_concurrency
        self._on_bound = on_bound
        """Told how every binding ended (the benchmark, tests)."""
        self._binds: asyncio.Queue[prebind.Job] = asyncio.Queue()
        self._writes: asyncio.Queue[prebind.Job] = asyncio.Queue()
        self._binding: set[str] = set()  # pods with a binding queued, waiting or in flight
        self._gone: set[str] = set()  # of those, the pods deleted since (a subset: bounded)
        self._bindings = binding.Bindings(
            api,
            cache=cache,
            clock=clock,
            gone=self._gone.__contains__,
            recorder=recorder,
            observer=observer,
            bind_timeout=bind_timeout,
            retries_on_timeout=retries_on_timeout,
            backoff=backoff,
        )
        self.resource_claims = claim_reservations.ClaimReservations(
            cache=cache, writer=self._writer
        )
        """ResourceClaims reserved (and allocated) before their pods' bindings."""
        self._prebind = prebind.PreBind(
            cache=cache,
            bindings=self._bindings,
            resource_claims=self.resource_claims,
            ready=self._binds.put_nowait,
            finished=self._finished,
            gone=self._gone.__contains__,
            recorder=recorder,
            on_bound=on_bound,
            presence=presence,
            eviction_wait=eviction_wait,
            claim_wait=claim_wait,
        )
        self.victims = self._prebind.victims
        """Preemptors waiting for their victims; admission mode shares it (its ungating waits
        the same way), and the informers wake it through :meth:`pod_released`."""
        self.claims = self._prebind.claims
        """Bindings waiting for their PersistentVolumeClaims to be bound."""
        self.reservation_facts = reservation_statuses.ReservationFacts()
        """Each cycle's Reservation facts, for the Kopf handler that writes their statuses."""
        # (subject kind, key) -> the reason last published for a Reservation
        self._reasons: dict[tuple[str, str], reasons.Reason] = {}
        self.pending = pending_marks.PendingMarks(self._writer, clock=clock, recorder=recorder)
        """Why each waiting pod waits, written on the pod (a gang per burst)."""
        self._other_writes = decision_writes.DecisionWrites(
            api,
            writer=self._writer,
            cache=cache,
            claims=self.claims,
            resource_claims=self.resource_claims,
            pending=self.pending,
            recorder=recorder,
        )
        self._nominated: dict[str, str] = {}  # pod key -> the node last nominated
        self.last_result: decisions.CycleResult | None = None
        """The last cycle's result (group reasons and queue summaries for the controllers)."""
        self._active = 0  # jobs being worked on

    @property
    def bound(self) -> int:
        """Pods this sink bound (the API server confirmed)."""
        return self._bindings.bound

    @property
    def bind_failures(self) -> int:
        """Bindings this sink gave up (each then sits out its backoff)."""
        return self._bindings.failures

    # DecisionSink ---------------------------------------------------------------------------
    def apply(self, result: decisions.CycleResult) -> None:
        """Queue ``result``'s decisions (in order); assume bound pods in the cache at once."""
        self.last_result = result
        snapshot = self._last_snapshot() if self._last_snapshot is not None else None
        evicted = victim_waits.victims_by_node(result)
        folded = _binding_annotations(result)
        plans = self.resource_claims.plan(result)
        for decision in result.decisions:
            if isinstance(decision, decisions.BindPod):
                self._assume(
                    decision,
                    snapshot=snapshot,
                    victims=evicted.get(decision.node, ()),
                    annotations=folded.get(decision.key),
                    reserving=plans.pop(decision.key, None),
                )
            elif isinstance(decision, decisions.AnnotatePod) and decision.key in folded:
                pass  # sent with the pod's Binding
            elif isinstance(decision, decisions.ReserveClaim):
                pass  # written before its pod's binding (the plan)
            elif isinstance(decision, decisions.EvictPod):
                ref = _pod_ref(decision.key, uid=decision.uid, snapshot=snapshot)
                self._binds.put_nowait(prebind.Job(decision, 0.0, ref))
            elif isinstance(decision, decisions.Unschedulable):
                self._unschedulable(decision)
            elif isinstance(decision, decisions.MarkPending):
                burst = self.pending.offer(
                    decision, ref=lambda key: _pod_ref(key, uid="", snapshot=snapshot)
                )
                if burst is not None:
                    self._writes.put_nowait(prebind.Job(decision, 0.0, burst=burst))
            elif isinstance(
                decision,
                decisions.SetReservationAvailable
                | decisions.AllocateReservation
                | decisions.EndReservation,
            ):
                # Kopf's Reservation handler writes them, in order (the sink writes no status).
                self.reservation_facts.offer(decision)
                if isinstance(decision, decisions.SetReservationAvailable):
                    # Placed: a later reason to wait is news again.
                    self._reasons.pop((decisions.Subject.RESERVATION.value, decision.key), None)
                    self._assume_reservation(decision)
            elif isinstance(decision, decisions.BindClaimVolume):
                self.claims.choosing(decision.key)
                self._cache.assume_volume(
                    decision.volume, claim=decision.key, version=decision.version
                )
                self._writes.put_nowait(prebind.Job(decision, 0.0))
            elif isinstance(decision, decisions.ExceedExecutionTime):
                self._writes.put_nowait(prebind.Job(decision, 0.0))
            elif isinstance(decision, decisions.NominatePod):
                if self._nominated.get(decision.key) != decision.node:
                    self._nominated[decision.key] = decision.node
                    self._writes.put_nowait(prebind.Job(decision, 0.0))
            else:
                self._writes.put_nowait(prebind.Job(decision, 0.0))
        for plan in plans.values():
            self.resource_claims.abandon(plan)  # no binding of that pod in the result
        # Words held back while a pod's condition reason stayed: due now, parked or not.
        for burst in self.pending.due():
            mark = decisions.MarkPending(group=burst.group, pods=burst.pods)
            self._writes.put_nowait(prebind.Job(mark, 0.0, burst=burst))

    def hold_pending(self, held: collections.abc.Mapping[str, reasons.Reason]) -> None:
        """Keep the gangs of ``held`` off the autoscalers' list (gang key -> what their pods
        say instead; :class:`berth.status.scale_up.Holds`), and show the others again: the
        pods of each gang whose hold changed are rewritten at once, a gang per burst."""
        snapshot = self._last_snapshot() if self._last_snapshot is not None else None
        for burst in self.pending.hold(
            held, ref=lambda key: _pod_ref(key, uid="", snapshot=snapshot)
        ):
            mark = decisions.MarkPending(group=burst.group, pods=burst.pods)
            self._writes.put_nowait(prebind.Job(mark, 0.0, burst=burst))

    def _assume_reservation(self, decision: decisions.SetReservationAvailable) -> None:
        """Hold the reservation on its node at once, as a bound pod is assumed: the next cycle
        must not place it again before the status write lands (the watch then confirms it)."""
        with contextlib.suppress(KeyError):  # deleted while the session ran
            self._cache.assume_reservation(
                decision.key,
                node=decision.node,
                allocatable=decision.allocatable,
                devices=snapshot_reservations.devices_of(decision.devices),
            )

    def _assume(
        self,
        decision: decisions.BindPod,
        *,
        snapshot: snapshots.Snapshot | None,
        victims: collections.abc.Sequence[decisions.EvictPod],
        annotations: collections.abc.Mapping[str, str] | None = None,
        reserving: claim_reservations.Plan | None = None,
    ) -> None:
        key = decision.key
        self._gone.discard(key)
        try:
            self._cache.assume_pod(key, node=decision.node, annotations=annotations)
        except KeyError:
            if reserving is not None:
                self.resource_claims.abandon(reserving)
            return  # deleted while the session ran: nothing to bind
        self._binding.add(key)
        self.pending.forget(key)
        pod = snapshot.pods.get(key) if snapshot is not None else None
        created = pod.creation_timestamp if pod is not None else 0.0
        ref = _pod_ref(key, uid=decision.uid, snapshot=snapshot)
        job = prebind.Job(decision, created, ref, annotations, reserving=reserving)
        self._prebind.start(job, victims=victims)

    def claim_changed(self, key: str) -> None:
        """A PersistentVolumeClaim changed or went (the informers): wake the bindings waiting
        for it."""
        self.claims.changed(key)

    def _unschedulable(self, decision: decisions.Unschedulable) -> None:
        if decision.subject is decisions.Subject.GROUP:
            return  # the PodGroup controller owns the group's status (from last_result)
        subject = (decision.subject.value, decision.key)
        if decision.subject is decisions.Subject.RESERVATION:
            if self._reasons.get(subject) != decision.reason:
                self._reasons[subject] = decision.reason
                self.reservation_facts.offer(decision)
            return
        # A pod's condition and Event come from its gang's MarkPending (written together).

    @property
    def nominated(self) -> collections.abc.Mapping[str, str]:
        """Pod key -> the node last written as its ``nominatedNodeName`` (the node writer
        keeps such nodes from scale-down while the pod waits)."""
        return self._nominated

    # Backoffs (the snapshot source asks) ---------------------------------------------------
    def holding(self, now: float) -> collections.abc.Set[str]:
        """Pods whose last binding failed and whose backoff has not ended at ``now``."""
        return self._bindings.holding(now)

    def pod_removed(self, key: str) -> None:
        """The pod left the cluster: drop its retries and remembered writes."""
        if key in self._binding:
            self._gone.add(key)
        self._bindings.forget(key)
        self.pending.forget(key)
        self._nominated.pop(key, None)
        self.pod_released(key)

    def pod_released(self, key: str) -> None:
        """The pod stopped holding capacity (finished or gone): wake the bindings waiting on
        it as a victim, or waiting to bind it."""
        self.victims.released(key)
        self.claims.changed(key)

    @property
    def in_flight(self) -> int:
        """Requests queued or running."""
        queued = self._binds.qsize() + self._writes.qsize()
        return queued + self._active + len(self._prebind.waiting)

    # Workers -------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Work through queued decisions until ``stop`` is set."""
        workers = [
            asyncio.create_task(self._work(self._binds), name=f"binder {i}")
            for i in range(self._concurrency)
        ] + [
            asyncio.create_task(self._work(self._writes), name=f"status writer {i}")
            for i in range(self._write_concurrency)
        ]
        try:
            await wakeups.first_set(stop)
        finally:
            waiting = list(self._prebind.waiting)
            for task in [*workers, *waiting]:
                task.cancel()
            await asyncio.gather(*workers, *waiting, return_exceptions=True)

    async def drain(self) -> None:
        """Wait until every queued decision has been applied (tests, the bench), bindings
        waiting for victims included."""
        while self._prebind.waiting:
            await asyncio.gather(*self._prebind.waiting, return_exceptions=True)
        await self._binds.join()
        await self._writes.join()

    async def _work(self, queue: asyncio.Queue[prebind.Job]) -> None:
        while True:
            job = await queue.get()
            self._active += 1
            try:
                await self._do(job)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("applying %r failed", job.decision)
            finally:
                self._active -= 1
                queue.task_done()

    async def _do(self, job: prebind.Job) -> None:
        decision = job.decision
        if isinstance(decision, decisions.BindPod):
            try:
                outcome = await self._bindings.bind(
                    decision, created=job.created, ref=job.ref, annotations=job.annotations
                )
            finally:
                self._finished(decision.key)
            if outcome.bound:
                self.resource_claims.bound(decision.key)
            else:
                await self._prebind.release_resource_claims(decision)
            if self._on_bound is not None:
                self._on_bound(outcome)
        else:
            await self._other_writes.apply(decision, ref=job.ref, burst=job.burst)

    def _finished(self, key: str) -> None:
        self._binding.discard(key)
        self._gone.discard(key)
