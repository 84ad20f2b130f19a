"""TokenReview and SubjectAccessReview as they cross the wire: typed records.

The operator's HTTP endpoints authenticate a bearer token with a TokenReview
(``authentication.k8s.io/v1``) and authorize its user with a SubjectAccessReview
(``authorization.k8s.io/v1``) (:mod:`berth.kube.transport.reviews`); an admission review names
the same user (:class:`UserInfo`). Only the fields Berth writes or reads are declared; see
:mod:`berth.api.objects` for what ``total=False`` promises.
"""

from __future__ import annotations

import typing_extensions

from berth.api import objects

__all__ = [
    "NonResourceAttributes",
    "SubjectAccessReview",
    "SubjectAccessReviewSpec",
    "SubjectAccessReviewStatus",
    "TokenReview",
    "TokenReviewSpec",
    "TokenReviewStatus",
    "UserInfo",
]


class UserInfo(typing_extensions.TypedDict, total=False):
    username: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]


class TokenReviewSpec(typing_extensions.TypedDict, total=False):
    token: str
    audiences: list[str]


class TokenReviewStatus(typing_extensions.TypedDict, total=False):
    authenticated: bool
    user: UserInfo
    audiences: list[str]
    error: str


class TokenReview(objects.KubeObject, total=False):
    spec: TokenReviewSpec
    status: TokenReviewStatus


class NonResourceAttributes(typing_extensions.TypedDict, total=False):
    path: str
    verb: str


class SubjectAccessReviewSpec(typing_extensions.TypedDict, total=False):
    user: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]
    nonResourceAttributes: NonResourceAttributes


class SubjectAccessReviewStatus(typing_extensions.TypedDict, total=False):
    allowed: bool
    denied: bool
    reason: str
    evaluationError: str


class SubjectAccessReview(objects.KubeObject, total=False):
    spec: SubjectAccessReviewSpec
    status: SubjectAccessReviewStatus
