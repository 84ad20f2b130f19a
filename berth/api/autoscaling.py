"""What a Queue says about cluster autoscalers, and the autoscalers' own API names Berth uses.

The autoscaling APIs of ``autoscaling.x-k8s.io`` (docs/autoscaling.md):

- **ProvisioningRequest** (``v1``, served by Cluster Autoscaler): capacity for a set of pods
  described by PodTemplates and counts, provisioned as its class says — Kueue's
  ``check-capacity`` and ``best-effort-atomic-scale-up`` classes are the reference: the latter
  scales up for the whole request or not at all. Pods that consume it carry
  :data:`CONSUME_ANNOTATION` (and :data:`CLASS_ANNOTATION`), which keeps Cluster Autoscaler's
  regular scale-up off them.
- **CapacityBuffer** (``v1beta1``, served by Karpenter ≥ 1.15 behind its ``CapacityBuffer``
  gate and by Cluster Autoscaler's buffer controller): headroom of ``replicas`` copies of a
  PodTemplate, which the autoscaler adds to its provisioning as virtual pods.

A Queue chooses with :class:`QueueAutoscaling` (``spec.autoscaling``): whether its gangs ask
for their capacity with a ProvisioningRequest (off unless a class is named) and whether the
Reservations counted against it ask for theirs with a CapacityBuffer. A Reservation can ask on
its own (``spec.capacityBuffer``).
"""

from __future__ import annotations

import re

import pydantic

from berth.api import meta, rules

__all__ = [
    "BEST_EFFORT_ATOMIC_SCALE_UP",
    "BUFFER_ACTIVE_CAPACITY",
    "BUFFER_INFEASIBLE",
    "BUFFER_NOT_ASKING",
    "BUFFER_PROVISIONING",
    "BUFFER_READY",
    "CAPACITY_BUFFER_API_VERSION",
    "CHECK_CAPACITY",
    "CLASS_ANNOTATION",
    "CLASS_NAME_MESSAGE",
    "CLASS_NAME_PATTERN",
    "CONSUME_ANNOTATION",
    "GROUP",
    "MAX_PARAMETERS",
    "MAX_PARAMETER_LENGTH",
    "PROVISIONING_REQUEST_API_VERSION",
    "PR_ACCEPTED",
    "PR_BOOKING_EXPIRED",
    "PR_CAPACITY_REVOKED",
    "PR_FAILED",
    "PR_PROVISIONED",
    "ProvisioningRequestPolicy",
    "QueueAutoscaling",
]

GROUP = "autoscaling.x-k8s.io"
PROVISIONING_REQUEST_API_VERSION = f"{GROUP}/v1"
CAPACITY_BUFFER_API_VERSION = f"{GROUP}/v1beta1"
CHECK_CAPACITY = f"check-capacity.{GROUP}"
"""Cluster Autoscaler checks that the capacity exists (and books it), without scaling up."""
BEST_EFFORT_ATOMIC_SCALE_UP = f"best-effort-atomic-scale-up.{GROUP}"
"""Cluster Autoscaler scales up for the whole request or not at all."""
CONSUME_ANNOTATION = f"{GROUP}/consume-provisioning-request"
"""On a pod: the ProvisioningRequest (same namespace) whose capacity it uses."""
CLASS_ANNOTATION = f"{GROUP}/provisioning-class-name"
"""On a pod: the class of the ProvisioningRequest it consumes."""
BUFFER_ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"
"""A CapacityBuffer's strategy that makes the autoscaler add nodes for it."""
PR_ACCEPTED = "Accepted"
"""ProvisioningRequest condition: the autoscaler took the request and works on it."""
PR_PROVISIONED = "Provisioned"
"""ProvisioningRequest condition: the capacity was created (or found and booked)."""
PR_FAILED = "Failed"
"""ProvisioningRequest condition: the capacity cannot be provided."""
PR_BOOKING_EXPIRED = "BookingExpired"
"""ProvisioningRequest condition: the capacity was provisioned and its booking lapsed unused."""
PR_CAPACITY_REVOKED = "CapacityRevoked"
"""ProvisioningRequest condition: the capacity was taken back."""
BUFFER_READY = "ReadyForProvisioning"
"""CapacityBuffer condition: its template was read (False: it cannot be)."""
BUFFER_PROVISIONING = "Provisioning"
"""CapacityBuffer condition: its virtual pods fit the cluster as it is (False: new capacity
is being asked for, or cannot be)."""
BUFFER_INFEASIBLE = "Infeasible"
"""The ``Provisioning`` condition's reason (``False``) when no node the autoscaler could add
takes the buffer's virtual pods (kubernetes-sigs/karpenter#3318, after v1.15; v1.15 says
``RequiresNewCapacity`` whether the pods need new nodes or fit none)."""
BUFFER_NOT_ASKING = frozenset({"NotReadyForProvisioning", "BufferEmpty"})
"""The ``Provisioning`` condition's reasons that speak of the buffer itself (its template not
read, no replicas), not of where its virtual pods fit."""
MAX_PARAMETERS = 100
"""The most parameters a ProvisioningRequest takes (its CRD's ``maxProperties``)."""
MAX_PARAMETER_LENGTH = 255
"""The longest parameter value a ProvisioningRequest takes."""
CLASS_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""A provisioning class name: a DNS subdomain, as the ProvisioningRequest CRD requires."""
CLASS_NAME_MESSAGE = (
    "provisioningClassName must be a DNS subdomain, such as "
    f"{BEST_EFFORT_ATOMIC_SCALE_UP} or {CHECK_CAPACITY}"
)
"""What the API server and Berth say of a class name that is not one."""
_CLASS_NAME = re.compile(CLASS_NAME_PATTERN)
_CEL_CLASS_NAME = CLASS_NAME_PATTERN.replace("\\.", "[.]")  # no escapes in a CEL string
_MAX_CLASS_NAME = 253


class ProvisioningRequestPolicy(meta.ApiModel):
    """How a queue's gangs ask for their capacity with a ProvisioningRequest."""

    model_config = pydantic.ConfigDict(
        json_schema_extra=rules.rules(
            rules.rule(
                f"self.provisioningClassName.matches('{_CEL_CLASS_NAME}')",
                message=CLASS_NAME_MESSAGE,
                field_path=".provisioningClassName",
            ),
        )
    )

    provisioning_class_name: str = pydantic.Field(min_length=1, max_length=_MAX_CLASS_NAME)
    """The ProvisioningRequest's class: ``best-effort-atomic-scale-up.autoscaling.x-k8s.io``
    (all of the gang's nodes or none), ``check-capacity.autoscaling.x-k8s.io`` (only capacity
    that exists, booked), or a class your cloud's autoscaler serves."""
    parameters: dict[str, str] | None = pydantic.Field(
        default=None,
        max_length=MAX_PARAMETERS,
        json_schema_extra={
            "maxProperties": MAX_PARAMETERS,
            "additionalProperties": {"type": "string", "maxLength": MAX_PARAMETER_LENGTH},
        },
    )
    """The class's parameters, copied into each request (e.g. ``ValidUntilSeconds``); at most
    100, each value at most 255 characters."""

    @pydantic.field_validator("provisioning_class_name")
    @classmethod
    def _class_name(cls, value: str) -> str:
        if not _CLASS_NAME.match(value):
            raise ValueError(
                f"{CLASS_NAME_MESSAGE} (lower-case letters, digits, '-', '.'): {value!r}"
            )
        return value

    @pydantic.field_validator("parameters")
    @classmethod
    def _parameters(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        long = sorted(k for k, v in (value or {}).items() if len(v) > MAX_PARAMETER_LENGTH)
        if long:
            raise ValueError(
                f"parameters {', '.join(long)}: a value is at most {MAX_PARAMETER_LENGTH} "
                "characters"
            )
        return value


class QueueAutoscaling(meta.ApiModel):
    """What a queue asks of the cluster's autoscaler (docs/autoscaling.md)."""

    provisioning_request: ProvisioningRequestPolicy | None = None
    """Scheduler mode: a gang of this queue waiting only for nodes asks for all of them with a
    ProvisioningRequest of this class (created and deleted by Berth, owned by the PodGroup),
    and its pods consume it. Unset (the default): the pods' ``Unschedulable`` condition is the
    only signal, as for kube-scheduler's pods. Admission mode always asks (gated pods are
    invisible to autoscalers), with this class if set."""
    reservation_buffers: bool = False
    """Reservations counted against this queue (``spec.queue``) that cannot fit ask the
    autoscaler for their room ahead of time with a CapacityBuffer, as if each set
    ``spec.capacityBuffer``."""
