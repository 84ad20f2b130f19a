"""Which waiting pods an autoscaler should act on: a decision per gang, from reason codes.

Cluster Autoscaler and Karpenter both buy nodes for exactly one signal: a pod whose
``PodScheduled`` condition has reason ``Unschedulable`` (Karpenter's ``pod.FailedToSchedule``
reads the reason only and skips pods with a ``nominatedNodeName``; Cluster Autoscaler's
unschedulable pod lister also wants status ``False``). Berth marks a pod that way exactly when
more capacity — nodes an autoscaler could add — would let it, and its whole gang, be placed;
a pod waiting for anything else (its queue's limit or share, missing gang members, a missing,
closed or invalid queue, a refused spec, a Reservation) gets ``PodScheduled=False`` with a
reason of its own that no autoscaler reads: the value of the :class:`~reasons.ReasonCode` that
stops it (``QueueOverLimit``, ``NotEnoughPods``, ...; an ``Error`` is kube-scheduler's
``SchedulerError``). docs/autoscaling.md has the table.

The decision is made from codes alone (:data:`NEEDS_CAPACITY`: one row per code, so a new code
cannot ship without saying which side it is on) and a gang at a time (:func:`decide`): a gang
below its quorum is placed all or nothing, so one obstacle that capacity cannot remove — the
group's or any member's — keeps every member off the autoscaler's list, and each member then
says what that obstacle is. The members of one gang are one :class:`MarkPending` decision, so
that the sink writes their conditions in one burst and an autoscaler batching pending pods sees
the whole gang in one provisioning round. A pod nothing looked at this cycle (``NotTried``), or
one whose claim the resourceclaim controller has not made yet (``ResourceClaimPending``, which
kube-scheduler's PreEnqueue keeps out of its queue without a write), is no news
(:data:`NO_NEWS`): it is left out, and the condition last written for it stands.

Codes say what Berth knows; the autoscaler knows its node shapes. Once it has said that a
member of a gang fits no node it could add, :func:`withheld` turns the gang's capacity
decision into one that waits for that verdict (``AutoscalerCannotFit``, chosen by
:class:`berth.status.scale_up.Holds`): an autoscaler would otherwise buy nodes for the members
that fit, which the gang, placed whole or not at all, can never use.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types

from berth.scheduler.framework import reasons

__all__ = [
    "NEEDS_CAPACITY",
    "NO_NEWS",
    "SCHEDULER_ERROR",
    "UNSCHEDULABLE",
    "Gang",
    "MarkPending",
    "PodPending",
    "condition_reason",
    "decide",
    "needs_capacity",
    "withheld",
]

Code = reasons.ReasonCode

UNSCHEDULABLE = "Unschedulable"
"""``PodScheduled`` reason of a pod that more nodes would place (Kubernetes'
``PodReasonUnschedulable``): the only one Cluster Autoscaler and Karpenter act on."""

SCHEDULER_ERROR = "SchedulerError"
"""``PodScheduled`` reason of a pod a plugin failed on (kube-scheduler's
``PodReasonSchedulerError``)."""

NEEDS_CAPACITY: collections.abc.Mapping[Code, bool] = types.MappingProxyType(
    {
        # Capacity: a node an autoscaler adds (of the shape its node pools make) could take it.
        Code.UNSCHEDULABLE: True,  # no node matches its labels, taints, affinity: a new one may
        Code.NOT_ENOUGH_RESOURCES: True,
        Code.CLUSTER_TOO_SMALL: True,  # the gang asks more than every node has: add nodes
        Code.TOPOLOGY_UNSATISFIABLE: True,  # no domain has room now: new nodes add room
        Code.TOPOLOGY_DOMAIN_TOO_SMALL: True,  # a domain grows with the nodes added to it
        Code.SUB_GROUP_BELOW_MINIMUM: True,  # a role lacked room for its minMember
        Code.VOLUME_NODE_CONFLICT: True,  # a node in the volume's zone may be added
        Code.VOLUME_LIMIT_EXCEEDED: True,  # a new node has attach slots of its own
        Code.DEVICES_UNAVAILABLE: True,  # a node whose devices match may be added (the
        # autoscaler judges, as for kube-scheduler's pods: Karpenter ignores DRA by default)
        Code.PREEMPTION_DELAYED: True,  # it waits for new nodes before evicting: ask for them
        Code.AUTOSCALER_CANNOT_FIT: False,  # the autoscaler said no node it adds fits a member
        # Not capacity: more nodes would stay empty or go to others.
        Code.NOT_ENOUGH_PODS: False,  # the gang waits for its members
        Code.GANG_TIMED_OUT: False,  # failed, or backing off until its next attempt
        Code.EXECUTION_TIME_EXCEEDED: False,  # failed past its maximum execution time
        Code.QUEUE_NOT_FOUND: False,
        Code.QUEUE_CLOSED: False,
        Code.NOT_LEAF_QUEUE: False,
        Code.QUEUE_INVALID: False,
        Code.NEVER_FITS: False,  # over a queue limit even with the queue empty
        Code.QUEUE_AT_LIMIT: False,
        Code.QUEUE_OVER_SHARE: False,  # the room added would go to the queues below their share
        Code.TOPOLOGY_LEVEL_UNKNOWN: False,  # a configuration error, not a lack of nodes
        Code.SUB_GROUP_MATCHES_NO_POD: False,
        Code.SUB_GROUPS_OVERLAP: False,
        Code.VOLUME_CLAIM_PROBLEM: False,
        Code.VOLUME_IN_USE: False,
        Code.RESOURCE_CLAIM_PENDING: False,  # it waits for the resourceclaim controller
        Code.RESOURCE_CLAIM_PROBLEM: False,  # the claim cannot be allocated wherever it goes
        Code.RESERVATION_UNAVAILABLE: False,  # it waits for its Reservation, not for nodes
        Code.NOT_STARTED: False,  # a Reservation before its startAt: not due, nodes or not
        Code.NAMESPACE_NOT_ADMITTED: False,
        Code.INVALID: False,
        Code.GROUP_PENDING: False,
        Code.SCHEDULING_GATED: False,
        Code.NOT_TRIED: False,  # no news (left out of every decision)
        Code.ADMISSION_REJECTED: False,
        Code.ERROR: False,
    }
)
"""Per reason code, whether more nodes could remove that obstacle (every code has a row)."""

NO_NEWS: frozenset[Code] = frozenset({Code.NOT_TRIED, Code.RESOURCE_CLAIM_PENDING})
"""Codes that say nothing to write on the pod (module docstring): left out of every decision,
and of the scheduling attempts counted."""


def needs_capacity(code: Code) -> bool:
    """Whether more nodes could remove an obstacle of this kind (:data:`NEEDS_CAPACITY`)."""
    return NEEDS_CAPACITY[code]


def condition_reason(reason: reasons.Reason, *, capacity: bool) -> str:
    """The ``PodScheduled`` reason of a pod waiting because of ``reason``: ``Unschedulable``
    when ``capacity`` (more nodes would place its gang), else the code's own value. A pod
    that does not wait for capacity is given a reason nodes cannot remove (:func:`decide`
    sees to it), whose value is never ``Unschedulable``."""
    if capacity:
        return UNSCHEDULABLE
    if reason.code is Code.ERROR:
        return SCHEDULER_ERROR
    return str(reason.code.value)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PodPending:
    """One waiting pod: what its condition and Event say, and whether an autoscaler acts."""

    key: str  # namespace/name
    reason: reasons.Reason  # what stops it (its gang's obstacle when that is the one)
    capacity: bool  # more nodes would place it (with its whole gang)

    @property
    def condition(self) -> str:
        """Its ``PodScheduled`` reason (:func:`condition_reason`)."""
        return condition_reason(self.reason, capacity=self.capacity)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MarkPending:
    """Set the ``PodScheduled=False`` condition (reason :attr:`PodPending.condition`, message
    the reason's) of the waiting pods of one gang, or of one pod of its own, in one burst, and
    record a ``FailedScheduling`` Event for each saying why it waits."""

    group: str  # the PodGroup's key, or the pod's own key for a pod without one
    pods: tuple[PodPending, ...]  # sorted by key

    @property
    def capacity(self) -> bool:
        """Every pod of the decision waits for capacity only (an autoscaler may place them)."""
        return all(pod.capacity for pod in self.pods)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Gang:
    """What :func:`decide` reads of one gang (or one pod of its own) at session close."""

    key: str
    whole: bool
    """Its waiting pods are placed together or not at all (a group below ``minMember``); a
    group already at quorum places each further pod on its own."""
    reason: reasons.Reason | None  # the group's own reason, if it has one
    pods: collections.abc.Mapping[str, reasons.Reason]  # each waiting pod's reason


def decide(gang: Gang) -> MarkPending | None:
    """The decision for ``gang``'s waiting pods; None when no pod has news (module docstring).

    A whole gang needs capacity only if its own reason and every member's do; then each
    member is ``Unschedulable`` with its own message (or, for a gang in its preemption
    window, the group's, which says how long it waits for nodes). Otherwise the first
    obstacle capacity cannot remove — the group's, else the first member's in key order — is
    what every member whose own reason is a capacity one says instead (worded ``pod group
    <key>: ...``), so a member never claims to wait for nodes when its gang waits for
    something else.
    """
    told = {key: why for key, why in sorted(gang.pods.items()) if why.code not in NO_NEWS}
    if not told:
        return None
    if not gang.whole:
        return MarkPending(
            group=gang.key,
            pods=tuple(
                PodPending(key=key, reason=why, capacity=needs_capacity(why.code))
                for key, why in told.items()
            ),
        )
    blocker = _blocker(gang, told)
    if blocker is None:
        window = gang.reason is not None and gang.reason.code is Code.PREEMPTION_DELAYED
        shown = _for_members(gang.key, gang.reason) if window and gang.reason else None
        return MarkPending(
            group=gang.key,
            pods=tuple(
                PodPending(key=k, reason=shown or why, capacity=True) for k, why in told.items()
            ),
        )
    return MarkPending(
        group=gang.key,
        pods=tuple(
            PodPending(
                key=key,
                reason=why if not needs_capacity(why.code) else blocker,
                capacity=False,
            )
            for key, why in told.items()
        ),
    )


def _blocker(
    gang: Gang, told: collections.abc.Mapping[str, reasons.Reason]
) -> reasons.Reason | None:
    """The gang's first obstacle that capacity cannot remove, worded for its members."""
    if gang.reason is not None and not needs_capacity(gang.reason.code):
        return _for_members(gang.key, gang.reason)
    for key, why in told.items():
        if not needs_capacity(why.code):
            if why.details.get("group") == gang.key:
                return why  # already the group's reason, worded for its members
            return _for_members(gang.key, why, pod=key)
    return None


def _for_members(group: str, why: reasons.Reason, *, pod: str = "") -> reasons.Reason:
    """``why`` as told to the other members of ``group`` (``details["group"]`` names it)."""
    if why.details.get("group") == group:
        return why
    about = f"pod {pod} waits: " if pod else ""
    return reasons.Reason(
        code=why.code,
        message=f"pod group {group}: {about}{why.message}",
        plugin=why.plugin,
        details={**why.details, "group": group},
    )


def withheld(mark: MarkPending, reason: reasons.Reason) -> MarkPending:
    """``mark`` with its pods off the autoscalers' list, each saying ``reason`` (a code more
    nodes cannot fix): for a gang the autoscaler said it cannot fit. A decision that already
    waits for something else is returned as it is (it says the more specific obstacle)."""
    if needs_capacity(reason.code):
        raise ValueError(
            f"a withheld gang waits for what nodes cannot fix, not {reason.code.value}"
        )
    if not mark.capacity:
        return mark
    return dataclasses.replace(
        mark,
        pods=tuple(dataclasses.replace(p, reason=reason, capacity=False) for p in mark.pods),
    )
