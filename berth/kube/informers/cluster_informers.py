"""The informers Berth runs: every kind the scheduler needs but its own, into the cache.

:class:`ClusterInformers` runs the informers Berth needs and feeds a
:class:`~berth.scheduler.snapshot.cache.ClusterCache`:

- pods: one watch of every pod, filtered here: Berth's own pods (its scheduler name) in any
  phase (finished members count for their gangs), and other schedulers' pods while they are
  bound and not finished (they use node capacity). One stream rather than two selector-filtered
  ones, so that a pod being bound is never seen deleted from one stream and added to another
  in the wrong order;
- nodes, PriorityClasses, Namespaces (their labels: default queues, queues' namespace
  selectors);
- PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes (the volume plugins);
  ``on_claim_changed`` hears every claim change (the binder's wait for claims to bind);
- DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates (DRA), where the API
  server serves ``resource.k8s.io/v1`` (asked once at start,
  :mod:`berth.kube.transport.dra_discovery`; the cache then schedules devices,
  :meth:`~berth.scheduler.snapshot.cache.ClusterCache.watch_devices`); where it does not, one log
  line says so and pods with claims are not Berth's to place.

Berth's own kinds (Queues, PodGroups, Reservations) are not watched here: the leader's Kopf
watches them, and its handlers feed the same cache (:mod:`berth.controllers.indexing`) — each
kind is watched once per replica.

Malformed objects (not parseable by the cache) are logged and skipped.
:class:`~berth.kube.informers.cache_sync.CacheSync` says whether the cache holds every source's
first list — each informer's, and the Kopf handlers' (the ``caches-synced`` readiness condition,
true once every source has listed once, false again while any cannot follow the API server);
``synced`` is set then. ``trigger`` is set on every
change the scheduler should react to (anything but status churn of pods already bound), which
is what wakes the scheduling loop. :meth:`ClusterInformers.holds_capacity` says whether a pod is
still in the cache and unfinished, and ``on_pod_released`` hears when one stops being so: the
binder holds a preemptor's binding until the victims on its node are gone.
"""

from __future__ import annotations

import asyncio
import collections.abc
import logging
import typing

import kubernetes_asyncio.client

from berth.api import core, objects
from berth.kube.informers.cache_sync import CacheSync, ReadinessSink
from berth.kube.informers.list_watch import (
    ChangeCallback,
    Informer,
    RemoveCallback,
    Resource,
    object_key,
)
from berth.kube.transport import dra_discovery, errors
from berth.scheduler.snapshot import cache as cluster_cache
from berth.util import wakeups

__all__ = ["ClusterInformers", "LivePods", "pod_resource"]

logger = logging.getLogger(__name__)

_TERMINAL = frozenset({"Succeeded", "Failed"})


def pod_resource() -> Resource:
    """Every pod in the cluster (filtered by :class:`ClusterInformers`, not the server)."""
    return Resource("pods", "/api/v1/pods", namespaced=True)


_NODES = Resource("nodes", "/api/v1/nodes", namespaced=False)
_NAMESPACES = Resource("namespaces", "/api/v1/namespaces", namespaced=False)
_CLASSES = Resource(
    "priorityclasses", "/apis/scheduling.k8s.io/v1/priorityclasses", namespaced=False
)
_CLAIMS = Resource("persistentvolumeclaims", "/api/v1/persistentvolumeclaims", namespaced=True)
_VOLUMES = Resource("persistentvolumes", "/api/v1/persistentvolumes", namespaced=False)
_STORAGE = "/apis/storage.k8s.io/v1"
_STORAGE_CLASSES = Resource("storageclasses", f"{_STORAGE}/storageclasses", namespaced=False)
_CSI_NODES = Resource("csinodes", f"{_STORAGE}/csinodes", namespaced=False)


class LivePods:
    """Which pods are in the cache and not finished (key -> uid): who still holds capacity.

    The informers write it; the binder's victim waits read it (:class:`~berth.kube.binder.
    victim_waits.PodPresence`). A separate object so that both can be built with it, in any
    order, by the composition root."""

    def __init__(self) -> None:
        self._uids: dict[str, str] = {}

    def holds_capacity(self, key: str, *, uid: str = "") -> bool:
        """True while the pod ``key`` (with ``uid``, unless empty) is in the cache and not
        finished: a bound one still occupies its node."""
        found = self._uids.get(key)
        return found is not None and (not uid or found == uid)

    def hold(self, key: str, uid: str) -> str | None:
        """``key`` is live with ``uid``; the uid it had before (None: it was not live)."""
        before = self._uids.get(key)
        self._uids[key] = uid
        return before

    def release(self, key: str) -> bool:
        """``key`` stopped holding capacity; whether it held any."""
        return self._uids.pop(key, None) is not None


class ClusterInformers:
    """The informers that keep one :class:`ClusterCache` current (see the module docstring).

    Everything it tells others is passed in when it is built (the composition root,
    :mod:`berth.operator.scheduling`, builds it last):

    - ``live``: the pods holding capacity, kept current here;
    - ``also_ours``: told every pod seen; True keeps a pod of another scheduler in the cache, in
      any phase (admission mode: pods held by Berth's gate or admitted by Berth);
    - ``on_pod_removed``: told the key of every pod that left the cache (the binder drops its
      retries);
    - ``on_pod_released``: told the key of every pod that stopped holding capacity: it
      finished (Succeeded or Failed), left the cache, or was replaced by a new pod of that
      name;
    - ``on_claim_changed``: told the key of every PersistentVolumeClaim that changed or went
      (the binder's bindings waiting for claims to bind);
    - ``on_node``, ``on_node_gone``: told every Node as seen, and the name of every Node that
      went (the node writer reads their annotations, which the cache does not keep);
    - ``sync``: the cache's :class:`CacheSync`, shared with the cache's other feeders (Kopf's
      handlers of Berth's kinds); None: one of its own, reporting to ``readiness``;
    - ``dynamic_resources``: watch the DRA kinds (True), not (False), or where the API server
      serves them (None: discovery at start).
    """

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        cache: cluster_cache.ClusterCache,
        scheduler_names: collections.abc.Collection[str],
        trigger: asyncio.Event,
        readiness: ReadinessSink | None = None,
        watch_timeout: int = 300,
        live: LivePods | None = None,
        also_ours: collections.abc.Callable[[core.Pod], bool] | None = None,
        on_pod_removed: collections.abc.Callable[[str], None] | None = None,
        on_pod_released: collections.abc.Callable[[str], None] | None = None,
        on_claim_changed: collections.abc.Callable[[str], None] | None = None,
        on_node: collections.abc.Callable[[core.Node], None] | None = None,
        on_node_gone: collections.abc.Callable[[str], None] | None = None,
        sync: CacheSync | None = None,
        dynamic_resources: bool | None = None,
    ) -> None:
        self.cache = cache
        self._ours = frozenset(scheduler_names)
        self._trigger = trigger
        self.sync = sync if sync is not None else CacheSync(readiness)
        """Whether the cache holds every source's first list (these informers' and others')."""
        self._bound: set[str] = set()  # pods known bound and unfinished (status churn is noise)
        self._tracked: set[str] = set()  # pods in the cache
        self.live = live if live is not None else LivePods()
        """The pods in the cache and not finished."""
        self._also_ours = also_ours
        self._on_pod_removed = on_pod_removed
        self._on_pod_released = on_pod_released
        self._on_claim_changed = on_claim_changed
        self._on_node = on_node
        self._on_node_gone = on_node_gone
        self._dynamic_resources = dynamic_resources
        self._devices_known = False  # discovery answered (a second run() asks no more)
        self._api = api

        def informer(
            resource: Resource, change: ChangeCallback, remove: RemoveCallback
        ) -> Informer:
            return Informer(
                api,
                resource=resource,
                on_change=change,
                on_remove=remove,
                on_health=self._health,
                on_listed=self._listed,
                watch_timeout=watch_timeout,
            )

        self._informer = informer
        self.informers: tuple[Informer, ...] = (
            informer(_NODES, *self._feeding(self._node, self._node_gone)),
            informer(_NAMESPACES, *self._feeding(cache.add_namespace, cache.remove_namespace)),
            informer(
                _CLASSES, *self._feeding(cache.add_priority_class, cache.remove_priority_class)
            ),
            informer(_CLAIMS, *self._feeding(self._claim, self._claim_gone)),
            informer(_VOLUMES, *self._feeding(cache.add_volume, cache.remove_volume)),
            informer(
                _STORAGE_CLASSES,
                *self._feeding(cache.add_storage_class, cache.remove_storage_class),
            ),
            informer(_CSI_NODES, *self._feeding(cache.add_csi_node, cache.remove_csi_node)),
            informer(pod_resource(), self._pod, self._pod_gone),
        )
        for each in self.informers:
            self.sync.expect(each.resource.name)

    @property
    def synced(self) -> asyncio.Event:
        """Set once every source of the cache has listed once (:attr:`sync`)."""
        return self.sync.synced

    async def run(self, stop: asyncio.Event) -> None:
        """Run every informer until ``stop`` is set."""
        self.sync.report()
        if not await self._discover_devices(stop):
            return
        synced = asyncio.create_task(self._await_sync(), name="informers: synced")
        try:
            await asyncio.gather(*(i.run(stop) for i in self.informers))
        finally:
            synced.cancel()
            await asyncio.gather(synced, return_exceptions=True)

    def _listed(self, informer: Informer) -> None:
        self.sync.listed(informer.resource.name)

    async def _discover_devices(self, stop: asyncio.Event) -> bool:
        """Add the DRA informers where the API server serves ``resource.k8s.io/v1`` (asking
        until it answers, once: a run after a stop keeps what was found); False when ``stop``
        came first."""
        if self._devices_known:
            return True
        served = self._dynamic_resources
        delay = 0.5
        while served is None:
            try:
                served = await dra_discovery.served(self._api)
            except errors.KubeError as exc:
                problem = (
                    f"cannot reach the API server: {exc}"
                    if isinstance(exc, errors.TransportError)
                    else f"discovery failed: {exc}"
                )
                self.sync.following(dra_discovery.PATH, problem)
                if await wakeups.sleep_or_stop(delay, stop=stop):
                    return False
                delay = min(delay * 2, 30.0)
        self.sync.following(dra_discovery.PATH)
        self._devices_known = True
        if not served:
            logger.warning("%s", dra_discovery.NOT_SERVED)
            return True
        cache = self.cache
        feeds = {
            "deviceclasses": (cache.add_device_class, cache.remove_device_class),
            "resourceslices": (cache.add_resource_slice, cache.remove_resource_slice),
            "resourceclaims": (cache.add_resource_claim, cache.remove_resource_claim),
            "resourceclaimtemplates": (
                cache.add_resource_claim_template,
                cache.remove_resource_claim_template,
            ),
        }
        added = tuple(
            self._informer(
                Resource(
                    plural,
                    f"{dra_discovery.PATH}/{plural}",
                    namespaced=plural not in ("deviceclasses", "resourceslices"),
                ),
                *self._feeding(*feeds[plural]),
            )
            for plural in dra_discovery.KINDS
        )
        for each in added:
            self.sync.expect(each.resource.name)
        # Before the pods: a pod's claims are known when it is first tried.
        self.informers = (*added, *self.informers)
        cache.watch_devices()
        return True

    async def _await_sync(self) -> None:
        """Kick the scheduling loop once the cache is synced (again on a run after a stop)."""
        await wakeups.first_set(self.sync.synced)
        self._trigger.set()

    def _health(self, informer: Informer, problem: str | None) -> None:
        self.sync.following(informer.resource.name, problem)

    # Pods ---------------------------------------------------------------------------------
    def holds_capacity(self, key: str, *, uid: str = "") -> bool:
        """True while the pod ``key`` (with ``uid``, unless empty) is in the cache and not
        finished: a bound one still occupies its node."""
        return self.live.holds_capacity(key, uid=uid)

    def _pod(self, kind: str, raw: objects.KubeObject) -> None:
        obj = typing.cast(core.Pod, raw)  # the pods informer's objects are pods
        key = object_key(obj, namespaced=True)
        assert key is not None  # the informer checked
        spec = obj.get("spec")
        status = obj.get("status")
        spec = spec if isinstance(spec, dict) else {}
        status = status if isinstance(status, dict) else {}
        ours = spec.get("schedulerName") in self._ours
        if self._also_ours is not None and self._also_ours(obj):
            ours = True
        node = spec.get("nodeName")
        bound = bool(node)
        live = status.get("phase") not in _TERMINAL
        if not ours and not (bound and live):
            if key in self._tracked:
                self._pod_gone(key)
            return
        # The binding Berth sent, landed: the cache counts the pod on that node already.
        confirms = bound and self.cache.assumed_node(key) == node
        self.cache.add_pod(obj)
        self._tracked.add(key)
        if live:
            meta = obj.get("metadata")
            uid = str((meta if isinstance(meta, dict) else {}).get("uid") or "")
            before = self.live.hold(key, uid)
            if before is not None and before != uid:
                self._released(key)  # a new pod under the old name: the old one is gone
        else:
            self._release(key)
        if bound and live:
            if key in self._bound:
                return  # a running pod's status changed: nothing to schedule
            self._bound.add(key)
            if confirms:
                # No cycle could decide anything new from it (kube-scheduler's cache confirms
                # an assumed pod the same way, without a scheduling attempt); the next cycle,
                # woken by anything else or by the period, sees it. In a stream of pods this
                # is half the cycles.
                return
        else:
            self._bound.discard(key)
        self._trigger.set()

    def _pod_gone(self, key: str) -> None:
        self._bound.discard(key)
        self._release(key)
        if key in self._tracked:
            self._tracked.discard(key)
            self.cache.remove_pod(key)
            self._trigger.set()
        if self._on_pod_removed is not None:
            self._on_pod_removed(key)

    def _release(self, key: str) -> None:
        if self.live.release(key):
            self._released(key)

    def _released(self, key: str) -> None:
        if self._on_pod_released is not None:
            self._on_pod_released(key)

    # The rest -----------------------------------------------------------------------------
    def _node(self, obj: objects.KubeObject) -> None:
        self.cache.add_node(obj)
        if self._on_node is not None:
            self._on_node(typing.cast(core.Node, obj))  # the nodes informer's objects

    def _node_gone(self, name: str) -> None:
        self.cache.remove_node(name)
        if self._on_node_gone is not None:
            self._on_node_gone(name)

    def _claim(self, obj: objects.KubeObject) -> None:
        self.cache.add_claim(obj)
        key = object_key(obj, namespaced=True)
        if key is not None and self._on_claim_changed is not None:
            self._on_claim_changed(key)

    def _claim_gone(self, key: str) -> None:
        self.cache.remove_claim(key)
        if self._on_claim_changed is not None:
            self._on_claim_changed(key)

    def _feeding(
        self,
        add: collections.abc.Callable[[objects.KubeObject], None],
        remove: collections.abc.Callable[[str], None],
    ) -> tuple[ChangeCallback, RemoveCallback]:
        """Callbacks handing every change of a kind to the cache, each waking the scheduler."""

        def change(kind: str, obj: objects.KubeObject) -> None:
            add(obj)
            self._trigger.set()

        def gone(key: str) -> None:
            remove(key)
            self._trigger.set()

        return change, gone
