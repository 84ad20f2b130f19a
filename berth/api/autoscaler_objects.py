"""The autoscalers' request kinds as they cross the wire: typed records (``autoscaling.x-k8s.io``).

A ProvisioningRequest (``v1``) and a CapacityBuffer (``v1beta1``), as Berth makes them for a
gang or a Reservation and reads their statuses back (:mod:`berth.kube.autoscaling`,
:mod:`berth.status.capacity_requests`). Only the fields Berth writes or reads are declared;
see :mod:`berth.api.objects` for what ``total=False`` promises. The names and conditions
Berth uses are in :mod:`berth.api.autoscaling`.
"""

from __future__ import annotations

import typing_extensions

from berth.api import core, objects

__all__ = [
    "CapacityBuffer",
    "CapacityBufferSpec",
    "CapacityRequest",
    "PodSet",
    "ProvisioningRequest",
    "ProvisioningRequestSpec",
    "RequestStatus",
]


class RequestStatus(typing_extensions.TypedDict, total=False):
    """What Berth reads of either kind's status: the autoscaler's conditions."""

    conditions: list[objects.Condition]


class PodSet(typing_extensions.TypedDict, total=False):
    podTemplateRef: core.LocalObjectReference
    count: int


class ProvisioningRequestSpec(typing_extensions.TypedDict, total=False):
    provisioningClassName: str
    podSets: list[PodSet]
    parameters: dict[str, str]


class ProvisioningRequest(objects.KubeObject, total=False):
    spec: ProvisioningRequestSpec
    status: RequestStatus


class CapacityBufferSpec(typing_extensions.TypedDict, total=False):
    provisioningStrategy: str
    podTemplateRef: core.LocalObjectReference
    replicas: int


class CapacityBuffer(objects.KubeObject, total=False):
    spec: CapacityBufferSpec
    status: RequestStatus


CapacityRequest = ProvisioningRequest | CapacityBuffer
"""One object of a capacity request, of either kind (the kind travels beside it)."""
