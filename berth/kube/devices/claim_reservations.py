"""Writing ResourceClaims' allocations and reservations before a pod is bound, and releasing them.

kube-scheduler's DynamicResources PreBind and Unreserve, for the binder
(:class:`~berth.kube.binder.decisions.ApiSink`). A cycle that places a pod using ResourceClaims
records, before its ``BindPod``, one :class:`~berth.scheduler.framework.decisions.ReserveClaim` per
claim the pod does not hold yet. :class:`ClaimReservations`:

- **plans** them when the cycle's result arrives (:meth:`ClaimReservations.plan`, on the event
  loop, never blocking): each claim is *assumed* in the cache at once — allocated, reserved for
  the pod — so the next cycle counts its devices taken although nothing is written yet (two
  claims are never given one device, which the API server would not catch);
- **writes** them, in order, when the binder is about to bind the pod
  (:meth:`ClaimReservations.reserve`): with an allocation, the finalizer
  ``resource.kubernetes.io/delete-protection`` first (a normal update, as kube-scheduler does),
  then ``status.allocation`` and the pod in ``status.reservedFor`` in one status write at the
  version read; without one, the pod is added to ``reservedFor``. Each write is conditional:
  the claim must still be the one the scheduler saw (its uid), not being deleted, and, to be
  given an allocation, still unallocated — a claim allocated meanwhile by kube-scheduler or
  another leader is never overwritten. A gang member sharing a claim another member's write
  allocates in the same cycle (``ReserveClaim.after``) waits for that write and is reserved
  only if it landed. Any refusal fails the pod's reservations: the binder does not bind it;
- **releases** what it wrote for a pod whose binding then failed, or whose reservations failed
  half way (:meth:`ClaimReservations.release`): the pod leaves ``reservedFor``, and a claim whose
  allocation this pod's write made and that nobody else reserves is deallocated (kube-scheduler
  removes the pod in Unreserve and deallocates such a claim in its next PostFilter; Berth does
  both at once, so that nothing it writes leaves a claim allocated to a pod that is not bound).
  The finalizer stays, as kube-scheduler leaves it: the resourceclaim controller removes it
  when the claim is deleted;
- **deallocates** a claim allocated where its pod cannot go and reserved by nobody else
  (:meth:`ClaimReservations.deallocate`, kube-scheduler's PostFilter), if it still is so.

When a pod that *is* bound finishes or goes, kube-controller-manager's resourceclaim
controller removes it from ``reservedFor`` and deallocates the claim nobody reserves any more,
as for kube-scheduler's pods: that is not the scheduler's share.

Every write goes through the write primitive (:class:`~berth.kube.transport.writes.Writer`: fenced,
409 retried at the version read), the first attempt at the version the informer last showed (no
read: a claim is allocated in two requests, reserved in one, as kube-scheduler does it); at
most ``concurrency`` claims are written at once. Runs on the event loop.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import logging

from berth.api import dra, patches
from berth.kube.transport import writes
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import resourceclaims, wire

__all__ = ["ClaimReservations", "Plan", "claim_path"]

logger = logging.getLogger(__name__)


def claim_path(namespace: str, name: str) -> str:
    """The API path of a ResourceClaim."""
    return f"/apis/{dra.API_VERSION}/namespaces/{namespace}/resourceclaims/{name}"


@dataclasses.dataclass(frozen=True)
class _Step:
    """One ReserveClaim of a pod, with the write it waits for and the one it signals."""

    decision: decisions.ReserveClaim
    waits_for: asyncio.Future[bool] | None  # the allocating write of another pod (``after``)
    signals: asyncio.Future[bool] | None  # set once this write (with an allocation) is done


@dataclasses.dataclass(frozen=True)
class Plan:
    """A pod's ReserveClaim steps, in recording order."""

    pod: str  # namespace/name
    pod_uid: str
    steps: tuple[_Step, ...]

    @property
    def claims(self) -> tuple[str, ...]:
        return tuple(step.decision.key for step in self.steps)


@dataclasses.dataclass(frozen=True)
class _Wrote:
    """A reservation written for a pod (what releasing it undoes)."""

    key: str
    namespace: str
    name: str
    uid: str
    allocated: bool  # this write put the allocation


def _as_seen(info: resourceclaims.ResourceClaimInfo | None) -> dra.ResourceClaim | None:
    """What the writes decide on, of the claim as the informer last showed it (None: read)."""
    if info is None or not info.resource_version:
        return None
    meta: dra.ObjectMeta = {
        "uid": info.uid,
        "resourceVersion": info.resource_version,
        "finalizers": list(info.finalizers),
    }
    if info.deleting:
        meta["deletionTimestamp"] = "(being deleted)"
    status: dra.ResourceClaimStatus = {}
    if info.allocation is not None:
        status["allocation"] = {"devices": {}}  # only whether it is, is read
    if info.reserved_for:
        status["reservedFor"] = [_consumer(ref) for ref in info.reserved_for]
    return {"metadata": meta, "status": status}


def _consumer(ref: resourceclaims.ConsumerRef) -> dra.ResourceClaimConsumerReference:
    out: dra.ResourceClaimConsumerReference = {
        "resource": ref.resource,
        "name": ref.name,
        "uid": ref.uid,
    }
    return {"apiGroup": ref.api_group, **out} if ref.api_group else out


class ClaimReservations:
    """See the module docstring."""

    def __init__(
        self,
        *,
        cache: cluster_cache.ClusterCache,
        writer: writes.Writer,
        concurrency: int = 64,
    ) -> None:
        self._cache = cache
        self._writer = writer
        self._slots = asyncio.Semaphore(concurrency)
        self._wrote: dict[str, list[_Wrote]] = {}  # pod key -> what its reservations wrote
        self.written = 0
        """Claims reserved (with or without an allocation) so far (tests, the bench)."""
        self.refused = 0
        """Reservations refused (the pod was not bound)."""

    # Planning (on the event loop, when a cycle's result arrives) ------------------------------
    def plan(self, result: decisions.CycleResult) -> dict[str, Plan]:
        """The ReserveClaim steps of each pod ``result`` places, assumed in the cache."""
        by_pod: dict[str, list[_Step]] = {}
        uids: dict[str, str] = {}
        allocating: dict[tuple[str, str], asyncio.Future[bool]] = {}
        for decision in result.of_kind(decisions.ReserveClaim):
            pod = f"{decision.namespace}/{decision.pod}"
            waits_for = (
                allocating.get((decision.key, f"{decision.namespace}/{decision.after}"))
                if decision.after is not None
                else None
            )
            signals = (
                asyncio.get_running_loop().create_future()
                if decision.allocation is not None
                else None
            )
            if signals is not None:
                allocating[(decision.key, pod)] = signals
            by_pod.setdefault(pod, []).append(_Step(decision, waits_for, signals))
            uids[pod] = decision.pod_uid
            allocation = (
                resourceclaims.allocation_info(decision.allocation)
                if decision.allocation is not None
                else None
            )
            self._cache.assume_resource_claim(
                decision.key,
                uid=decision.uid,
                pod=decision.pod,
                pod_uid=decision.pod_uid,
                allocation=allocation,
            )
        return {pod: Plan(pod, uids[pod], tuple(steps)) for pod, steps in by_pod.items()}

    def abandon(self, plan: Plan) -> None:
        """The pod will not be bound (gone, or its victims stayed): nothing is written for
        it, the writes waiting for its allocations give up, the assumptions are forgotten."""
        for step in plan.steps:
            if step.signals is not None and not step.signals.done():
                step.signals.set_result(False)
            self._cache.forget_resource_claim(step.decision.key, pod_uid=plan.pod_uid)

    # Writing (before the binding) -------------------------------------------------------------
    async def reserve(self, plan: Plan) -> str | None:
        """Write ``plan``'s reservations in order; None when all landed, else why not (what
        was written for the pod is then released, and the rest abandoned)."""
        try:
            for step in plan.steps:
                why = await self._reserve(step)
                if step.signals is not None and not step.signals.done():
                    step.signals.set_result(why is None)
                if why is not None:
                    self.refused += 1
                    logger.info("not binding pod %s: %s", plan.pod, why)
                    await self.release(plan.pod, pod_uid=plan.pod_uid)
                    self.abandon(plan)
                    return why
        except BaseException:
            self.abandon(plan)  # stopped, or a bug: nothing waits for these writes any more
            raise
        return None

    async def _reserve(self, step: _Step) -> str | None:
        decision = step.decision
        key = decision.key
        if step.waits_for is not None and not await step.waits_for:
            self._cache.forget_resource_claim(key, pod_uid=decision.pod_uid)
            return (
                f"resourceclaim {key}: the allocation pod {decision.namespace}/{decision.after} "
                "was to write was not written"
            )
        path = claim_path(decision.namespace, decision.name)
        refusal: list[str] = []

        def refuse(current: dra.ResourceClaim) -> str | None:
            meta = wire.part(current.get("metadata"))
            status = wire.part(current.get("status"))
            if meta.get("uid") != decision.uid:
                return f"resourceclaim {key} was replaced by another of that name"
            if meta.get("deletionTimestamp"):
                return f"resourceclaim {key} is being deleted"
            if decision.allocation is not None and status.get("allocation"):
                return f"resourceclaim {key} was allocated by someone else meanwhile"
            if decision.allocation is None and not status.get("allocation"):
                return f"resourceclaim {key} is not allocated (any more)"
            return None

        def finalizer(current: dra.ResourceClaim) -> patches.ResourceClaimPatch | None:
            refusal.clear()
            why = refuse(current)
            if why is not None:
                refusal.append(why)
                return None
            present = list(wire.part(current.get("metadata")).get("finalizers") or [])
            if dra.CLAIM_FINALIZER in present:
                return None
            return {"metadata": {"finalizers": [*present, dra.CLAIM_FINALIZER]}}

        def status(current: dra.ResourceClaim) -> patches.ResourceClaimPatch | None:
            refusal.clear()
            why = refuse(current)
            if why is not None:
                refusal.append(why)
                return None
            found = wire.part(current.get("status"))
            consumers = list(found.get("reservedFor") or [])
            if any(c.get("uid") == decision.pod_uid for c in consumers):
                return None  # an earlier attempt landed
            if len(consumers) >= dra.RESERVED_FOR_MAX_SIZE:
                refusal.append(
                    f"resourceclaim {key} is reserved by {dra.RESERVED_FOR_MAX_SIZE} consumers, "
                    "the most a claim may have"
                )
                return None
            consumers.append({"resource": "pods", "name": decision.pod, "uid": decision.pod_uid})
            patch: patches.ResourceClaimStatusPatch = {"reservedFor": consumers}
            if decision.allocation is not None:
                patch["allocation"] = decision.allocation.copy()
            return {"status": patch}

        what = f"resourceclaim {key} for pod {decision.namespace}/{decision.pod}"
        known = _as_seen(self._cache.resource_claim_seen(key))
        async with self._slots:
            if decision.allocation is not None:
                written = await self._writer.update(
                    path, finalizer, what=f"finalizer of {what}", known=known
                )
                why = self._failure(written, refusal, key=key)
                if why is not None:
                    self._cache.forget_resource_claim(key, pod_uid=decision.pod_uid)
                    return why
                known = written.object
            written = await self._writer.update(
                path, status, subresource="status", what=what, known=known
            )
        why = self._failure(written, refusal, key=key)
        if why is not None:
            self._cache.forget_resource_claim(key, pod_uid=decision.pod_uid)
            return why
        if written.outcome is writes.Outcome.WRITTEN and written.object is not None:
            version = str(wire.part(written.object.get("metadata")).get("resourceVersion") or "")
            self._cache.settle_resource_claim(key, pod_uid=decision.pod_uid, version=version)
        self._wrote.setdefault(f"{decision.namespace}/{decision.pod}", []).append(
            _Wrote(
                key,
                decision.namespace,
                decision.name,
                decision.uid,
                allocated=decision.allocation is not None,
            )
        )
        self.written += 1
        return None

    @staticmethod
    def _failure(
        written: writes.Written[dra.ResourceClaim], refusal: list[str], *, key: str
    ) -> str | None:
        if refusal:
            return refusal[0]
        if written.ok:
            return None
        if written.outcome is writes.Outcome.GONE:
            return f"resourceclaim {key} was deleted"
        if written.outcome is writes.Outcome.FENCED:
            return f"resourceclaim {key} not written: this replica may not lead any more"
        return f"resourceclaim {key} could not be written ({written.outcome.value})"

    # Releasing (the binding failed) -----------------------------------------------------------
    def holds(self, pod: str) -> bool:
        """Whether reservations were written for ``pod`` (``namespace/name``) and not
        released: its binding must release them if it fails."""
        return pod in self._wrote

    def bound(self, pod: str) -> None:
        """``pod`` is bound: what was written for it stays (the resourceclaim controller
        releases it when the pod finishes or goes)."""
        self._wrote.pop(pod, None)

    async def release(self, pod: str, *, pod_uid: str) -> None:
        """Undo what was written for ``pod``: it leaves each claim's ``reservedFor``; a claim
        whose allocation its write made and that nobody else reserves is deallocated."""
        for wrote in reversed(self._wrote.pop(pod, [])):

            def change(
                current: dra.ResourceClaim, wrote: _Wrote = wrote
            ) -> patches.ResourceClaimPatch | None:
                if wire.part(current.get("metadata")).get("uid") != wrote.uid:
                    return None  # another claim of that name: nothing of ours is in it
                found = wire.part(current.get("status"))
                before = list(found.get("reservedFor") or [])
                consumers = [c for c in before if c.get("uid") != pod_uid]
                patch: patches.ResourceClaimStatusPatch = {}
                if len(consumers) != len(before):
                    patch["reservedFor"] = consumers or None
                if wrote.allocated and not consumers and found.get("allocation"):
                    patch["allocation"] = None
                    patch["devices"] = None  # drivers' status of devices no longer allocated
                return {"status": patch} if patch else None

            written = await self._writer.update(
                claim_path(wrote.namespace, wrote.name),
                change,
                subresource="status",
                what=f"release of resourceclaim {wrote.key} by pod {pod}",
            )
            self._cache.forget_resource_claim(wrote.key, pod_uid=pod_uid)
            if written.outcome is writes.Outcome.WRITTEN:
                logger.info("released resourceclaim %s of pod %s (not bound)", wrote.key, pod)

    # Deallocating (kube-scheduler's PostFilter) -----------------------------------------------
    async def deallocate(self, decision: decisions.DeallocateClaim) -> bool:
        """Clear the claim's allocation and consumers if it still is the one decided on,
        allocated, and reserved by nobody but the pod; whether it was."""

        def change(current: dra.ResourceClaim) -> patches.ResourceClaimPatch | None:
            if wire.part(current.get("metadata")).get("uid") != decision.uid:
                return None
            found = wire.part(current.get("status"))
            if not found.get("allocation"):
                return None
            if any(c.get("uid") != decision.pod_uid for c in found.get("reservedFor") or []):
                return None  # reserved meanwhile: in use after all
            return {"status": {"allocation": None, "reservedFor": None, "devices": None}}

        written = await self._writer.update(
            claim_path(decision.namespace, decision.name),
            change,
            subresource="status",
            what=f"deallocation of resourceclaim {decision.key} for pod {decision.pod}",
            known=_as_seen(self._cache.resource_claim_seen(decision.key)),
        )
        if written.outcome is writes.Outcome.WRITTEN:
            logger.info(
                "deallocated resourceclaim %s: allocated where pod %s/%s cannot go",
                decision.key,
                decision.namespace,
                decision.pod,
            )
            return True
        return False

    def pending(self) -> collections.abc.Set[str]:
        """Pods with reservations written and their binding not settled (tests)."""
        return set(self._wrote)
