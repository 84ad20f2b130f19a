"""berth.kube.transport.rest: one request on the wire, through the client's aiohttp session.

Aspects, against a recording aiohttp server on 127.0.0.1 (what the API server receives):
- what ``call_api`` used to add is still sent: the bearer token from the kubeconfig, the
  client's User-Agent, ``Accept`` and the given ``Content-Type``; the query encoded; the body as
  JSON (a ``datetime`` as ISO 8601, as the client's sanitiser wrote it);
- the token is asked of the configuration for every request, so a rotated token (an exec
  plugin's, the service account's) is the one sent next;
- the configured proxy (a kubeconfig ``proxy-url``) carries the request;
- answers: a 2xx JSON object back; a non-2xx as the ``berth.kube.transport.errors`` class of
  its status, naming the request and the Status's reason and message; a 2xx that is not a JSON
  object as ``APIError``;
- no answer: a refused connection and a ``timeout`` exceeded are ``TransportError`` naming the
  request; a token refresh that fails is one too (the request is not sent).
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import datetime
import json
import pathlib
import typing

import aiohttp.web
import pytest
import yaml

from berth.kube.transport import clients, errors, rest

Handler = collections.abc.Callable[[aiohttp.web.Request], typing.Awaitable[aiohttp.web.Response]]


@dataclasses.dataclass
class Seen:
    """One request as the server received it."""

    method: str
    target: str  # the request target: path and query (absolute-form through a proxy)
    headers: dict[str, str]
    body: bytes


@dataclasses.dataclass
class Server:
    url: str
    seen: list[Seen]
    answer: Handler


async def _created(_: aiohttp.web.Request) -> aiohttp.web.Response:
    return aiohttp.web.json_response({"kind": "Binding", "status": "Success"}, status=201)


@pytest.fixture
async def server(unused_tcp_port: int) -> collections.abc.AsyncIterator[Server]:
    recorded = Server(url=f"http://127.0.0.1:{unused_tcp_port}", seen=[], answer=_created)

    async def handle(request: aiohttp.web.Request) -> aiohttp.web.Response:
        recorded.seen.append(
            Seen(request.method, request.raw_path, dict(request.headers), await request.read())
        )
        return await recorded.answer(request)

    app = aiohttp.web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = aiohttp.web.AppRunner(app, access_log=None)
    await runner.setup()
    await aiohttp.web.TCPSite(runner, "127.0.0.1", unused_tcp_port).start()
    try:
        yield recorded
    finally:
        await runner.cleanup()


def _kubeconfig(path: pathlib.Path, *, url: str, proxy: str | None = None) -> pathlib.Path:
    cluster: dict[str, str] = {"server": url} | ({"proxy-url": proxy} if proxy else {})
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": "first-token"}}],
                "contexts": [{"name": "m", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "m",
            }
        )
    )
    return path


@pytest.fixture
async def connection(
    server: Server, tmp_path: pathlib.Path
) -> collections.abc.AsyncIterator[clients.AsyncConnection]:
    path = _kubeconfig(tmp_path / "config", url=server.url)
    async with clients.connect_async(kubeconfig=str(path)) as connected:
        yield connected


BINDING_PATH = "/api/v1/namespaces/team-a/pods/p-1/binding"


async def test_a_request_carries_what_the_client_would_have_added(
    server: Server, connection: clients.AsyncConnection
) -> None:
    answer = await rest.request(
        connection.api,
        method="PATCH",
        path="/api/v1/namespaces/team-a/pods/p-1/status",
        query={"fieldManager": "berth scheduler", "dryRun": "All"},
        body={"status": {"at": datetime.datetime(2026, 11, 29, 0, 5, tzinfo=datetime.UTC)}},
        content_type=rest.STRATEGIC_MERGE_PATCH,
        timeout=10.0,
    )
    assert answer == {"kind": "Binding", "status": "Success"}
    [seen] = server.seen
    assert seen.method == "PATCH"
    assert seen.target == (
        "/api/v1/namespaces/team-a/pods/p-1/status?fieldManager=berth+scheduler&dryRun=All"
    )
    assert seen.headers["Authorization"] == "Bearer first-token"
    assert seen.headers["Accept"] == "application/json"
    assert seen.headers["Content-Type"] == rest.STRATEGIC_MERGE_PATCH
    assert seen.headers["User-Agent"] == connection.api.user_agent
    assert json.loads(seen.body) == {"status": {"at": "2026-11-29T00:05:00+00:00"}}


async def test_a_get_sends_no_body(server: Server, connection: clients.AsyncConnection) -> None:
    await rest.request(connection.api, method="GET", path="/api/v1/namespaces")
    [seen] = server.seen
    assert (seen.method, seen.target, seen.body) == ("GET", "/api/v1/namespaces", b"")


async def test_a_rotated_token_is_the_one_sent_next(
    server: Server, connection: clients.AsyncConnection
) -> None:
    configuration = connection.api.configuration
    tokens = iter(["second-token", "third-token"])

    def refresh(config: typing.Any) -> None:  # as the exec plugin and in-cluster loaders do
        config.api_key["BearerToken"] = f"Bearer {next(tokens)}"

    configuration.refresh_api_key_hook = refresh
    for _ in range(2):
        await rest.request(connection.api, method="POST", path=BINDING_PATH, body={})
    assert [s.headers["Authorization"] for s in server.seen] == [
        "Bearer second-token",
        "Bearer third-token",
    ]


async def test_a_token_that_cannot_be_refreshed_fails_the_request_unsent(
    server: Server, connection: clients.AsyncConnection
) -> None:
    def refresh(_: typing.Any) -> None:
        raise OSError("the credential plugin is gone")

    connection.api.configuration.refresh_api_key_hook = refresh
    with pytest.raises(errors.TransportError, match=f"POST {BINDING_PATH}: OSError: the cred"):
        await rest.request(connection.api, method="POST", path=BINDING_PATH, body={})
    assert server.seen == []


async def test_the_configured_proxy_carries_the_request(
    server: Server, tmp_path: pathlib.Path
) -> None:
    # The recording server plays the proxy; the API server's name never resolves here.
    path = _kubeconfig(tmp_path / "config", url="http://api.invalid:6443", proxy=server.url)
    async with clients.connect_async(kubeconfig=str(path)) as connection:
        await rest.request(connection.api, method="POST", path=BINDING_PATH, body={"a": 1})
    [seen] = server.seen
    assert seen.target == f"http://api.invalid:6443{BINDING_PATH}"
    assert seen.headers["Authorization"] == "Bearer first-token"
    assert json.loads(seen.body) == {"a": 1}


@pytest.mark.parametrize(
    ("status", "reason", "error"),
    [
        (401, "Unauthorized", errors.Unauthorized),
        (403, "Forbidden", errors.Forbidden),
        (404, "NotFound", errors.NotFound),
        (409, "Conflict", errors.Conflict),
        (410, "Expired", errors.Gone),
        (500, "InternalError", errors.APIError),
    ],
)
async def test_an_error_answer_is_the_error_of_its_status(
    server: Server,
    connection: clients.AsyncConnection,
    status: int,
    reason: str,
    error: type[errors.APIError],
) -> None:
    async def refuse(_: aiohttp.web.Request) -> aiohttp.web.Response:
        body = {"kind": "Status", "reason": reason, "message": "said the server", "code": status}
        return aiohttp.web.json_response(body, status=status)

    server.answer = refuse
    with pytest.raises(error) as caught:
        await rest.request(connection.api, method="POST", path=BINDING_PATH, body={})
    assert type(caught.value) is error
    assert (caught.value.status, caught.value.reason) == (status, reason)
    assert str(caught.value) == f"POST {BINDING_PATH}: {status} {reason}: said the server"


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]"])
async def test_a_success_that_is_not_a_json_object_is_an_api_error(
    server: Server, connection: clients.AsyncConnection, text: str
) -> None:
    async def odd(_: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(status=200, text=text)

    server.answer = odd
    with pytest.raises(errors.APIError, match="200 answer is not a JSON object") as caught:
        await rest.request(connection.api, method="GET", path="/api/v1/nodes")
    assert caught.value.status == 200


async def test_an_exceeded_timeout_is_a_transport_error(
    server: Server, connection: clients.AsyncConnection
) -> None:
    release = asyncio.Event()

    async def slow(request: aiohttp.web.Request) -> aiohttp.web.Response:
        await release.wait()
        return await _created(request)

    server.answer = slow
    try:
        with pytest.raises(errors.TransportError, match=f"POST {BINDING_PATH}: .*Timeout"):
            await rest.request(
                connection.api, method="POST", path=BINDING_PATH, body={}, timeout=0.2
            )
    finally:
        release.set()


async def test_a_refused_connection_is_a_transport_error(
    tmp_path: pathlib.Path, unused_tcp_port: int
) -> None:
    path = _kubeconfig(tmp_path / "config", url=f"http://127.0.0.1:{unused_tcp_port}")
    async with clients.connect_async(kubeconfig=str(path)) as connection:
        with pytest.raises(errors.TransportError, match=f"POST {BINDING_PATH}: ClientConnector"):
            await rest.request(connection.api, method="POST", path=BINDING_PATH, body={})
