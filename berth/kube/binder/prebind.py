"""What a binding waits for before it is sent, as kube-scheduler's PreBind plugins.

The binder (:class:`~berth.kube.binder.decisions.ApiSink`) assumes a ``BindPod``'s pod in the
cache and hands it to :meth:`PreBind.start`, which queues the binding (``ready``) once:

- the preemption victims evicted from its node in the same result are gone from the cache
  (deleted, or Succeeded/Failed): posted at once, the kubelet would see the preemptor while the
  victims still run and fail it ``OutOf<resource>``. The wait is woken by the informers
  (:meth:`~berth.kube.binder.decisions.ApiSink.pod_released`), not polled, and bounded by the
  eviction wait: then the pod is forgotten, sits out the backoff, is retried by a later cycle,
  and a ``FailedScheduling`` Event names the victims that stayed. Binds to other nodes never
  wait. Without a ``presence`` (who knows which pods still hold capacity) nothing waits;
- its ResourceClaims list the pod in ``status.reservedFor``: the cycle's ``ReserveClaim``
  decisions for the pod (assumed in the cache at once) are written first, in order
  (:mod:`berth.kube.devices.claim_reservations`, kube-scheduler's DynamicResources PreBind) —
  after its victims are gone, before its PersistentVolumeClaims are waited for. A refused write
  (the claim was allocated by someone else meanwhile, replaced, deleted) fails the binding like
  any other failure (backoff, a ``FailedScheduling`` Event naming the claim); what was written
  for a pod whose binding fails is released (it leaves ``reservedFor``; the claim its write
  allocated is deallocated when nobody else reserves it);
- the claims it lists that were not bound yet (``WaitForFirstConsumer`` claims the same cycle
  matched to a volume or annotated with the node) are bound, as the claim informer shows
  (:mod:`berth.kube.binder.claim_waits`, kube-scheduler's VolumeBinding PreBind), a
  ``WaitingForVolumes`` Event saying so; after the claim wait the pod is forgotten, sits out
  the backoff and a ``FailedScheduling`` Event names the claims.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import typing

from berth.kube.binder import binding, claim_waits, pending_marks, victim_waits
from berth.kube.devices import claim_reservations
from berth.kube.transport import events
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import cache as cluster_cache

__all__ = ["Job", "PreBind"]


@dataclasses.dataclass(frozen=True)
class Job:
    """One decision the binder has queued, with what its request needs."""

    decision: decisions.Decision
    created: float  # the pod's creationTimestamp (BindPod), for the e2e latency
    ref: events.ObjectRef | None = None  # the pod its Events are about, as last seen
    annotations: collections.abc.Mapping[str, str] | None = None  # BindPod: sent in the Binding
    burst: pending_marks.Burst | None = None  # MarkPending: the pods whose condition changed
    reserving: claim_reservations.Plan | None = None  # BindPod: ReserveClaims written first


class PreBind:
    """Holds bindings until what they need is in place; see the module docstring.

    ``ready`` queues a binding; ``finished`` and ``gone`` are the binder's record of the pods
    with a binding under way (``gone``: deleted since); ``on_bound`` hears how each given-up
    binding ended.
    """

    def __init__(
        self,
        *,
        cache: cluster_cache.ClusterCache,
        bindings: binding.Bindings,
        resource_claims: claim_reservations.ClaimReservations,
        ready: collections.abc.Callable[[Job], None],
        finished: collections.abc.Callable[[str], None],
        gone: collections.abc.Callable[[str], bool],
        recorder: events.EventRecorder | None = None,
        on_bound: collections.abc.Callable[[binding.BindOutcome], None] | None = None,
        presence: victim_waits.PodPresence | None = None,
        eviction_wait: float = 30.0,
        claim_wait: float = 600.0,
    ) -> None:
        self._cache = cache
        self._bindings = bindings
        self._ready = ready
        self._finished = finished
        self._gone = gone
        self._recorder = recorder
        self._on_bound = on_bound
        self.victims = victim_waits.VictimWaits(presence, timeout=eviction_wait)
        """Preemptors waiting for their victims."""
        self.claims = claim_waits.ClaimWaits(self._claim_bound, timeout=claim_wait)
        """Bindings waiting for their PersistentVolumeClaims to be bound."""
        self.resource_claims = resource_claims
        self.waiting: set[asyncio.Task[None]] = set()
        """The bindings held now."""

    def start(self, job: Job, *, victims: collections.abc.Sequence[decisions.EvictPod]) -> None:
        """Queue ``job``'s binding once ``victims`` (those evicted from its node) are gone, its
        ResourceClaims reserved and its PersistentVolumeClaims bound."""
        assert isinstance(job.decision, decisions.BindPod)
        staying = self.victims.staying(victims)
        if not staying:
            self._queue_bind(job)
            return
        self._hold(
            self._after_victims(job, victims=staying),
            name=f"binding {job.decision.key} after its victims",
        )

    def _hold(
        self, wait: collections.abc.Coroutine[typing.Any, typing.Any, None], *, name: str
    ) -> None:
        task = asyncio.get_running_loop().create_task(wait, name=name)
        self.waiting.add(task)
        task.add_done_callback(self.waiting.discard)

    def _claim_bound(self, key: str) -> bool:
        claim = self._cache.claim(key)
        return claim is not None and claim.bound

    def _queue_bind(self, job: Job) -> None:
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

    async def _after_reservations(self, job: Job) -> None:
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
        outcome = self._bindings.failed(decision, failure="resourceclaims", detail=why)
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

    def _queue_volumes(self, job: Job) -> None:
        """Queue ``job``'s binding now, or once the claims it lists are bound."""
        decision = job.decision
        assert isinstance(decision, decisions.BindPod)
        unbound = self.claims.unbound(decision.claims)
        if not unbound:
            self._ready(job)
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

    async def _after_claims(self, job: Job, *, claims: tuple[str, ...]) -> None:
        """Queue ``job``'s binding once ``claims`` are bound; give it up after the wait."""
        decision = job.decision
        assert isinstance(decision, decisions.BindPod)
        try:
            left = await self.claims.wait(
                decision.key, claims, abandoned=lambda: self._gone(decision.key)
            )
        except BaseException:
            self._cache.forget_pod(decision.key)
            raise
        if left == ():
            self._ready(job)
            return
        self._finished(decision.key)
        await self.release_resource_claims(decision)
        if left is None:
            self._cache.forget_pod(decision.key)
            outcome = binding.BindOutcome(decision.key, decision.node, False, "gone")
        elif isinstance(left, claim_waits.Refused):
            message = f"PersistentVolumeClaim {left.claim}: {left.why}; the pod will be tried again"
            self._event(
                events.ObjectRef("Pod", decision.name, decision.namespace, decision.uid),
                type=events.WARNING,
                reason="FailedScheduling",
                message=message,
            )
            outcome = self._bindings.failed(decision, failure="claims", detail=message)
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
            outcome = self._bindings.failed(decision, failure="claims", detail=message)
        if self._on_bound is not None:
            self._on_bound(outcome)

    async def release_resource_claims(self, decision: decisions.BindPod) -> None:
        """The binding failed: release the ResourceClaims reserved for it."""
        if self.resource_claims.holds(decision.key):
            await self.resource_claims.release(decision.key, pod_uid=decision.uid)

    async def _after_victims(
        self, job: Job, *, victims: collections.abc.Sequence[decisions.EvictPod]
    ) -> None:
        """Queue ``job``'s binding once ``victims`` are gone; give it up after the wait."""
        decision = job.decision
        assert isinstance(decision, decisions.BindPod)
        try:
            waited = await self.victims.wait(
                [decision.key], victims, abandoned=lambda: self._gone(decision.key)
            )
        except BaseException:
            self._cache.forget_pod(decision.key)  # stopped, or a bug: nothing will bind it
            if job.reserving is not None:
                self.resource_claims.abandon(job.reserving)
            raise
        outcome: binding.BindOutcome | None = None
        if waited.clear:
            self._queue_bind(job)
            return
        self._finished(decision.key)
        if job.reserving is not None:
            self.resource_claims.abandon(job.reserving)
        if waited.abandoned:
            self._cache.forget_pod(decision.key)
            outcome = binding.BindOutcome(decision.key, decision.node, False, "gone")
        else:
            outcome = self._victims_stayed(decision, waited.staying)
        if outcome is not None and self._on_bound is not None:
            self._on_bound(outcome)

    def _victims_stayed(
        self, decision: decisions.BindPod, staying: collections.abc.Sequence[decisions.EvictPod]
    ) -> binding.BindOutcome:
        names = ", ".join(v.key for v in staying)
        message = self.victims.message(decision.node, staying, doing="binding")
        self._event(
            events.ObjectRef("Pod", decision.name, decision.namespace, decision.uid),
            type=events.WARNING,
            reason="FailedScheduling",
            message=message,
        )
        return self._bindings.failed(decision, failure="victims", detail=f"victims {names} stayed")

    def _event(self, ref: events.ObjectRef, *, type: str, reason: str, message: str) -> None:
        if self._recorder is not None:
            self._recorder.record(ref, type=type, reason=reason, message=message)
