"""Gangs of LeaderWorkerSets (``leaderworkerset.x-k8s.io/v1``): one gang per replica.

Each replica (a leader and its workers, ``leaderWorkerTemplate.size`` pods) is its own gang,
told apart by the pod label ``leaderworkerset.sigs.k8s.io/group-index``. Under
``startupPolicy: LeaderReady`` the workers are created once the leader is ready, so the gang
is the leader alone.
"""

from __future__ import annotations

from berth.api import core, objects
from berth.workloads import fields, gangs

__all__ = ["GROUP_INDEX_LABEL", "leaderworkerset"]

GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"


def leaderworkerset(owner: objects.ForeignObject, /, *, pod: core.Pod) -> gangs.Gang:
    """The gang of the replica of a LeaderWorkerSet that ``pod`` belongs to."""
    spec = fields.mapping(owner, "spec", path="LeaderWorkerSet", required=True)
    template = fields.mapping(spec, "leaderWorkerTemplate", path="spec", required=True)
    size = fields.integer(template, "size", path="spec.leaderWorkerTemplate", default=1, minimum=1)
    index = pod.get("metadata", {}).get("labels", {}).get(GROUP_INDEX_LABEL, "")
    if not index.isdigit():
        raise gangs.OwnerSpecError(
            f"the pod has no {GROUP_INDEX_LABEL} label saying which replica it belongs to"
        )
    if fields.text(spec, "startupPolicy", path="spec") == "LeaderReady":
        return gangs.Gang(min_member=1, why="the leader (LeaderReady)", replica=index)
    return gangs.Gang(min_member=size, why=f"replica {index}, size {size}", replica=index)
