"""RejectTask: a pending allocation kube-scheduler would not bind, and the pod sent back.

Bound elsewhere, reported ``Unschedulable`` by its scheduler, or still unbound ``bind_timeout``
seconds after the gate went: admission (:class:`~berth.kube.admission.admission.Admission`)
*rejects* the allocation (YuniKorn's RejectTask) with :meth:`Rejecting.reject`: the cache forgets
the assumption (capacity released), Warning Events go to the pod and its PodGroup, the group's
reason says why until it is admitted again, and the pod is sent back to wait: Kubernetes forbids
adding a scheduling gate to an existing pod, so a pod owned by a controller is evicted (Eviction
API; the controller recreates it and the webhook gates the new one) and a bare pod is recreated
by Berth — deleted, then created again with the same name and spec, its pin removed and the gate
back. Why it was refused is data (:mod:`berth.kube.admission.refusals`: the taint, cordon or
ResourceClaim Berth sees on the node, and kube-scheduler's own words verbatim), in the Events and
the group's reason. The node is remembered for the pod and its gang
(:mod:`berth.kube.admission.rejections`): no member is pinned there again until the cause may
have gone (a taint removed, a device freed, the node changed) or the memory fades; the pod backs
off exponentially before it is offered again; and no pod is deleted more than once a minute —
refused again sooner, it stays pinned and ungated until then (kube-scheduler may still bind it
there). A gang member rejected releases its group's other pending allocations with it, so the
gang is admitted again whole.
"""

from __future__ import annotations

import asyncio
import collections.abc
import logging

from berth.api import core, keys
from berth.kube.admission import admission_states as states
from berth.kube.admission import allocations, not_admitted, pod_requests, refusals, rejections
from berth.kube.transport import events, pod_edits
from berth.scheduler.framework import reasons
from berth.scheduler.snapshot import pods, snapshots, wire
from berth.status import conditions
from berth.util import clocks, wakeups

__all__ = ["Rejecting"]

logger = logging.getLogger(__name__)


class Rejecting:
    """Rejects pending allocations and sends their pods back; see the module docstring.

    Shared with admission: ``objects`` (the raw pods it may patch), ``due`` (refused pods to send
    back later: pod key -> (when, UID, node); no pod is deleted twice within the resend
    interval), ``recreating`` (pod key -> woken when the old pod is gone) and ``jobs`` (the
    requests its workers send); ``seen`` is the inner source's last snapshot, ``group_of`` a
    pod's group key.
    """

    def __init__(
        self,
        *,
        allocations: allocations.Allocations,
        rejections: rejections.Rejections,
        not_admitted: not_admitted.NotAdmitted,
        requests: pod_requests.PodRequests,
        clock: clocks.Clock,
        objects: dict[str, core.Pod],
        due: dict[str, tuple[float, str, str]],
        recreating: dict[str, wakeups.Wakeup],
        jobs: asyncio.Queue[collections.abc.Callable[[], collections.abc.Awaitable[None]]],
        seen: collections.abc.Callable[[], snapshots.Snapshot | None],
        group_of: collections.abc.Callable[[str], str | None],
        recorder: events.EventRecorder | None = None,
        bind_timeout: float = 60.0,
    ) -> None:
        self._allocations = allocations
        self._rejections = rejections
        self._not_admitted = not_admitted
        self._requests = requests
        self._clock = clock
        self._objects = objects
        self._due = due
        self._recreating = recreating
        self._jobs = jobs
        self._seen = seen
        self._group_of = group_of
        self._recorder = recorder
        self._bind_timeout = bind_timeout
        self.rejected = 0
        """Allocations rejected so far."""
        self.sent_back = 0
        """Refused pods deleted to send them back (evicted or recreated)."""

    def send_due(self, now: float) -> None:
        """Send back the refused pods whose turn came by ``now``."""
        for key, (when, uid, node) in sorted(self._due.items()):
            if when > now:
                continue
            del self._due[key]
            obj = self._objects.get(key)
            if obj is None or str(wire.part(obj.get("metadata")).get("uid") or "") != uid:
                continue  # gone, or another pod under the name
            if key in self._allocations or wire.part(obj.get("spec")).get("nodeName"):
                continue  # admitted again, or bound after all
            self._send_back(key, obj, node=node)

    def refusal(
        self,
        allocation: allocations.Allocation,
        event: states.Event,
        seen: states.Observation | None,
    ) -> refusals.Refusal:
        """kube-scheduler's refusal of ``allocation`` (``event``), read against Berth's view."""
        obj = self._objects.get(allocation.key)
        info = pods.pod_info(obj) if obj is not None else None
        return refusals.refusal(
            self._seen(),
            info,
            node=allocation.node,
            how=event,
            said=seen.unschedulable if seen is not None else None,
            bound_to=seen.node if event is states.Event.BOUND_ELSEWHERE and seen else None,
            timeout=self._bind_timeout,
        )

    def reject(
        self,
        allocation: allocations.Allocation,
        *,
        refusal: refusals.Refusal | None = None,
        released_with: str | None = None,
    ) -> None:
        """RejectTask: release the capacity, explain, and send the pod back to wait gated.

        ``refusal``: kube-scheduler refused the pod there: the node is remembered (for the
        pod and its gang), the pod backs off, and the gang's other pending allocations are
        released with it. ``released_with``: the member of its gang that was refused."""
        self._allocations.drop(allocation)
        self.rejected += 1
        key = allocation.key
        obj = self._objects.get(key)
        group = allocation.group or self._group_of(key)
        now = self._clock.now()
        if refusal is not None:
            retry = self._rejections.remember(
                key, group=group, node=allocation.node, now=now, refusal=refusal
            )
            why = f"{refusal.message}; admitted again no sooner than {conditions.timestamp(retry)}"
        else:
            why = f"released with {released_with}, rejected on {allocation.node}"
        message = f"admission of pod {key} on {allocation.node} rejected: {why}"
        logger.warning("%s", message)
        self._requests.event(key, type=events.WARNING, reason="AdmissionRejected", message=message)
        if group is not None:
            note = f"{message}; the pod waits gated again"
            self._not_admitted.notes[group] = (
                refusal.reason(message=note)
                if refusal is not None
                else reasons.new(reasons.ReasonCode.ADMISSION_REJECTED, note, node=allocation.node)
            )
            namespace, _, name = group.partition("/")
            if not name.startswith("pod:") and self._recorder is not None:
                self._recorder.record(
                    events.ObjectRef("PodGroup", name, namespace, "", keys.API_VERSION),
                    type=events.WARNING,
                    reason="AdmissionRejected",
                    message=message,
                )
        if obj is not None:
            when = self._rejections.send_back_at(key, now=now)
            if when <= now:
                self._send_back(key, obj, node=allocation.node)
            else:
                # Deleted less than a resend interval ago: it stays pinned and ungated until
                # then (kube-scheduler may still bind it there if the cause goes).
                uid = str(wire.part(obj.get("metadata")).get("uid") or "")
                self._due[key] = (when, uid, allocation.node)
                logger.info(
                    "pod %s is sent back at %s at the soonest (deleted once already within %gs)",
                    key,
                    conditions.timestamp(when),
                    self._rejections.resend,
                )
        if refusal is not None and group is not None:
            for sibling in [a for a in self._allocations.values() if a.group == group]:
                self.reject(sibling, released_with=key)

    def _send_back(self, key: str, obj: core.Pod, *, node: str) -> None:
        """Send a refused pod back to wait gated: evict it (its controller recreates it, the
        webhook gates it) or, a bare pod, delete it and create it again."""
        self._rejections.sent_back(key, now=self._clock.now())
        self.sent_back += 1
        if pod_edits.controlled(obj):
            self._jobs.put_nowait(lambda: self._requests.evict(key, obj))
        else:
            self._recreating[key] = wakeups.Wakeup()
            self._jobs.put_nowait(lambda: self._recreate(key, obj, node=node))

    async def _recreate(self, key: str, obj: core.Pod, *, node: str) -> None:
        """A rejected bare pod: delete it and create it again, unpinned and gated."""
        gone = self._recreating.get(key) or wakeups.Wakeup()
        try:
            await self._requests.recreate(key, obj, node=node, gone=gone)
        finally:
            self._recreating.pop(key, None)
