"""The patches Berth sends, as typed records: JSON patch operations (RFC 6902).

Admission edits a pod's scheduling gates and affinity with JSON patches
(:mod:`berth.kube.transport.pod_edits`), the mutating webhook answers with one
(:mod:`berth.operator.webhooks`). Merge patches are the kinds' own records with only the
changed keys (a status patch is ``{"status": <the kind's status record>}``), except where a
patch clears a field with ``null``: those have their own records here.
"""

from __future__ import annotations

import typing

import typing_extensions

from berth.api import dra

__all__ = ["JsonPatchOperation", "ResourceClaimPatch", "ResourceClaimStatusPatch"]

JsonPatchOperation = typing_extensions.TypedDict(
    "JsonPatchOperation",
    {
        "op": typing_extensions.Required[str],  # add, remove, replace, test, move, copy
        "path": typing_extensions.Required[str],  # a JSON pointer ("/spec/schedulingGates/0")
        "value": typing.Any,  # any JSON the path's field takes: a patch carries the API's types
        "from": str,
    },
    total=False,
)


class ResourceClaimStatusPatch(typing_extensions.TypedDict, total=False):
    """A merge patch of a ResourceClaim's ``status``: ``None`` (null) clears a field, as
    releasing or deallocating a claim does."""

    reservedFor: list[dra.ResourceClaimConsumerReference] | None
    allocation: dra.AllocationResult | None
    devices: None  # the drivers' status of devices no longer allocated goes with them


class ResourceClaimPatch(typing_extensions.TypedDict, total=False):
    """A merge patch of a ResourceClaim (``status`` through the status subresource)."""

    metadata: dra.ObjectMeta
    status: ResourceClaimStatusPatch
