"""ImageLocality: prefer nodes that already hold the pod's container images.

Kubernetes' ``ImageLocality`` score, vectorised: for each of the pod's images (containers and
init containers, ``:latest`` added to an untagged name), the rows holding it score its size
scaled by the share of all nodes holding it (so an image every node has counts little: it
would be pulled quickly anyway, and would not steer every pod to the same node). The sum is
clamped between 23 MB and 1000 MB per container and mapped to 0..100. Per image, the rows
holding it and the scaled size are cached with the node table's static part (``status.images``
of the nodes), so a pod shape costs one vector sum per attempt. PreScore skips pods none of
whose images any node holds.
"""

from __future__ import annotations

import numpy as np

from berth.scheduler.framework import (
    cyclestate,
    filtering,
    handles,
    interfaces,
    registries,
    statuses,
)
from berth.scheduler.plugins import names
from berth.scheduler.snapshot import nodetable, pods

__all__ = ["MAX_CONTAINER_THRESHOLD", "MIN_THRESHOLD", "NAME", "ImageLocality", "new"]

NAME = names.IMAGE_LOCALITY
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
"""Below this sum (bytes) a node scores 0: small images are pulled fast anyway."""
MAX_CONTAINER_THRESHOLD = 1000 * MB
"""Per container of the pod, the sum (bytes) at which a node scores 100."""


def _scaled(image: str, nodes: nodetable.NodeTable) -> nodetable.IntArray:
    """Per row, the image's size times the share of nodes holding it (0 where absent)."""

    def compute() -> nodetable.IntArray:
        sizes = np.array([images.get(image, 0) for images in nodes.images], dtype=np.int64)
        holders = int(np.count_nonzero(sizes))
        out = sizes * holders // max(len(nodes), 1)
        out.setflags(write=False)
        return out

    return nodes.cached((NAME, image), compute=compute)


class ImageLocality(interfaces.PreScorePlugin, interfaces.ScorePlugin):
    """PreScore (skips pods whose images no node holds), Score (already 0..100)."""

    name = NAME

    def pre_score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> statuses.Status:
        held = nodes.cached(
            (NAME, "held", pod.images),
            compute=lambda: any(_scaled(image, nodes).any() for image in pod.images),
        )
        return statuses.SUCCESS if held else statuses.SKIP

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        total = np.zeros(len(nodes), dtype=np.int64)
        for image in set(pod.images):
            total += _scaled(image, nodes)
        high = MAX_CONTAINER_THRESHOLD * max(len(pod.images), 1)
        clamped = np.clip(total, MIN_THRESHOLD, high)
        return (clamped - MIN_THRESHOLD) * interfaces.MAX_NODE_SCORE // (high - MIN_THRESHOLD)

    def score_extensions(self) -> None:
        return None


def new(args: registries.NoArgs, handle: handles.ExtendedHandle) -> ImageLocality:
    """Build the plugin (it takes no arguments)."""
    return ImageLocality()
