"""Groups by owner: the pods Berth holds for want of a group get one derived from their owners.

A pod Berth schedules (or gates) with owners and no group waits in the cache
(:func:`~berth.scheduler.snapshot.pods.awaits_owner_group`); after each cycle the loop hands
the snapshot to :meth:`OwnerGrouper.offer`, and :meth:`OwnerGrouper.run` then, for each such pod:

1. walks its owners, reading each hop from the API (the ``controller`` ownerReference, else the
   first; kinds Berth knows only, :mod:`berth.workloads.kinds`; an owner read once serves every
   pod of the batch);
2. asks :func:`berth.workloads.plans.plan` what the pod's group is;
3. writes it: for a gang, the Berth PodGroup (``minMember``, ``minResources``, ``queue`` as
   derived, the annotation ``scheduling.berth.io/derived-from`` saying how) owned by the
   workload, so garbage collection deletes it with the workload — updated when a later pod
   finds the workload resized; then the pod's ``scheduling.berth.io/pod-group`` label (or, for a
   group of one, its queue label) and the annotation ``scheduling.berth.io/grouped-by``, which
   release it to the scheduler;
4. or, when the group cannot be known (a deleted owner, a spec it cannot read...), writes the
   problem on the pod (annotation ``scheduling.berth.io/group-error``, which becomes its
   why-pending reason, and a Warning Event ``GroupByOwnerFailed``) and tries again after
   ``retry`` seconds: the pod is never placed without its gang.

API failures are logged and retried later; nothing here raises into the loop.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import logging
import typing

import kubernetes_asyncio.client

from berth.api import core, custom_objects, keys
from berth.api import objects as api_objects
from berth.kube.transport import errors, events, rest, writes
from berth.scheduler.snapshot import pods, snapshots
from berth.util import clocks, wakeups
from berth.workloads import kinds, plans

__all__ = ["MAX_HOPS", "OwnerGrouper", "pod_object", "walk"]

logger = logging.getLogger(__name__)

MAX_HOPS = 8
"""Owners followed at most (LeaderWorkerSet workers need four hops: StatefulSet, leader pod,
StatefulSet, LeaderWorkerSet)."""

Fetch = collections.abc.Callable[[str], collections.abc.Awaitable[api_objects.ForeignObject]]
"""Reads one owner (a Job, a JobSet, a RayCluster...: any kind :mod:`berth.workloads` knows)."""


def pod_object(pod: pods.PodInfo, /) -> core.Pod:
    """The metadata of ``pod`` as the API has it (what the plan reads of the pod)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.uid,
            "labels": dict(pod.labels),
            "annotations": dict(pod.annotations),
            "ownerReferences": [
                {
                    "apiVersion": ref.api_version,
                    "kind": ref.kind,
                    "name": ref.name,
                    "uid": ref.uid,
                    "controller": ref.controller,
                }
                for ref in pod.owner_references
            ],
        },
    }


async def walk(pod: core.Pod, /, *, namespace: str, fetch: Fetch) -> plans.Chain:
    """Read ``pod``'s owners upwards with ``fetch(path)`` until one of the ends of
    :class:`~berth.workloads.plans.End`. API errors other than 403 and 404 propagate."""
    owners: list[api_objects.ForeignObject] = []
    seen = {plans.owner_ref(pod).uid}
    obj: api_objects.KubeObject = pod
    for _ in range(MAX_HOPS):
        ref = plans.next_ref(obj)
        if ref is None:
            return plans.Chain(tuple(owners), plans.End.TOP)
        if ref.uid and ref.uid in seen:
            return plans.Chain(tuple(owners), plans.End.LOOP, ref)
        group, version = kinds.split_api_version(ref.api_version)
        kind = kinds.KINDS.get((group, ref.kind))
        if kind is None:
            return plans.Chain(tuple(owners), plans.End.UNKNOWN_KIND, ref)
        if version not in kind.versions:
            return plans.Chain(tuple(owners), plans.End.UNSUPPORTED_VERSION, ref)
        try:
            got = await fetch(kind.path(version=version, namespace=namespace, name=ref.name))
        except errors.NotFound:
            return plans.Chain(tuple(owners), plans.End.MISSING, ref)
        except errors.Forbidden:
            return plans.Chain(tuple(owners), plans.End.FORBIDDEN, ref)
        if ref.uid and plans.owner_ref(got).uid != ref.uid:
            return plans.Chain(tuple(owners), plans.End.MISSING, ref)
        owners.append(got)
        seen.add(ref.uid)
        obj = got
    return plans.Chain(tuple(owners), plans.End.LOOP, plans.next_ref(obj))


def _podgroup(plan: plans.Plan, *, namespace: str) -> custom_objects.PodGroup:
    assert plan.group is not None and plan.owner is not None and plan.gang is not None
    gang = plan.gang
    spec: custom_objects.PodGroupSpec = {
        "minMember": gang.min_member,
        "queue": plan.queue or keys.DEFAULT_QUEUE,
    }
    if gang.min_resources:
        spec["minResources"] = dict(gang.min_resources)
    if gang.priority_class_name:
        spec["priorityClassName"] = gang.priority_class_name
    return {
        "apiVersion": keys.API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": plan.group,
            "namespace": namespace,
            "annotations": {keys.DERIVED_FROM_ANNOTATION: f"{plan.grouped_by}: {gang.why}"},
            "ownerReferences": [
                {
                    "apiVersion": plan.owner.api_version,
                    "kind": plan.owner.kind,
                    "name": plan.owner.name,
                    "uid": plan.owner.uid,
                }
            ],
        },
        "spec": spec,
    }


def _pod_edit(plan: plans.Plan, pod: pods.PodInfo) -> dict[str, object]:
    """A merge patch of the pod's labels and annotations (``None`` removes one)."""
    labels: dict[str, str | None] = {}
    annotations: dict[str, str | None] = {}
    if plan.outcome is plans.Outcome.HELD:
        annotations[keys.GROUP_ERROR_ANNOTATION] = plan.problem
    else:
        if plan.outcome is plans.Outcome.SINGLE:
            if not pod.labels.get(keys.QUEUE_LABEL):
                labels[keys.QUEUE_LABEL] = plan.queue or keys.DEFAULT_QUEUE
        else:
            labels[keys.POD_GROUP_LABEL] = plan.group
        annotations[keys.GROUPED_BY_ANNOTATION] = plan.grouped_by
        annotations[keys.GROUP_ERROR_ANNOTATION] = None
    meta: dict[str, dict[str, str | None]] = {"annotations": annotations}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta}


@dataclasses.dataclass
class _Batch:
    """What one batch read and wrote, so the pods of one workload cost one read and write."""

    objects: dict[str, api_objects.ForeignObject] = dataclasses.field(default_factory=dict)
    groups: dict[str, custom_objects.PodGroupSpec] = dataclasses.field(default_factory=dict)


class OwnerGrouper:
    """Derives the groups of the pods waiting for one (see the module docstring)."""

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        clock: clocks.Clock,
        recorder: events.EventRecorder | None = None,
        retry: float = 10.0,
        namespace_queue: collections.abc.Callable[[str], str] | None = None,
        writer: writes.Writer | None = None,
    ) -> None:
        """``namespace_queue(namespace)``: the queue a namespace's pods join when nothing
        names one (the cluster's ``default`` when not given). ``writer``: the leader's write
        primitive for the pods' labels and the derived groups' specs (one of its own on
        ``api`` when not given)."""
        self._api = api
        self._writer = writer or writes.Writer(api)
        self._clock = clock
        self._recorder = recorder
        self._retry = retry
        self._namespace_queue = namespace_queue or (lambda _: keys.DEFAULT_QUEUE)
        self._waiting: dict[str, pods.PodInfo] = {}
        self._not_before: dict[str, float] = {}
        self._wake = wakeups.Wakeup()
        self.grouped = 0
        """Pods given a group so far."""

    def offer(self, snapshot: snapshots.Snapshot) -> None:
        """Take note of the pods of ``snapshot`` waiting for a group (called after a cycle)."""
        now = self._clock.now()
        waiting = {str(p.key): p for p in snapshot.awaiting_owner_group()}
        for key in [k for k in self._not_before if k not in waiting]:
            del self._not_before[key]
        fresh = {k: p for k, p in waiting.items() if self._not_before.get(k, 0.0) <= now}
        if fresh:
            self._waiting.update(fresh)
            self._wake.wake()

    async def run(self, stop: asyncio.Event) -> None:
        """Group the pods offered, batch by batch, until ``stop``."""
        while await self._wake.sleep(stop=stop) and not stop.is_set():
            await self.group_waiting()

    async def group_waiting(self) -> None:
        """Group every pod offered so far (one batch)."""
        waiting, self._waiting = self._waiting, {}
        batch = _Batch()
        for key in sorted(waiting):
            pod = waiting[key]
            try:
                await self._group(pod, batch)
            except errors.KubeError as exc:
                logger.warning("cannot group pod %s by its owners yet: %s", key, exc)
                self._not_before[key] = self._clock.now() + self._retry

    async def _get(self, path: str, batch: _Batch) -> api_objects.ForeignObject:
        found = batch.objects.get(path)
        if found is None:
            got = await rest.request(self._api, method="GET", path=path)
            found = batch.objects[path] = typing.cast(api_objects.ForeignObject, got)  # an owner
        return found

    async def _group(self, pod: pods.PodInfo, batch: _Batch) -> None:
        obj = pod_object(pod)
        chain = await walk(obj, namespace=pod.namespace, fetch=lambda p: self._get(p, batch))
        plan = plans.plan(obj, chain, default_queue=self._namespace_queue(pod.namespace))
        if plan.outcome is plans.Outcome.GANG:
            await self._ensure_group(plan, namespace=pod.namespace, batch=batch)
        if plan.outcome is plans.Outcome.HELD:
            self._not_before[pod.key] = self._clock.now() + self._retry
            if pod.group_error == plan.problem:
                return
            logger.warning("cannot group pod %s by its owners: %s", pod.key, plan.problem)
            self._event(pod, reason="GroupByOwnerFailed", message=str(plan.problem))
        written = await self._writer.patch(
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
            _pod_edit(plan, pod),
            what=f"pod {pod.key}",
        )
        if not written.ok:
            raise errors.KubeError(f"its labels were not written ({written.outcome.value})")
        if plan.outcome is not plans.Outcome.HELD:
            # Until the informer brings the labelled pod, later cycles still offer it.
            self._not_before[pod.key] = self._clock.now() + self._retry
            self.grouped += 1
            logger.info("pod %s grouped by %s: %s", pod.key, plan.grouped_by, plan.outcome.value)

    async def _ensure_group(self, plan: plans.Plan, *, namespace: str, batch: _Batch) -> None:
        wanted = _podgroup(plan, namespace=namespace)
        key = f"{namespace}/{plan.group}"
        if batch.groups.get(key) == wanted["spec"]:
            return
        collection = f"/apis/{keys.API_VERSION}/namespaces/{namespace}/podgroups"
        try:
            await rest.request(self._api, method="POST", path=collection, body=wanted)
            logger.info("PodGroup %s derived from %s", key, wanted["metadata"]["annotations"])
        except errors.Conflict:
            current = await rest.request(self._api, method="GET", path=f"{collection}/{plan.group}")
            meta = current.get("metadata") or {}
            derived = keys.DERIVED_FROM_ANNOTATION in (meta.get("annotations") or {})
            if derived and current.get("spec") != wanted["spec"]:
                # The workload was resized (or its queue changed): follow it.
                written = await self._writer.patch(
                    f"{collection}/{plan.group}",
                    {
                        "metadata": {"annotations": wanted["metadata"]["annotations"]},
                        "spec": {
                            **wanted["spec"],
                            **{
                                k: None
                                for k in (current.get("spec") or {})
                                if k not in wanted["spec"]
                            },
                        },
                    },
                    what=f"PodGroup {key}",
                )
                if not written.ok:
                    raise errors.KubeError(
                        f"PodGroup {key} was not resized ({written.outcome.value})"
                    ) from None
        batch.groups[key] = wanted["spec"]

    def _event(self, pod: pods.PodInfo, *, reason: str, message: str) -> None:
        if self._recorder is None:
            return
        ref = events.ObjectRef("Pod", pod.name, namespace=pod.namespace, uid=pod.uid)
        self._recorder.record(ref, type="Warning", reason=reason, message=message)
