"""Why a pod, a group or a Reservation waits, as data: a closed set of codes and a record.

A plugin that rejects says *what kind* of obstacle it met with a :class:`ReasonCode` and
explains it for a human in the message. The record travels unchanged from the plugin's
:class:`~berth.scheduler.framework.statuses.Status` through the session and its
:class:`~berth.scheduler.framework.decisions.CycleResult` to the PodGroup's ``Scheduled``
condition (whose ``reason`` is the code's value), Events, metrics labels and the CLI. Layers
decide on the code; only rendering reads the message, and nothing parses it back
(``tests/scheduler/framework/test_no_reason_parsing.py`` guards that). See "Reasons" in
docs/architecture.md.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import types

__all__ = ["Detail", "Reason", "ReasonCode", "new"]


class ReasonCode(enum.Enum):
    """What kind of obstacle keeps work pending; the value is the CamelCase condition reason
    users see in the ``Reason`` column of ``kubectl get bpg``."""

    UNSCHEDULABLE = "Unschedulable"
    """No node fits for a reason other than free capacity (labels, taints, affinity...)."""

    NOT_ENOUGH_RESOURCES = "NotEnoughResources"
    """Nodes exist that could hold the work, but not enough capacity is free on them now
    (``Insufficient cpu``, a gang's ``minResources``)."""

    NOT_ENOUGH_PODS = "NotEnoughPods"
    """A gang has fewer than ``minMember`` pods yet."""

    GANG_TIMED_OUT = "Timeout"
    """A gang's ``scheduleTimeoutSeconds`` passed without placing it (failed or backing off)."""

    EXECUTION_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"
    """A running group (or pod) passed its ``maximumExecutionTimeSeconds`` (its own, else its
    queue's): its pods were evicted, and it waits again (``Requeue``) or failed (``Fail``;
    ``details``: ``maximumExecutionTimeSeconds``, ``policy``)."""

    QUEUE_NOT_FOUND = "QueueNotFound"
    """The work names a queue that does not exist."""

    QUEUE_CLOSED = "QueueClosed"
    """The queue (or a parent) is ``Closed``: new work waits, running work may finish."""

    NOT_LEAF_QUEUE = "NotLeafQueue"
    """The work names a queue that has child queues; only leaves hold work."""

    QUEUE_INVALID = "QueueInvalid"
    """The queue's spec cannot be used (a cycle, a missing parent, ``limit`` below
    ``guaranteed``)."""

    NEVER_FITS = "OverQueueLimit"
    """The gang's quorum exceeds a limit on its queue's path even with the queue empty."""

    CLUSTER_TOO_SMALL = "ClusterTooSmall"
    """The gang's quorum asks more of some resource than the cluster's schedulable nodes
    have in all, even empty: it can never fit the cluster as it is (``details``:
    ``resource``, ``needs``, ``has``, in milli-units)."""

    QUEUE_AT_LIMIT = "QueueOverLimit"
    """Placing the work now would take its queue (or a parent) over its ``limit``."""

    QUEUE_OVER_SHARE = "QueueOverShare"
    """The queue holds its fair share while other queues wait."""

    TOPOLOGY_UNSATISFIABLE = "TopologyUnsatisfiable"
    """A required topology cannot be met now: no domain of the level has room for the gang
    (or one of its roles), or it fits in none of those tried (``details``: ``field``,
    ``level``)."""

    TOPOLOGY_LEVEL_UNKNOWN = "TopologyLevelUnknown"
    """A topology request names a level the profile does not declare, or one whose node
    label no node carries (``details``: ``field``, ``level``)."""

    TOPOLOGY_DOMAIN_TOO_SMALL = "TopologyDomainTooSmall"
    """What must share one domain asks for more than the largest domain of the level holds
    in all, so it can never fit (``details``: ``field``, ``level``, ``resource``)."""

    SUB_GROUP_BELOW_MINIMUM = "SubGroupBelowMinimum"
    """A role of the gang (``spec.subGroups``) could not get its ``minMember`` placed
    (``details``: ``field``, ``subGroup``)."""

    SUB_GROUP_MATCHES_NO_POD = "SubGroupMatchesNoPod"
    """A role's selector matches none of the group's pods (``details``: ``field``)."""

    SUB_GROUPS_OVERLAP = "SubGroupsOverlap"
    """A pod matches the selectors of two roles; a pod belongs to one (``details``:
    ``field``, ``pod``)."""

    VOLUME_CLAIM_PROBLEM = "VolumeClaimProblem"
    """A claim the pod mounts cannot be used as it stands: missing, being deleted, lost,
    or waiting for its storage class or volume (``details``: ``claim``)."""

    VOLUME_NODE_CONFLICT = "VolumeNodeConflict"
    """Only nodes a volume cannot reach are left: the node affinity of its bound or
    bindable PersistentVolumes, or no volume the claim could bind to there."""

    VOLUME_IN_USE = "VolumeInUse"
    """A ``ReadWriteOncePod`` claim the pod mounts is used by another pod."""

    VOLUME_LIMIT_EXCEEDED = "VolumeLimitExceeded"
    """The nodes that could run the pod have no room for more volumes of its CSI driver."""

    RESOURCE_CLAIM_PENDING = "ResourceClaimPending"
    """A ResourceClaim the pod asks for from a template is not made yet: the resourceclaim
    controller has not named it in the pod's ``status.resourceClaimStatuses``, or named it
    there before Berth's watch of claims brought it (``details``: ``claim``).
    kube-scheduler's PreEnqueue keeps such a pod out of its queue and writes nothing; so this
    is no news (:mod:`~berth.scheduler.framework.pending`): no condition, no Event, only the
    reason Berth's own views show."""

    RESOURCE_CLAIM_PROBLEM = "ResourceClaimProblem"
    """A ResourceClaim the pod uses cannot be allocated as it stands, wherever the pod goes:
    missing, being deleted, not the pod's own, malformed,
    naming a DeviceClass that does not exist, with a selector that does not compile or fails
    on a device, asking for all devices of a pool being updated or broken, or reserved by
    as many consumers as a claim may have (``details``: ``claim``)."""

    DEVICES_UNAVAILABLE = "DevicesUnavailable"
    """No node left offers devices that satisfy the pod's ResourceClaims: none there match
    its requests and constraints, their pools are broken, or a claim is allocated where the
    pod cannot go. (Matching devices taken by other claims are ``NotEnoughResources``.)"""

    RESERVATION_UNAVAILABLE = "ReservationUnavailable"
    """The pod must go into a Reservation (it names one, or its queue admitted it on one's
    room) that does not exist, has ended, is not Available yet, takes no owners, holds
    nothing any more, or does not list the pod as an owner (``details``: ``reservation``)."""

    NOT_STARTED = "NotStarted"
    """A Reservation's ``startAt`` has not come: it holds nothing yet (a node may be draining
    for it meanwhile; ``details``: ``startAt``, RFC 3339)."""

    PREEMPTION_DELAYED = "PreemptionDelayed"
    """The work could evict others to fit, but waits for new nodes first: its
    ``preemptionDelay`` (the PodGroup's, else its queue's) has not passed since it began
    waiting (``details``: ``delaySeconds``, ``remainingSeconds``). Capacity may still come."""

    AUTOSCALER_CANNOT_FIT = "AutoscalerCannotFit"
    """The gang waits for capacity, but the cluster's autoscaler said it cannot place a
    member on any node it could add (its NodePools are too small): its pods are kept off the
    autoscalers' list for a backoff, so that no node is bought for the members that fit
    (``details``: ``group``, ``until``). Set by the binder, never by a plugin."""

    NAMESPACE_NOT_ADMITTED = "NamespaceNotAdmitted"
    """The work's queue does not admit its namespace (the queue's ``namespaceSelector``;
    ``details``: ``queue``, ``namespace``)."""

    INVALID = "Invalid"
    """The object itself cannot be scheduled as written (a bad quantity, a bad template)."""

    GROUP_PENDING = "GroupPending"
    """A pod waits for its PodGroup: the group does not exist yet, or Berth has not derived
    it from the pod's owners."""

    SCHEDULING_GATED = "SchedulingGated"
    """The pod still carries ``schedulingGates``."""

    NOT_TRIED = "NotTried"
    """No action looked at the pod this cycle: no news about why it waits."""

    ADMISSION_REJECTED = "AdmissionRejected"
    """Admission mode: the pod's admission was rejected after its gate went (it did not bind
    in time); it waits gated again."""

    ERROR = "Error"
    """A plugin failed (a bug): the work is not placed this cycle."""


Detail = str | int | float | bool
"""One value of :attr:`Reason.details` (JSON scalars, so a reason serialises as it is)."""

_NO_DETAILS: collections.abc.Mapping[str, Detail] = types.MappingProxyType({})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Reason:
    """Why something waits: ``code`` for machines, ``message`` for humans, who said it, and
    typed ``details`` (e.g. ``{"queue": "team-a", "resource": "cpu"}``)."""

    code: ReasonCode
    message: str
    plugin: str = ""
    details: collections.abc.Mapping[str, Detail] = dataclasses.field(
        default_factory=lambda: _NO_DETAILS, hash=False
    )

    def followed_by(self, cause: Reason) -> Reason:
        """``"<self>; <cause>"``, coded as ``cause``: the more specific obstacle explains why
        this one could not be overcome (``gang needs minMember 3, only 1 could be placed;
        0/4 nodes fit: 4 Insufficient cpu`` is ``NotEnoughResources``)."""
        return Reason(
            code=cause.code,
            message=f"{self.message}; {cause.message}",
            plugin=cause.plugin or self.plugin,
            details={**self.details, **cause.details},
        )

    def explained_by(self, cause: Reason) -> Reason:
        """``"<self>; <cause>"``, coded as ``self``: for an obstacle that is itself the kind
        (a gang fits in no single rack), where the cause only says what the last try met."""
        return Reason(
            code=self.code,
            message=f"{self.message}; {cause.message}",
            plugin=self.plugin or cause.plugin,
            details={**cause.details, **self.details},
        )

    def as_json(self) -> dict[str, object]:
        """The record as JSON for the operator's debug API and ``kubectl berth why``."""
        out: dict[str, object] = {"code": self.code.value, "message": self.message}
        if self.plugin:
            out["plugin"] = self.plugin
        if self.details:
            out["details"] = dict(self.details)
        return out


def new(code: ReasonCode, message: str, *, plugin: str = "", **details: Detail) -> Reason:
    """A reason: ``reasons.new(ReasonCode.QUEUE_CLOSED, "queue a is closed", queue="a")``."""
    return Reason(
        code=code,
        message=message,
        plugin=plugin,
        details=types.MappingProxyType(details) if details else _NO_DETAILS,
    )
