"""Gates Berth removes without admitting, and admissions that went around Berth.

- **Bad input.** A pod with Berth's gate but neither group nor queue is not Berth's: the gate is
  removed with a Warning Event saying so, and kube-scheduler places it as usual.
- **Handed over.** A gated pod naming Berth's own scheduler and using ResourceClaims is not
  admitted: its gate is removed at once, unpinned, and the scheduler places it as any of its pods
  (queues and gangs checked there), the binder writing its claims before binding it.
- **Bypasses.** A pod whose gate someone other than Berth removed, or that carries Berth's
  ``admitted-node`` marker Berth did not write, went around its queue's and gang's checks: the
  cache charges it to no queue, and the pod and the log say so.
"""

from __future__ import annotations

import asyncio
import collections.abc
import functools

from berth.api import core, keys
from berth.kube.admission import pod_requests
from berth.kube.transport import errors, events
from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import wire

__all__ = ["Ungating"]

_GATE = keys.ADMISSION_GATE


class Ungating:
    """Removes the gates of pods Berth does not admit, and says who went around it; see the
    module docstring. ``objects`` is admission's record of the raw pods it may patch; ``jobs``
    the requests its workers send."""

    def __init__(
        self,
        *,
        cache: cluster_cache.ClusterCache,
        requests: pod_requests.PodRequests,
        objects: dict[str, core.Pod],
        jobs: asyncio.Queue[collections.abc.Callable[[], collections.abc.Awaitable[None]]],
    ) -> None:
        self._cache = cache
        self._requests = requests
        self._objects = objects
        self._jobs = jobs
        self.bad: set[str] = set()
        """Gated pods with neither group nor queue, to release."""
        self._releasing: set[str] = set()  # bad input being ungated
        self._handing_over: set[str] = set()  # Berth's own pods with claims being ungated
        # Pod key -> UID of the pods reported with a forged marker (once each).
        self._forged: dict[str, str] = {}
        self.gate_bypasses = 0
        """Pods whose admission gate someone other than Berth removed (tests, metrics)."""
        self.forged_markers = 0
        """Pods seen with an ``admitted-node`` marker Berth did not write (tests, metrics)."""

    def release_bad(self) -> None:
        """Queue the removal of the gates of bad input (once per pod at a time)."""
        for key in sorted(self.bad - self._releasing):
            self._releasing.add(key)
            self._jobs.put_nowait(functools.partial(self._release, key))

    def hand_over(self, key: str) -> None:
        """Queue the removal of the gate of Berth's own pod with claims (once at a time)."""
        if key not in self._handing_over:
            self._handing_over.add(key)
            self._jobs.put_nowait(functools.partial(self._hand_over, key))

    def forget(self, key: str) -> None:
        """The pod left the cluster."""
        self._forged.pop(key, None)
        self.bad.discard(key)

    def gate_removed(self, key: str, obj: core.Pod) -> None:
        """Someone other than Berth removed the admission gate: the pod bypassed its queue's
        and gang's checks. Say so on the pod and in the log; the cache charges it to no queue
        (Berth did not admit it), so it cannot take its queue's limit from the queue's
        tenants."""
        self.gate_bypasses += 1
        self._objects[key] = obj  # for the Event's UID
        message = (
            f"the scheduling gate {_GATE} was removed by someone other than Berth: the pod was "
            "not admitted by Berth (no queue or gang check) and is charged to no queue"
        )
        self._requests.log_failure("gate-removed", f"pod {key}: {message}")
        self._requests.event(key, type=events.WARNING, reason="AdmissionBypassed", message=message)

    def marker_forged(self, key: str, obj: core.Pod, *, uid: str, node: str) -> None:
        """The pod carries Berth's ``admitted-node`` marker, but Berth did not write it: it
        bypassed its queue's and gang's checks. The cache charges it to no queue; the pod and
        the log say so (once per pod)."""
        self._cache.disown(key, uid=uid)
        if self._forged.get(key) == uid:
            return
        self._forged[key] = uid
        self.forged_markers += 1
        self._objects[key] = obj  # for the Event's UID
        message = (
            f"the annotation {keys.ADMITTED_NODE_ANNOTATION}={node} was not written by Berth: "
            "the pod was not admitted by Berth (no queue or gang check) and is charged to no "
            "queue"
        )
        self._requests.log_failure("marker-forged", f"pod {key}: {message}")
        self._requests.event(key, type=events.WARNING, reason="AdmissionBypassed", message=message)

    async def _release(self, key: str) -> None:
        """Bad input: Berth's gate on a pod with neither group nor queue; remove it, say why."""
        try:
            obj = self._objects.get(key)
            if obj is None or key not in self.bad:
                return
            version = wire.part(obj.get("metadata")).get("resourceVersion")
            try:
                answer = await self._requests.remove_gate(key, obj, version=version)
            except errors.KubeError as exc:
                self._requests.log_failure(
                    "release", f"removing the gate of pod {key} failed: {exc}"
                )
                return
            self.bad.discard(key)
            self._objects[key] = answer
            self._requests.event(
                key,
                type=events.WARNING,
                reason="NotBerths",
                message=(
                    f"the scheduling gate {_GATE} was removed: the pod names neither a PodGroup "
                    f"({keys.POD_GROUP_LABEL}) nor a queue ({keys.QUEUE_LABEL}), so Berth does "
                    "not admit it and the default scheduler places it"
                ),
            )
        finally:
            self._releasing.discard(key)

    async def _hand_over(self, key: str) -> None:
        """A gated pod of Berth's scheduler with ResourceClaims: remove the gate (no pin)."""
        try:
            obj = self._objects.get(key)
            if obj is None:
                return
            version = wire.part(obj.get("metadata")).get("resourceVersion")
            try:
                self._objects[key] = await self._requests.remove_gate(key, obj, version=version)
            except errors.KubeError as exc:
                self._requests.log_failure(
                    "hand-over", f"removing the gate of pod {key} failed: {exc}"
                )
        finally:
            self._handing_over.discard(key)
