"""The ``admission.k8s.io/v1`` AdmissionReview as the API server sends it: typed records.

What a mutating or validating admission webhook is sent (the ``request``) and answers (the
``response``), spelt as kube-apiserver spells them. The emulator builds the request when it calls
the webhooks a configuration (:mod:`berth.api.admissionregistration`) names
(:mod:`berth.emulator.webhooks`). An answer comes from someone else's server: it is read field by
field, never trusted to have this shape. See :mod:`berth.api.objects` for what ``total=False``
promises.
"""

from __future__ import annotations

import typing_extensions

from berth.api import access_reviews, objects

__all__ = [
    "API_VERSION",
    "AdmissionRequest",
    "AdmissionResponse",
    "AdmissionReview",
    "GroupVersionKind",
    "GroupVersionResource",
    "RequestOptions",
]

API_VERSION = "admission.k8s.io/v1"


class GroupVersionKind(typing_extensions.TypedDict):
    group: str
    version: str
    kind: str


class GroupVersionResource(typing_extensions.TypedDict):
    group: str
    version: str
    resource: str


class RequestOptions(typing_extensions.TypedDict):
    """The operation's options (``CreateOptions``, ...), as an object of ``meta.k8s.io/v1``."""

    apiVersion: str
    kind: str


class AdmissionRequest(typing_extensions.TypedDict, total=False):
    uid: typing_extensions.Required[str]
    kind: GroupVersionKind
    resource: GroupVersionResource
    subResource: str
    requestKind: GroupVersionKind
    requestResource: GroupVersionResource
    name: str
    namespace: str
    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    userInfo: access_reviews.UserInfo
    object: objects.KubeObject | None
    oldObject: objects.KubeObject | None
    dryRun: bool
    options: RequestOptions


class AdmissionResponse(typing_extensions.TypedDict, total=False):
    uid: typing_extensions.Required[str]
    allowed: typing_extensions.Required[bool]
    status: objects.Status  # why a refusal refused
    patch: str  # base64 of a JSON patch
    patchType: str  # JSONPatch
    warnings: list[str]


class AdmissionReview(typing_extensions.TypedDict, total=False):
    apiVersion: typing_extensions.Required[str]
    kind: typing_extensions.Required[str]
    request: AdmissionRequest
    response: AdmissionResponse
