"""The Queue API (cluster-scoped, short name ``bq``): quota and fair share for PodGroups.

Queues form a tree through ``spec.parent``; only leaf queues take work. A queue's
``guaranteed`` resources are lent out while it is idle and reclaimed when it needs them, its
``limit`` is a hard cap, and its ``weight`` is its share of what is left above the guarantees.
Its ``namespaceSelector`` says which namespaces may use it. A queue named ``default`` exists
implicitly, and the leader creates it as an object when it is missing
(:mod:`berth.kube.grouping.default_queue`), so that users see it and its usage. The model is the
contract; the Proportion and QueueAccess plugins and the queue controller are the readers.
"""

from __future__ import annotations

import enum
import typing

import pydantic

from berth.api import autoscaling as autoscaling_api
from berth.api import durations, keys, meta, reservations, resources, rules, spec_defaults

__all__ = [
    "JobOrder",
    "KIND",
    "MAX_MIN_RUNTIME_SECONDS",
    "MAX_WEIGHT",
    "PLURAL",
    "Queue",
    "QueueCondition",
    "QueueSpec",
    "QueueState",
    "QueueStatus",
    "QueueSummary",
]

KIND = "Queue"
PLURAL = "queues"
MAX_WEIGHT = 65535
MAX_EXPECTED_RUNTIME_SECONDS = 30 * 24 * 3600
"""The longest default expected runtime a queue may declare (30 days)."""
MAX_MIN_RUNTIME_SECONDS = 7 * 24 * 3600
"""The longest protection from fair-share reclaim a queue may ask for (a week)."""


class QueueState(enum.StrEnum):
    """Whether a queue admits new work."""

    OPEN = "Open"
    CLOSED = "Closed"


class QueueCondition(enum.StrEnum):
    """What a queue does with work now (``kubectl get bq``'s State column)."""

    OPEN = "Open"  # takes new work
    CLOSED = "Closed"  # spec.state is Closed: nothing new is admitted
    INVALID = "Invalid"  # its place in the tree or its quota is wrong: it takes nothing


class QueueSummary(meta.ApiModel):
    """The main resources of a queue as short text, for ``kubectl get bq`` (the structured
    ResourceLists beside it are the data)."""

    guaranteed: str | None = None
    """E.g. ``8 cpu, 32Gi mem, 4 gpu``."""
    allocated: str | None = None
    """What runs, in the same form."""
    fair_share: str | None = None
    """What the queue is entitled to now, in the same form."""
    limit: str | None = None
    """The hard cap, in the same form."""


class JobOrder(enum.StrEnum):
    """The order in which a queue's waiting PodGroups are tried."""

    PRIORITY_FIFO = "PriorityFIFO"
    """Highest priority first, then oldest first."""
    FIFO = "FIFO"
    """Oldest first, whatever the priority."""
    NAMESPACE_FAIR = "NamespaceFair"
    """The namespace holding least (running plus what its earlier groups ask, by dominant
    resource) goes next; inside a namespace, priority then oldest."""


class QueueSpec(meta.ApiModel):
    """The desired quota, share and place in the hierarchy of a queue."""

    model_config = pydantic.ConfigDict(
        json_schema_extra=rules.rules(
            rules.rule(
                f"!has(self.weight) || (self.weight >= 1 && self.weight <= {MAX_WEIGHT})",
                message=f"weight must be between 1 and {MAX_WEIGHT}",
                field_path=".weight",
            ),
            rules.rule(
                "!has(self.guaranteed) || !has(self.limit) || self.guaranteed.all(k, "
                "!(k in self.limit) || "
                "quantity(string(self.limit[k]))"
                ".compareTo(quantity(string(self.guaranteed[k]))) >= 0)",
                message="limit must be at least guaranteed for every resource both name",
                field_path=".limit",
            ),
            rules.duration("preemptionDelay"),
        )
    )

    parent: str | None = None
    """Name of the parent queue; queues without one hang off the root. Only leaf queues take
    work."""
    guaranteed: resources.ResourceListField | None = None
    """Resources this queue is always entitled to, e.g. {cpu: "8", memory: 32Gi}. Lent to
    other queues while idle and reclaimed when this queue needs them."""
    limit: resources.ResourceListField | None = None
    """Hard cap on the resources this queue may use; a resource not named is not capped. Must
    be at least guaranteed for every resource both name."""
    weight: int = pydantic.Field(default=spec_defaults.QUEUE_WEIGHT, ge=1, le=MAX_WEIGHT)
    """Share (1..65535) of the capacity above all guarantees, relative to sibling queues."""
    priority: int = spec_defaults.QUEUE_PRIORITY
    """Higher-priority queues are served first and reclaimed from last."""
    reclaimable: bool = spec_defaults.QUEUE_RECLAIMABLE
    """Whether resources this queue borrowed above its guarantee may be taken back."""
    state: QueueState = QueueState(spec_defaults.QUEUE_STATE)
    """Open admits new PodGroups; Closed admits nothing new (running work continues)."""
    reclaim_min_runtime_seconds: int | None = pydantic.Field(
        default=None, ge=0, le=MAX_MIN_RUNTIME_SECONDS
    )
    """Seconds a pod of this queue must have run before fair-share reclaim may evict it
    (0..604800); unset: the scheduler profile's ``reclaimMinRuntimeSeconds`` (60 by
    default). Reclaim toward a guarantee does not wait for it."""
    default_expected_runtime_seconds: int | None = pydantic.Field(
        default=None, ge=1, le=MAX_EXPECTED_RUNTIME_SECONDS
    )
    """How long this queue's pods run, for those that do not declare it (annotation
    ``scheduling.berth.io/expected-runtime``): EASY backfill lets a pod onto room held for a
    starving gang only when it ends before the gang could start. Unset: such pods have no
    known end and never backfill."""
    maximum_execution_time_seconds: int | None = pydantic.Field(default=None, ge=1)
    """Seconds each of this queue's groups (and pods of no group) may run, for those that do
    not set their own ``maximumExecutionTimeSeconds``; then they are requeued (a PodGroup's
    ``onMaximumExecutionTime`` may say Fail). On a parent queue it holds for the queues below
    that set none. Unset (here and above): no limit."""
    job_order: JobOrder = JobOrder(spec_defaults.QUEUE_JOB_ORDER)
    """Order in which the queue's waiting PodGroups are tried: PriorityFIFO, FIFO or
    NamespaceFair (fair between the namespaces submitting to it). Leaf queues only."""
    preempt_across_queues: bool = spec_defaults.QUEUE_PREEMPT_ACROSS_QUEUES
    """Whether this queue's groups may preempt lower-priority work of other queues that hold
    more than their fair share (never taking such a queue below its guarantee). Off: priority
    only orders work and preempts inside the queue."""
    preemption_delay: durations.DurationField | None = None
    """How long this queue's waiting work waits for new capacity — nodes an autoscaler adds —
    before Berth preempts or reclaims for it (KAI's ``preemption-delay``), counted from when
    it began waiting (a gang: once its ``minMember``-th pod exists); free room is used at
    once all the same. A PodGroup's own ``preemptionDelay`` overrides it; on a parent queue
    it holds for the queues below that set none. Unset (here and above) or ``0``: evict at
    once."""
    autoscaling: autoscaling_api.QueueAutoscaling | None = None
    """What this queue's work asks of the cluster's autoscaler: a ProvisioningRequest per gang
    waiting for nodes (``provisioningRequest``), a CapacityBuffer per Reservation that cannot
    fit (``reservationBuffers``). Unset: neither; waiting pods' ``Unschedulable`` condition is
    the signal (docs/autoscaling.md)."""
    namespace_selector: reservations.LabelSelector | None = None
    """Namespaces (by their labels) whose pods and PodGroups may use this queue; unset, every
    namespace may. A pod naming a queue its namespace may not use is refused at admission, and
    one already there waits, saying so."""

    @pydantic.field_validator("limit")
    @classmethod
    def _limit_covers_guaranteed(
        cls, limit: resources.ResourceList | None, info: pydantic.ValidationInfo
    ) -> resources.ResourceList | None:
        guaranteed = info.data.get("guaranteed")
        if limit is None or guaranteed is None:
            return limit
        below = sorted(k for k in guaranteed if k in limit and limit[k] < guaranteed[k])
        if below:
            raise ValueError(
                f"limit must be at least guaranteed for every resource both name; "
                f"it is below for: {', '.join(below)}"
            )
        return limit


class QueueStatus(meta.ApiModel):
    """What the queue holds and is entitled to, as the scheduler last computed it."""

    allocated: resources.ResourceTotalsField | None = None
    """Resources used by this queue's running pods (and reservations)."""
    requested: resources.ResourceTotalsField | None = None
    """Resources asked for by this queue's pending pods."""
    fair_share: resources.ResourceTotalsField | None = None
    """Resources this queue is entitled to now: its guarantee plus its weighted share of the
    rest."""
    children: list[str] | None = None
    """Names of the queues whose parent this queue is."""
    pending: int = pydantic.Field(default=0, ge=0)
    """Number of PodGroups waiting in this queue."""
    running: int = pydantic.Field(default=0, ge=0)
    """Number of PodGroups running in this queue."""
    state: QueueCondition | None = None
    """Open, Closed or Invalid: what the queue does with work now."""
    state_reason: str | None = None
    """Why the queue is Closed or Invalid."""
    pending_pods: int = pydantic.Field(default=0, ge=0)
    """Number of pods waiting in this queue and the queues below it."""
    running_pods: int = pydantic.Field(default=0, ge=0)
    """Number of pods placed (and not finished) in this queue and the queues below it."""
    summary: QueueSummary | None = None
    """Guaranteed, allocated, fair share and limit of the main resources, as short text."""
    conditions: list[meta.Condition] | None = None
    """Observations of the queue's state."""


class Queue(meta.ApiModel):
    """A queue of batch work with guaranteed quota, a hard limit and a weighted fair share."""

    model_config = pydantic.ConfigDict(
        json_schema_extra=rules.rules(
            rules.rule(
                "!has(self.spec) || !has(self.spec.parent) || !has(self.metadata.name) || "
                "self.spec.parent != self.metadata.name",
                message="a queue cannot be its own parent",
                field_path=".spec.parent",
            ),
        )
    )

    api_version: typing.Literal["scheduling.berth.io/v1alpha1"] = keys.API_VERSION
    """APIVersion of the object: scheduling.berth.io/v1alpha1."""
    kind: typing.Literal["Queue"] = "Queue"
    """Kind of the object: Queue."""
    metadata: meta.ObjectMeta = pydantic.Field(default_factory=meta.ObjectMeta)
    """Standard object metadata."""
    spec: QueueSpec = pydantic.Field(default_factory=QueueSpec)
    """Desired quota, share and place in the hierarchy."""
    status: QueueStatus | None = None
    """Observed usage and entitlement, written by Berth."""

    @pydantic.field_validator("spec")
    @classmethod
    def _not_own_parent(cls, spec: QueueSpec, info: pydantic.ValidationInfo) -> QueueSpec:
        metadata = info.data.get("metadata")
        if spec.parent is not None and metadata is not None and spec.parent == metadata.name:
            raise ValueError(f"queue {spec.parent!r} cannot be its own parent (spec.parent)")
        return spec
