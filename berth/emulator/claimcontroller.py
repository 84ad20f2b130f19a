"""The emulator's resourceclaim controller: kube-controller-manager's part in DRA.

Kubernetes' ``resourceclaim`` controller, enough for schedulers and users to see what they see
on a real cluster (:mod:`berth.api.claims` does the object work):

- a pod naming a ResourceClaimTemplate in ``spec.resourceClaims`` gets a claim made for it
  (``<pod>-<entry>-<suffix>``, controlled by the pod, so the garbage collector deletes it with
  the pod) and its ``status.resourceClaimStatuses`` naming it; a pod whose template does not
  exist yet gets it when the template is created;
- a pod that finished (``Succeeded``/``Failed``) or is gone leaves its claims' ``reservedFor``;
  a claim nobody reserves any more is deallocated, and a claim made for a finished pod is
  deleted;
- a claim being deleted that nobody reserves loses the ``delete-protection`` finalizer a
  scheduler put on it, so its deletion completes.

It runs on the emulator's loop for as long as the server runs (started and stopped by
:class:`~berth.emulator.server.Emulator`), following the storage's changes in process.
"""

from __future__ import annotations

import asyncio
import contextlib
import typing

from berth.api import claims, core, dra
from berth.emulator import errors, patches, resources, storage

if typing.TYPE_CHECKING:
    from berth.emulator import rest

__all__ = ["ResourceClaimController"]

_DONE = frozenset({"Succeeded", "Failed"})


def _entries(pod: core.Pod) -> list[dra.PodResourceClaim]:
    # Stored pods passed validation, but their entries are still read defensively.
    raw = (pod.get("spec") or {}).get("resourceClaims")
    return [e for e in raw if isinstance(e, dict)] if isinstance(raw, list) else []


class ResourceClaimController:
    """See the module docstring."""

    def __init__(self, api: rest.Api) -> None:
        self.api = api
        self._watchers: list[storage.Watcher] = []
        self._task: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[tuple[str, storage.Change] | None] = asyncio.Queue()

    # Lifecycle ------------------------------------------------------------------------------
    def _resource(self, api_version: str, plural: str) -> resources.Resource:
        return self.api.resource(api_version, plural)

    async def start(self) -> None:
        store = self.api.storage
        for api_version, plural in (
            ("v1", "pods"),
            (dra.API_VERSION, "resourceclaimtemplates"),
            (dra.API_VERSION, "resourceclaims"),
        ):
            watcher = store.subscribe(
                key=self._resource(api_version, plural).key, namespace=None, internal=True
            )
            self._watchers.append(watcher)
        self._task = asyncio.create_task(self._run(), name="resourceclaim controller")
        for pod in store.list(self._resource("v1", "pods").key):
            self._pod(typing.cast(core.Pod, pod))

    async def stop(self) -> None:
        for watcher in self._watchers:
            self.api.storage.unsubscribe(watcher)
        self._watchers = []
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        # One follower per watched kind; cancelling this task cancels them all.
        await asyncio.gather(*(self._follow(watcher) for watcher in self._watchers))

    async def _follow(self, watcher: storage.Watcher) -> None:
        while (change := await watcher.queue.get()) is not None:  # None: the server stops
            with contextlib.suppress(errors.StatusError):
                self._handle(change)

    def _handle(self, change: storage.Change) -> None:
        plural = change.key[1]
        if plural == "pods":
            pod = typing.cast(core.Pod, change.object)
            if change.type == "DELETED":
                self._pod_gone(pod, finished=False)  # the collector takes its own
            else:
                self._pod(pod)
        elif plural == "resourceclaimtemplates" and change.type == "ADDED":
            self._template(typing.cast(dra.ResourceClaimTemplate, change.object))
        elif plural == "resourceclaims" and change.type != "DELETED":
            self._claim(typing.cast(dra.ResourceClaim, change.object))

    # Pods -----------------------------------------------------------------------------------
    def _pod(self, pod: core.Pod) -> None:
        if (pod.get("status") or {}).get("phase") in _DONE:
            self._pod_gone(pod, finished=True)
            return
        if not pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp"):
            self._make_claims(pod)

    def _make_claims(self, pod: core.Pod) -> None:
        entries = [e for e in _entries(pod) if e.get("resourceClaimTemplateName") and e.get("name")]
        if not entries:
            return
        status = pod.get("status") or {}
        made: dict[str, str | None] = {
            str(s["name"]): s.get("resourceClaimName")
            for s in status.get("resourceClaimStatuses") or []
            if isinstance(s, dict) and s.get("name")
        }
        namespace = pod["metadata"]["namespace"]
        templates = self._resource(dra.API_VERSION, "resourceclaimtemplates")
        claim_kind = self._resource(dra.API_VERSION, "resourceclaims")
        changed = False
        for entry in entries:
            name = str(entry["name"])
            if name in made:
                continue
            template = self.api.storage.get(
                templates.key, namespace, str(entry["resourceClaimTemplateName"])
            )
            if template is None:
                continue  # made when the template is created
            claim = claims.claim_from_template(
                typing.cast(dra.ResourceClaimTemplate, template), pod=pod, entry=name
            )
            claim_name = claim["metadata"]["name"]
            if self.api.storage.get(claim_kind.key, namespace, claim_name) is None:
                self.api.create(claim_kind, typing.cast("rest.Object", claim), namespace=namespace)
            made[name] = claim_name
            changed = True
        if changed:
            self.api.patch(
                self._resource("v1", "pods"),
                {"status": {"resourceClaimStatuses": claims.claim_statuses(made)}},
                namespace=namespace,
                name=pod["metadata"]["name"],
                patch_type=patches.MERGE_PATCH,
                subresource="status",
            )

    def _template(self, template: dra.ResourceClaimTemplate) -> None:
        namespace = template["metadata"].get("namespace")
        name = template["metadata"]["name"]
        for stored in self.api.storage.list(self._resource("v1", "pods").key, namespace):
            pod = typing.cast(core.Pod, stored)
            if any(e.get("resourceClaimTemplateName") == name for e in _entries(pod)):
                self._pod(pod)

    def _pod_gone(self, pod: core.Pod, *, finished: bool) -> None:
        """The pod is gone or done: it leaves its claims (a finished pod's own claims go)."""
        meta = pod["metadata"]
        namespace, uid = meta["namespace"], str(meta.get("uid") or "")
        names = [e.get("resourceClaimName") for e in _entries(pod)] + [
            s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
            if isinstance(s, dict)
        ]
        kind = self._resource(dra.API_VERSION, "resourceclaims")
        for name in sorted({str(n) for n in names if n}):
            stored = self.api.storage.get(kind.key, namespace, name)
            if stored is None:
                continue
            claim = typing.cast(dra.ResourceClaim, stored)
            updated = claims.released(claim, pod_uid=uid)
            if updated is not None:
                self._write_status(kind, claim, updated)
            owner = next(
                (r for r in claim["metadata"].get("ownerReferences") or [] if r.get("controller")),
                None,
            )
            if finished and owner is not None and owner.get("uid") == uid:
                with contextlib.suppress(errors.StatusError):
                    self.api.delete(kind, namespace=namespace, name=name)

    # Claims ---------------------------------------------------------------------------------
    def _claim(self, claim: dra.ResourceClaim) -> None:
        meta = claim["metadata"]
        if not meta.get("deletionTimestamp"):
            return
        if (claim.get("status") or {}).get("reservedFor"):
            return  # still in use: deleting waits
        finalizers = meta.get("finalizers") or []
        if dra.CLAIM_FINALIZER not in finalizers:
            return
        kind = self._resource(dra.API_VERSION, "resourceclaims")
        if (claim.get("status") or {}).get("allocation"):
            self.api.patch(
                kind,
                {"status": {"allocation": None}},
                namespace=meta["namespace"],
                name=meta["name"],
                patch_type=patches.MERGE_PATCH,
                subresource="status",
            )
        self.api.patch(
            kind,
            {"metadata": {"finalizers": [f for f in finalizers if f != dra.CLAIM_FINALIZER]}},
            namespace=meta["namespace"],
            name=meta["name"],
            patch_type=patches.MERGE_PATCH,
        )

    def _write_status(
        self, kind: resources.Resource, old: dra.ResourceClaim, new: dra.ResourceClaim
    ) -> None:
        meta = old["metadata"]
        body: dra.ResourceClaim = {**old, "status": new.get("status") or {}}
        self.api.replace(
            kind,
            typing.cast("rest.Object", body),
            namespace=meta["namespace"],
            name=meta["name"],
            subresource="status",
        )
        finalizers = (new.get("metadata") or {}).get("finalizers") or []
        if finalizers != (meta.get("finalizers") or []):
            self.api.patch(
                kind,
                {"metadata": {"finalizers": finalizers or None}},
                namespace=meta["namespace"],
                name=meta["name"],
                patch_type=patches.MERGE_PATCH,
            )
