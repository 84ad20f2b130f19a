"""The PodGroup API (namespaced, short name ``bpg``): a gang placed all or nothing.

Pods join a group with the ``scheduling.berth.io/pod-group`` label. The group is placed only
when ``minMember`` of its pods (and ``minResources``) fit at once; its ``Scheduled`` condition
always says why it waits. The model is the contract; the Gang plugin and the PodGroup
controller are the readers.
"""

from __future__ import annotations

import enum
import typing

import pydantic

from berth.api import durations, keys, meta, reservations, resources, rules, spec_defaults

__all__ = [
    "CONDITION_SCHEDULED",
    "ExecutionTimePolicy",
    "KIND",
    "MIN_MEMBER",
    "PLURAL",
    "PodGroup",
    "PodGroupPhase",
    "PodGroupSpec",
    "PodGroupStatus",
    "SUB_GROUP_NAMES",
    "ScheduleTimeoutPolicy",
    "SubGroup",
    "SubGroupStatus",
    "TopologyConstraint",
]

MAX_SUB_GROUPS = 16
"""Sub-groups a PodGroup may list (bounded, so that CRD rules over the list stay cheap)."""

KIND = "PodGroup"
PLURAL = "podgroups"
CONDITION_SCHEDULED = "Scheduled"
"""The condition whose reason and message say why a group waits (or that it was placed)."""


class PodGroupPhase(enum.StrEnum):
    """Where a PodGroup is in its life."""

    PENDING = "Pending"
    INQUEUE = "Inqueue"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    FINISHED = "Finished"
    FAILED = "Failed"


class ScheduleTimeoutPolicy(enum.StrEnum):
    """What happens when a group's ``scheduleTimeoutSeconds`` passes without it being placed."""

    REQUEUE = "Requeue"
    """Release what it holds, back off (the timeout, doubling each time, at most an hour),
    then try again from the back of its queue."""
    FAIL = "Fail"
    """Mark the group Failed."""


class ExecutionTimePolicy(enum.StrEnum):
    """What happens when a running group passes its ``maximumExecutionTimeSeconds``."""

    REQUEUE = "Requeue"
    """Evict its pods (their controller recreates them) and let the group wait in its queue
    again; its clock starts afresh when it runs whole again."""
    FAIL = "Fail"
    """Evict its pods and mark the group Failed: it is not placed again."""


MIN_MEMBER = "minMember must be at least 1"
"""What a group (or role) of fewer than one pod is told, by the API server and Berth alike."""
SUB_GROUP_NAMES = "subGroups names must be unique"
"""What two roles of one name are told, by the API server and Berth alike."""


class TopologyConstraint(meta.ApiModel):
    """Pods that must (or should) share one topology domain, at a level the scheduler knows."""

    model_config = pydantic.ConfigDict(
        json_schema_extra=rules.rules(
            rules.rule(
                "!(has(self.required) && has(self.preferred))",
                message="set at most one of required and preferred",
            ),
        )
    )

    required: str | None = pydantic.Field(default=None, min_length=1, max_length=63)
    """Level (e.g. ``rack``) whose one domain must hold all the pods; until one can, they wait."""
    preferred: str | None = pydantic.Field(default=None, min_length=1, max_length=63)
    """Level whose one domain should hold the pods; they spread over more when none can."""

    @pydantic.model_validator(mode="after")
    def _one(self) -> TopologyConstraint:
        if self.required is not None and self.preferred is not None:
            raise ValueError("set at most one of required and preferred")
        return self


class SubGroup(meta.ApiModel):
    """A role inside the gang (``launcher``, ``workers``): its pods, its minimum, its topology."""

    name: str = pydantic.Field(min_length=1, max_length=63)
    """Name of the role, unique in the group (used in reasons and status)."""
    min_member: int = pydantic.Field(default=spec_defaults.SUB_GROUP_MIN_MEMBER, ge=1)
    """Pods of this role that must be placed before the gang runs."""
    selector: reservations.LabelSelector
    """The group's pods that belong to this role, by their labels (one role per pod)."""
    topology: TopologyConstraint | None = None
    """A domain this role's pods must (or should) share."""


class PodGroupSpec(meta.ApiModel):
    """The gang's size, resources, queue and priority."""

    model_config = pydantic.ConfigDict(
        json_schema_extra=rules.rules(
            rules.rule(
                "!has(self.minMember) || self.minMember >= 1",
                message=MIN_MEMBER,
                field_path=".minMember",
            ),
            rules.rule(
                "!has(self.subGroups) || self.subGroups.all(a, "
                "self.subGroups.exists_one(b, b.name == a.name))",
                message=SUB_GROUP_NAMES,
                field_path=".subGroups",
            ),
            rules.duration("preemptionDelay"),
        )
    )

    min_member: int = pydantic.Field(default=spec_defaults.POD_GROUP_MIN_MEMBER, ge=1)
    """Number of pods that must be placed together before any of them is bound."""
    min_resources: resources.ResourceListField | None = None
    """Resources that must be available for the whole group before it is admitted."""
    queue: str = spec_defaults.POD_GROUP_QUEUE
    """Queue the group's resources are charged to."""
    priority_class_name: str | None = None
    """PriorityClass giving the group its priority among the queue's groups."""
    schedule_timeout_seconds: int | None = pydantic.Field(default=None, ge=1)
    """Seconds the group may wait for minMember pods to fit at a time; then
    ``onScheduleTimeout`` applies. Unset waits for ever."""
    on_schedule_timeout: ScheduleTimeoutPolicy = ScheduleTimeoutPolicy(
        spec_defaults.POD_GROUP_ON_SCHEDULE_TIMEOUT
    )
    """Requeue (release, back off exponentially, retry from the back of the queue) or Fail
    (mark the group Failed) when ``scheduleTimeoutSeconds`` passes."""
    maximum_execution_time_seconds: int | None = pydantic.Field(default=None, ge=1)
    """Seconds the group may run (Kueue's ``maximumExecutionTimeSeconds``, Slurm's time
    limit), counted from when its ``minMember``-th pod started; then
    ``onMaximumExecutionTime`` applies. Unset: its queue's ``maximumExecutionTimeSeconds``
    (unset there too: no limit)."""
    on_maximum_execution_time: ExecutionTimePolicy | None = None
    """Requeue (evict its pods; it waits in its queue again) or Fail (evict its pods and mark
    the group Failed) once it has run ``maximumExecutionTimeSeconds``. Unset: Requeue."""
    preemption_delay: durations.DurationField | None = None
    """How long the group waits for new capacity — nodes an autoscaler adds — before Berth
    preempts or reclaims for it, counted from when its ``minMember``-th pod exists; free room
    is used at once all the same. Unset: its queue's ``preemptionDelay``; ``0``: evict at
    once."""
    topology: TopologyConstraint | None = None
    """A topology domain (zone, block, rack, host: the levels the scheduler's profile
    declares) the gang's pods must or should share; it goes to the one that fits it best."""
    sub_groups: list[SubGroup] | None = pydantic.Field(default=None, max_length=MAX_SUB_GROUPS)
    """Roles inside the gang: it runs only when every role has its ``minMember`` placed."""

    @pydantic.model_validator(mode="after")
    def _unique_sub_groups(self) -> PodGroupSpec:
        names = [g.name for g in self.sub_groups or ()]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"subGroups names must be unique ({name} is listed twice)")
        return self


class SubGroupStatus(meta.ApiModel):
    """One role's pods, as Berth last observed them."""

    name: str
    """The sub-group's name."""
    min_member: int = pydantic.Field(ge=1)
    """Its minMember."""
    scheduled: int = pydantic.Field(default=0, ge=0)
    """Its pods bound to a node."""
    running: int = pydantic.Field(default=0, ge=0)
    """Its pods running."""


class PodGroupStatus(meta.ApiModel):
    """Where the group is and why, as Berth last observed it."""

    phase: PodGroupPhase = PodGroupPhase.PENDING
    """Pending, Inqueue, Scheduled, Running, Finished or Failed."""
    scheduled: int = pydantic.Field(default=0, ge=0)
    """Number of the group's pods bound to a node."""
    running: int = pydantic.Field(default=0, ge=0)
    """Number of the group's pods running."""
    succeeded: int = pydantic.Field(default=0, ge=0)
    """Number of the group's pods that succeeded."""
    failed: int = pydantic.Field(default=0, ge=0)
    """Number of the group's pods that failed."""
    queue_position: int | None = pydantic.Field(default=None, ge=1)
    """While the group waits: its place among its queue's waiting groups, in the order the
    scheduler tries them (1 is tried first)."""
    queue_pending: int | None = pydantic.Field(default=None, ge=0)
    """While the group waits: how many groups wait in its queue."""
    sub_groups: list[SubGroupStatus] | None = pydantic.Field(
        default=None, max_length=MAX_SUB_GROUPS
    )
    """Per sub-group: its pods scheduled and running."""
    conditions: list[meta.Condition] | None = None
    """Observations; the Scheduled condition says why the group waits."""


class PodGroup(meta.ApiModel):
    """A gang of pods that is scheduled all or nothing."""

    api_version: typing.Literal["scheduling.berth.io/v1alpha1"] = keys.API_VERSION
    """APIVersion of the object: scheduling.berth.io/v1alpha1."""
    kind: typing.Literal["PodGroup"] = "PodGroup"
    """Kind of the object: PodGroup."""
    metadata: meta.ObjectMeta = pydantic.Field(default_factory=meta.ObjectMeta)
    """Standard object metadata."""
    spec: PodGroupSpec = pydantic.Field(default_factory=PodGroupSpec)
    """The gang's size, resources, queue and priority."""
    status: PodGroupStatus | None = None
    """Where the group is and why, written by Berth."""
