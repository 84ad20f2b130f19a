"""Reading the Kubernetes protobuf encoding that Go clients (Helm) send.

We test these aspects:
- a Secret in the ``k8s\\0`` envelope decodes to its JSON form (metadata, labels, base64 data,
  type, creationTimestamp), and unknown fields are skipped;
- a ConfigMap decodes; kinds this module does not model, and non-protobuf bodies, are refused;
- through HTTP, a protobuf Secret is created (201) and an unsupported kind is 415.
"""

from __future__ import annotations

import json

import aiohttp
import pytest

from berth.emulator import protobuf, server


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: bytes | str | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw


def _entry(number: int, key: str, value: bytes | str) -> bytes:
    return _field(number, _field(1, key) + _field(2, value))


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + _field(1, _field(1, api_version) + _field(2, kind)) + _field(2, raw)


META = (
    _field(1, "release")
    + _field(3, "default")
    + _field(8, _field(1, 1_767_225_600))
    + _entry(11, "owner", "helm")
    + _field(17, b"ignored managed fields")
)
SECRET = _envelope(
    "v1",
    "Secret",
    _field(1, META)
    + _entry(2, "release", b"\x00\x01")
    + _field(3, "helm.sh/release.v1")
    + _field(5, 1),
)


def test_secret_decodes() -> None:
    assert protobuf.decode(SECRET) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "release",
            "namespace": "default",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"owner": "helm"},
        },
        "data": {"release": "AAE="},
        "type": "helm.sh/release.v1",
        "immutable": True,
    }


def test_config_map_decodes() -> None:
    body = _envelope("v1", "ConfigMap", _field(1, _field(1, "c")) + _entry(2, "a", "b"))
    assert protobuf.decode(body) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {"a": "b"},
    }


def test_namespace_and_service_account_decode() -> None:
    # What `kubectl create namespace` and `kubectl create serviceaccount` send.
    namespace = _envelope(
        "v1", "Namespace", _field(1, _field(1, "team")) + _field(2, _field(1, "kubernetes"))
    )
    assert protobuf.decode(namespace) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team"},
        "spec": {"finalizers": ["kubernetes"]},
    }
    account = _envelope("v1", "ServiceAccount", _field(1, _field(1, "robot")) + _field(4, 0))
    assert protobuf.decode(account) == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "robot"},
        "automountServiceAccountToken": False,
    }


@pytest.mark.parametrize(
    "body",
    [
        _envelope("v1", "Pod", b""),
        _envelope("v1", "NamespaceSpec", b""),
        b'{"kind": "Secret"}',
        b"k8s\x00" + b"\x0a\xff",
    ],
    ids=["unmodelled-kind", "a-part-not-a-kind", "not-protobuf", "truncated"],
)
def test_refused_bodies(body: bytes) -> None:
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(body)


async def test_protobuf_create_over_http() -> None:
    headers = {"Content-Type": protobuf.MEDIA_TYPE}
    async with server.Emulator() as emulator, aiohttp.ClientSession(emulator.url) as session:
        path = "/api/v1/namespaces/default/secrets"
        async with session.post(path, data=SECRET, headers=headers) as response:
            created = json.loads(await response.read())
            assert response.status == 201
        assert created["data"] == {"release": "AAE="} and created["metadata"]["uid"]
        pod = _envelope("v1", "Pod", _field(1, _field(1, "p")))
        async with session.post(
            "/api/v1/namespaces/default/pods", data=pod, headers=headers
        ) as response:
            assert response.status == 415
