"""What Kubernetes' resourceclaim controller and DRA scheduler write, as pure functions on
the wire records of :mod:`berth.api.dra`.

The simulator and the emulator both stand in for Kubernetes, and both must do to
ResourceClaims what kube-controller-manager and a scheduler do:

- :func:`claim_from_template`: the claim the resourceclaim controller makes for a pod's
  ``spec.resourceClaims[]`` entry that names a template: named ``<pod>-<entry>-<suffix>``,
  controlled by the pod (owner reference), with the template's labels, annotations and spec;
  the pod's ``status.resourceClaimStatuses`` then names it (:func:`claim_statuses`);
- :func:`reserved`: a scheduler's PreBind: the allocation written (with the delete-protection
  finalizer) and the pod added to ``status.reservedFor``;
- :func:`released`: the controller's clean-up when a pod is gone or finished: the pod leaves
  ``reservedFor``, and a claim nobody reserves any more is deallocated;
- :func:`deallocated`: a scheduler's PostFilter: a claim allocated where its pod cannot go,
  reserved by no other pod, deallocated so that it can be allocated again.

Nothing here raises on odd input: what cannot be done returns ``None``.
"""

from __future__ import annotations

import copy
import hashlib
import typing

from berth.api import core, dra

__all__ = [
    "claim_from_template",
    "claim_statuses",
    "deallocated",
    "generated_name",
    "released",
    "reserved",
]

_MAX_NAME = 253


def generated_name(pod: str, entry: str, *, pod_uid: str) -> str:
    """The claim's name for entry ``entry`` of pod ``pod``: ``<pod>-<entry>-<5 characters>``
    (the controller's ``generateName``; the suffix is derived from the pod's uid, so the same
    pod always gets the same name)."""
    suffix = hashlib.sha256(f"{pod_uid}/{entry}".encode()).hexdigest()[:5]
    base = f"{pod}-{entry}"[: _MAX_NAME - 6].rstrip("-.")
    return f"{base}-{suffix}"


def claim_from_template(
    template: dra.ResourceClaimTemplate,
    *,
    pod: core.Pod,
    entry: str,
) -> dra.ResourceClaim:
    """The claim the resourceclaim controller makes from ``template`` for ``pod``'s entry
    ``entry`` (``pod`` as the API returns it)."""
    meta = pod.get("metadata") or {}
    name = str(meta.get("name") or "")
    uid = str(meta.get("uid") or "")
    spec = template.get("spec") or {}
    template_meta = spec.get("metadata") or {}
    claim_meta = dra.ObjectMeta(
        name=generated_name(name, entry, pod_uid=uid),
        namespace=str(meta.get("namespace") or "default"),
        annotations={
            **(template_meta.get("annotations") or {}),
            "resource.kubernetes.io/pod-claim-name": entry,
        },
        ownerReferences=[
            dra.OwnerReference(
                apiVersion="v1",
                kind="Pod",
                name=name,
                uid=uid,
                controller=True,
                blockOwnerDeletion=True,
            )
        ],
    )
    labels = template_meta.get("labels")
    if labels:
        claim_meta["labels"] = dict(labels)
    return dra.ResourceClaim(
        apiVersion=dra.API_VERSION,
        kind="ResourceClaim",
        metadata=claim_meta,
        spec=copy.deepcopy(spec.get("spec") or dra.ResourceClaimSpec()),
    )


def claim_statuses(
    made: typing.Mapping[str, str | None],
) -> list[dra.PodResourceClaimStatus]:
    """``status.resourceClaimStatuses`` for the entries in ``made`` (entry -> claim name;
    ``None``: intentionally none), by entry name."""
    out: list[dra.PodResourceClaimStatus] = []
    for entry in sorted(made):
        item = dra.PodResourceClaimStatus(name=entry)
        claim = made[entry]
        if claim:
            item["resourceClaimName"] = claim
        out.append(item)
    return out


def reserved(
    claim: dra.ResourceClaim,
    *,
    pod: str,
    pod_uid: str,
    allocation: dra.AllocationResult | None,
) -> dra.ResourceClaim | None:
    """``claim`` reserved for the pod, with ``allocation`` written when given; ``None`` when
    that cannot be done (it is allocated already and an allocation was given: never
    overwritten; or it is not allocated and none was given)."""
    status: dra.ResourceClaimStatus = {**(claim.get("status") or {})}
    if allocation is not None:
        if status.get("allocation"):
            return None
        status["allocation"] = copy.deepcopy(allocation)
    elif not status.get("allocation"):
        return None
    consumers = list(status.get("reservedFor") or [])
    if not any(c.get("uid") == pod_uid for c in consumers):
        if len(consumers) >= dra.RESERVED_FOR_MAX_SIZE:
            return None
        consumers.append(dra.ResourceClaimConsumerReference(resource="pods", name=pod, uid=pod_uid))
    status["reservedFor"] = consumers
    meta: dra.ObjectMeta = {**(claim.get("metadata") or {})}
    finalizers = list(meta.get("finalizers") or [])
    if dra.CLAIM_FINALIZER not in finalizers:
        meta["finalizers"] = [*finalizers, dra.CLAIM_FINALIZER]
    return typing.cast(dra.ResourceClaim, {**claim, "metadata": meta, "status": status})


def released(claim: dra.ResourceClaim, *, pod_uid: str) -> dra.ResourceClaim | None:
    """``claim`` without the pod among its consumers, deallocated (and its finalizer gone)
    when nobody reserves it any more; ``None`` when nothing changes."""
    status: dra.ResourceClaimStatus = {**(claim.get("status") or {})}
    consumers = [c for c in status.get("reservedFor") or [] if c.get("uid") != pod_uid]
    if len(consumers) == len(status.get("reservedFor") or []):
        return None
    status["reservedFor"] = consumers
    meta: dra.ObjectMeta = {**(claim.get("metadata") or {})}
    if not consumers:
        status.pop("reservedFor")
        status.pop("allocation", None)
        status.pop("devices", None)
        finalizers = [f for f in meta.get("finalizers") or [] if f != dra.CLAIM_FINALIZER]
        if finalizers:
            meta["finalizers"] = finalizers
        else:
            meta.pop("finalizers", None)
    return typing.cast(dra.ResourceClaim, {**claim, "metadata": meta, "status": status})


def deallocated(claim: dra.ResourceClaim, *, pod_uid: str) -> dra.ResourceClaim | None:
    """``claim`` without its allocation and consumers, when it is allocated and reserved by
    nobody but the pod ``pod_uid``; ``None`` when it may not be deallocated."""
    status: dra.ResourceClaimStatus = {**(claim.get("status") or {})}
    if not status.get("allocation"):
        return None
    if any(c.get("uid") != pod_uid for c in status.get("reservedFor") or []):
        return None
    status.pop("allocation", None)
    status.pop("reservedFor", None)
    status.pop("devices", None)
    return typing.cast(dra.ResourceClaim, {**claim, "status": status})
