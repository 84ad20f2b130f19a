"""``NodeInfo``: one node as the scheduler sees it, built once per change from the API's dict.

Owns what scheduling reads from a node (labels, taints, allocatable, unschedulable, the images
it holds) and, in a
snapshot, the keys of the pods placed on it. Allocatable falls back to capacity, as kubelet
reports both; ``pods`` is always present (110, kubelet's default, when the node omits it).
Built by :class:`berth.scheduler.snapshot.cache.ClusterCache`.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

from berth.api import core, errors, resources
from berth.scheduler.snapshot import ids, taints, wire

__all__ = ["DEFAULT_MAX_PODS", "NodeInfo", "node_info", "normalized_image"]

DEFAULT_MAX_PODS = 110  # kubelet's --max-pods default


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """A node, parsed once. ``pods`` is filled in by the snapshot (sorted pod keys)."""

    name: ids.NodeName
    uid: str
    labels: collections.abc.Mapping[str, str] = dataclasses.field(hash=False, repr=False)
    taints: tuple[taints.Taint, ...]
    allocatable: resources.ResourceList
    unschedulable: bool
    invalid: str | None = None  # a malformed allocatable: the node offers nothing
    pods: tuple[ids.PodKey, ...] = ()
    # status.images: every name of each image present (normalised) -> its size in bytes
    images: collections.abc.Mapping[str, int] = dataclasses.field(
        default_factory=dict, hash=False, repr=False
    )

    def static_equal(self, other: NodeInfo, /) -> bool:
        """Equal in everything a node table stores (pods aside)."""
        return (
            self.labels == other.labels
            and self.taints == other.taints
            and self.allocatable == other.allocatable
            and self.unschedulable == other.unschedulable
            and self.images == other.images
        )


def normalized_image(name: str, /) -> str:
    """An image name as kubelet reports it: ``:latest`` added when it has no tag or digest."""
    if "@" in name or ":" in name.rsplit("/", 1)[-1]:
        return name
    return f"{name}:latest"


def _images(raw: typing.Any) -> dict[str, int]:
    out: dict[str, int] = {}
    if not isinstance(raw, list):
        return out
    for image in raw:
        if not isinstance(image, collections.abc.Mapping):
            continue
        size = image.get("sizeBytes")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            continue
        for name in image.get("names") or ():
            if isinstance(name, str) and name:
                out[normalized_image(name)] = size
    return out


def node_info(raw: typing.Any, /) -> NodeInfo:
    """Parse a node (the API's dict) into a :class:`NodeInfo`."""
    obj = typing.cast(core.Node, wire.as_raw(raw))
    meta, spec, status = (
        wire.part(obj.get("metadata")),
        wire.part(obj.get("spec")),
        wire.part(obj.get("status")),
    )
    offered = wire.part(status.get("allocatable")) or wire.part(status.get("capacity"))
    invalid: str | None = None
    parsed: dict[str, int] = {}
    for name, text in offered.items():
        try:
            value = wire.milli(text)
        except errors.QuantityError as exc:
            invalid = f"invalid allocatable {name}: {exc}"
            break
        parsed[str(name)] = max(value, 0)
    if invalid is not None:
        parsed = {}
    parsed.setdefault(resources.PODS, DEFAULT_MAX_PODS * 1000 if invalid is None else 0)
    return NodeInfo(
        name=ids.NodeName(str(meta.get("name") or "")),
        uid=str(meta.get("uid") or ""),
        labels={str(k): str(v) for k, v in wire.part(meta.get("labels")).items()},
        taints=taints.parse_taints(spec.get("taints")),
        allocatable=resources.ResourceList(parsed),
        unschedulable=bool(spec.get("unschedulable")),
        invalid=invalid,
        images=_images(status.get("images")),
    )
