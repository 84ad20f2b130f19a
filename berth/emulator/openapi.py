"""OpenAPI v3: the ``/openapi/v3`` root and one document per group/version.

Two clients read these. ``kubectl apply``/``create`` decide from them whether the server
validates fields itself (a PATCH operation tagged with the kind's
``x-kubernetes-group-version-kind`` that takes a ``fieldValidation`` parameter); when it does
they send ``fieldValidation=Strict`` and need no ``--validate=false``. ``kubectl explain`` reads
the kind's schema from ``components.schemas`` (found by the same extension). CRD kinds get their
``openAPIV3Schema``; built-in kinds get an open schema (their fields are not modelled here).

The root's URLs carry a hash of each document so kubectl's cache notices a new CRD.
"""

from __future__ import annotations

import hashlib
import json
import typing

import typing_extensions

from berth.api import schemas
from berth.emulator import discovery, resources

__all__ = ["Document", "Operation", "Root", "document", "root"]


# "in" is a Python keyword: the functional form names it.
Parameter = typing_extensions.TypedDict(
    "Parameter",
    {"name": str, "in": str, "description": str, "schema": schemas.JSONSchemaProps},
    total=False,
)


class MediaType(typing_extensions.TypedDict):
    schema: schemas.JSONSchemaProps


class RequestBody(typing_extensions.TypedDict):
    content: dict[str, MediaType]  # by content type


class Response(typing_extensions.TypedDict):
    description: str
    content: dict[str, MediaType]


Operation = typing_extensions.TypedDict(
    "Operation",
    {
        "operationId": str,
        "parameters": list[Parameter],
        "responses": dict[str, Response],  # by status code
        "requestBody": RequestBody,
        "x-kubernetes-action": str,
        "x-kubernetes-group-version-kind": schemas.GroupVersionKind,
    },
    total=False,
)
"""One operation of a path: what kubectl reads to find the kind's schema and whether the server
validates fields (a ``fieldValidation`` parameter)."""

PathItem = dict[str, Operation]  # by method: get, post, put, patch, delete


class Info(typing_extensions.TypedDict):
    title: str
    version: str


class Components(typing_extensions.TypedDict):
    schemas: dict[str, schemas.JSONSchemaProps]


class Document(typing_extensions.TypedDict):
    """One group/version's OpenAPI v3 document."""

    openapi: str
    info: Info
    paths: dict[str, PathItem]
    components: Components


class DocumentReference(typing_extensions.TypedDict):
    serverRelativeURL: str


class Root(typing_extensions.TypedDict):
    """``/openapi/v3``: each group/version's document, by path."""

    paths: dict[str, DocumentReference]


_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_OBJECT_META_SCHEMA: schemas.JSONSchemaProps = {
    "description": "ObjectMeta is metadata that all persisted resources must have, which "
    "includes all objects users must create.",
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Name must be unique within a namespace."},
        "generateName": {
            "type": "string",
            "description": "An optional prefix, used by the server, to generate a unique name.",
        },
        "namespace": {
            "type": "string",
            "description": "Namespace defines the space within which each name must be unique.",
        },
        "uid": {
            "type": "string",
            "description": "UID is the unique in time and space value for this object.",
        },
        "resourceVersion": {
            "type": "string",
            "description": "An opaque value that represents the internal version of this object.",
        },
        "generation": {
            "type": "integer",
            "format": "int64",
            "description": "A sequence number "
            "representing a specific generation of the desired state.",
        },
        "creationTimestamp": {
            "type": "string",
            "format": "date-time",
            "description": "The server time when this object was created.",
        },
        "deletionTimestamp": {
            "type": "string",
            "format": "date-time",
            "description": "The time after which this resource will be deleted.",
        },
        "labels": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Map of string keys and values to organize and categorize objects.",
        },
        "annotations": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Unstructured key value map stored with a resource.",
        },
        "finalizers": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Must be empty before the object is deleted from the registry.",
        },
        "ownerReferences": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "description": "List of objects depended by this object.",
        },
    },
}


def _segment(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _schema_name(resource: resources.Resource) -> str:
    if resource.custom:
        reverse = ".".join(reversed(resource.group.split(".")))
        return f"{reverse}.{resource.version}.{resource.kind}"
    group = resource.group.split(".")[0] if resource.group else "core"
    return f"io.k8s.api.{group}.{resource.version}.{resource.kind}"


def _kind_schema(resource: resources.Resource) -> schemas.JSONSchemaProps:
    gvk = schemas.GroupVersionKind(
        group=resource.group, version=resource.version, kind=resource.kind
    )
    schema: schemas.JSONSchemaProps
    if resource.schema is not None:
        # A deep copy, through JSON as it is served.
        schema = typing.cast(schemas.JSONSchemaProps, json.loads(json.dumps(resource.schema)))
    else:
        schema = {
            "type": "object",
            "description": f"{resource.kind} is served by Berth's API server emulator.",
            "properties": {
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
            "x-kubernetes-preserve-unknown-fields": True,
        }
    properties = schema.setdefault("properties", {})
    properties.setdefault(
        "apiVersion",
        {
            "type": "string",
            "description": "APIVersion defines "
            "the versioned schema of this representation of an object.",
        },
    )
    properties.setdefault(
        "kind",
        {
            "type": "string",
            "description": "Kind is a string value "
            "representing the REST resource this object represents.",
        },
    )
    properties["metadata"] = {
        "allOf": [{"$ref": f"#/components/schemas/{_OBJECT_META}"}],
        "description": "Standard object's metadata.",
    }
    schema["x-kubernetes-group-version-kind"] = [gvk]
    return schema


def _operation(resource: resources.Resource, action: str, *, fields: bool) -> Operation:
    parameters: list[Parameter] = [
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
    ]
    if fields:
        parameters.append(
            {
                "name": "fieldValidation",
                "in": "query",
                "description": "instructs the server on how to handle objects in the request "
                "containing unknown or duplicate fields",
                "schema": {"type": "string", "uniqueItems": True},
            }
        )
    ref: schemas.JSONSchemaProps = {"$ref": f"#/components/schemas/{_schema_name(resource)}"}
    operation: Operation = {
        "operationId": f"{action}{resource.kind}",
        "parameters": parameters,
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": ref}}}
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": resource.group,
            "version": resource.version,
            "kind": resource.kind,
        },
    }
    if action == "patch":
        # No strategic-merge content type: kubectl then computes built-in patches from its own
        # types, and CRD patches as JSON merge patches, as it does against a real server.
        content = [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ]
        operation["requestBody"] = {"content": {c: {"schema": {"type": "object"}} for c in content}}
    elif action in ("post", "put"):
        operation["requestBody"] = {"content": {"application/json": {"schema": ref}}}
    return operation


def _paths(resource: resources.Resource) -> dict[str, PathItem]:
    base = "/" + _segment(resource.group, resource.version)
    if resource.namespaced:
        base += "/namespaces/{namespace}"
    collection = f"{base}/{resource.plural}"
    item = collection + "/{name}"
    paths: dict[str, PathItem] = {
        collection: {
            "get": _operation(resource, "list", fields=False),
            "post": _operation(resource, "post", fields=True),
        },
        item: {
            "get": _operation(resource, "get", fields=False),
            "put": _operation(resource, "put", fields=True),
            "patch": _operation(resource, "patch", fields=True),
            "delete": _operation(resource, "delete", fields=False),
        },
    }
    if resource.has_status:
        paths[item + "/status"] = {
            "get": _operation(resource, "get", fields=False),
            "put": _operation(resource, "put", fields=True),
        }
    return paths


def document(registry: resources.Registry, group: str, version: str) -> Document | None:
    """The OpenAPI v3 document of one group/version, or None if it is not served."""
    served = registry.in_group_version(group, version)
    if not served:
        return None
    paths: dict[str, PathItem] = {}
    kinds: dict[str, schemas.JSONSchemaProps] = {_OBJECT_META: _OBJECT_META_SCHEMA}
    for resource in served:
        if "create" not in resource.verbs or "get" not in resource.verbs:
            continue
        paths.update(_paths(resource))
        kinds[_schema_name(resource)] = _kind_schema(resource)
    major, minor, patch = discovery.KUBERNETES_VERSION
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": f"v{major}.{minor}.{patch}"},
        "paths": paths,
        "components": {"schemas": kinds},
    }


def root(registry: resources.Registry) -> Root:
    """``/openapi/v3``: each group/version's document URL, with a content hash."""
    paths: dict[str, DocumentReference] = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            doc = document(registry, group, version)
            if doc is None:
                continue
            digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64]
            segment = _segment(group, version)
            paths[segment] = {"serverRelativeURL": f"/openapi/v3/{segment}?hash={digest.upper()}"}
    return {"paths": paths}
