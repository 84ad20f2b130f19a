"""The Reservation API (namespaced, short name ``resv``): capacity held for named owners.

A Reservation is scheduled like a pod built from ``spec.template`` (docs/architecture.md); once
``Available`` its node's capacity is held for the pods its ``owners`` match, and for no one
else, until the first owner uses it (``allocateOnce``), its ``ttl`` or ``expires`` passes, or
it is deleted. The Reservation plugin and controller are the readers.
"""

from __future__ import annotations

import datetime
import enum
import typing

import pydantic

from berth.api import durations, keys, meta, pods, quantities, resources, rules, spec_defaults

__all__ = [
    "CurrentOwner",
    "DEFAULT_TTL",
    "EXACTLY_ONE_OWNER",
    "KIND",
    "LabelSelector",
    "LabelSelectorOperator",
    "LabelSelectorRequirement",
    "MAX_EXPRESSIONS",
    "MAX_OWNERS",
    "NO_OWNER",
    "OwnerController",
    "OwnerObject",
    "PLURAL",
    "REQUESTS_NOTHING",
    "Reservation",
    "ReservationOwner",
    "ReservationPhase",
    "ReservationSpec",
    "ReservationStatus",
    "ReservedDevice",
    "STARTS_AFTER_EXPIRY",
    "STARTS_IN_THE_PAST",
    "VALUES_FORBIDDEN",
    "VALUES_REQUIRED",
    "template_asks",
]

KIND = "Reservation"
PLURAL = "reservations"
MAX_OWNERS = 64
"""Most owner entries a reservation has (bounded so that the CRD's CEL rules have a bounded
cost, which the API server requires)."""
DEFAULT_TTL = durations.Duration.parse("24h")
"""How long a reservation lives when it names neither ``ttl`` nor ``expires``."""


class LabelSelectorOperator(enum.StrEnum):
    """How a label selector requirement relates a label's value to ``values``."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


MAX_EXPRESSIONS = 64
"""Most requirements a label selector lists (bounded so that the CRDs' rules on each have a
bounded cost, which the API server requires)."""
VALUES_REQUIRED = rules.VALUES_REQUIRED
VALUES_FORBIDDEN = rules.VALUES_FORBIDDEN


class LabelSelectorRequirement(meta.ApiModel):
    """A requirement on one label key."""

    model_config = pydantic.ConfigDict(
        json_schema_extra=rules.rules(
            *rules.values_fit_operator(),
        )
    )

    key: str = pydantic.Field(min_length=1)
    """The label key the requirement applies to."""
    operator: LabelSelectorOperator
    """In, NotIn, Exists or DoesNotExist."""
    values: list[str] | None = None
    """Values for In and NotIn (non-empty); none for Exists and DoesNotExist."""

    @pydantic.model_validator(mode="after")
    def _values_fit_operator(self) -> LabelSelectorRequirement:
        in_like = self.operator in (LabelSelectorOperator.IN, LabelSelectorOperator.NOT_IN)
        if in_like and not self.values:
            raise ValueError(VALUES_REQUIRED)
        if not in_like and self.values:
            raise ValueError(VALUES_FORBIDDEN)
        return self


class LabelSelector(meta.ApiModel):
    """Pods whose labels match all of matchLabels and all of matchExpressions."""

    match_labels: dict[str, str] | None = None
    """Labels a pod must have, with these values."""
    match_expressions: list[LabelSelectorRequirement] | None = pydantic.Field(
        default=None, max_length=MAX_EXPRESSIONS
    )
    """Requirements a pod's labels must all meet (at most 64)."""


class OwnerObject(meta.ApiModel):
    """An owner named directly: the pod of this name."""

    name: str = pydantic.Field(min_length=1)
    """Name of the pod, in the reservation's namespace."""


class OwnerController(meta.ApiModel):
    """An owner named by its controller: pods whose controller is this object."""

    kind: str = pydantic.Field(min_length=1)
    """Kind of the controlling object, e.g. Job or StatefulSet."""
    name: str = pydantic.Field(min_length=1)
    """Name of the controlling object, in the reservation's namespace."""


EXACTLY_ONE_OWNER = "an owner sets exactly one of object, controller or labelSelector"
"""What an owner entry setting none or several ways is told (API server and Berth alike)."""
NO_OWNER = "owners must name at least one owner"
"""What a Reservation without owners is told (API server and Berth alike)."""


class ReservationOwner(meta.ApiModel):
    """One way to match the pods that may use the reservation; set exactly one field."""

    model_config = pydantic.ConfigDict(
        json_schema_extra=rules.rules(
            rules.rule(
                "(has(self.object) ? 1 : 0) + (has(self.controller) ? 1 : 0) + "
                "(has(self.labelSelector) ? 1 : 0) == 1",
                message=EXACTLY_ONE_OWNER,
            ),
        )
    )

    object: OwnerObject | None = None
    """Match one pod by name."""
    controller: OwnerController | None = None
    """Match the pods controlled by an object (kind and name)."""
    label_selector: LabelSelector | None = None
    """Match pods by labels."""

    @pydantic.model_validator(mode="after")
    def _exactly_one(self) -> ReservationOwner:
        given = [f for f in (self.object, self.controller, self.label_selector) if f is not None]
        if len(given) != 1:
            raise ValueError(f"{EXACTLY_ONE_OWNER} (this one sets {len(given)})")
        return self


class ReservationPhase(enum.StrEnum):
    """Where a Reservation is in its life."""

    PENDING = "Pending"
    AVAILABLE = "Available"
    SUCCEEDED = "Succeeded"
    EXPIRED = "Expired"
    FAILED = "Failed"


STARTS_AFTER_EXPIRY = "startAt must be before expires: the reservation would never hold anything"
"""What a Reservation starting at or after its expiry is told (API server and Berth alike)."""
STARTS_IN_THE_PAST = "startAt is before the reservation was created"
"""What Berth says of a Reservation whose ``startAt`` was already past when it was created
(an API server's CEL has no clock, so this one is Berth's alone: the reservation is marked
invalid and never placed)."""

REQUESTS_NOTHING = (
    "a reservation holds what its template requests, and this one requests no resources: set "
    "resources.requests on its containers"
)
"""What a Reservation whose template requests nothing is told (API server and Berth alike)."""


def _positive(resource_list: str, *, unless_in: str | None = None) -> str:
    """CEL: ``resource_list`` (a path) names a resource other than pods above 0 (not named in
    ``unless_in``: a limit counts as the request only where no request is given)."""
    skip = f" && !(has({unless_in}) && k in {unless_in})" if unless_in else ""
    return (
        f"(has({resource_list}) && {resource_list}.exists(k, k != 'pods'{skip} && "
        f"quantity(string({resource_list}[k])).isGreaterThan(quantity('0'))))"
    )


def _asks(resources_path: str) -> str:
    """CEL: the requirements at ``resources_path`` ask for something (requests, or limits
    standing for absent requests)."""
    requests, limits = f"{resources_path}.requests", f"{resources_path}.limits"
    return (
        f"(has({resources_path}) && ({_positive(requests)} || "
        f"{_positive(limits, unless_in=requests)}))"
    )


_TEMPLATE_ASKS = (
    f"self.template.spec.containers.exists(c, {_asks('c.resources')}) || "
    f"(has(self.template.spec.initContainers) && "
    f"self.template.spec.initContainers.exists(c, {_asks('c.resources')})) || "
    f"{_asks('self.template.spec.resources')} || "
    f"{_positive('self.template.spec.overhead')}"
)


def _requirements_ask(found: pods.ResourceRequirements | None) -> bool:
    if found is None:
        return False
    requests = found.requests or resources.ResourceList()
    limits = found.limits or resources.ResourceList()
    return any(v > 0 and k != resources.PODS for k, v in requests.items()) or any(
        v > 0 and k != resources.PODS and k not in requests for k, v in limits.items()
    )


def template_asks(spec: pods.PodSpec, /) -> bool:
    """Whether a pod of ``spec`` requests anything but its pod slot (what the CRD's rule says)."""
    return (
        any(_requirements_ask(c.resources) for c in spec.containers)
        or any(_requirements_ask(c.resources) for c in spec.init_containers or ())
        or _requirements_ask(spec.resources)
        or any(v > 0 and k != resources.PODS for k, v in (spec.overhead or {}).items())
    )


class ReservationSpec(meta.ApiModel):
    """What to hold, for whom and for how long."""

    model_config = pydantic.ConfigDict(
        json_schema_extra=rules.rules(
            rules.rule(
                "!(has(self.ttl) && has(self.expires))",
                message="set ttl or expires, not both",
                field_path=".expires",
            ),
            rules.rule(_TEMPLATE_ASKS, message=REQUESTS_NOTHING, field_path=".template"),
            rules.rule(
                "has(self.owners) && size(self.owners) > 0",
                message=NO_OWNER,
                field_path=".owners",
            ),
            rules.rule(
                "!has(self.startAt) || !has(self.expires) || "
                "timestamp(self.startAt) < timestamp(self.expires)",
                message=STARTS_AFTER_EXPIRY,
                field_path=".startAt",
            ),
        )
    )

    template: pods.PodTemplate
    """Shape of the capacity to hold, written as a pod template: container requests,
    nodeSelector, affinity, tolerations."""
    owners: list[ReservationOwner] = pydantic.Field(min_length=1, max_length=MAX_OWNERS)
    """Pods (in this namespace) that may use the reserved capacity; at least one entry, each
    matching by object, controller or labelSelector."""
    ttl: durations.DurationField | None = pydantic.Field(
        default=None, json_schema_extra=rules.rules(rules.duration_range())
    )
    """How long the reservation lives once created, e.g. 24h or 90m; "0" never expires.
    Defaults to 24h when expires is not set. Exclusive with expires."""
    expires: meta.TimestampField | None = None
    """When the reservation expires (RFC 3339). Exclusive with ttl."""
    start_at: meta.TimestampField | None = None
    """When the reservation starts holding its room (RFC 3339), e.g. to book a big run for
    tonight: until then it is Pending and places nothing; a while before it, Berth drains a
    node for it (new work goes there only if expected to end by then), and from then on it
    holds its room like any reservation. Must be before ``expires``, and not before the
    reservation's creation. With a ``ttl``, the reservation lives that long from ``startAt``.
    Unset: it holds its room as soon as it fits."""
    allocate_once: bool = spec_defaults.RESERVATION_ALLOCATE_ONCE
    """Whether the reservation ends (Succeeded) when its first owner is placed into it."""
    queue: str | None = None
    """Queue the reserved capacity counts against."""
    unschedulable: bool = spec_defaults.RESERVATION_UNSCHEDULABLE
    """Stops new owners from being placed into the reservation (those placed keep running)."""
    capacity_buffer: bool = spec_defaults.RESERVATION_CAPACITY_BUFFER
    """While the reservation cannot fit, ask the cluster's autoscaler for its room with a
    CapacityBuffer of its template (Karpenter ≥ 1.15, Cluster Autoscaler): the reservation
    then lands on the node that appears. The buffer goes with the reservation. Its queue's
    ``autoscaling.reservationBuffers`` turns this on for every reservation counted against it."""

    @pydantic.field_validator("expires")
    @classmethod
    def _ttl_or_expires(
        cls, expires: datetime.datetime | None, info: pydantic.ValidationInfo
    ) -> datetime.datetime | None:
        if expires is not None and info.data.get("ttl") is not None:
            raise ValueError("set ttl or expires, not both")
        return expires

    @pydantic.field_validator("start_at")
    @classmethod
    def _starts_before_expiry(
        cls, start_at: datetime.datetime | None, info: pydantic.ValidationInfo
    ) -> datetime.datetime | None:
        expires = info.data.get("expires")
        if start_at is not None and expires is not None and start_at >= expires:
            raise ValueError(STARTS_AFTER_EXPIRY)
        return start_at

    @pydantic.field_validator("template")
    @classmethod
    def _template_asks(cls, template: pods.PodTemplate) -> pods.PodTemplate:
        if not template_asks(template.spec):
            raise ValueError(REQUESTS_NOTHING)
        return template

    @property
    def effective_ttl(self) -> durations.Duration | None:
        """The ttl that applies: the one given, 24h when neither ttl nor expires is, else None."""
        if self.ttl is not None:
            return self.ttl
        return None if self.expires is not None else DEFAULT_TTL


class CurrentOwner(meta.ApiModel):
    """A pod placed into the reservation."""

    namespace: str
    """Namespace of the pod."""
    name: str
    """Name of the pod."""
    uid: str | None = None
    """UID of the pod."""


class ReservedDevice(meta.ApiModel):
    """One DRA device a reservation holds for its owners, as a ResourceClaim's allocation
    names it (``status.allocation.devices.results[]``)."""

    claim: str = pydantic.Field(min_length=1)
    """The entry of ``spec.template.spec.resourceClaims`` the device was allocated for."""
    request: str = pydantic.Field(min_length=1)
    """The request of that entry's claim the device meets (``gpu``, or ``gpu/big`` for a
    subrequest of ``firstAvailable``)."""
    driver: str = pydantic.Field(min_length=1)
    """The DRA driver of the device's ResourceSlice."""
    pool: str = pydantic.Field(min_length=1)
    """The pool of the device's ResourceSlice."""
    device: str = pydantic.Field(min_length=1)
    """The device's name in its pool."""
    share_id: str | None = pydantic.Field(default=None, alias="shareID")
    """Set when the device allows multiple allocations: which share of it is held."""
    consumed_capacity: dict[str, quantities.QuantityField] | None = None
    """For a share of a device with consumable capacity: the capacity the share consumes."""


class ReservationStatus(meta.ApiModel):
    """Where the reservation is held and how much of it is used, written by Berth."""

    phase: ReservationPhase = ReservationPhase.PENDING
    """Pending, Available, Succeeded, Expired or Failed."""
    node_name: str | None = None
    """Node holding the reserved capacity."""
    allocatable: resources.ResourceTotalsField | None = None
    """Resources held on the node."""
    allocated: resources.ResourceTotalsField | None = None
    """Resources of the held capacity used by owners."""
    current_owners: list[CurrentOwner] | None = None
    """Owner pods placed into the reservation."""
    devices: list[ReservedDevice] | None = pydantic.Field(default=None, max_length=1024)
    """DRA devices held on the node for the template's resourceClaims; non-owner pods see
    them as taken until the reservation ends or an owner takes them over."""
    owner_selector: str | None = pydantic.Field(default=None, max_length=4096)
    """The owners as selectors people read (pod/NAME, KIND/NAME, app=train), what the OWNER
    column of kubectl get resv shows."""
    expires_at: meta.TimestampField | None = None
    """When the reservation expires; unset when it never does."""
    conditions: list[meta.Condition] | None = None
    """Observations of the reservation's state."""


class Reservation(meta.ApiModel):
    """Capacity on one node held for named owner pods."""

    api_version: typing.Literal["scheduling.berth.io/v1alpha1"] = keys.API_VERSION
    """APIVersion of the object: scheduling.berth.io/v1alpha1."""
    kind: typing.Literal["Reservation"] = "Reservation"
    """Kind of the object: Reservation."""
    metadata: meta.ObjectMeta = pydantic.Field(default_factory=meta.ObjectMeta)
    """Standard object metadata."""
    spec: ReservationSpec
    """What to hold, for whom and for how long."""
    status: ReservationStatus | None = None
    """Where the reservation is held and how much is used, written by Berth."""
