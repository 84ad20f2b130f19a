"""The scheduler's ``DecisionSink`` against the API server: bind, evict, annotate, explain.

:class:`ApiSink` receives each cycle's :class:`~berth.scheduler.framework.decisions.CycleResult`
on the event loop and must not block it, so :meth:`ApiSink.apply` only updates the cache and
queues work; worker tasks (:meth:`ApiSink.run`) do the requests, a bounded number at a time:

- ``BindPod``: the cache assumes the pod on its node at once (the next cycle already counts
  it there, on the GPU devices its binding records for a shared GPU), then
  ``POST pods/{name}/binding`` with the pod's UID as precondition. On success the pod gets a
  ``Scheduled`` Event. A 409 saying the pod is already on *this* node is a
  success (an earlier attempt landed although its answer was lost). A 404, a UID mismatch or
  a pod being deleted means the pod is gone: forget it, no retry. A 409 naming another node
  means somebody else bound it: the cache holds the pod on *that* node (the truth the watch
  will bring), so that no cycle tries it again meanwhile — a 409 is never a retry loop — and
  that node's usage counts it. An answer that may have been lost (a 5xx, a timeout, a broken
  connection) is reconciled first: the pod is read and, if bound, the binding is settled from
  that (success, or bound elsewhere) with no second request. Otherwise a timeout is retried
  (keeping the assumption) a few times, then given up like any other failure: the cache
  forgets the pod and it sits out a backoff (1 s doubling to 10 s, as kube-scheduler) before
  the scheduler may try it again, possibly elsewhere; after :data:`FAILURES_BEFORE_REASON`
  failures in a row a ``FailedBinding`` Event says why. The API server refuses a second
  binding of a bound pod, and a pod is only bound here from a ``BindPod`` — so a pod is never
  bound twice.
- A ``BindPod`` whose node has victims evicted in the same result (reclaim, preempt) waits,
  assumed in the cache, until those victims are gone from the cache (deleted, or Succeeded/
  Failed) before its binding is queued: posted at once, the kubelet would see the preemptor
  while the victims still run and fail it ``OutOf<resource>``. The wait is woken by the
  informers (:meth:`ApiSink.pod_released`), not polled, and bounded by ``eviction_wait``: then
  the pod is forgotten, sits out the backoff, is retried by a later cycle, and a
  ``FailedScheduling`` Event names the victims that stayed. Binds to other nodes never wait.
  Without a ``presence`` (who knows which pods still hold capacity) nothing waits.
- A ``BindPod`` listing claims not bound yet (``WaitForFirstConsumer`` claims the same cycle
  matched to a volume or annotated with the node) waits, assumed, until the claim informer shows
  them bound (:mod:`berth.kube.binder.claim_waits`, kube-scheduler's VolumeBinding PreBind), a
  ``WaitingForVolumes`` Event saying so; after ``claim_wait`` the pod is forgotten, sits out the
  backoff and a ``FailedScheduling`` Event names the claims. The informers wake the wait
  (:meth:`ApiSink.claim_changed`).
- A ``BindPod`` of a pod using ResourceClaims binds only once each lists the pod in
  ``status.reservedFor``: the cycle's ``ReserveClaim`` decisions for the pod (assumed in the
  cache at once) are written first, in order (:mod:`berth.kube.devices.claim_reservations`,
  kube-scheduler's DynamicResources PreBind) — after its victims are gone, before its
  PersistentVolumeClaims are waited for. A refused write (the claim was allocated by someone
  else meanwhile, replaced, deleted) fails the binding like any other failure (backoff, a
  ``FailedScheduling`` Event naming the claim); what was written for a pod whose binding fails
  is released (it leaves ``reservedFor``; the claim its write allocated is deallocated when
  nobody else reserves it).
- ``DeallocateClaim``: the claim's allocation cleared if nobody but the pod reserves it
  (:mod:`berth.kube.devices.claim_reservations`).
- ``SelectClaimNode``: the claim's ``volume.kubernetes.io/selected-node`` annotation (a merge
  patch); ``BindClaimVolume``: the PersistentVolume's ``spec.claimRef``, as kube-scheduler's
  volume binder pre-binds (kube-controller-manager completes the binding). The cache assumes
  the volume the claim's at once (no later cycle gives it to another claim), and the patch
  carries the ``resourceVersion`` the volume was chosen at, so it lands only on the volume as
  it was then: a 409 (or any refusal) means the volume may be another claim's now, so the
  assumption is forgotten and the pods waiting for the claim give up at once and back off, to
  be placed again on a fresh view (kube-scheduler's PreBind fails the pod the same way).
- ``EvictPod``: the Eviction API (``POST pods/{name}/eviction``, UID precondition), and a
  ``Preempted`` Event explaining why (``MaximumExecutionTimeExceeded`` when the decision's
  ``cause`` says so).
- ``AnnotatePod``: carried by the pod's Binding when the same result binds the pod (the API
  server copies a Binding's annotations onto the pod, in the same write as ``spec.nodeName``:
  the reservation a pod is charged to lands atomically with its binding, and scheduler mode
  needs no ``pods: patch`` for it); otherwise a merge patch of the pod.
- ``NominatePod``: a small status patch, only when the node changed.
- ``SetReservationAvailable``, ``AllocateReservation``, ``EndReservation``: published, in
  order, to :attr:`ApiSink.reservation_facts`, where Berth's Kopf handler for Reservations
  takes them and writes the status (:mod:`berth.controllers.reservation_statuses`); the sink
  writes no Reservation itself. An available reservation is assumed on its node in the cache
  at once, as a bound pod is.
- ``MarkPending``: a gang's (or a lone pod's) waiting pods get their ``PodScheduled=False``
  condition — reason ``Unschedulable`` only where more nodes would place them, else the code
  of what they wait for — and a ``FailedScheduling`` Event, the changed ones of a gang in one
  burst (:mod:`berth.kube.binder.pending_marks`; docs/autoscaling.md).
- ``Unschedulable``: for a Reservation, published like the facts above, only when the reason
  changed (every cycle repeats the reasons of everything still waiting); a pod's is carried
  by its gang's ``MarkPending`` ("not tried this cycle" is in neither: no news). Group reasons
  are kept in :attr:`ApiSink.last_result` for the PodGroup controller, which owns the
  PodGroup's status.

Failures are counted and logged once per kind of trouble, never raised into the loop.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import dataclasses
import logging
import re
import typing

import kubernetes_asyncio.client

from berth.api import keys
from berth.kube.binder import claim_waits, pending_marks, victim_waits
from berth.kube.devices import claim_reservations
from berth.kube.reservations import reservation_statuses
from berth.kube.transport import errors, events, pod_edits, rest, writes
from berth.scheduler.framework import decisions, reasons
from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import reservations as snapshot_reservations
from berth.scheduler.snapshot import snapshots, volumes
from berth.util import clocks

__all__ = ["FAILURES_BEFORE_REASON", "ApiSink", "BindOutcome", "BindingObserver", "PodPresence"]

logger = logging.getLogger(__name__)


class BindingObserver(typing.Protocol):
    """Where binding latencies go (the operator's metrics)."""

    def observe_binding(self, seconds: float, *, failure: str | None = None) -> None: ...

    def observe_e2e(self, seconds: float) -> None: ...


FAILURES_BEFORE_REASON = 5
"""Consecutive failed bindings of one pod after which a ``FailedBinding`` Event says why (the
backoff keeps retrying, capped at its maximum)."""
_ASSIGNED = re.compile(r'already assigned to node "([^"]+)"')

PodPresence = victim_waits.PodPresence
"""Which pods still hold capacity (kept here for callers of the binder)."""


class BindOutcome(typing.NamedTuple):
    """How one binding ended (for logs, tests and the bench)."""

    key: str
    node: str
    bound: bool
    failure: str | None  # conflict, not_found, gone, timeout, error, victims, claims,
    # resourceclaims, fenced


@dataclasses.dataclass
class _Backoff:
    attempts: int
    until: float


@dataclasses.dataclass(frozen=True)
class _Job:
    decision: decisions.Decision
    created: float  # the pod's creationTimestamp (BindPod), for the e2e latency
    ref: events.ObjectRef | None = None  # the pod its Events are about, as last seen
    annotations: collections.abc.Mapping[str, str] | None = None  # BindPod: sent in the Binding
    burst: pending_marks.Burst | None = None  # MarkPending: the pods whose condition changed
    reserving: claim_reservations.Plan | None = None  # BindPod: ReserveClaims written first


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
        observer: BindingObserver | None = None,
        last_snapshot: collections.abc.Callable[[], snapshots.Snapshot | None] | None = None,
        concurrency: int = 64,
        write_concurrency: int = 8,
        bind_timeout: float = 10.0,
        retries_on_timeout: int = 2,
        backoff: tuple[float, float] = (1.0, 10.0),
        on_bound: collections.abc.Callable[[BindOutcome], None] | None = None,
        presence: PodPresence | None = None,
        eviction_wait: float = 30.0,
        claim_wait: float = 600.0,
        writer: writes.Writer | None = None,
    ) -> None:
        self._api = api
        self._writer = writer or writes.Writer(api)
        self._cache = cache
        self._clock = clock
        self._recorder = recorder
        self._observer = observer
        self._last_snapshot = last_snapshot
        self._concurrency = concurrency
        self._write_concurrency = write_concurrency
        self._bind_timeout = bind_timeout
        self._retries = retries_on_timeout
        self._backoff = backoff
        self._on_bound = on_bound
        """Told how every binding ended (the benchmark, tests)."""
        self.victims = victim_waits.VictimWaits(presence, timeout=eviction_wait)
        """Preemptors waiting for their victims; admission mode shares it (its ungating waits
        the same way), and the informers wake it through :meth:`pod_released`."""
        self.claims = claim_waits.ClaimWaits(self._claim_bound, timeout=claim_wait)
        """Bindings waiting for their PersistentVolumeClaims to be bound."""
        self.resource_claims = claim_reservations.ClaimReservations(
            cache=cache, writer=self._writer
        )
        """ResourceClaims reserved (and allocated) before their pods' bindings."""
        self._waiting: set[asyncio.Task[None]] = set()
        self._binds: asyncio.Queue[_Job] = asyncio.Queue()
        self._writes: asyncio.Queue[_Job] = asyncio.Queue()
        self._backoffs: dict[str, _Backoff] = {}
        self._binding: set[str] = set()  # pods with a binding queued, waiting or in flight
        self._gone: set[str] = set()  # of those, the pods deleted since (a subset: bounded)
        self.reservation_facts = reservation_statuses.ReservationFacts()
        """Each cycle's Reservation facts, for the Kopf handler that writes their statuses."""
        # (subject kind, key) -> the reason last published for a Reservation
        self._reasons: dict[tuple[str, str], reasons.Reason] = {}
        self.pending = pending_marks.PendingMarks(self._writer, clock=clock, recorder=recorder)
        """Why each waiting pod waits, written on the pod (a gang per burst)."""
        self._nominated: dict[str, str] = {}  # pod key -> the node last nominated
        self._failing: set[str] = set()  # kinds of failure already logged
        self.last_result: decisions.CycleResult | None = None
        """The last cycle's result (group reasons and queue summaries for the controllers)."""
        self._active = 0  # jobs being worked on
        self.bound = 0
        """Pods this sink bound (the API server confirmed)."""
        self.bind_failures = 0

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
                self._binds.put_nowait(_Job(decision, 0.0, ref))
            elif isinstance(decision, decisions.Unschedulable):
                self._unschedulable(decision)
            elif isinstance(decision, decisions.MarkPending):
                burst = self.pending.offer(
                    decision, ref=lambda key: _pod_ref(key, uid="", snapshot=snapshot)
                )
                if burst is not None:
                    self._writes.put_nowait(_Job(decision, 0.0, burst=burst))
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
                self._writes.put_nowait(_Job(decision, 0.0))
            elif isinstance(decision, decisions.ExceedExecutionTime):
                self._writes.put_nowait(_Job(decision, 0.0))
            elif isinstance(decision, decisions.NominatePod):
                if self._nominated.get(decision.key) != decision.node:
                    self._nominated[decision.key] = decision.node
                    self._writes.put_nowait(_Job(decision, 0.0))
            else:
                self._writes.put_nowait(_Job(decision, 0.0))
        for plan in plans.values():
            self.resource_claims.abandon(plan)  # no binding of that pod in the result

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
        job = _Job(decision, created, ref, annotations, reserving=reserving)
        staying = self.victims.staying(victims)
        if not staying:
            self._queue_bind(job)
            return
        self._hold(
            self._after_victims(job, victims=staying), name=f"binding {key} after its victims"
        )

    def _hold(
        self, wait: collections.abc.Coroutine[typing.Any, typing.Any, None], *, name: str
    ) -> None:
        task = asyncio.get_running_loop().create_task(wait, name=name)
        self._waiting.add(task)
        task.add_done_callback(self._waiting.discard)

    def _claim_bound(self, key: str) -> bool:
        claim = self._cache.claim(key)
        return claim is not None and claim.bound

    def _queue_bind(self, job: _Job) -> None:
        """Write ``job``'s ResourceClaim reservations, then queue its binding (now, or once
        the PersistentVolumeClaims it lists are bound)."""
        decision = job.decision
        assert isinstance(decision, decisions.BindPod)
        if job.reserving is not None or decision.resource_claims:
            self._hold(
                self._after_reservations(job), name=f"binding {decision.key} after its claims"
            )
            return
        self._queue_volumes(job)

    async def _after_reservations(self, job: _Job) -> None:
        """Reserve ``job``'s ResourceClaims, then go on to its binding; a refusal fails it."""
        decision = job.decision
        assert isinstance(decision, decisions.BindPod)
        why: str | None = None
        try:
            if job.reserving is not None:
                why = await self.resource_claims.reserve(job.reserving)
            if why is None:
                why = self._unreserved(decision)
                if why is not None and self.resource_claims.holds(decision.key):
                    await self.resource_claims.release(decision.key, pod_uid=decision.uid)
        except BaseException:
            self._cache.forget_pod(decision.key)
            raise
        if why is None:
            self._queue_volumes(job)
            return
        self._finished(decision.key)
        message = f"{why}; not binding to {decision.node} now, the pod will be tried again"
        self._event(
            job.ref or events.ObjectRef("Pod", decision.name, decision.namespace, decision.uid),
            type=events.WARNING,
            reason="FailedScheduling",
            message=message,
        )
        outcome = self._failed(decision, failure="resourceclaims", detail=why)
        if self._on_bound is not None:
            self._on_bound(outcome)

    def _unreserved(self, decision: decisions.BindPod) -> str | None:
        """Why not every ResourceClaim of the pod lists it in ``reservedFor`` (as the cache
        sees them, the writes just made assumed), None when all do."""
        for key in decision.resource_claims:
            claim = self._cache.resource_claim(key)
            if claim is None:
                return f"resourceclaim {key} was deleted"
            if not claim.reserved_for_pod(decision.uid):
                return f"resourceclaim {key} is not reserved for the pod"
        return None

    def _queue_volumes(self, job: _Job) -> None:
        """Queue ``job``'s binding now, or once the claims it lists are bound."""
        decision = job.decision
        assert isinstance(decision, decisions.BindPod)
        unbound = self.claims.unbound(decision.claims)
        if not unbound:
            self._binds.put_nowait(job)
            return
        self._event(
            job.ref or events.ObjectRef("Pod", decision.name, decision.namespace, decision.uid),
            type=events.NORMAL,
            reason="WaitingForVolumes",
            message=claim_waits.waiting_message(decision.node, unbound),
        )
        self._hold(
            self._after_claims(job, claims=unbound), name=f"binding {decision.key} after its claims"
        )

    async def _after_claims(self, job: _Job, *, claims: tuple[str, ...]) -> None:
        """Queue ``job``'s binding once ``claims`` are bound; give it up after the wait."""
        decision = job.decision
        assert isinstance(decision, decisions.BindPod)
        try:
            left = await self.claims.wait(
                decision.key, claims, abandoned=lambda: decision.key in self._gone
            )
        except BaseException:
            self._cache.forget_pod(decision.key)
            raise
        if left == ():
            self._binds.put_nowait(job)
            return
        self._finished(decision.key)
        await self._release_resource_claims(decision)
        if left is None:
            self._cache.forget_pod(decision.key)
            outcome = BindOutcome(decision.key, decision.node, False, "gone")
        elif isinstance(left, claim_waits.Refused):
            message = f"PersistentVolumeClaim {left.claim}: {left.why}; the pod will be tried again"
            self._event(
                events.ObjectRef("Pod", decision.name, decision.namespace, decision.uid),
                type=events.WARNING,
                reason="FailedScheduling",
                message=message,
            )
            outcome = self._failed(decision, failure="claims", detail=message)
        else:
            message = (
                f"PersistentVolumeClaims {', '.join(left)} were not bound after"
                f" {self.claims.timeout:g}s; not binding to {decision.node} now, the pod will be"
                " tried again"
            )
            self._event(
                events.ObjectRef("Pod", decision.name, decision.namespace, decision.uid),
                type=events.WARNING,
                reason="FailedScheduling",
                message=message,
            )
            outcome = self._failed(decision, failure="claims", detail=message)
        if self._on_bound is not None:
            self._on_bound(outcome)

    async def _release_resource_claims(self, decision: decisions.BindPod) -> None:
        """The binding failed: release the ResourceClaims reserved for it."""
        if self.resource_claims.holds(decision.key):
            await self.resource_claims.release(decision.key, pod_uid=decision.uid)

    def claim_changed(self, key: str) -> None:
        """A PersistentVolumeClaim changed or went (the informers): wake the bindings waiting
        for it."""
        self.claims.changed(key)

    async def _after_victims(
        self, job: _Job, *, victims: collections.abc.Sequence[decisions.EvictPod]
    ) -> None:
        """Queue ``job``'s binding once ``victims`` are gone; give it up after the wait."""
        decision = job.decision
        assert isinstance(decision, decisions.BindPod)
        try:
            waited = await self.victims.wait(
                [decision.key], victims, abandoned=lambda: decision.key in self._gone
            )
        except BaseException:
            self._cache.forget_pod(decision.key)  # stopped, or a bug: nothing will bind it
            if job.reserving is not None:
                self.resource_claims.abandon(job.reserving)
            raise
        outcome: BindOutcome | None = None
        if waited.clear:
            self._queue_bind(job)
            return
        self._finished(decision.key)
        if job.reserving is not None:
            self.resource_claims.abandon(job.reserving)
        if waited.abandoned:
            self._cache.forget_pod(decision.key)
            outcome = BindOutcome(decision.key, decision.node, False, "gone")
        else:
            outcome = self._victims_stayed(decision, waited.staying)
        if outcome is not None and self._on_bound is not None:
            self._on_bound(outcome)

    def _victims_stayed(
        self, decision: decisions.BindPod, staying: collections.abc.Sequence[decisions.EvictPod]
    ) -> BindOutcome:
        names = ", ".join(v.key for v in staying)
        message = self.victims.message(decision.node, staying, doing="binding")
        self._event(
            events.ObjectRef("Pod", decision.name, decision.namespace, decision.uid),
            type=events.WARNING,
            reason="FailedScheduling",
            message=message,
        )
        return self._failed(decision, failure="victims", detail=f"victims {names} stayed")

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
        return {key for key, entry in self._backoffs.items() if entry.until > now}

    def pod_removed(self, key: str) -> None:
        """The pod left the cluster: drop its retries and remembered writes."""
        if key in self._binding:
            self._gone.add(key)
        self._backoffs.pop(key, None)
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
        return queued + self._active + len(self._waiting)

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
            await stop.wait()
        finally:
            waiting = list(self._waiting)
            for task in [*workers, *waiting]:
                task.cancel()
            await asyncio.gather(*workers, *waiting, return_exceptions=True)

    async def drain(self) -> None:
        """Wait until every queued decision has been applied (tests, the bench), bindings
        waiting for victims included."""
        while self._waiting:
            await asyncio.gather(*self._waiting, return_exceptions=True)
        await self._binds.join()
        await self._writes.join()

    async def _work(self, queue: asyncio.Queue[_Job]) -> None:
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

    async def _do(self, job: _Job) -> None:
        decision = job.decision
        if isinstance(decision, decisions.BindPod):
            try:
                outcome = await self._bind(
                    decision, created=job.created, ref=job.ref, annotations=job.annotations
                )
            finally:
                self._finished(decision.key)
            if outcome.bound:
                self.resource_claims.bound(decision.key)
            else:
                await self._release_resource_claims(decision)
            if self._on_bound is not None:
                self._on_bound(outcome)
        elif isinstance(decision, decisions.EvictPod):
            await self._evict(decision, ref=job.ref)
        elif isinstance(decision, decisions.AnnotatePod):
            await self._patch(
                pod_edits.path(decision.key),
                {"metadata": {"annotations": dict(decision.annotations)}},
                what=f"annotate pod {decision.key}",
                content_type=rest.MERGE_PATCH,
            )
        elif isinstance(decision, decisions.SelectClaimNode):
            await self._patch(
                f"/api/v1/namespaces/{decision.namespace}/persistentvolumeclaims/{decision.name}",
                {"metadata": {"annotations": {volumes.SELECTED_NODE: decision.node}}},
                what=f"claim {decision.key} selected node",
                content_type=rest.MERGE_PATCH,
            )
        elif isinstance(decision, decisions.BindClaimVolume):
            await self._reserve_volume(decision)
        elif isinstance(decision, decisions.DeallocateClaim):
            await self.resource_claims.deallocate(decision)
        elif isinstance(decision, decisions.NominatePod):
            await self._patch(
                pod_edits.path(decision.key) + "/status",
                {"status": {"nominatedNodeName": decision.node}},
                what=f"nominate pod {decision.key}",
                content_type=rest.STRATEGIC_MERGE_PATCH,
            )
        elif isinstance(decision, decisions.MarkPending) and job.burst is not None:
            await self.pending.write(job.burst)
        elif isinstance(decision, decisions.ExceedExecutionTime):
            await self._exceed_execution_time(decision)

    # Binding -------------------------------------------------------------------------------
    async def _bind(
        self,
        decision: decisions.BindPod,
        *,
        created: float,
        ref: events.ObjectRef | None = None,
        annotations: collections.abc.Mapping[str, str] | None = None,
    ) -> BindOutcome:
        key = decision.key
        loop = asyncio.get_running_loop()
        body = pod_edits.binding(key, uid=decision.uid, node=decision.node, annotations=annotations)
        path = pod_edits.path(key) + "/binding"
        for attempt in range(1 + self._retries):
            if key in self._gone:
                self._cache.forget_pod(key)
                return BindOutcome(key, decision.node, False, "gone")
            started = loop.time()
            try:
                await rest.request(
                    self._api, method="POST", path=path, body=body, timeout=self._bind_timeout
                )
            except errors.TransportError as exc:
                self._observe(loop.time() - started, failure="timeout")
                landed = await self._landed(decision, created=created, ref=ref)
                if landed is not None:
                    return landed
                if attempt < self._retries:
                    # It may have landed: ask again for the same node (a 409 naming this node
                    # then confirms it); the cache keeps the pod where it was assumed.
                    await asyncio.sleep(self._backoff[0] / 4 * (attempt + 1))
                    continue
                return self._failed(decision, failure="timeout", detail=str(exc))
            except errors.APIError as exc:
                seconds = loop.time() - started
                if exc.status >= 500:
                    # The answer may be lost, not the binding: read the pod before deciding.
                    landed = await self._landed(decision, created=created, ref=ref)
                    if landed is not None:
                        self._observe(seconds, failure="error")
                        return landed
                return self._refused(decision, exc, seconds=seconds, created=created, ref=ref)
            except errors.NotLeader as exc:
                # Never sent: another replica may lead now. No retry, no backoff: whoever
                # leads places the pod from its own view.
                self._cache.forget_pod(key)
                self._log_failure("bind-fenced", f"not binding pod {key}: {exc}")
                return BindOutcome(key, decision.node, False, "fenced")
            self._observe(loop.time() - started, failure=None)
            return self._succeeded(decision, created=created, ref=ref)
        raise AssertionError("unreachable: the last attempt returns")  # pragma: no cover

    def _refused(
        self,
        decision: decisions.BindPod,
        exc: errors.APIError,
        *,
        seconds: float,
        created: float,
        ref: events.ObjectRef | None,
    ) -> BindOutcome:
        key = decision.key
        message = str(exc.body.get("message") or exc)
        if isinstance(exc, errors.Conflict) and f'assigned to node "{decision.node}"' in message:
            self._observe(seconds, failure=None)
            return self._succeeded(decision, created=created, ref=ref)
        if isinstance(exc, errors.NotFound) or (
            isinstance(exc, errors.Conflict)
            and ("Precondition failed" in message or "being deleted" in message)
        ):
            self._observe(seconds, failure="not_found")
            self._cache.forget_pod(key)
            self._backoffs.pop(key, None)
            logger.info("pod %s is gone; not binding it", key)
            return BindOutcome(key, decision.node, False, "gone")
        if isinstance(exc, errors.Conflict) and "already assigned" in message:
            self._observe(seconds, failure="conflict")
            found = _ASSIGNED.search(message)
            return self._bound_elsewhere(decision, found.group(1) if found else None, message)
        failure = "conflict" if isinstance(exc, errors.Conflict) else "error"
        self._observe(seconds, failure=failure)
        return self._failed(decision, failure=failure, detail=str(exc))

    async def _landed(
        self, decision: decisions.BindPod, *, created: float, ref: events.ObjectRef | None
    ) -> BindOutcome | None:
        """After an answer that may have been lost: the outcome if the pod is bound already
        (here: success; elsewhere: conflict), None if it is not, or cannot be read."""
        try:
            pod = await rest.request(
                self._api, method="GET", path=pod_edits.path(decision.key), timeout=10.0
            )
        except errors.KubeError:
            return None
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if meta.get("uid") != decision.uid:
            return None
        node = spec.get("nodeName")
        if not node:
            return None
        if node == decision.node:
            logger.info("binding of pod %s landed although its answer was lost", decision.key)
            return self._succeeded(decision, created=created, ref=ref)
        return self._bound_elsewhere(decision, str(node), f"bound to {node}")

    def _bound_elsewhere(
        self, decision: decisions.BindPod, node: str | None, message: str
    ) -> BindOutcome:
        """The pod is bound, not where this binding wanted it: hold it where it is (the truth
        the watch will bring), so that no cycle tries it again meanwhile — a 409 is never a
        retry loop — and its node's usage counts it."""
        key = decision.key
        self._backoffs.pop(key, None)
        if node is None:
            self._cache.forget_pod(key)
        else:
            with contextlib.suppress(KeyError):  # gone meanwhile
                self._cache.assume_pod(key, node=node)
        logger.warning("pod %s was bound by somebody else: %s", key, message)
        return BindOutcome(key, decision.node, False, "conflict")

    def _finished(self, key: str) -> None:
        self._binding.discard(key)
        self._gone.discard(key)

    def _succeeded(
        self, decision: decisions.BindPod, *, created: float, ref: events.ObjectRef | None = None
    ) -> BindOutcome:
        self.bound += 1
        self._backoffs.pop(decision.key, None)
        if self._observer is not None and created > 0:
            self._observer.observe_e2e(max(0.0, self._clock.now() - created))
        self._event(
            ref or events.ObjectRef("Pod", decision.name, decision.namespace, decision.uid),
            type=events.NORMAL,
            reason="Scheduled",
            message=f"Successfully assigned {decision.key} to {decision.node}",
        )
        return BindOutcome(decision.key, decision.node, True, None)

    def _failed(self, decision: decisions.BindPod, *, failure: str, detail: str) -> BindOutcome:
        key = decision.key
        self.bind_failures += 1
        self._cache.forget_pod(key)
        entry = self._backoffs.get(key)
        attempts = entry.attempts + 1 if entry is not None else 1
        delay = min(self._backoff[0] * 2 ** (attempts - 1), self._backoff[1])
        self._backoffs[key] = _Backoff(attempts, self._clock.now() + delay)
        self._log_failure(
            f"bind-{failure}",
            f"binding pod {key} to {decision.node} failed ({detail}); retrying in {delay:g}s",
        )
        if attempts == FAILURES_BEFORE_REASON:
            self._event(
                events.ObjectRef("Pod", decision.name, decision.namespace, decision.uid),
                type=events.WARNING,
                reason="FailedBinding",
                message=(
                    f"binding failed {attempts} times in a row (last: {detail}); still retrying "
                    f"every {self._backoff[1]:g}s at most"
                ),
            )
        return BindOutcome(key, decision.node, False, failure)

    def _observe(self, seconds: float, *, failure: str | None) -> None:
        if self._observer is not None:
            self._observer.observe_binding(seconds, failure=failure)

    # Other writes --------------------------------------------------------------------------
    async def _evict(
        self, decision: decisions.EvictPod, *, ref: events.ObjectRef | None = None
    ) -> None:
        body = pod_edits.eviction(decision.key, uid=decision.uid)
        path = pod_edits.path(decision.key) + "/eviction"
        try:
            await rest.request(self._api, method="POST", path=path, body=body, timeout=30.0)
        except errors.NotFound:
            return  # gone already: the eviction's purpose is served
        except errors.KubeError as exc:
            self._log_failure("evict", f"evicting pod {decision.key} failed: {exc}")
            return
        self._event(
            ref or events.ObjectRef("Pod", decision.name, decision.namespace, decision.uid),
            type=events.WARNING,
            # Why, as data: a maximum execution time passed, else preemption or reclaim.
            reason=decision.cause.value if decision.cause is not None else "Preempted",
            message=f"Evicted from {decision.node}: {decision.reason}",
        )

    async def _exceed_execution_time(self, decision: decisions.ExceedExecutionTime) -> None:
        """The group's Warning Event; for ``fail``, first the annotation that keeps it Failed
        (written before the Event, so an Event saying it failed is never without it)."""
        if decision.fail:
            path = (
                f"/apis/{keys.API_VERSION}/namespaces/{decision.namespace}/podgroups/"
                f"{decision.name}"
            )
            body = {
                "metadata": {
                    "annotations": {
                        keys.EXECUTION_TIME_EXCEEDED_ANNOTATION: decision.reason.message
                    }
                }
            }
            landed = await self._patch(
                path,
                body,
                what=f"mark pod group {decision.key} failed",
                content_type=rest.MERGE_PATCH,
            )
            if not landed:
                return
        self._event(
            events.ObjectRef(
                "PodGroup", decision.name, decision.namespace, decision.uid, keys.API_VERSION
            ),
            type=events.WARNING,
            reason=decision.reason.code.value,
            message=decision.reason.message,
        )

    async def _reserve_volume(self, decision: decisions.BindClaimVolume) -> None:
        """Write the volume's ``claimRef`` at the version it was chosen; on refusal, forget
        the assumption and end the waits for the claim (the pod is placed again)."""
        claim_ref = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": decision.namespace,
            "name": decision.name,
            "uid": decision.uid,
        }
        written = await self._writer.patch(
            f"/api/v1/persistentvolumes/{decision.volume}",
            {"metadata": {"resourceVersion": decision.version}, "spec": {"claimRef": claim_ref}},
            what=f"volume {decision.volume} for claim {decision.key}",
            content_type=rest.MERGE_PATCH,
            retry=False,  # decided on that version: sending it again cannot help
        )
        if written.outcome is writes.Outcome.WRITTEN:
            return
        self._cache.forget_volume(decision.volume, version=decision.version)
        why = {
            writes.Outcome.CONFLICTED: "it changed since it was chosen",
            writes.Outcome.GONE: "it is gone",
            writes.Outcome.FENCED: "this replica may not write for the leader",
        }.get(written.outcome, "the write failed")
        logger.info(
            "volume %s not reserved for claim %s (%s); its pod %s is placed again",
            decision.volume,
            decision.key,
            why,
            decision.pod,
        )
        self.claims.refuse(
            decision.key, f"persistentvolume {decision.volume} was not reserved for it: {why}"
        )

    async def _patch(
        self, path: str, body: dict[str, typing.Any], *, what: str, content_type: str
    ) -> bool:
        """One patch through the write primitive; whether it landed (gone, fenced or failed:
        False, already logged)."""
        written = await self._writer.patch(path, body, content_type=content_type, what=what)
        return written.outcome is writes.Outcome.WRITTEN

    def _event(self, ref: events.ObjectRef, *, type: str, reason: str, message: str) -> None:
        if self._recorder is not None:
            self._recorder.record(ref, type=type, reason=reason, message=message)

    def _log_failure(self, kind: str, message: str) -> None:
        # The first failure of a kind is a warning; repeats are debug (a flapping API server
        # must not flood the log with one line per pod).
        if kind not in self._failing:
            self._failing.add(kind)
            logger.warning("%s", message)
        else:
            logger.debug("%s", message)
