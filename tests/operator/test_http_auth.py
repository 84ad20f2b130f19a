"""The HTTP server behind Kubernetes authentication and authorization (issue 20).

Port 8080 used to answer anyone with every tenant's pod names per node. We test these aspects:

- with authorization on, the probes stay open; metrics, the scheduler's API and the plugins'
  routes answer 401 without a bearer token, 403 when RBAC says no, and are served when it says
  yes;
- :class:`berth.kube.transport.reviews.Reviewer` asks the API server a TokenReview, then a
  SubjectAccessReview for the non-resource path and verb, passes the user's groups, and
  caches the verdict (a scraper costs two calls per ttl, not per scrape); an unknown token is
  401 and a denied user 403 with the reason.
"""

from __future__ import annotations

import collections.abc
import pathlib
import typing

import aiohttp
import aiohttp.web
import pytest
import yaml

from berth.emulator import server as emulator_server
from berth.kube.transport import clients, reviews
from berth.operator import http, metrics, probing


class Stub:
    """Allows ``good`` to get everything, knows ``weak`` but forbids it, rejects the rest."""

    async def review(self, *, token: str | None, path: str, verb: str) -> reviews.Decision:
        if token == "good":
            return reviews.Decision(200, user="good")
        if token == "weak":
            return reviews.Decision(403, user="weak", reason=f'user "weak" may not {verb} {path}')
        return reviews.Decision(401, reason="token not accepted")


@pytest.fixture
async def guarded() -> collections.abc.AsyncIterator[str]:
    stub = Stub()
    app = http.build_app(
        readiness=probing.Readiness(),
        metrics=metrics.Metrics(),
        providers=http.Providers(),
        debug_api=False,
        authorizer=lambda: stub,
    )
    runner = aiohttp.web.AppRunner(app)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def status_of(url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as answer:
        return answer.status


async def test_probes_are_open_and_everything_else_needs_an_authorized_token(
    guarded: str,
) -> None:
    assert await status_of(f"{guarded}/healthz") == 200
    assert await status_of(f"{guarded}/readyz") == 200
    for path in ("/metrics", "/berth/v1/__services__", "/berth/v1/nodes/n1"):
        assert await status_of(f"{guarded}{path}") == 401
        assert await status_of(f"{guarded}{path}", "stolen") == 401
        assert await status_of(f"{guarded}{path}", "weak") == 403
    assert await status_of(f"{guarded}/metrics", "good") == 200


class FakeApiServer:
    """Answers TokenReviews (token ``t-alice`` is alice in group ``ops``) and
    SubjectAccessReviews (ops may get /metrics); records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[dict[str, typing.Any]] = []

    async def tokenreview(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        body = await request.json()
        self.asked.append(body)
        token = body["spec"]["token"]
        if token == "t-alice":
            user = {"username": "alice", "groups": ["ops"]}
            return aiohttp.web.json_response(
                {**body, "status": {"authenticated": True, "user": user}}
            )
        if token == "t-bob":
            user = {"username": "bob", "groups": ["dev"]}
            return aiohttp.web.json_response(
                {**body, "status": {"authenticated": True, "user": user}}
            )
        return aiohttp.web.json_response({**body, "status": {"authenticated": False}})

    async def sar(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        body = await request.json()
        self.asked.append(body)
        spec = body["spec"]
        allowed = "ops" in spec["groups"] and spec["nonResourceAttributes"] == {
            "path": "/metrics",
            "verb": "get",
        }
        status = {"allowed": allowed} if allowed else {"allowed": False, "reason": "no RBAC rule"}
        return aiohttp.web.json_response({**body, "status": status})


async def test_the_reviewer_asks_the_api_server_and_caches_its_verdict(
    tmp_path: pathlib.Path,
) -> None:
    fake = FakeApiServer()
    app = aiohttp.web.Application()
    app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", fake.tokenreview)
    app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", fake.sar)
    runner = aiohttp.web.AppRunner(app)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(emulator_server.kubeconfig(url)))
    try:
        async with clients.connect_async(kubeconfig=str(kubeconfig)) as connection:
            reviewer = reviews.Reviewer(connection.api)
            allowed = await reviewer.review(token="t-alice", path="/metrics", verb="get")
            assert allowed == reviews.Decision(200, user="alice")
            assert len(fake.asked) == 2
            assert fake.asked[1]["spec"]["user"] == "alice"
            again = await reviewer.review(token="t-alice", path="/metrics", verb="get")
            assert again.allowed and len(fake.asked) == 2  # cached
            denied = await reviewer.review(token="t-bob", path="/metrics", verb="get")
            assert denied.status == 403 and "no RBAC rule" in denied.reason
            unknown = await reviewer.review(token="t-eve", path="/metrics", verb="get")
            assert unknown.status == 401
            assert (await reviewer.review(token=None, path="/metrics", verb="get")).status == 401
    finally:
        await runner.cleanup()
