"""Test doubles and wiring for admission mode on the emulator.

- :class:`StandInScheduler` is a small stand-in for kube-scheduler, written for these tests and
  only enough to exercise Berth's admission protocol: it binds ungated, unbound pods of the
  default scheduler — a pod whose required node affinity pins it (``matchFields metadata.name
  In [node]``) only to that node, any other pod to the first node (by name) with room. A pod
  that does not fit where it must go is reported ``PodScheduled=False/Unschedulable`` as
  kube-scheduler reports it; a binding the API server refuses is reported ``SchedulerError``
  and not retried (kube-scheduler would back off for seconds, longer than the tests' bind
  timeout). Tests may make it refuse nodes (``refuses``: a taint only it sees) and leave pods
  alone for a while (``holding``). It has no queue, no scoring, no preemption: it is not
  kube-scheduler.
- :class:`BerthStack` runs Berth's leader-side pieces against the emulator, built by the
  operator's composition root (:func:`berth.operator.scheduling.build`): informers and the
  leader's Kopf (Berth's kinds, their statuses) -> cache ->
  :class:`~berth.kube.admission.admission.Admission` (around the ``CacheSource`` and the
  ``ApiSink``) -> the scheduling loop with the default profile.
  The wiring does not depend on the mode: the mode decides how pods are created (gated by the
  webhook, or naming Berth's scheduler), which is what restarting with the other flag changes.
- :func:`eventually` polls a condition (bounded) while the asynchronous parts converge.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import typing

import kubernetes_asyncio.client
import kubernetes_asyncio.config

from berth.api import crds, keys
from berth.emulator import testing
from berth.kube.binder import decisions
from berth.kube.transport import errors, rest, watching
from berth.operator import scheduling, settings
from berth.scheduler import loop
from berth.scheduler.framework import decisions as cycle_decisions
from berth.scheduler.plugins import registry
from berth.scheduler.snapshot import pods as pod_infos
from berth.scheduler.snapshot import snapshots as snapshot_types
from berth.util import clocks

Object = dict[str, typing.Any]
SCHEDULER_NAME = keys.DEFAULT_SCHEDULER_NAME


def install_crds(emulator: testing.RunningEmulator) -> None:
    resource = emulator.api.resource("apiextensions.k8s.io/v1", "customresourcedefinitions")
    for crd in crds.render_all().values():
        emulator.call(emulator.api.create, resource, crd)


def pod(
    name: str,
    *,
    cpu: str = "1",
    labels: dict[str, str] | None = None,
    gated: bool = True,
    scheduler: str | None = None,
) -> Object:
    spec: Object = {
        "restartPolicy": "Never",
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
        ],
    }
    if gated:
        spec["schedulingGates"] = [{"name": keys.ADMISSION_GATE}]
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def create(
    emulator: testing.RunningEmulator, api_version: str, plural: str, body: Object
) -> Object:
    resource = emulator.api.resource(api_version, plural)
    namespace = "default" if resource.namespaced else None
    return emulator.call(emulator.api.create, resource, body, namespace=namespace).object


def get_pod(emulator: testing.RunningEmulator, name: str) -> Object | None:
    found = emulator.call(emulator.api.storage.get, ("", "pods"), "default", name)
    return typing.cast(Object | None, found)


def all_pods(emulator: testing.RunningEmulator) -> list[Object]:
    return typing.cast(
        list[Object], emulator.call(emulator.api.storage.list, ("", "pods"), "default")
    )


def events(emulator: testing.RunningEmulator) -> list[Object]:
    found = emulator.call(emulator.api.storage.list, ("", "events"), "default")
    return typing.cast(list[Object], found)


def delete_pod(emulator: testing.RunningEmulator, name: str) -> None:
    resource = emulator.api.resource("v1", "pods")
    emulator.call(emulator.api.delete, resource, namespace="default", name=name)


def gates(obj: Object) -> list[str]:
    return [g["name"] for g in obj["spec"].get("schedulingGates") or ()]


async def eventually(
    check: collections.abc.Callable[[], bool], *, timeout: float = 15.0, what: str = ""
) -> None:
    """Wait (bounded) until ``check()`` holds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(0.02)


def _pinned_node(obj: Object) -> str | None:
    affinity = (obj["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or ():
        for field in term.get("matchFields") or ():
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                return str(field["values"][0])
    return None


class StandInScheduler:
    """The tests' stand-in for kube-scheduler; see the module docstring."""

    def __init__(self, api: kubernetes_asyncio.client.ApiClient) -> None:
        self._api = api
        self._pods: dict[str, Object] = {}
        self._nodes: dict[str, dict[str, int]] = {}
        self._failed: set[str] = set()  # uids whose binding was refused: never retried
        self.paused = False
        self.refuses: set[str] = set()
        """Nodes it will not bind to (a taint or cordon only it sees): it reports the pod
        Unschedulable instead."""
        self.holding: set[str] = set()
        """Pods (names) it leaves alone for now."""
        self.bound: dict[str, str] = {}  # pod name -> node, in binding order

    def knows(self, name: str) -> bool:
        """The pod ``name`` has reached this scheduler's view."""
        return name in self._pods

    def resume(self) -> None:
        """Bind again after :attr:`paused`, at once rather than at the next pod event."""
        self.paused = False
        self._kick = asyncio.ensure_future(self._schedule())

    async def run(self, stop: asyncio.Event) -> None:
        listing = await watching.list_pages(self._api, path="/api/v1/nodes")
        for node in listing.items:
            allocatable = node.get("status", {}).get("allocatable") or {}
            self._nodes[node["metadata"]["name"]] = dict(
                pod_infos.pod_requests(
                    {"containers": [{"resources": {"requests": allocatable}}]}
                ).items()
            )
        listed = await watching.list_pages(self._api, path="/api/v1/pods")
        for item in listed.items:
            self._pods[item["metadata"]["name"]] = item
        version = listed.resource_version
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                follow = asyncio.ensure_future(self._follow(version))
                done, _ = await asyncio.wait(
                    {follow, stopping}, return_when=asyncio.FIRST_COMPLETED
                )
                if follow not in done:
                    follow.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await follow
                    break
                version = follow.result()
        finally:
            stopping.cancel()

    async def _follow(self, version: str) -> str:
        await self._schedule()
        async for event in watching.watch(
            self._api, path="/api/v1/pods", resource_version=version, timeout_seconds=60
        ):
            if event.resource_version:
                version = event.resource_version
            if event.type == "BOOKMARK":
                continue
            name = event.object["metadata"]["name"]
            if event.type == "DELETED":
                self._pods.pop(name, None)
            else:
                self._pods[name] = event.object
            await self._schedule()
        return version

    def _used(self, node: str) -> dict[str, int]:
        used: dict[str, int] = {}
        for obj in self._pods.values():
            if obj["spec"].get("nodeName") != node or obj.get("status", {}).get("phase") in (
                "Succeeded",
                "Failed",
            ):
                continue
            for name, value in pod_infos.pod_requests(obj["spec"]).items():
                used[name] = used.get(name, 0) + value
        return used

    def _fits(self, obj: Object, node: str) -> bool:
        used = self._used(node)
        free = self._nodes.get(node, {})
        return all(
            used.get(name, 0) + value <= free.get(name, 0)
            for name, value in pod_infos.pod_requests(obj["spec"]).items()
        )

    async def _schedule(self) -> None:
        if self.paused:
            return
        for name in sorted(self._pods):
            obj = self._pods[name]
            spec, meta = obj["spec"], obj["metadata"]
            if (
                spec.get("nodeName")
                or spec.get("schedulingGates")
                or spec.get("schedulerName", "default-scheduler") != "default-scheduler"
                or meta.get("deletionTimestamp")
                or meta.get("uid") in self._failed
                or name in self.holding
            ):
                continue
            pinned = _pinned_node(obj)
            candidates = [pinned] if pinned is not None else sorted(self._nodes)
            candidates = [n for n in candidates if n not in self.refuses]
            target = next((n for n in candidates if self._fits(obj, n)), None)
            if target is None:
                await self._condition(
                    obj, "Unschedulable", f"0/{len(self._nodes)} nodes are available"
                )
                continue
            try:
                await rest.request(
                    self._api,
                    method="POST",
                    path=f"/api/v1/namespaces/default/pods/{name}/binding",
                    body={
                        "metadata": {"name": name, "uid": meta["uid"]},
                        "target": {"kind": "Node", "name": target},
                    },
                )
            except errors.APIError as exc:
                self._failed.add(meta["uid"])
                await self._condition(obj, "SchedulerError", f"binding rejected: {exc}")
                continue
            spec["nodeName"] = target  # until the watch brings it
            self.bound[name] = target

    async def _condition(self, obj: Object, reason: str, message: str) -> None:
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
        }
        current = [
            c
            for c in obj.get("status", {}).get("conditions") or ()
            if c.get("type") == "PodScheduled"
        ]
        if current and current[0].get("reason") == reason:
            return
        with contextlib.suppress(errors.KubeError):
            await rest.request(
                self._api,
                method="PATCH",
                path=f"/api/v1/namespaces/default/pods/{obj['metadata']['name']}/status",
                body={"status": {"conditions": [condition]}},
                content_type="application/strategic-merge-patch+json",
            )


class _RecordingSink:
    """The binder, remembering every result admission hands it (group reasons included)."""

    def __init__(self, inner: decisions.ApiSink, into: list[cycle_decisions.CycleResult]) -> None:
        self._inner = inner
        self._into = into

    def apply(self, result: cycle_decisions.CycleResult) -> None:
        self._into.append(result)
        self._inner.apply(result)

    def pod_removed(self, key: str) -> None:
        self._inner.pod_removed(key)


class _RememberingSource:
    """Admission's view, remembering the snapshot the loop scheduled from last."""

    def __init__(self, inner: loop.SnapshotSource) -> None:
        self._inner = inner
        self.last: snapshot_types.Snapshot | None = None

    def snapshot(self) -> snapshot_types.Snapshot:
        self.last = self._inner.snapshot()
        return self.last


class BerthStack:
    """Berth's leader-side pieces on the emulator (see the module docstring)."""

    def __init__(
        self,
        emulator: testing.RunningEmulator,
        *,
        bind_timeout: float = 5.0,
        capacity_requests: bool = False,
    ) -> None:
        self.emulator = emulator
        self.bind_timeout = bind_timeout
        self.capacity_requests = capacity_requests
        """Run the capacity requests to autoscalers too, fed after each cycle as the
        operator feeds them."""
        self.results: list[cycle_decisions.CycleResult] = []
        """What the binder was handed, cycle by cycle (after admission took its part)."""
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> BerthStack:
        self.api = await kubernetes_asyncio.config.new_client_from_config(
            config_file=str(self.emulator.kubeconfig)
        )
        # The operator's composition root, with the binder recording what it is handed.
        self.parts = scheduling.build(
            scheduling.Inputs(
                api=self.api,
                settings=settings.Settings(
                    kubeconfig=str(self.emulator.kubeconfig),
                    admission={"bind_timeout": self.bind_timeout},
                ),
                clock=clocks.SystemClock(),
                registry=registry.in_tree_registry(),
                wrap_sink=lambda sink: _RecordingSink(sink, self.results),
            )
        )
        self.scheduler = self.parts.scheduler
        self.cache = self.parts.cache
        self.trigger = self.parts.trigger
        self.informers = self.parts.informers
        self.recorder = self.parts.recorder
        self.sink = self.parts.sink
        self.source = self.parts.source
        self.admission = self.parts.admission
        for name, run in (
            ("events", self.recorder.run),
            ("informers", self.informers.run),
            ("binder", self.sink.run),
            ("admission", self.admission.run),
            ("loop", self._loop),
        ):
            self._tasks.append(asyncio.create_task(run(self._stop), name=name))
        if self.capacity_requests:
            assert self.parts.requests is not None
            self._tasks.append(
                asyncio.create_task(self.parts.requests.run(self._stop), name="capacity requests")
            )
        # The leader's Kopf: the one watch of Queues, PodGroups and Reservations (feeding the
        # cache), and their status writers (Reservations' from the facts the binder publishes).
        self.kopf = self.parts.kopf
        await self.kopf.start()
        await asyncio.wait_for(self.informers.synced.wait(), timeout=20)
        return self

    async def _loop(self, stop: asyncio.Event) -> None:
        # As the operator's loop does: no cycle on a half-listed cluster (Kopf's kinds come in
        # a moment after the informers' first lists).
        await self.informers.synced.wait()
        source = _RememberingSource(self.admission)
        requests = self.parts.requests if self.capacity_requests else None

        def on_result(result: cycle_decisions.CycleResult) -> None:
            if requests is not None and source.last is not None:
                requests.offer(source.last, result, gated=self.admission.through_gate)

        await loop.run(
            self.scheduler,
            source=source,
            sink=self.admission,
            stop=stop,
            trigger=self.trigger,
            period=0.05,
            on_result=on_result,
            in_thread=False,
        )

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await self.kopf.stop()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.api.close()

    def group_reason(self, group: str) -> str | None:
        for result in reversed(self.results):
            if group in result.group_reasons:
                return result.group_reasons[group]
        return None


@contextlib.asynccontextmanager
async def stand_in(
    emulator: testing.RunningEmulator,
) -> collections.abc.AsyncIterator[StandInScheduler]:
    """Run a :class:`StandInScheduler` against ``emulator`` for the block."""
    api = await kubernetes_asyncio.config.new_client_from_config(
        config_file=str(emulator.kubeconfig)
    )
    scheduler = StandInScheduler(api)
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop), name="stand-in kube-scheduler")
    try:
        yield scheduler
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
