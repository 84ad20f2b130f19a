"""What passes through Berth's gate: the snapshot offered, and the cycle's decisions sorted.

Pure. :func:`offering` is the inner source's snapshot with the gated pods admission offers
(:meth:`berth.kube.admission.admission.Admission.snapshot` chooses them) as pending, their groups
and queues counting them. :func:`sort_out` sorts a cycle's result: what admission does itself
(its pods' bindings, the reasons its pods wait, the devices found for their claims), what
kube-scheduler will do as it binds them (their claims' volumes), and what goes on to the inner
sink.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types
import typing

from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import pods, snapshots, usage

__all__ = ["Sorted", "offering", "sort_out"]


def offering(
    base: snapshots.Snapshot,
    *,
    admitted: collections.abc.Sequence[pods.PodInfo],
    still_gated: collections.abc.Sequence[pods.PodInfo],
) -> snapshots.Snapshot:
    """``base`` with ``admitted`` (gated pods, their gates lifted) offered as pending, and
    ``still_gated`` (held by other gates too) among the gated pods."""
    if not admitted and not still_gated:
        return base
    lifted = {p.key for p in admitted}
    by_group: dict[str, int] = {}
    for info in admitted:
        if info.pod_group is not None:
            by_group[info.pod_group] = by_group.get(info.pod_group, 0) + 1
    groups = dict(base.pod_groups)
    for group, count in by_group.items():
        found = groups.get(group)
        if found is not None:
            moved = min(count, found.gated)
            groups[group] = dataclasses.replace(
                found, pending=found.pending + moved, gated=found.gated - moved
            )
    # The cache keeps apart only its own scheduler's pods awaiting a group from their owners;
    # the gated pods admission offers are kube-scheduler's, and await theirs as much.
    awaiting = {p.key: p for p in base.awaiting_owner_group()}
    awaiting.update((p.key, p) for p in (*admitted, *still_gated) if p.awaiting_group)
    return base.but(
        awaiting_group=tuple(awaiting[key] for key in sorted(awaiting)),
        pods=types.MappingProxyType({**base.pods, **{p.key: p for p in admitted}}),
        pending=tuple(sorted((*base.pending, *admitted), key=lambda p: p.key)),
        queue_usage=_with_demand(base, admitted),
        gated=tuple(
            sorted(
                (*(p for p in base.gated if p.key not in lifted), *still_gated),
                key=lambda p: p.key,
            )
        ),
        pod_groups=types.MappingProxyType(groups),
    )


def _with_demand(
    base: snapshots.Snapshot, offered: collections.abc.Sequence[pods.PodInfo]
) -> collections.abc.Mapping[str, usage.QueueUsage]:
    """``base``'s queue usage with the gated pods ``offered`` as pending counted as their
    queues' demand, as the cache counts the pending pods it knows (a pod whose queue's
    ``namespaceSelector`` does not admit its namespace is none of that queue's demand): without
    them a queue's waiting pods and its fair share would leave admission mode's work out."""
    totals = dict(base.queue_usage)
    for info in offered:
        if info.queue is None:
            continue
        queue = base.queues.get(info.queue)
        selector = queue.namespaces if queue is not None else None
        if selector is not None and not selector.admits(base.namespaces.get(info.namespace, {})):
            continue
        found = totals.get(info.queue, usage.EMPTY)
        totals[info.queue] = dataclasses.replace(found, requested=found.requested + info.requests)
    return types.MappingProxyType(totals)


class Sorted(typing.NamedTuple):
    """A cycle's decisions as :func:`sort_out` sorted them."""

    admits: dict[str, list[decisions.BindPod]]  # group key (or pod key) -> its pods' bindings
    unschedulable: list[decisions.Unschedulable]  # why gated pods wait (NotAdmitted Events)
    reserving: list[decisions.ReserveClaim]  # devices found for gated pods' claims
    passed: tuple[decisions.Decision, ...]  # for the inner sink, in order


def sort_out(
    result: decisions.CycleResult,
    *,
    view: collections.abc.Set[str],
    group_of: collections.abc.Callable[[str], str | None],
) -> Sorted:
    """Sort ``result`` by whether its decisions are about the pods offered through the gate
    (``view``); ``group_of`` gives a pod's group key."""
    admits: dict[str, list[decisions.BindPod]] = {}
    reserving: list[decisions.ReserveClaim] = []
    passed: list[decisions.Decision] = []
    unschedulable: list[decisions.Unschedulable] = []
    for decision in result.decisions:
        if isinstance(decision, decisions.BindPod) and decision.key in view:
            group = group_of(decision.key)
            admits.setdefault(group or decision.key, []).append(decision)
        elif (
            isinstance(decision, decisions.Unschedulable)
            and decision.subject is decisions.Subject.POD
            and decision.key in view
        ):
            unschedulable.append(decision)
        elif (
            isinstance(decision, decisions.SelectClaimNode | decisions.BindClaimVolume)
            and decision.pod in view
        ):
            continue  # kube-scheduler binds it, and handles its claims as it does so
        elif isinstance(decision, decisions.MarkPending) and any(
            p.key in view for p in decision.pods
        ):
            # A gated pod's condition stays SchedulingGated (its NotAdmitted Events say
            # why); the capacity it waits for is asked for by its gang's request.
            others = tuple(p for p in decision.pods if p.key not in view)
            if others:
                passed.append(dataclasses.replace(decision, pods=others))
        elif (
            isinstance(decision, decisions.ReserveClaim)
            and f"{decision.namespace}/{decision.pod}" in view
        ):
            reserving.append(decision)  # kube-scheduler allocates it as it binds the pod
        else:
            passed.append(decision)
    return Sorted(admits, unschedulable, reserving, tuple(passed))
