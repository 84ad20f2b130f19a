"""OpenAPI v2 (``/openapi/v2``): the document kubectl validates a ``kind: List``'s items with.

kubectl validates what it applies on the server (``fieldValidation=Strict``, found through
OpenAPI v3: :mod:`berth.emulator.openapi`), except a ``kind: List`` — the form ``kubectl get
-o yaml`` writes — whose items it checks itself, against the schemas of the v2 document, before
sending each one. Without ``/openapi/v2`` that apply fails ("the server could not find the
requested resource").

The document holds one definition per CRD kind, converted from its ``openAPIV3Schema`` as
kube-apiserver converts CRD schemas for v2 (:func:`v2_schema`: no ``nullable``, no
``anyOf``/``oneOf``/``allOf``/``not``; what preserves unknown fields, or is nullable, is left
open), tagged with ``x-kubernetes-group-version-kind``. Built-in kinds have no definition, so
kubectl skips them (their schemas are not modelled here, as in v3); each item is still validated
by the server when sent. kubectl asks for the protobuf form (gnostic's ``openapi_v2.Document``,
field numbers from ``openapiv2/OpenAPIv2.proto``), which :func:`encode` writes; JSON is served
to those that ask for it.
"""

from __future__ import annotations

import copy
import json
import struct
import typing

import typing_extensions

from berth.api import schemas
from berth.emulator import discovery, resources

__all__ = ["PROTOBUF_CONTENT_TYPE", "PROTOBUF_MEDIA_TYPES", "document", "encode", "v2_schema"]

PROTOBUF_MEDIA_TYPES = (
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
)
"""What kubectl's ``Accept`` header names for the v2 document (the first is client-go's)."""
PROTOBUF_CONTENT_TYPE = PROTOBUF_MEDIA_TYPES[1]
"""What the answer says it is, as kube-apiserver's: the form without ``@``, which is no valid
media type (client-go refuses a response that says it)."""

_GVK: typing.Final = "x-kubernetes-group-version-kind"
_DROPPED = ("nullable", "anyOf", "oneOf", "allOf", "not")


class Info(typing_extensions.TypedDict):
    title: str
    version: str


class Document(typing_extensions.TypedDict):
    """A Swagger 2.0 document, the parts served: kinds' schemas under ``definitions``."""

    swagger: str
    info: Info
    paths: dict[str, object]  # always empty: kubectl looks kinds up in the definitions
    definitions: dict[str, schemas.JSONSchemaProps]


def v2_schema(schema: schemas.JSONSchemaProps) -> schemas.JSONSchemaProps:
    """An OpenAPI v3 structural schema made v2-compatible, as kube-apiserver's
    ``ToStructuralOpenAPIV2`` does: combinators and ``x-kubernetes-*`` extensions dropped;
    a nullable, int-or-string or unknown-field-preserving schema left untyped or without
    ``properties``/``items`` (kubectl would refuse what they allow); a nullable property no
    longer required."""
    # v3's keywords less those v2 lacks: a JSONSchemaProps still.
    out = typing.cast(
        schemas.JSONSchemaProps,
        {
            key: copy.deepcopy(value)
            for key, value in schema.items()
            if key not in _DROPPED and not key.startswith("x-kubernetes-")
        },
    )
    if isinstance(properties := schema.get("properties"), dict):
        out["properties"] = {name: v2_schema(sub) for name, sub in properties.items()}
    if isinstance(items := schema.get("items"), dict):
        out["items"] = v2_schema(items)
    if isinstance(extra := schema.get("additionalProperties"), dict):
        out["additionalProperties"] = v2_schema(extra)
    if schema.get("nullable") or schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.pop("items", None)
        out.pop("properties", None)
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        out.pop("items", None)
        out.pop("properties", None)
    if out.get("type") == "array" and "items" not in out:
        out.pop("type")
    properties = schema.get("properties") or {}
    if "required" in out:
        out["required"] = [
            name for name in out["required"] if not (properties.get(name) or {}).get("nullable")
        ]
        if not out["required"]:
            del out["required"]
    return out


def _definition(resource: resources.Resource) -> schemas.JSONSchemaProps:
    assert resource.schema is not None
    schema = v2_schema(resource.schema)
    properties = schema.setdefault("properties", {})
    properties.setdefault("apiVersion", {"type": "string"})
    properties.setdefault("kind", {"type": "string"})
    properties["metadata"] = {"type": "object", "description": "Standard object's metadata."}
    schema[_GVK] = [{"group": resource.group, "version": resource.version, "kind": resource.kind}]
    return schema


def document(registry: resources.Registry) -> Document:
    """The v2 document: every CRD kind served now (see the module docstring)."""
    definitions: dict[str, schemas.JSONSchemaProps] = {}
    for group, versions in sorted(registry.group_versions().items()):
        for version in versions:
            for resource in registry.in_group_version(group, version):
                if resource.custom and resource.schema is not None:
                    reverse = ".".join(reversed(resource.group.split(".")))
                    definitions[f"{reverse}.{resource.version}.{resource.kind}"] = _definition(
                        resource
                    )
    major, minor, patch = discovery.KUBERNETES_VERSION
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": f"v{major}.{minor}.{patch}"},
        "paths": {},
        "definitions": definitions,
    }


# ----- protobuf: gnostic's openapi_v2 messages ---------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s as two's complement, as protobuf writes them
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _bytes(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _bytes(number, text.encode())


def _any(number: int, value: typing.Any) -> bytes:
    """A gnostic ``Any`` holding ``value`` as YAML (JSON is YAML)."""
    return _bytes(number, _string(2, json.dumps(value)))


# Schema's scalar fields by kind: (json name, field number).
_STRINGS: tuple[
    tuple[typing.Literal["$ref", "format", "title", "description", "pattern"], int], ...
] = (
    ("$ref", 1),
    ("format", 2),
    ("title", 3),
    ("description", 4),
    ("pattern", 13),
)
_DOUBLES: tuple[tuple[typing.Literal["multipleOf", "maximum", "minimum"], int], ...] = (
    ("multipleOf", 6),
    ("maximum", 7),
    ("minimum", 9),
)
_BOOLS: tuple[
    tuple[typing.Literal["exclusiveMaximum", "exclusiveMinimum", "uniqueItems"], int], ...
] = (("exclusiveMaximum", 8), ("exclusiveMinimum", 10), ("uniqueItems", 16))
_INTS: tuple[
    tuple[
        typing.Literal[
            "maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties"
        ],
        int,
    ],
    ...,
] = (
    ("maxLength", 11),
    ("minLength", 12),
    ("maxItems", 14),
    ("minItems", 15),
    ("maxProperties", 17),
    ("minProperties", 18),
)
_DEFAULT = 5


def _scalars(schema: schemas.JSONSchemaProps) -> bytes:
    """The scalar fields of ``schema``, in field-number order."""
    fields: list[tuple[int, bytes]] = []
    for name, number in _STRINGS:
        if name in schema:
            fields.append((number, _string(number, str(schema[name]))))
    if "default" in schema:
        fields.append((_DEFAULT, _any(_DEFAULT, schema["default"])))
    for double, number in _DOUBLES:
        if double in schema:
            fields.append((number, _tag(number, 1) + struct.pack("<d", float(schema[double]))))
    for flag, number in _BOOLS:
        if flag in schema:
            fields.append((number, _tag(number, 0) + _varint(1) if schema[flag] else b""))
    for count, number in _INTS:
        if count in schema:
            fields.append((number, _tag(number, 0) + _varint(int(schema[count]))))
    return b"".join(encoded for _, encoded in sorted(fields))


def _schema(schema: schemas.JSONSchemaProps) -> bytes:
    out = bytearray(_scalars(schema))
    for required in schema.get("required") or ():
        out += _string(19, str(required))
    for value in schema.get("enum") or ():
        out += _any(20, value)
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        out += _bytes(21, _bytes(1, _schema(additional)))
    elif isinstance(additional, bool):
        out += _bytes(21, _tag(2, 0) + _varint(int(additional)))
    kind_of = schema.get("type")
    if kind_of:
        names = kind_of if isinstance(kind_of, list) else [kind_of]
        out += _bytes(22, b"".join(_string(1, str(n)) for n in names))
    if isinstance(schema.get("items"), dict):
        out += _bytes(23, _bytes(1, _schema(schema["items"])))
    properties = schema.get("properties")
    if isinstance(properties, dict):
        named = b"".join(
            _bytes(1, _string(1, name) + _bytes(2, _schema(sub)))
            for name, sub in properties.items()
        )
        out += _bytes(25, named)
    for key, extension in schema.items():
        if key.startswith("x-"):
            out += _bytes(31, _string(1, key) + _any(2, extension))
    return bytes(out)


def encode(doc: Document) -> bytes:
    """``doc`` (from :func:`document`) as a protobuf ``openapi.v2.Document``."""
    info = doc.get("info") or {}
    out = bytearray(_string(1, str(doc.get("swagger", "2.0"))))
    out += _bytes(
        2, _string(1, str(info.get("title", ""))) + _string(2, str(info.get("version", "")))
    )
    out += _bytes(8, b"")  # paths: none (kubectl looks kinds up in the definitions)
    definitions = b"".join(
        _bytes(1, _string(1, name) + _bytes(2, _schema(schema)))
        for name, schema in (doc.get("definitions") or {}).items()
    )
    out += _bytes(9, definitions)
    return bytes(out)
