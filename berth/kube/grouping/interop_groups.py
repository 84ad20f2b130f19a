"""Other schedulers' gangs honoured as they are: scheduler-plugins, Volcano, Kubernetes' own.

For each enabled flavour (:data:`berth.workloads.interop.FLAVORS`) :class:`InteropGroups` waits
until its API is served — it is told of every CustomResourceDefinition the leader's Kopf sees
(:meth:`InteropGroups.crd_seen`; that watch is the process's one watch of CRDs,
:mod:`berth.controllers.indexing`), so a CRD appearing is seen at once, and asks discovery at
start and every ``discovery_interval`` (Kubernetes' Workload API is built into the API server,
with no CRD): a cluster without Volcano costs a request a minute and logs no warning. Once
served, it lists and watches those objects (an :class:`~berth.kube.informers.list_watch.Informer`).
For each one it keeps Berth PodGroups in step (:func:`berth.workloads.interop.mirrors`: the PodGroup
of the same name, or one per pod group of a 1.35 Workload and per replica key its waiting pods
name; created, updated when what they are made from changes — the original's spec and name,
not its status —, made again when deleted by hand, owned by it so they go with it), which is what
the pods' own keys (``scheduling.x-k8s.io/pod-group``, ``scheduling.k8s.io/group-name``,
``spec.schedulingGroup``, ``spec.workloadRef``) find. After each cycle
(:meth:`InteropGroups.offer`) it writes Berth's verdict back into each original's status
(:func:`berth.workloads.interop.foreign_status`) when that changed and the flavour's status is
Berth's to write.

A Berth PodGroup of the same name that is not a mirror (somebody wrote it) is left alone: the
pods join it, and a Warning Event ``PodGroupConflict`` on the original says so. API failures are
logged and retried at the next change or cycle; nothing here raises into the loop.
"""

from __future__ import annotations

import asyncio
import collections.abc
import logging
import typing

import kubernetes_asyncio.client

from berth.api import keys, objects
from berth.kube.informers import list_watch
from berth.kube.transport import errors, events, rest, writes
from berth.scheduler.snapshot import podgroups, snapshots
from berth.util import wakeups
from berth.workloads import interop

__all__ = ["InteropGroups"]

logger = logging.getLogger(__name__)

_OWNED = ("phase", "running", "succeeded", "failed", "conditions")


class InteropGroups:
    """Mirrors and status write-backs of other schedulers' PodGroups (module docstring)."""

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        flavors: collections.abc.Sequence[interop.Flavor] = interop.FLAVORS,
        recorder: events.EventRecorder | None = None,
        discovery_interval: float = 60.0,
        writer: writes.Writer | None = None,
    ) -> None:
        """``discovery_interval``: how often (seconds) to ask discovery whether a flavour's API
        is served, until it is (a CRD appearing is seen at once). ``writer``: the leader's
        write primitive for the mirrors' specs and the originals' statuses (one of its own on
        ``api`` when not given)."""
        self._api = api
        self._writer = writer or writes.Writer(api)
        self._discovery_interval = discovery_interval
        self._flavors = tuple(flavors)
        self._recorder = recorder
        self._available = {f.name: asyncio.Event() for f in self._flavors}
        # (flavor name, key) -> the original as last seen; the keys whose mirror needs a sync.
        self._originals: dict[tuple[str, str], objects.ForeignObject] = {}
        self._dirty: set[tuple[str, str]] = set()
        # The originals whose Berth PodGroup (mirror, or one somebody wrote) a cycle's
        # snapshot held: missing from a later one, it was deleted and is made again.
        self._held: set[tuple[str, str]] = set()
        self._snapshot: snapshots.Snapshot | None = None
        self._reasons: collections.abc.Mapping[str, str] = {}
        self._conflicts: set[tuple[str, str]] = set()
        # Workload key -> (pod group, replica key) its pods name: one mirror each.
        self._replica_keys: dict[str, set[tuple[str, str]]] = {}
        self._wake = wakeups.Wakeup()
        self.served: set[str] = set()
        """The flavours whose PodGroup API the server serves (and Berth watches)."""

    # Inputs -------------------------------------------------------------------------------
    def offer(
        self, snapshot: snapshots.Snapshot, *, reasons: collections.abc.Mapping[str, str]
    ) -> None:
        """The cycle's snapshot and why-pending reasons by group key: statuses to write."""
        self._snapshot, self._reasons = snapshot, reasons
        if interop.WORKLOADS.name in self.served:
            self._note_replica_keys(snapshot)
        self._note_deleted_mirrors(snapshot)
        if self._originals:
            self._wake.wake()

    def _note_replica_keys(self, snapshot: snapshots.Snapshot) -> None:
        """The replicas of Workloads' pod groups that waiting pods name and no PodGroup stands
        for yet: their mirrors are made from the Workload at the next write."""
        for pod in (*snapshot.pending, *snapshot.gated):
            ref = pod.workload_ref
            if ref is None or ref.replica_key is None or pod.pod_group in snapshot.pod_groups:
                continue
            key = f"{pod.namespace}/{ref.workload}"
            seen = self._replica_keys.setdefault(key, set())
            if (ref.pod_group, ref.replica_key) not in seen:
                seen.add((ref.pod_group, ref.replica_key))
                self._dirty.add((interop.WORKLOADS.name, key))

    def _note_deleted_mirrors(self, snapshot: snapshots.Snapshot) -> None:
        """The originals whose Berth PodGroup an earlier snapshot held and this one does not:
        it was deleted (by hand), and is made again at the next write. (A Workload's mirrors
        have names of their own: made again when the Workload changes.)"""
        for item in self._originals:
            if item[0] == interop.WORKLOADS.name:
                continue
            if item[1] in snapshot.pod_groups:
                self._held.add(item)
            elif item in self._held:
                self._held.discard(item)
                self._dirty.add(item)

    def _mirrors(
        self, flavor: interop.Flavor, key: str, obj: objects.ForeignObject
    ) -> list[interop.Mirror]:
        replicas = self._replica_keys.get(key, ()) if flavor is interop.WORKLOADS else ()
        return interop.mirrors(flavor, obj, replica_keys=replicas)

    def _changed(self, flavor: interop.Flavor) -> list_watch.ChangeCallback:
        def change(_: str, obj: objects.KubeObject) -> None:
            key = list_watch.object_key(obj, namespaced=True)
            if key is None:
                return
            # A flavour's PodGroup or Workload: the kinds interop.FLAVORS name.
            original = typing.cast(objects.ForeignObject, obj)
            before = self._originals.get((flavor.name, key))
            self._originals[(flavor.name, key)] = original
            # A change of its status alone (its owner's, or Berth's own write-back) leaves its
            # mirror as it is: synced again, it would cost a create refused, a read and a patch.
            if before is None or self._mirrors(flavor, key, before) != self._mirrors(
                flavor, key, original
            ):
                self._dirty.add((flavor.name, key))
            self._wake.wake()  # its status may need Berth's verdict again

        return change

    def _removed(self, flavor: interop.Flavor) -> list_watch.RemoveCallback:
        def remove(key: str) -> None:
            self._originals.pop((flavor.name, key), None)
            self._dirty.discard((flavor.name, key))
            self._held.discard((flavor.name, key))
            self._conflicts.discard((flavor.name, key))
            if flavor is interop.WORKLOADS:
                self._replica_keys.pop(key, None)

        return remove

    # Running ------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Watch every flavour the server serves and write mirrors and statuses until
        ``stop``."""
        await asyncio.gather(
            self._write_loop(stop),
            *(self._watch(f, stop) for f in self._flavors),
            *(self._discover(f, stop) for f in self._flavors),
        )

    async def served_by(self, flavor: interop.Flavor) -> bool:
        """Whether discovery lists ``flavor``'s resource in its group and version (a failed
        request answers no: asked again later)."""
        path = f"/apis/{flavor.api_version}"
        try:
            found = await rest.request(self._api, method="GET", path=path)
        except errors.NotFound:
            return False
        except errors.KubeError as exc:
            logger.debug("cannot ask discovery about %s: %s", path, exc)
            return False
        listed = found.get("resources") if isinstance(found, dict) else None
        return any(isinstance(r, dict) and r.get("name") == flavor.plural for r in listed or ())

    async def _discover(self, flavor: interop.Flavor, stop: asyncio.Event) -> None:
        """Ask discovery whether ``flavor``'s API is served, now and every interval until it
        is: Kubernetes' Workload API is built into the API server (no CRD to watch)."""
        available = self._available[flavor.name]
        while not stop.is_set() and not available.is_set():
            if await self.served_by(flavor):
                available.set()
                return
            await wakeups.sleep_or_stop(self._discovery_interval, stop=stop)

    def crd_seen(self, _: str, crd: objects.KubeObject) -> None:
        """A CustomResourceDefinition was listed, added or changed: a flavour it serves is
        watched from now on."""
        name = crd.get("metadata", {}).get("name", "")
        # apiextensions' schema is not a record of its own: only spec.versions is read here.
        spec = typing.cast(objects.ForeignObject, crd).get("spec", {})
        for flavor in self._flavors:
            if name != f"{flavor.plural}.{flavor.group}":
                continue
            versions = spec.get("versions")
            if not isinstance(versions, list):
                continue
            if any(
                isinstance(v, dict) and v.get("name") == flavor.version and v.get("served")
                for v in versions
            ):
                self._available[flavor.name].set()

    async def _watch(self, flavor: interop.Flavor, stop: asyncio.Event) -> None:
        await wakeups.first_set(self._available[flavor.name], stop)
        if stop.is_set():
            return
        logger.info("%s %s are served: honouring them", flavor.name, flavor.plural)
        self.served.add(flavor.name)
        resource = list_watch.Resource(
            f"{flavor.name} {flavor.plural}", flavor.path, namespaced=True
        )
        watcher = list_watch.Informer(
            self._api,
            resource=resource,
            on_change=self._changed(flavor),
            on_remove=self._removed(flavor),
        )
        await watcher.run(stop)

    async def _write_loop(self, stop: asyncio.Event) -> None:
        while await self._wake.sleep(stop=stop) and not stop.is_set():
            await self.write_once()

    async def write_once(self) -> None:
        """Sync the mirrors of the originals that changed, then write statuses that changed."""
        flavors = {f.name: f for f in self._flavors}
        dirty, self._dirty = self._dirty, set()
        for name, key in sorted(dirty):
            obj = self._originals.get((name, key))
            if obj is None:
                continue
            try:
                await self._sync_mirror(flavors[name], key, obj)
            except errors.KubeError as exc:
                logger.warning("cannot keep the PodGroup mirroring %s %s: %s", name, key, exc)
                self._dirty.add((name, key))  # retried at the next wake
        snapshot = self._snapshot
        if snapshot is None:
            return
        for (name, key), obj in sorted(self._originals.items()):
            if (name, key) in self._conflicts or not flavors[name].writes_status:
                continue
            desired = self._status(flavors[name], key, snapshot)
            if desired is None:
                continue
            current = obj.get("status", {})
            if all(current.get(k) == desired.get(k) for k in _OWNED if k in desired):
                continue
            # Not written: deleted meanwhile, or the write primitive logged why (throttled).
            await self._write_status(flavors[name], obj, desired)

    def _status(
        self, flavor: interop.Flavor, key: str, snapshot: snapshots.Snapshot
    ) -> interop.ForeignStatus | None:
        info = snapshot.pod_groups.get(key)
        if info is None:
            return None
        members = snapshot.members(key)
        running = sum(1 for p in members if p.phase == "Running" and p.node_name is not None)
        placed = info.placed + info.succeeded >= info.min_member
        reason = None if placed else (self._reasons.get(key) or info.invalid)
        return interop.foreign_status(
            flavor,
            phase=_berth_phase(info, members=len(members), running=running),
            running=running,
            succeeded=info.succeeded,
            failed=info.failed,
            reason=reason,
            invalid=info.invalid is not None,
        )

    async def _sync_mirror(
        self, flavor: interop.Flavor, key: str, obj: objects.ForeignObject
    ) -> None:
        for wanted in self._mirrors(flavor, key, obj):
            await self._sync_one(flavor, key, obj, wanted)

    async def _sync_one(
        self,
        flavor: interop.Flavor,
        key: str,
        obj: objects.ForeignObject,
        wanted: interop.Mirror,
    ) -> None:
        namespace, name = wanted["metadata"]["namespace"], wanted["metadata"]["name"]
        collection = f"/apis/{keys.API_VERSION}/namespaces/{namespace}/podgroups"
        present = {k: v for k, v in wanted["metadata"]["annotations"].items() if v is not None}
        body = {**wanted, "metadata": {**wanted["metadata"], "annotations": present}}
        try:
            await rest.request(self._api, method="POST", path=collection, body=body)
            logger.info(
                "PodGroup %s/%s mirrors %s",
                namespace,
                name,
                wanted["metadata"]["annotations"][keys.MIRROR_OF_ANNOTATION],
            )
            return
        except errors.Conflict:
            pass
        current = await rest.request(self._api, method="GET", path=f"{collection}/{name}")
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        if keys.MIRROR_OF_ANNOTATION not in annotations:
            # Keyed by the mirror's name: the original's for a PodGroup, whose status then is
            # not written; each of a Workload's pod groups on its own.
            conflict = (flavor.name, f"{namespace}/{name}")
            if conflict not in self._conflicts:
                self._conflicts.add(conflict)
                self._event(
                    flavor,
                    obj,
                    reason="PodGroupConflict",
                    message=f"a Berth PodGroup {namespace}/{name} exists already: pods with the "
                    f"{flavor.pod_key}={name} join that one, whose spec Berth follows",
                )
            return
        spec = dict(current.get("spec") or {})
        patch_spec = {**{k: None for k in spec if k not in wanted["spec"]}, **wanted["spec"]}
        if spec != wanted["spec"] or any(
            annotations.get(k) != v for k, v in wanted["metadata"]["annotations"].items()
        ):
            written = await self._writer.patch(
                f"{collection}/{name}",
                {
                    "metadata": {"annotations": wanted["metadata"]["annotations"]},
                    "spec": patch_spec,
                },
                what=f"PodGroup {namespace}/{name}",
            )
            if not written.ok:
                raise errors.KubeError(
                    f"PodGroup {namespace}/{name} was not updated ({written.outcome.value})"
                )

    async def _write_status(
        self, flavor: interop.Flavor, obj: objects.ForeignObject, desired: interop.ForeignStatus
    ) -> None:
        meta = obj.get("metadata", {})
        path = flavor.object_path(namespace=str(meta.get("namespace")), name=str(meta.get("name")))
        if flavor.status_subresource:
            path += "/status"
        await self._writer.patch(
            path, {"status": desired}, what=f"the status of {flavor.name} PodGroup {path}"
        )

    def _event(
        self, flavor: interop.Flavor, obj: objects.ForeignObject, *, reason: str, message: str
    ) -> None:
        logger.warning("%s PodGroup: %s", flavor.name, message)
        if self._recorder is None:
            return
        meta = obj.get("metadata", {})
        ref = events.ObjectRef(
            "PodGroup",
            meta.get("name", ""),
            namespace=meta.get("namespace", ""),
            uid=meta.get("uid", ""),
            api_version=flavor.api_version,
        )
        self._recorder.record(ref, type="Warning", reason=reason, message=message)


def _berth_phase(info: podgroups.PodGroupInfo, *, members: int, running: int) -> str:
    """The group's phase from its counts (the snapshot's ``phase`` is the status the writer
    wrote before this cycle: possibly behind)."""
    minimum = info.min_member
    if members >= minimum and info.succeeded + info.failed == members:
        return "Finished" if info.succeeded >= minimum else "Failed"
    if running + info.succeeded >= minimum:
        return "Running"
    if info.placed + info.succeeded >= minimum:
        return "Scheduled"
    return "Failed" if info.phase == "Failed" else "Pending"
