"""How objects are written back: as they are, as Table rows, or as their metadata only.

The ``Accept`` header chooses (:func:`from_accept`): plain JSON, ``as=Table`` (what
``kubectl get`` asks for; rows from :mod:`berth.emulator.tables`) or
``as=PartialObjectMetadata`` (what metadata-only informers ask for). :func:`one` and
:func:`listing` write single objects and lists in the chosen form. The handlers use them for
reads, :mod:`berth.emulator.watches` for the objects of watch events.
"""

from __future__ import annotations

import dataclasses
import typing

from berth.api import objects
from berth.emulator import resources, tables

__all__ = ["Rendered", "Rendering", "from_accept", "listing", "one"]

Object = objects.KubeObject
Rendered = objects.KubeObject | objects.Table
"""An object as written: itself, its PartialObjectMetadata, or a Table of its row."""


@dataclasses.dataclass(frozen=True)
class Rendering:
    """How objects are written: as they are, as Table rows, or as metadata only."""

    mode: str = "object"  # "object" | "table" | "metadata"
    include_object: str = "Metadata"  # Table rows' object: None | Metadata | Object


def from_accept(accept: str) -> Rendering | None:
    """What the client accepts: None when it accepts no JSON form at all (406)."""
    if not accept.strip():
        return Rendering()
    for option in accept.split(","):
        parts = [p.strip() for p in option.split(";")]
        media = parts[0].lower()
        params = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        if media not in ("application/json", "*/*", "application/*", "application/yaml"):
            continue
        as_ = params.get("as", "")
        if as_ == "Table" and params.get("g", "meta.k8s.io") == "meta.k8s.io":
            return Rendering(mode="table")
        if as_ in ("PartialObjectMetadata", "PartialObjectMetadataList"):
            return Rendering(mode="metadata")
        if not as_:
            return Rendering()
    return None


def one(
    rendering: Rendering,
    *,
    resource: resources.Resource,
    obj: Object,
    now: float,
    resource_version: str = "",
    headers: bool = True,
) -> Rendered:
    """``obj`` as ``rendering`` says: itself, a Table of one row, or PartialObjectMetadata."""
    if rendering.mode == "table":
        return tables.render(
            resource,
            [obj],
            now=now,
            include_object=rendering.include_object,
            resource_version=resource_version,
            headers=headers,
        )
    if rendering.mode == "metadata":
        return tables.partial_object_metadata(obj)
    return obj


def listing(
    rendering: Rendering,
    *,
    resource: resources.Resource,
    items: typing.Sequence[Object],
    now: float,
    resource_version: str,
    continue_token: str = "",
    remaining: int | None = None,
) -> objects.ObjectList | objects.Table:
    """A list response: a Table, a ``PartialObjectMetadataList`` or a ``<Kind>List``."""
    if rendering.mode == "table":
        return tables.render(
            resource,
            items,
            now=now,
            include_object=rendering.include_object,
            resource_version=resource_version,
            continue_token=continue_token,
        )
    metadata: objects.ListMeta = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
        if remaining is not None:
            metadata["remainingItemCount"] = remaining
    if rendering.mode == "metadata":
        return {
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": metadata,
            "items": [tables.partial_object_metadata(o) for o in items],
        }
    return {
        "kind": f"{resource.kind}List",
        "apiVersion": resource.api_version,
        "metadata": metadata,
        "items": list(items),
    }
