"""The simulator's resourceclaim controller, and its side of a scheduler's claim writes.

Kubernetes' kube-controller-manager makes a pod's claims from templates and cleans up after
pods; the in-memory cluster (:mod:`berth.sim.cluster`) has no controller manager, so this
plays that part, with the pure functions of :mod:`berth.api.claims`:

- a pod naming a ResourceClaimTemplate gets its claim made at once (and its
  ``status.resourceClaimStatuses``); a pod whose template does not exist yet gets it when the
  template is put;
- ``ReserveClaim`` decisions are applied as the API server would take them: the allocation
  written only into a claim still unallocated, the pod added to ``reservedFor`` (for a gang
  member relying on another's write, only if that write was done); a write refused is not done,
  and the pod's binding then does not happen either (:meth:`ClaimController.bindable`), with
  what was reserved for it released;
- ``DeallocateClaim`` decisions clear a claim reserved by nobody but the pod that cannot go
  where it is allocated (a scheduler's PostFilter);
- a pod that is deleted or finished leaves ``reservedFor``; a claim nobody reserves is
  deallocated, and a claim made for the pod from a template is deleted with it.
"""

from __future__ import annotations

import collections.abc
import typing

from berth.api import claims, core, dra, objects
from berth.scheduler.framework import decisions

__all__ = ["CLAIM", "ClaimController", "Store", "TEMPLATE"]

CLAIM: typing.Final = "ResourceClaim"
TEMPLATE: typing.Final = "ResourceClaimTemplate"
_O = typing.TypeVar("_O", bound=objects.KubeObject)


class Store(typing.Protocol):
    """The parts of :class:`~berth.sim.cluster.InMemoryCluster` the controller uses."""

    def put(self, obj: _O) -> _O: ...

    @typing.overload
    def get(
        self, kind: typing.Literal["ResourceClaim"], *, namespace: str | None = None, name: str
    ) -> dra.ResourceClaim | None: ...
    @typing.overload
    def get(
        self,
        kind: typing.Literal["ResourceClaimTemplate"],
        *,
        namespace: str | None = None,
        name: str,
    ) -> dra.ResourceClaimTemplate | None: ...

    def delete(
        self, kind: str, *, namespace: str | None, name: str
    ) -> objects.KubeObject | None: ...

    def objects(self, kind: typing.Literal["Pod"]) -> list[core.Pod]: ...


def _entries(pod: core.Pod) -> list[dra.PodResourceClaim]:
    # Checked as read: a user's pod may carry anything there, and the API server checks it.
    raw: object = (pod.get("spec") or {}).get("resourceClaims")
    if not isinstance(raw, list):
        return []
    return [typing.cast(dra.PodResourceClaim, e) for e in raw if isinstance(e, dict)]


def claim_names(pod: core.Pod) -> list[str]:
    """The claims the pod uses, by name (its namespace): named ones and those made for it."""
    made = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        if isinstance(s, dict)
    }
    out: list[str] = []
    for entry in _entries(pod):
        name = entry.get("resourceClaimName") or made.get(entry.get("name"))
        if isinstance(name, str) and name:
            out.append(name)
    return out


class ClaimController:
    """See the module docstring."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._written: set[tuple[str, str]] = set()  # (claim key, pod): allocations written

    def begin(self) -> None:
        """A cycle's decisions are about to be applied (``ReserveClaim.after`` is per cycle)."""
        self._written.clear()

    # Templates -------------------------------------------------------------------------------
    def pod_with_claims(self, pod: core.Pod) -> core.Pod:
        """``pod`` (about to be stored) with the claims its templates call for made, and its
        ``status.resourceClaimStatuses`` saying so."""
        entries = _entries(pod)
        if not any(e.get("resourceClaimTemplateName") for e in entries):
            return pod
        status: core.PodStatus = {**(pod.get("status") or {})}
        made: dict[str, str | None] = {
            str(s["name"]): s.get("resourceClaimName")
            for s in status.get("resourceClaimStatuses") or []
            if isinstance(s, dict) and s.get("name")
        }
        namespace = str(pod["metadata"].get("namespace") or "default")
        changed = False
        for entry in entries:
            name, template_name = entry.get("name"), entry.get("resourceClaimTemplateName")
            if not name or not template_name or name in made:
                continue
            template = self._store.get(TEMPLATE, namespace=namespace, name=template_name)
            if template is None:
                continue  # made when the template appears (template_added)
            claim = claims.claim_from_template(template, pod=pod, entry=str(name))
            if self._store.get(CLAIM, namespace=namespace, name=claim["metadata"]["name"]) is None:
                self._store.put(claim)
            made[str(name)] = claim["metadata"]["name"]
            changed = True
        if not changed:
            return pod
        status["resourceClaimStatuses"] = claims.claim_statuses(made)
        return {**pod, "status": status}

    def template_added(self, template: objects.KubeObject) -> list[core.Pod]:
        """Pods waiting for ``template`` (stored, unbound), with their claims made now."""
        namespace = str(template["metadata"].get("namespace") or "default")
        name = template["metadata"]["name"]
        out: list[core.Pod] = []
        for pod in self._store.objects("Pod"):
            if pod["metadata"].get("namespace") != namespace or pod["spec"].get("nodeName"):
                continue
            if any(e.get("resourceClaimTemplateName") == name for e in _entries(pod)):
                updated = self.pod_with_claims(pod)
                if updated is not pod:
                    out.append(updated)
        return out

    # A scheduler's writes --------------------------------------------------------------------
    def reserve(self, decision: decisions.ReserveClaim) -> bool:
        """Apply ``decision``; False when the API server would refuse it."""
        claim = self._store.get(CLAIM, namespace=decision.namespace, name=decision.name)
        if claim is None or claim["metadata"].get("uid") != decision.uid:
            return False
        if claim["metadata"].get("deletionTimestamp"):
            return False
        if decision.after is not None and (decision.key, decision.after) not in self._written:
            return False  # the allocation it relies on was not written
        updated = claims.reserved(
            claim,
            pod=decision.pod,
            pod_uid=decision.pod_uid,
            allocation=decision.allocation,
        )
        if updated is None:
            return False
        self._store.put(updated)
        if decision.allocation is not None:
            self._written.add((decision.key, decision.pod))
        return True

    def deallocate(self, decision: decisions.DeallocateClaim) -> bool:
        """Apply ``decision`` (a scheduler's PostFilter); False when it may not be done."""
        claim = self._store.get(CLAIM, namespace=decision.namespace, name=decision.name)
        if claim is None or claim["metadata"].get("uid") != decision.uid:
            return False
        updated = claims.deallocated(claim, pod_uid=decision.pod_uid)
        if updated is None:
            return False
        self._store.put(updated)
        return True

    def bindable(self, decision: decisions.BindPod) -> bool:
        """Whether every ResourceClaim the pod uses lists it in ``reservedFor`` (a failed
        :meth:`reserve` leaves one that does not: the pod is then not bound, and what was
        reserved for it is released)."""
        ok = True
        for key in decision.resource_claims:
            namespace, _, name = key.partition("/")
            claim = self._store.get(CLAIM, namespace=namespace, name=name)
            consumers = ((claim or {}).get("status") or {}).get("reservedFor") or []
            if not any(c.get("uid") == decision.uid for c in consumers):
                ok = False
        if not ok:
            self._release(
                decision.namespace, decision.resource_claims, pod_uid=decision.uid, owned=False
            )
        return ok

    # Clean-up --------------------------------------------------------------------------------
    def pod_done(self, pod: core.Pod) -> None:
        """``pod`` was deleted or finished: it leaves its claims; the claims made for it go."""
        namespace = str(pod["metadata"].get("namespace") or "default")
        keys = [f"{namespace}/{name}" for name in claim_names(pod)]
        self._release(namespace, keys, pod_uid=str(pod["metadata"].get("uid") or ""), owned=True)

    def _release(
        self, namespace: str, keys: collections.abc.Iterable[str], *, pod_uid: str, owned: bool
    ) -> None:
        for key in keys:
            name = key.partition("/")[2]
            claim = self._store.get(CLAIM, namespace=namespace, name=name)
            if claim is None:
                continue
            controller = next(
                (r for r in claim["metadata"].get("ownerReferences") or [] if r.get("controller")),
                None,
            )
            if owned and controller is not None and controller.get("uid") == pod_uid:
                self._store.delete(CLAIM, namespace=namespace, name=name)
                continue
            updated = claims.released(claim, pod_uid=pod_uid)
            if updated is not None:
                self._store.put(updated)
