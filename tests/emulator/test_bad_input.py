"""Bad input gets the API server's Status object and HTTP code, never a 500 traceback.

We test these aspects:
- malformed JSON, a body that is not an object, an empty body: 400 BadRequest;
- unknown groups, versions and kinds: 404 NotFound "the server could not find the requested
  resource"; unknown objects: 404 with the object's name;
- bad label and field selectors, bad booleans and integers in the query: 400;
- wrong content types: 415 (strategic merge on a custom resource too); only-protobuf Accept: 406;
- oversized bodies: 413; a kind that does not match the URL: 400;
- an object missing required fields: 422 Invalid with causes;
- a failed JSON-patch ``test``: 422; a name that is not a DNS subdomain: 422;
- an exception inside a handler becomes a 500 Status, not a traceback page.
"""

from __future__ import annotations

import io
import json
import typing
from collections.abc import AsyncIterator

import aiohttp
import pytest

from berth.emulator import handlers, server

PODS = "/api/v1/namespaces/default/pods"
JSON = {"Content-Type": "application/json"}
POD = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


@pytest.fixture
async def http() -> AsyncIterator[tuple[aiohttp.ClientSession, server.Emulator]]:
    async with server.Emulator() as emulator, aiohttp.ClientSession(emulator.url) as session:
        yield session, emulator


async def _call(
    session: aiohttp.ClientSession,
    method: str,
    path: str,
    *,
    data: bytes | str | io.BytesIO | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, typing.Any]]:
    async with session.request(method, path, data=data, headers=headers or JSON) as response:
        return response.status, json.loads(await response.read())


@pytest.mark.parametrize(
    ("method", "path", "data", "headers", "code", "reason"),
    [
        ("POST", PODS, "{not json", JSON, 400, "BadRequest"),
        ("POST", PODS, "[1, 2]", JSON, 400, "BadRequest"),
        ("POST", PODS, "", JSON, 400, "BadRequest"),
        ("POST", PODS, json.dumps({**POD, "kind": "Service"}), JSON, 400, "BadRequest"),
        ("GET", "/apis/nope.example.com/v1/things", None, None, 404, "NotFound"),
        ("GET", "/api/v2/pods", None, None, 404, "NotFound"),
        ("GET", "/api/v1/namespaces/default/gizmos", None, None, 404, "NotFound"),
        ("GET", PODS + "/missing", None, None, 404, "NotFound"),
        ("GET", PODS + "?labelSelector=a%20in%20(b", None, None, 400, "BadRequest"),
        ("GET", PODS + "?labelSelector=!!x", None, None, 400, "BadRequest"),
        ("GET", PODS + "?fieldSelector=spec.bogus%3Dx", None, None, 400, "BadRequest"),
        ("GET", PODS + "?watch=maybe", None, None, 400, "BadRequest"),
        ("GET", PODS + "?limit=ten", None, None, 400, "BadRequest"),
        ("POST", PODS, "x", {"Content-Type": "text/plain"}, 415, "UnsupportedMediaType"),
        (
            "POST",
            PODS,
            "x",
            {"Content-Type": "application/vnd.kubernetes.protobuf"},
            415,
            "UnsupportedMediaType",
        ),
        ("PATCH", PODS + "/p", "{}", JSON, 415, "UnsupportedMediaType"),
        (
            "GET",
            PODS,
            None,
            {"Accept": "application/vnd.kubernetes.protobuf"},
            406,
            "NotAcceptable",
        ),
        ("POST", PODS, json.dumps({"metadata": {"name": "p"}, "spec": {}}), JSON, 422, "Invalid"),
        ("POST", PODS, json.dumps({**POD, "metadata": {"name": "Not_OK"}}), JSON, 422, "Invalid"),
        (
            "DELETE",
            "/api/v1/namespaces/default/pods/p/binding",
            None,
            None,
            405,
            "MethodNotAllowed",
        ),
    ],
    ids=[
        "malformed-json",
        "not-an-object",
        "empty-body",
        "kind-mismatch",
        "unknown-group",
        "unknown-version",
        "unknown-kind",
        "unknown-object",
        "unclosed-set",
        "bad-selector-syntax",
        "unknown-field-selector",
        "bad-boolean",
        "bad-integer",
        "text-body",
        "protobuf-body",
        "patch-as-json",
        "protobuf-only-accept",
        "missing-containers",
        "bad-name",
        "delete-binding",
    ],
)
async def test_bad_requests_get_a_status(
    http: tuple[aiohttp.ClientSession, server.Emulator],
    method: str,
    path: str,
    data: str | None,
    headers: dict[str, str] | None,
    code: int,
    reason: str,
) -> None:
    session, _ = http
    status, body = await _call(session, method, path, data=data, headers=headers)
    assert (status, body["kind"], body["status"], body["reason"], body["code"]) == (
        code,
        "Status",
        "Failure",
        reason,
        code,
    )
    assert body["message"]


async def test_oversized_body_is_413(http: tuple[aiohttp.ClientSession, server.Emulator]) -> None:
    session, _ = http
    big = io.BytesIO(json.dumps({**POD, "data": "x" * (handlers.MAX_BODY + 10)}).encode())
    status, body = await _call(session, "POST", PODS, data=big)
    assert (status, body["reason"]) == (413, "RequestEntityTooLarge")


async def test_invalid_lists_causes_with_field_paths(
    http: tuple[aiohttp.ClientSession, server.Emulator],
) -> None:
    session, _ = http
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    status, body = await _call(session, "POST", PODS, data=json.dumps(pod))
    assert status == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value",
            "field": "spec.containers[0].image",
        }
    ]
    assert body["message"] == 'Pod "p" is invalid: spec.containers[0].image: Required value'


async def test_failed_json_patch_test_is_422(
    http: tuple[aiohttp.ClientSession, server.Emulator],
) -> None:
    session, _ = http
    await _call(
        session,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        data=json.dumps({"metadata": {"name": "c"}}),
    )
    patch = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/data", "value": {"a": "b"}},
    ]
    status, body = await _call(
        session,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/c",
        data=json.dumps(patch),
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert (status, body["reason"]) == (422, "Invalid")


async def test_strategic_merge_on_a_custom_resource_is_415(
    http: tuple[aiohttp.ClientSession, server.Emulator], test_crd: dict[str, typing.Any]
) -> None:
    session, _ = http
    await _call(
        session,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        data=json.dumps(test_crd),
    )
    widgets = "/apis/test.berth.io/v1/namespaces/default/widgets"
    await _call(
        session, "POST", widgets, data=json.dumps({"metadata": {"name": "w"}, "spec": {"size": 1}})
    )
    status, body = await _call(
        session,
        "PATCH",
        widgets + "/w",
        data="{}",
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")


async def test_unexpected_errors_are_a_500_status(
    http: tuple[aiohttp.ClientSession, server.Emulator], monkeypatch: pytest.MonkeyPatch
) -> None:
    session, emulator = http

    def explode(*args: typing.Any, **kwargs: typing.Any) -> typing.NoReturn:
        raise RuntimeError("boom")

    monkeypatch.setattr(emulator.api, "get", explode)
    status, body = await _call(session, "GET", PODS + "/p")
    assert (status, body["reason"]) == (500, "InternalError")
    assert "RuntimeError: boom" in body["message"]
