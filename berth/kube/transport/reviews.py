"""Delegated authentication and authorization: who is calling, and may they (as kube-scheduler).

kube-scheduler's secure port serves ``/metrics`` and its debug endpoints only to callers the API
server vouches for: the bearer token goes into a ``TokenReview`` (``authentication.k8s.io/v1``)
and the user it names into a ``SubjectAccessReview`` (``authorization.k8s.io/v1``) for the
non-resource path and verb asked. :class:`Reviewer` does the same for Berth's HTTP server, so
that RBAC decides who reads metrics, the scheduler's node views and the reservations — e.g. a
ClusterRole granting ``get`` on ``nonResourceURLs: ["/metrics"]``.

Answers are cached for ``ttl`` seconds per (token, path, verb), a bounded number of entries, so
a scraper costs two API calls a minute, not two per scrape. The review calls are reads in
effect: followers serve HTTP too, so they are exempt from leader fencing.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import time
import typing

from berth.api import access_reviews
from berth.kube.transport import errors, fencing, rest
from berth.scheduler.snapshot import wire

__all__ = ["Decision", "Reviewer"]


@dataclasses.dataclass(frozen=True)
class Decision:
    """The verdict on one request: ``status`` 200 (allowed), 401 or 403, and why."""

    status: int
    user: str = ""
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


class Reviewer:
    """Authenticates bearer tokens and authorizes non-resource requests through the API."""

    def __init__(
        self,
        api: typing.Any,
        *,
        ttl: float = 10.0,
        size: int = 1024,
        now: typing.Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._ttl = ttl
        self._size = size
        self._now = now
        self._cache: collections.OrderedDict[tuple[str, str, str], tuple[float, Decision]] = (
            collections.OrderedDict()
        )

    async def review(self, *, token: str | None, path: str, verb: str) -> Decision:
        """May the bearer of ``token`` ``verb`` (get, post, ...) the path ``path``?"""
        if not token:
            return Decision(401, reason="no bearer token")
        key = (hashlib.sha256(token.encode()).hexdigest(), path, verb)
        cached = self._cache.get(key)
        now = self._now()
        if cached is not None and now - cached[0] < self._ttl:
            self._cache.move_to_end(key)
            return cached[1]
        decision = await self._ask(token=token, path=path, verb=verb)
        if decision.status != 503:  # an unreachable API server is not an answer to keep
            self._cache[key] = (now, decision)
            self._cache.move_to_end(key)
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return decision

    async def _ask(self, *, token: str, path: str, verb: str) -> Decision:
        try:
            with fencing.unfenced():
                token_review: access_reviews.TokenReview = {
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenReview",
                    "spec": {"token": token},
                }
                answer = await rest.request(
                    self._api,
                    method="POST",
                    path="/apis/authentication.k8s.io/v1/tokenreviews",
                    body=token_review,
                    timeout=10.0,
                )
                # The API server answers each review with the review, its status filled in.
                who = typing.cast(access_reviews.TokenReview, answer)
                status = wire.part(who.get("status"))
                if not status.get("authenticated"):
                    return Decision(401, reason=str(status.get("error") or "token not accepted"))
                user = wire.part(status.get("user"))
                name = str(user.get("username") or "")
                spec: access_reviews.SubjectAccessReviewSpec = {
                    "user": name,
                    "groups": list(user.get("groups") or []),
                    "nonResourceAttributes": {"path": path, "verb": verb},
                }
                if user.get("uid"):
                    spec["uid"] = user["uid"]
                if user.get("extra"):
                    spec["extra"] = user["extra"]
                access_review: access_reviews.SubjectAccessReview = {
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview",
                    "spec": spec,
                }
                answer = await rest.request(
                    self._api,
                    method="POST",
                    path="/apis/authorization.k8s.io/v1/subjectaccessreviews",
                    body=access_review,
                    timeout=10.0,
                )
                verdict = typing.cast(access_reviews.SubjectAccessReview, answer)
        except errors.KubeError as exc:
            return Decision(503, reason=f"cannot review the request: {exc}")
        allowed = wire.part(verdict.get("status")).get("allowed") is True
        if not allowed:
            why = wire.part(verdict.get("status")).get("reason") or "RBAC does not allow it"
            return Decision(403, user=name, reason=f'user "{name}" may not {verb} {path}: {why}')
        return Decision(200, user=name)
