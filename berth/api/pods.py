"""The parts of a pod Berth schedules on: requests, node selection, tolerations, priority.

A Reservation's ``spec.template`` is a :class:`PodTemplate`, and manifests of plain pods load
into :class:`Pod`. Only the fields scheduling reads are declared (and validated the way the
API server validates them); every other pod field is kept as written (``extra="allow"``), so a
real pod template loads and dumps back unchanged.

Used by :mod:`berth.api.reservations`, :mod:`berth.api.manifests` and the snapshot builders.
"""

from __future__ import annotations

import enum
import re
import typing

import pydantic

from berth.api import meta, rules
from berth.api import resources as resource_lists  # PodSpec has a field named resources

__all__ = [
    "Affinity",
    "Container",
    "EMPTY_KEY_EXISTS",
    "EXISTS_HAS_NO_VALUE",
    "MAX_CONTAINERS",
    "MAX_REQUIREMENTS",
    "MAX_TERMS",
    "MAX_TOLERATIONS",
    "MAX_VALUE_LENGTH",
    "NodeAffinity",
    "NodeSelector",
    "NodeSelectorOperator",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ONE_INTEGER",
    "Pod",
    "PodSpec",
    "PodTemplate",
    "PodTemplateMeta",
    "PreferredSchedulingTerm",
    "ResourceRequirements",
    "TaintEffect",
    "Toleration",
    "TolerationOperator",
    "VALUES_FORBIDDEN",
    "VALUES_REQUIRED",
]


class ResourceRequirements(meta.OpenApiModel):
    """Compute resources a container asks for (requests) and may not exceed (limits)."""

    requests: resource_lists.ResourceListField | None = None
    """Resources the scheduler reserves for the container, e.g. {cpu: 500m, memory: 1Gi}."""
    limits: resource_lists.ResourceListField | None = None
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


# Bounds on the lists inside a template (none in Kubernetes' own types), so that the CRDs'
# rules on their items have a bounded cost, which the API server requires; far above any
# sensible template.
MAX_TERMS = 32
MAX_REQUIREMENTS = 32
MAX_TOLERATIONS = 64
MAX_CONTAINERS = 32
MAX_VALUE_LENGTH = 253  # a node name (matchFields metadata.name); label values are shorter
VALUES_REQUIRED = rules.VALUES_REQUIRED
VALUES_FORBIDDEN = rules.VALUES_FORBIDDEN
ONE_INTEGER = "values must be one integer when operator is Gt or Lt"
_INTEGER = re.compile(r"^-?[0-9]+$")


class NodeSelectorRequirement(meta.ApiModel):
    """A requirement on one node label (or field) key."""

    model_config = pydantic.ConfigDict(
        json_schema_extra=rules.rules(
            *rules.values_fit_operator(),
            rules.rule(
                "!(self.operator in ['Gt', 'Lt']) || (has(self.values) && size(self.values) == 1 "
                f"&& self.values[0].matches('{_INTEGER.pattern}'))",
                message=ONE_INTEGER,
            ),
        )
    )

    key: str = pydantic.Field(min_length=1)
    """The label key (or field name, e.g. ``metadata.name``) the requirement applies to."""
    operator: NodeSelectorOperator
    """In, NotIn, Exists, DoesNotExist, Gt or Lt."""
    values: list[typing.Annotated[str, pydantic.Field(max_length=MAX_VALUE_LENGTH)]] | None = None
    """Values for In and NotIn (non-empty), one integer for Gt and Lt, none for the others."""

    @pydantic.model_validator(mode="after")
    def _values_fit_operator(self) -> NodeSelectorRequirement:
        values = self.values or []
        op = self.operator
        if op in (NodeSelectorOperator.IN, NodeSelectorOperator.NOT_IN) and not values:
            raise ValueError(VALUES_REQUIRED)
        if op in (NodeSelectorOperator.EXISTS, NodeSelectorOperator.DOES_NOT_EXIST) and values:
            raise ValueError(VALUES_FORBIDDEN)
        if op in (NodeSelectorOperator.GT, NodeSelectorOperator.LT) and (
            len(values) != 1 or not _INTEGER.match(values[0])
        ):
            raise ValueError(ONE_INTEGER)
        return self


class NodeSelectorTerm(meta.ApiModel):
    """Requirements that must all hold (terms of a selector are ORed, requirements ANDed)."""

    match_expressions: list[NodeSelectorRequirement] | None = pydantic.Field(
        default=None, max_length=MAX_REQUIREMENTS
    )
    """Requirements on node labels (at most 32)."""
    match_fields: list[NodeSelectorRequirement] | None = pydantic.Field(
        default=None, max_length=MAX_REQUIREMENTS
    )
    """Requirements on node fields (``metadata.name``; at most 32)."""


class NodeSelector(meta.ApiModel):
    """Nodes matching any one of the terms."""

    node_selector_terms: list[NodeSelectorTerm] = pydantic.Field(min_length=1, max_length=MAX_TERMS)
    """The terms (at most 32); a node matches when it matches at least one."""


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
        pydantic.Field(default=None, max_length=MAX_TERMS)
    )
    """Nodes the pod prefers, by weight (at most 32 terms)."""


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


EXISTS_HAS_NO_VALUE = "value must be empty when operator is Exists"
EMPTY_KEY_EXISTS = "operator must be Exists when key is empty"


class Toleration(meta.ApiModel):
    """Lets the pod onto nodes with a matching taint."""

    model_config = pydantic.ConfigDict(
        json_schema_extra=rules.rules(
            rules.rule(
                "!has(self.operator) || self.operator != 'Exists' || !has(self.value) || "
                "self.value == ''",
                message=EXISTS_HAS_NO_VALUE,
            ),
            rules.rule(
                "(has(self.key) && self.key != '') || "
                "(has(self.operator) && self.operator == 'Exists')",
                message=EMPTY_KEY_EXISTS,
            ),
        )
    )

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
            raise ValueError(EXISTS_HAS_NO_VALUE)
        if not self.key and self.operator is not TolerationOperator.EXISTS:
            raise ValueError(EMPTY_KEY_EXISTS)
        return self


class PodSpec(meta.OpenApiModel):
    """The pod's specification; fields not listed here are kept as written."""

    containers: list[Container] = pydantic.Field(min_length=1, max_length=MAX_CONTAINERS)
    """The pod's containers (at most 32); their requests are summed."""
    init_containers: list[Container] | None = pydantic.Field(
        default=None, max_length=MAX_CONTAINERS
    )
    """Containers run one by one before the others (at most 32); the pod needs the largest of
    them."""
    overhead: resource_lists.ResourceListField | None = None
    """Resources of the pod sandbox, added to the containers' requests."""
    resources: ResourceRequirements | None = None
    """Pod-level requests and limits (cpu, memory): they replace what the containers add up
    to for the resources they name."""
    node_selector: dict[str, str] | None = None
    """Labels a node must have for the pod to run there."""
    affinity: Affinity | None = None
    """Node affinity (and pod affinity, kept as written)."""
    tolerations: list[Toleration] | None = pydantic.Field(default=None, max_length=MAX_TOLERATIONS)
    """Taints the pod tolerates (at most 64)."""
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
