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

from berth.emulator import discovery, resources

__all__ = ["document", "root"]

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_OBJECT_META_SCHEMA: dict[str, typing.Any] = {
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


def _kind_schema(resource: resources.Resource) -> dict[str, typing.Any]:
    gvk = {"group": resource.group, "version": resource.version, "kind": resource.kind}
    if resource.schema is not None:
        schema = typing.cast(dict[str, typing.Any], json.loads(json.dumps(resource.schema)))
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


def _operation(resource: resources.Resource, action: str, *, fields: bool) -> dict[str, typing.Any]:
    parameters: list[dict[str, typing.Any]] = [
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
    ref = {"$ref": f"#/components/schemas/{_schema_name(resource)}"}
    operation: dict[str, typing.Any] = {
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


def _paths(resource: resources.Resource) -> dict[str, typing.Any]:
    base = "/" + _segment(resource.group, resource.version)
    if resource.namespaced:
        base += "/namespaces/{namespace}"
    collection = f"{base}/{resource.plural}"
    item = collection + "/{name}"
    paths: dict[str, typing.Any] = {
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


def document(
    registry: resources.Registry, group: str, version: str
) -> dict[str, typing.Any] | None:
    """The OpenAPI v3 document of one group/version, or None if it is not served."""
    served = registry.in_group_version(group, version)
    if not served:
        return None
    paths: dict[str, typing.Any] = {}
    schemas: dict[str, typing.Any] = {_OBJECT_META: _OBJECT_META_SCHEMA}
    for resource in served:
        if "create" not in resource.verbs or "get" not in resource.verbs:
            continue
        paths.update(_paths(resource))
        schemas[_schema_name(resource)] = _kind_schema(resource)
    major, minor, patch = discovery.KUBERNETES_VERSION
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": f"v{major}.{minor}.{patch}"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def root(registry: resources.Registry) -> dict[str, typing.Any]:
    """``/openapi/v3``: each group/version's document URL, with a content hash."""
    paths: dict[str, dict[str, str]] = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            doc = document(registry, group, version)
            if doc is None:
                continue
            digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64]
            segment = _segment(group, version)
            paths[segment] = {"serverRelativeURL": f"/openapi/v3/{segment}?hash={digest.upper()}"}
    return {"paths": paths}
