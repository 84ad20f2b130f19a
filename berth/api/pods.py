"""The parts of a pod Berth schedules on: requests, node selection, tolerations, priority.

A Reservation's ``spec.template`` is a :class:`PodTemplate`, and manifests of plain pods load
into :class:`Pod`. Only the fields scheduling reads are declared (and validated the way the
API server validates them); every other pod field is kept as written (``extra="allow"``), so a
real pod template loads and dumps back unchanged.

Used by :mod:`berth.api.reservations`, :mod:`berth.api.manifests` and the snapshot builders.
"""

from __future__ import annotations

import enum
import typing

import pydantic

from berth.api import meta, resources

__all__ = [
    "Affinity",
    "Container",
    "NodeAffinity",
    "NodeSelector",
    "NodeSelectorOperator",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "Pod",
    "PodSpec",
    "PodTemplate",
    "PodTemplateMeta",
    "PreferredSchedulingTerm",
    "ResourceRequirements",
    "TaintEffect",
    "Toleration",
    "TolerationOperator",
]


class ResourceRequirements(meta.OpenApiModel):
    """Compute resources a container asks for (requests) and may not exceed (limits)."""

    requests: resources.ResourceListField | None = None
    """Resources the scheduler reserves for the container, e.g. {cpu: 500m, memory: 1Gi}."""
    limits: resources.ResourceListField | None = None
    """Most the container may use; a resource with a limit and no request requests the limit."""


class Container(meta.OpenApiModel):
    """A container of the pod; only its name, image and resources matter to scheduling."""

    name: str
    """Name of the container, unique within the pod."""
    image: str | None = None
    """Container image, e.g. ``python:3.11``."""
    resources: ResourceRequirements | None = None
    """Resources the container requests and is limited to."""


class NodeSelectorOperator(enum.StrEnum):
    """How a node selector requirement relates a node's value to ``values``."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


class NodeSelectorRequirement(meta.ApiModel):
    """A requirement on one node label (or field) key."""

    key: str = pydantic.Field(min_length=1)
    """The label key (or field name, e.g. ``metadata.name``) the requirement applies to."""
    operator: NodeSelectorOperator
    """In, NotIn, Exists, DoesNotExist, Gt or Lt."""
    values: list[str] | None = None
    """Values for In and NotIn (non-empty), one integer for Gt and Lt, none for the others."""

    @pydantic.model_validator(mode="after")
    def _values_fit_operator(self) -> NodeSelectorRequirement:
        values = self.values or []
        op = self.operator
        if op in (NodeSelectorOperator.IN, NodeSelectorOperator.NOT_IN) and not values:
            raise ValueError(f"values must be non-empty when operator is {op}")
        if op in (NodeSelectorOperator.EXISTS, NodeSelectorOperator.DOES_NOT_EXIST) and values:
            raise ValueError(f"values must be empty when operator is {op}")
        if op in (NodeSelectorOperator.GT, NodeSelectorOperator.LT) and (
            len(values) != 1 or not values[0].lstrip("-").isdigit()
        ):
            raise ValueError(f"values must be one integer when operator is {op}")
        return self


class NodeSelectorTerm(meta.ApiModel):
    """Requirements that must all hold (terms of a selector are ORed, requirements ANDed)."""

    match_expressions: list[NodeSelectorRequirement] | None = None
    """Requirements on node labels."""
    match_fields: list[NodeSelectorRequirement] | None = None
    """Requirements on node fields (``metadata.name``)."""


class NodeSelector(meta.ApiModel):
    """Nodes matching any one of the terms."""

    node_selector_terms: list[NodeSelectorTerm] = pydantic.Field(min_length=1)
    """The terms; a node matches when it matches at least one."""


class PreferredSchedulingTerm(meta.ApiModel):
    """A weighted preference: nodes matching ``preference`` score ``weight`` more."""

    weight: int = pydantic.Field(ge=1, le=100)
    """Weight 1..100 added to the score of a matching node."""
    preference: NodeSelectorTerm
    """The term a node must match to get the weight."""


class NodeAffinity(meta.ApiModel):
    """Which nodes the pod must (required) or would rather (preferred) run on."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    """Nodes the pod may only run on."""
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = (
        None
    )
    """Nodes the pod prefers, by weight."""


class Affinity(meta.OpenApiModel):
    """Scheduling constraints; node affinity is checked, pod (anti-)affinity is kept as is."""

    node_affinity: NodeAffinity | None = None
    """Constraints on the nodes the pod runs on."""


class TolerationOperator(enum.StrEnum):
    """How a toleration matches a taint's value."""

    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(enum.StrEnum):
    """What a taint does to pods that do not tolerate it."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Toleration(meta.ApiModel):
    """Lets the pod onto nodes with a matching taint."""

    key: str | None = None
    """Taint key; empty with operator Exists tolerates every taint."""
    operator: TolerationOperator | None = None
    """Exists or Equal (the default)."""
    value: str | None = None
    """Taint value to match with operator Equal."""
    effect: TaintEffect | None = None
    """Effect to match; empty matches all effects."""
    toleration_seconds: int | None = None
    """How long a NoExecute taint is tolerated before eviction."""

    @pydantic.model_validator(mode="after")
    def _exists_has_no_value(self) -> Toleration:
        if self.operator is TolerationOperator.EXISTS and self.value:
            raise ValueError("value must be empty when operator is Exists")
        if not self.key and self.operator is not TolerationOperator.EXISTS:
            raise ValueError("operator must be Exists when key is empty")
        return self


class PodSpec(meta.OpenApiModel):
    """The pod's specification; fields not listed here are kept as written."""

    containers: list[Container] = pydantic.Field(min_length=1)
    """The pod's containers; their requests are summed."""
    init_containers: list[Container] | None = None
    """Containers run one by one before the others; the pod needs the largest of them."""
    overhead: resources.ResourceListField | None = None
    """Resources of the pod sandbox, added to the containers' requests."""
    node_selector: dict[str, str] | None = None
    """Labels a node must have for the pod to run there."""
    affinity: Affinity | None = None
    """Node affinity (and pod affinity, kept as written)."""
    tolerations: list[Toleration] | None = None
    """Taints the pod tolerates."""
    priority_class_name: str | None = None
    """PriorityClass giving the pod its priority."""
    priority: int | None = None
    """Priority value (filled in from priorityClassName by the API server)."""
    scheduler_name: str | None = None
    """Scheduler that places the pod; Berth places pods naming berth-scheduler."""
    node_name: str | None = None
    """Node the pod is bound to."""


class PodTemplateMeta(meta.OpenApiModel):
    """Labels and annotations given to pods made from the template."""

    labels: dict[str, str] | None = None
    """Labels of the pod."""
    annotations: dict[str, str] | None = None
    """Annotations of the pod."""


class PodTemplate(meta.ApiModel):
    """A pod template: the shape of the pod whose resources are set aside."""

    metadata: PodTemplateMeta | None = None
    """Labels and annotations of the pod."""
    spec: PodSpec
    """The pod's specification."""


class Pod(meta.OpenApiModel):
    """A pod as a manifest holds it (``v1/Pod``); its status is kept as written."""

    api_version: typing.Literal["v1"] = "v1"
    kind: typing.Literal["Pod"] = "Pod"
    metadata: meta.ObjectMeta = pydantic.Field(default_factory=meta.ObjectMeta)
    spec: PodSpec
