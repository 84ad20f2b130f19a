"""Decoding the Kubernetes protobuf encoding, for the few kinds Go clients send that way.

client-go's typed clients write built-in objects as ``application/vnd.kubernetes.protobuf``;
Helm does so for its release Secrets (and ConfigMaps with the configmap driver). The emulator
answers in JSON (every such client accepts it), but must read those request bodies. This module
decodes the envelope (``k8s\\x00`` + ``runtime.Unknown``) and the messages of
:data:`SCHEMAS` (field numbers from ``k8s.io/api/core/v1/generated.proto``) into the JSON
form; other kinds raise :class:`ProtobufError`, which the handlers answer with 415.
"""

from __future__ import annotations

import base64
import datetime
import typing

__all__ = ["MEDIA_TYPE", "ProtobufError", "decode"]

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """A body that is not the protobuf of a kind this module knows."""


# A field is (json name, kind, repeated); kinds: "string", "bytes", "int", "bool", "time",
# "map:string", "map:bytes", or the name of a message in SCHEMAS.
Field = tuple[str, str, bool]
SCHEMAS: dict[str, dict[int, Field]] = {
    "ObjectMeta": {
        1: ("name", "string", False),
        2: ("generateName", "string", False),
        3: ("namespace", "string", False),
        5: ("uid", "string", False),
        6: ("resourceVersion", "string", False),
        7: ("generation", "int", False),
        8: ("creationTimestamp", "time", False),
        9: ("deletionTimestamp", "time", False),
        10: ("deletionGracePeriodSeconds", "int", False),
        11: ("labels", "map:string", False),
        12: ("annotations", "map:string", False),
        13: ("ownerReferences", "OwnerReference", True),
        14: ("finalizers", "string", True),
    },
    "OwnerReference": {
        1: ("kind", "string", False),
        3: ("name", "string", False),
        4: ("uid", "string", False),
        5: ("apiVersion", "string", False),
        6: ("controller", "bool", False),
        7: ("blockOwnerDeletion", "bool", False),
    },
    "Secret": {
        1: ("metadata", "ObjectMeta", False),
        2: ("data", "map:bytes", False),
        3: ("type", "string", False),
        4: ("stringData", "map:string", False),
        5: ("immutable", "bool", False),
    },
    "ConfigMap": {
        1: ("metadata", "ObjectMeta", False),
        2: ("data", "map:string", False),
        3: ("binaryData", "map:bytes", False),
        4: ("immutable", "bool", False),
    },
    # kubectl create namespace / serviceaccount send these.
    "Namespace": {
        1: ("metadata", "ObjectMeta", False),
        2: ("spec", "NamespaceSpec", False),
    },
    "NamespaceSpec": {1: ("finalizers", "string", True)},
    "ServiceAccount": {
        1: ("metadata", "ObjectMeta", False),
        4: ("automountServiceAccountToken", "bool", False),
    },
}
_PARTS = frozenset({"ObjectMeta", "OwnerReference", "NamespaceSpec"})
"""Messages that are parts of objects, never a request body's kind."""


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def _fields(data: bytes) -> typing.Iterator[tuple[int, int | bytes]]:
    """(field number, value) pairs; length-delimited values are bytes, the rest integers."""
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _varint(data, position)
            yield number, value
        elif wire == 2:
            length, position = _varint(data, position)
            if position + length > len(data):
                raise ProtobufError("truncated field")
            yield number, data[position : position + length]
            position += length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            yield number, int.from_bytes(data[position : position + size], "little")
            position += size
        else:
            raise ProtobufError(f"unsupported wire type {wire}")


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a length-delimited field")
    return value.decode("utf-8")


def _signed(value: int | bytes) -> int:
    if not isinstance(value, int):
        raise ProtobufError("expected a varint field")
    return value - (1 << 64) if value >= 1 << 63 else value


def _time(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a Time message")
    seconds = next((_signed(v) for n, v in _fields(value) if n == 1), 0)
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(value: int | bytes, *, binary: bool) -> tuple[str, str]:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a map entry")
    key, item = "", b""
    for number, part in _fields(value):
        if number == 1:
            key = _text(part)
        elif number == 2 and isinstance(part, bytes):
            item = part
    return key, base64.b64encode(item).decode() if binary else item.decode("utf-8")


# Untyped: a request body in JSON form, before validation: whatever the client sent, which the
# strategies check as they check a JSON body.
def _message(kind: str, data: bytes) -> dict[str, typing.Any]:
    schema = SCHEMAS[kind]
    out: dict[str, typing.Any] = {}  # Untyped: as _message's result
    for number, value in _fields(data):
        if number not in schema:
            continue  # fields the emulator does not model (managedFields, ...)
        name, field_kind, repeated = schema[number]
        decoded: typing.Any
        if field_kind.startswith("map:"):
            key, item = _entry(value, binary=field_kind == "map:bytes")
            out.setdefault(name, {})[key] = item
            continue
        if field_kind == "string":
            decoded = _text(value)
        elif field_kind == "bytes":
            decoded = base64.b64encode(value if isinstance(value, bytes) else b"").decode()
        elif field_kind == "int":
            decoded = _signed(value)
        elif field_kind == "bool":
            decoded = bool(value)
        elif field_kind == "time":
            decoded = _time(value)
        else:
            if not isinstance(value, bytes):
                raise ProtobufError(f"expected a {field_kind} message")
            decoded = _message(field_kind, value)
        if repeated:
            out.setdefault(name, []).append(decoded)
        else:
            out[name] = decoded
    return out


def decode(body: bytes) -> dict[str, typing.Any]:  # Untyped: a request body before validation
    """The JSON form of a protobuf-encoded object (``apiVersion``, ``kind`` included)."""
    if not body.startswith(_MAGIC):
        raise ProtobufError("not a Kubernetes protobuf body (no k8s\\0 prefix)")
    api_version = kind = ""
    raw = b""
    for number, value in _fields(body[len(_MAGIC) :]):
        if number == 1 and isinstance(value, bytes):
            for sub, text in _fields(value):
                if sub == 1:
                    api_version = _text(text)
                elif sub == 2:
                    kind = _text(text)
        elif number == 2 and isinstance(value, bytes):
            raw = value
    if kind not in SCHEMAS or kind in _PARTS:
        raise ProtobufError(f"protobuf bodies of kind {kind!r} are not supported; send JSON")
    obj = _message(kind, raw)
    return {"apiVersion": api_version, "kind": kind, **obj}
