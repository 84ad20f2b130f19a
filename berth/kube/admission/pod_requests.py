"""The requests admission mode sends about a pod, and what it says of them.

Pins and gate removals go through the write primitive
(:class:`berth.kube.transport.writes.Writer`: read at version, retry on conflict, fenced); a
binding, an eviction and a recreation are plain requests within the request timeout. Events
about a pod carry the UID of the pod as last seen; the first failure of a kind is a warning in
the log, repeats are debug (one line per pod would flood the log while the API server is down).
"""

from __future__ import annotations

import collections.abc
import logging
import typing

import kubernetes_asyncio.client

from berth.api import core, keys
from berth.kube.transport import errors, events, pod_edits, rest, writes
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import wire
from berth.status import conditions
from berth.util import clocks, wakeups

__all__ = ["PodRequests"]

logger = logging.getLogger(__name__)

_RECREATE_WAIT = 30.0  # seconds to wait for a deleted pod to be gone before creating it again


class PodRequests:
    """Admission's requests about pods; see the module docstring.

    ``objects`` is admission's record of the raw pods it may patch (pod key -> the pod as last
    seen or written), read here for UIDs and versions.
    """

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        writer: writes.Writer,
        clock: clocks.Clock,
        objects: dict[str, core.Pod],
        recorder: events.EventRecorder | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._api = api
        self._writer = writer
        self._clock = clock
        self._objects = objects
        self._recorder = recorder
        self._timeout = timeout
        self._failing: set[str] = set()

    async def pin(self, key: str, *, node: str, now: float) -> writes.Written[core.Pod]:
        """Write the pin to ``node`` and the admitted annotations at the version read (the write
        primitive reads again on a conflict)."""

        def pin(current: core.Pod) -> core.Pod:
            # A pin from an earlier attempt stays (Kubernetes lets a gated pod's node affinity
            # only narrow); the session saw it and chose within it, so adding ours is a no-op.
            affinity = wire.part(current.get("spec")).get("affinity")
            return {
                "metadata": {
                    "annotations": {
                        keys.ADMITTED_NODE_ANNOTATION: node,
                        keys.ADMITTED_AT_ANNOTATION: conditions.timestamp(now),
                    },
                },
                "spec": {"affinity": pod_edits.pin_affinity(affinity, node=node)},
            }

        return await self._writer.update(
            pod_edits.path(key), pin, what=f"pin of pod {key} to {node}"
        )

    async def bind(self, decision: decisions.BindPod) -> bool:
        """POST the pod's binding; whether it was accepted (a failure is logged)."""
        body = pod_edits.binding(decision.key, uid=decision.uid, node=decision.node)
        try:
            await self.call("POST", pod_edits.path(decision.key) + "/binding", body=body)
        except errors.KubeError as exc:
            self.log_failure("bind", f"binding pod {decision.key} failed: {exc}")
            return False
        return True

    async def evict(self, key: str, obj: core.Pod) -> None:
        """A rejected pod with a controller: evict it; the controller recreates it (gated)."""
        uid = str(wire.part(obj.get("metadata")).get("uid") or "")
        try:
            await self.call(
                "POST", pod_edits.path(key) + "/eviction", body=pod_edits.eviction(key, uid=uid)
            )
        except errors.NotFound:
            return
        except errors.KubeError as exc:
            self.log_failure("evict", f"evicting rejected pod {key} failed: {exc}")

    async def recreate(self, key: str, obj: core.Pod, *, node: str, gone: wakeups.Wakeup) -> None:
        """A rejected bare pod: delete it and create it again, unpinned and gated (``gone`` is
        woken when the informers see the old pod go)."""
        options: core.DeleteOptions = {
            "preconditions": {"uid": wire.part(obj.get("metadata")).get("uid")}
        }
        if not wire.part(obj.get("spec")).get("nodeName"):
            options["gracePeriodSeconds"] = 0  # never started: nothing to stop gracefully
        try:
            await self.call("DELETE", pod_edits.path(key), body=options)
        except errors.NotFound:
            gone.wake()
        except errors.Conflict:
            return  # another pod of that name already: nothing of ours to recreate
        except errors.KubeError as exc:
            self.log_failure("recreate", f"deleting rejected pod {key} failed: {exc}")
            return
        body = pod_edits.recreated_pod(obj, node=node)
        collection = pod_edits.path(key).rsplit("/", 1)[0]
        deadline = self._clock.now() + _RECREATE_WAIT
        while True:
            try:
                await self.call("POST", collection, body=body)
                logger.info("recreated rejected pod %s gated", key)
                return
            except errors.Conflict:
                # The old pod is still terminating: wait for its removal, then again.
                left = deadline - self._clock.now()
                if left <= 0:
                    break
                gone.clear()
                await gone.sleep(timeout=min(left, 5.0))
            except errors.KubeError as exc:
                self.log_failure("recreate", f"recreating rejected pod {key} failed: {exc}")
                return
        self.log_failure("recreate", f"rejected pod {key} was not gone in time to recreate")

    async def remove_gate(self, key: str, obj: core.Pod, *, version: str | None) -> core.Pod:
        """PATCH away Berth's gate (the other gates kept) at ``version``; the pod as written."""
        patch = {
            "metadata": {"resourceVersion": version},
            "spec": {"schedulingGates": pod_edits.without_gate(obj)},
        }
        written = await self._writer.patch(
            pod_edits.path(key), patch, what=f"gate removal of pod {key}", retry=False
        )
        if written.outcome is not writes.Outcome.WRITTEN or written.object is None:
            raise errors.KubeError(f"not written ({written.outcome.value})")
        return typing.cast(core.Pod, written.object)  # the API server answers the pod

    async def call(
        self, method: str, path: str, *, body: collections.abc.Mapping[str, object] | None = None
    ) -> None:
        """One request within the request timeout; every PATCH here is a JSON merge patch.
        What the API server answers is not read (a failure raises)."""
        content_type = rest.MERGE_PATCH if method == "PATCH" else "application/json"
        await rest.request(
            self._api,
            method=method,
            path=path,
            body=body,
            content_type=content_type,
            timeout=self._timeout,
        )

    def event(self, key: str, *, type: str, reason: str, message: str) -> None:
        """An Event about the pod ``key`` (its UID as last seen)."""
        if self._recorder is None:
            return
        namespace, _, name = key.partition("/")
        obj = self._objects.get(key)
        uid = str(wire.part(wire.part(obj).get("metadata")).get("uid") or "")
        self._recorder.record(
            events.ObjectRef("Pod", name, namespace, uid), type=type, reason=reason, message=message
        )

    def log_failure(self, kind: str, message: str) -> None:
        """Log a failure of ``kind``: the first as a warning, repeats as debug."""
        if kind not in self._failing:
            self._failing.add(kind)
            logger.warning("%s", message)
        else:
            logger.debug("%s", message)
