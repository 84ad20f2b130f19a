"""OpenAPI schemas as CustomResourceDefinitions hold them: ``JSONSchemaProps``, a typed record.

``apiextensions.k8s.io/v1``'s ``JSONSchemaProps`` spelt as the API server serves it: OpenAPI
v3's keywords (``type``, ``properties``, ``items``, ``required``, ``enum``, ``default``...) and
Kubernetes' extensions (``x-kubernetes-preserve-unknown-fields``,
``x-kubernetes-validations``...). It is recursive: ``properties``, ``items`` and
``additionalProperties`` hold schemas in turn. Keys that are no Python names (``$ref``,
``x-kubernetes-*``, ``not``) need the functional ``TypedDict`` form.

Berth renders its CRDs' schemas (:mod:`berth.api.crds`), evaluates their CEL rules
(:mod:`berth.api.cel`), applies their defaults (:mod:`berth.api.defaulting`), and the emulator
validates custom objects with them and serves them as OpenAPI. A schema a user posts may be
malformed: as every record here (see :mod:`berth.api.objects`), this one promises the keys,
not their values, so a walker still checks the shape where it descends.
"""

from __future__ import annotations

import typing

import typing_extensions

__all__ = [
    "JSON",
    "ExternalDocumentation",
    "GroupVersionKind",
    "JSONSchemaProps",
    "ValidationRule",
]

JSON: typing.TypeAlias = "bool | int | float | str | list[JSON] | dict[str, JSON] | None"
"""A JSON value of any shape: what a schema's ``default``, ``enum`` and ``example`` hold (the
schema's author chose it; a reader checks its type, or copies it as it is)."""


class ValidationRule(typing_extensions.TypedDict, total=False):
    """One ``x-kubernetes-validations`` entry: a CEL rule and what a refusal says.

    Only ``rule`` is required; without ``message`` the API server says ``failed rule: <rule>``.
    Berth's own rules always carry a message (:class:`berth.api.rules.Rule`)."""

    rule: typing_extensions.Required[str]
    message: str
    messageExpression: str
    reason: str  # FieldValueInvalid, FieldValueForbidden, FieldValueRequired, FieldValueDuplicate
    fieldPath: str  # a JSON path below the node (".spec.parent"): where a refusal points
    optionalOldSelf: bool


class GroupVersionKind(typing_extensions.TypedDict):
    group: str
    version: str
    kind: str


class ExternalDocumentation(typing_extensions.TypedDict, total=False):
    description: str
    url: str


JSONSchemaProps = typing_extensions.TypedDict(
    "JSONSchemaProps",
    {
        "id": str,
        "$schema": str,
        "$ref": str,
        "description": str,
        "type": str,  # object, array, string, integer, number, boolean
        "format": str,
        "title": str,
        "default": JSON,
        "maximum": float,
        "exclusiveMaximum": bool,
        "minimum": float,
        "exclusiveMinimum": bool,
        "maxLength": int,
        "minLength": int,
        "pattern": str,
        "maxItems": int,
        "minItems": int,
        "uniqueItems": bool,
        "multipleOf": float,
        "enum": list[JSON],
        "maxProperties": int,
        "minProperties": int,
        "required": list[str],
        # A structural schema (every CRD of apiextensions.k8s.io/v1) has one schema for all
        # items; v1 also admits a list of them, which structural schemas forbid.
        "items": "JSONSchemaProps",
        "allOf": "list[JSONSchemaProps]",
        "oneOf": "list[JSONSchemaProps]",
        "anyOf": "list[JSONSchemaProps]",
        "not": "JSONSchemaProps",
        "properties": "dict[str, JSONSchemaProps]",
        "additionalProperties": "JSONSchemaProps | bool",
        "patternProperties": "dict[str, JSONSchemaProps]",
        "dependencies": "dict[str, JSONSchemaProps | list[str]]",
        "additionalItems": "JSONSchemaProps | bool",
        "definitions": "dict[str, JSONSchemaProps]",
        "externalDocs": ExternalDocumentation,
        "example": JSON,
        "nullable": bool,
        "x-kubernetes-preserve-unknown-fields": bool,
        "x-kubernetes-embedded-resource": bool,
        "x-kubernetes-int-or-string": bool,
        "x-kubernetes-list-map-keys": list[str],
        "x-kubernetes-list-type": str,  # atomic, set, map
        "x-kubernetes-map-type": str,  # granular, atomic
        "x-kubernetes-validations": list[ValidationRule],
        # Not in a CRD: the API server tags each kind's schema with it in the OpenAPI it serves.
        "x-kubernetes-group-version-kind": list[GroupVersionKind],
    },
    total=False,
)
"""One node of an OpenAPI v3 schema, as a CRD version's ``schema.openAPIV3Schema`` holds it."""
