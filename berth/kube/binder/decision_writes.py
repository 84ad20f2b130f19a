"""The writes of a cycle's decisions other than bindings: evictions, patches, a claim's volume.

For the binder (:class:`~berth.kube.binder.decisions.ApiSink`), which queues them after the
cycle and runs them on its status writers:

- ``EvictPod``: the Eviction API (``POST pods/{name}/eviction``, UID precondition), and a
  ``Preempted`` Event explaining why (``MaximumExecutionTimeExceeded`` when the decision's
  ``cause`` says so).
- ``AnnotatePod`` (one not carried by the pod's Binding): a merge patch of the pod.
- ``NominatePod``: a small status patch.
- ``SelectClaimNode``: the claim's ``volume.kubernetes.io/selected-node`` annotation (a merge
  patch); ``BindClaimVolume``: the PersistentVolume's ``spec.claimRef``, as kube-scheduler's
  volume binder pre-binds (kube-controller-manager completes the binding). The patch carries
  the ``resourceVersion`` the volume was chosen at, so it lands only on the volume as it was
  then: a 409 (or any refusal) means the volume may be another claim's now, so the cache's
  assumption is forgotten and the pods waiting for the claim give up at once and back off, to
  be placed again on a fresh view (kube-scheduler's PreBind fails the pod the same way).
- ``DeallocateClaim``: the claim's allocation cleared if nobody but the pod reserves it
  (:mod:`berth.kube.devices.claim_reservations`).
- ``MarkPending``: the burst of pod conditions :mod:`berth.kube.binder.pending_marks` planned.
- ``ExceedExecutionTime``: the group's Warning Event; for ``fail``, first the annotation that
  keeps it Failed.

Failures are logged once per kind of trouble, never raised.
"""

from __future__ import annotations

import logging

import kubernetes_asyncio.client

from berth.api import core, custom_objects, keys, storage
from berth.kube.binder import claim_waits, failure_log, pending_marks
from berth.kube.devices import claim_reservations
from berth.kube.transport import errors, events, pod_edits, rest, writes
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import volumes

__all__ = ["DecisionWrites"]

logger = logging.getLogger(__name__)


class DecisionWrites:
    """Sends the writes of decisions other than bindings; see the module docstring."""

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        writer: writes.Writer,
        cache: cluster_cache.ClusterCache,
        claims: claim_waits.ClaimWaits,
        resource_claims: claim_reservations.ClaimReservations,
        pending: pending_marks.PendingMarks,
        recorder: events.EventRecorder | None = None,
    ) -> None:
        self._api = api
        self._writer = writer
        self._cache = cache
        self._claims = claims
        self._resource_claims = resource_claims
        self._pending = pending
        self._recorder = recorder
        self._failures = failure_log.FailureLog(logger)

    async def apply(
        self,
        decision: decisions.Decision,
        *,
        ref: events.ObjectRef | None = None,
        burst: pending_marks.Burst | None = None,
    ) -> None:
        """Send ``decision``'s write (``ref``: the pod its Events are about, as last seen;
        ``burst``: a ``MarkPending``'s changed conditions)."""
        if isinstance(decision, decisions.EvictPod):
            await self._evict(decision, ref=ref)
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
            await self._resource_claims.deallocate(decision)
        elif isinstance(decision, decisions.NominatePod):
            await self._patch(
                pod_edits.path(decision.key) + "/status",
                {"status": {"nominatedNodeName": decision.node}},
                what=f"nominate pod {decision.key}",
                content_type=rest.STRATEGIC_MERGE_PATCH,
            )
        elif isinstance(decision, decisions.MarkPending) and burst is not None:
            await self._pending.write(burst)
        elif isinstance(decision, decisions.ExceedExecutionTime):
            await self._exceed_execution_time(decision)

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
            self._failures.failed("evict", f"evicting pod {decision.key} failed: {exc}")
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
            body: custom_objects.PodGroup = {
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
        self._claims.refuse(
            decision.key, f"persistentvolume {decision.volume} was not reserved for it: {why}"
        )

    async def _patch(
        self,
        path: str,
        body: core.Pod | storage.PersistentVolumeClaim | custom_objects.PodGroup,
        *,
        what: str,
        content_type: str,
    ) -> bool:
        """One merge patch (the kind's fields that change) through the write primitive;
        whether it landed (gone, fenced or failed: False, already logged)."""
        written = await self._writer.patch(path, body, content_type=content_type, what=what)
        return written.outcome is writes.Outcome.WRITTEN

    def _event(self, ref: events.ObjectRef, *, type: str, reason: str, message: str) -> None:
        if self._recorder is not None:
            self._recorder.record(ref, type=type, reason=reason, message=message)
