"""The PodGroup and Queue statuses one scheduling cycle's facts give, for every object.

A cycle publishes a snapshot (members and their phases, queue usage) and a
:class:`~berth.scheduler.framework.decisions.CycleResult` (why each group waits, the queues'
lines and summaries). :func:`facts_of` derives what every object's status needs from them once
per cycle — queue positions, usage and pod counts are per cycle, not per object — and
:func:`desired` gives one object's status from those facts with its kind's owner
(:mod:`berth.status.podgroups`, :mod:`berth.status.queues`). The live operator's status pass
(:class:`berth.controllers.statuses.StatusWriter`) and ``berth sim``
(:class:`berth.sim.cluster.InMemoryCluster`) both call these two functions.
"""

from __future__ import annotations

import collections.abc
import dataclasses

from berth.api import custom_objects
from berth.scheduler.framework import decisions, parking, reasons
from berth.scheduler.snapshot import snapshots
from berth.status import observations, podgroups, queues, scale_up

__all__ = ["KINDS", "CycleFacts", "desired", "facts_of", "inputs"]

KINDS = (podgroups.KIND, queues.KIND)
"""The kinds whose status a cycle's facts give."""


@dataclasses.dataclass(frozen=True)
class CycleFacts:
    """What one cycle published, derived once for every object's status."""

    snapshot: snapshots.Snapshot
    group_why: collections.abc.Mapping[str, reasons.Reason]
    places: collections.abc.Mapping[str, tuple[int, int]]  # group key -> (place, line length)
    summaries: collections.abc.Mapping[str, decisions.QueueStatusSummary]
    usage: collections.abc.Mapping[str, queues.Usage]  # only without summaries
    pods: collections.abc.Mapping[str, queues.PodCounts]
    scale_ups: collections.abc.Mapping[str, scale_up.ScaleUp] = dataclasses.field(
        default_factory=dict
    )  # group key -> what the autoscaler did for it (the ``ScaleUp`` condition)


def facts_of(
    snapshot: snapshots.Snapshot,
    result: decisions.CycleResult | None,
    *,
    scale_ups: collections.abc.Mapping[str, scale_up.ScaleUp] | None = None,
) -> CycleFacts:
    """The facts of the cycle that decided ``result`` on ``snapshot`` (``result`` None: only
    the snapshot is known yet); ``scale_ups``: what the autoscaler did for each group waiting
    on one (:mod:`berth.kube.autoscaling.capacity_requests`; None: nothing known)."""
    summaries = result.queues if result is not None else {}
    return CycleFacts(
        snapshot=snapshot,
        group_why=result.group_why if result is not None else {},
        # Every waiting group's place, read only if a PodGroup object is there to show one:
        # a standing backlog of plain pods has thousands of places and no reader.
        places=parking.Lazy(lambda: podgroups.positions(result.waiting))
        if result is not None
        else {},
        summaries=summaries,
        usage=queues.usage_by_queue(snapshot) if not summaries else {},
        pods=queues.pods_by_queue(snapshot),
        scale_ups=scale_ups or {},
    )


def inputs(obj: observations.ObservedObject, facts: CycleFacts) -> tuple[object, ...] | None:
    """Everything :func:`desired` reads about ``obj`` but the time, for a caller that keeps
    the status it computed while these stay equal (the status pass: a cycle changes a few
    of thousands of PodGroups). Snapshots share unchanged pods and groups, so comparing is
    mostly identity. None for a Queue: its status reads every queue of the tree."""
    if obj.kind != podgroups.KIND:
        return None
    snapshot = facts.snapshot
    return (
        obj,
        snapshot.pod_groups.get(obj.key),
        snapshot.members(obj.key),
        facts.group_why.get(obj.key),
        facts.places.get(obj.key),
        facts.scale_ups.get(obj.key),
    )


def desired(
    obj: observations.ObservedObject, facts: CycleFacts, *, now: float
) -> custom_objects.PodGroupStatus | custom_objects.QueueStatus | None:
    """The status ``obj`` (a PodGroup or a Queue) should have; None while the facts do not
    know it (a PodGroup the snapshot has not seen yet)."""
    if obj.kind == podgroups.KIND:
        return podgroups.desired_status(
            obj,
            snapshot=facts.snapshot,
            reason=facts.group_why.get(obj.key),
            now=now,
            position=facts.places.get(obj.key),
            scale_up=facts.scale_ups.get(obj.key),
        )
    if obj.kind == queues.KIND:
        return queues.desired_status(
            obj,
            snapshot=facts.snapshot,
            summary=facts.summaries.get(obj.name),
            usage=facts.usage,
            now=now,
            pods=facts.pods,
        )
    raise ValueError(f"no status owner in berth.status.cycles for {obj.kind or 'kindless'} objects")
