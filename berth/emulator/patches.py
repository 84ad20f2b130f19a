"""Patches: JSON merge (RFC 7386), JSON patch (RFC 6902), strategic merge, and apply.

Pure functions over JSON values; they never change their inputs. A patch that cannot apply
raises :class:`PatchError`, which the REST layer answers with 422 (as the API server does for a
failed JSON-patch ``test``, which is how kopf detects a stale object).

Strategic merge knows the list keys of the built-in kinds (:func:`merge_key`): containers,
volumes, env and the like merge by ``name``, conditions by ``type``, container ports by
``containerPort`` and service ports by ``port``; lists without a key (tolerations, args) are
replaced whole, and ``metadata.finalizers`` is a set union. The ``$patch``, ``$retainKeys``,
``$setElementOrder/`` and ``$deleteFromPrimitiveList/`` directives that kubectl sends are obeyed.
Server-side apply is treated as a merge patch (no field ownership), creating the object if needed.
"""

from __future__ import annotations

import copy
import typing

__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "APPLY_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "PatchError",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
    "merge_key",
]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

Json = typing.Any


class PatchError(ValueError):
    """A patch that does not apply to the object (a failed ``test``, a missing path, ...)."""


# ----- JSON merge patch ---------------------------------------------------------------------


def apply_merge_patch(target: Json, patch: Json) -> Json:
    """RFC 7386: maps merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


# ----- JSON patch -----------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}: must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Json], token: str, *, adding: bool) -> int:
    if adding and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r}")
    index = int(token)
    if index > len(container) or (not adding and index == len(container)):
        raise PatchError(f"array index {index} out of bounds")
    return index


def _parent(document: Json, tokens: list[str], path: str) -> dict[str, Json] | list[Json]:
    """The map or list that holds the last token of ``path`` (which must be one of them)."""
    node = document
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, adding=False)]
        else:
            raise PatchError(f"doc is missing path: {path!r}")
    if not isinstance(node, dict | list):
        raise PatchError(f"doc is missing path: {path!r}")
    return node


def _get(document: Json, path: str) -> Json:
    tokens = _pointer(path)
    if not tokens:
        return document
    parent, last = _parent(document, tokens, path), tokens[-1]
    if isinstance(parent, list):
        return parent[_index(parent, last, adding=False)]
    if last not in parent:
        raise PatchError(f"doc is missing path: {path!r}")
    return parent[last]


def _add(document: Json, path: str, value: Json) -> Json:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent, last = _parent(document, tokens, path), tokens[-1]
    if isinstance(parent, list):
        parent.insert(_index(parent, last, adding=True), value)
    else:
        parent[last] = value
    return document


def _remove(document: Json, path: str) -> Json:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent, last = _parent(document, tokens, path), tokens[-1]
    if isinstance(parent, list):
        del parent[_index(parent, last, adding=False)]
    elif last in parent:
        del parent[last]
    else:
        raise PatchError(f"unable to remove nonexistent key: {last}: missing value")
    return document


def apply_json_patch(target: Json, operations: Json) -> Json:
    """RFC 6902 on a copy of ``target``; a failed ``test`` raises :class:`PatchError`."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    document = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or not isinstance(operation.get("path"), str):
            raise PatchError(f"invalid JSON patch operation: {operation!r}")
        op, path = operation.get("op"), operation["path"]
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError(f"operation {op!r} is missing its value")
        if op == "add":
            document = _add(document, path, copy.deepcopy(operation["value"]))
        elif op == "remove":
            document = _remove(document, path)
        elif op == "replace":
            _get(document, path)
            document = _add(_remove(document, path), path, copy.deepcopy(operation["value"]))
        elif op == "test":
            actual = _get(document, path)
            if actual != operation["value"] or type(actual) is not type(operation["value"]):
                raise PatchError(
                    f"testing value {path} failed: expected {operation['value']!r}, "
                    f"found {actual!r}"
                )
        elif op in ("move", "copy"):
            source = operation.get("from")
            if not isinstance(source, str):
                raise PatchError(f"operation {op!r} is missing 'from'")
            value = copy.deepcopy(_get(document, source))
            if op == "move":
                document = _remove(document, source)
            document = _add(document, path, value)
        else:
            raise PatchError(f"unexpected JSON patch operation {op!r}")
    return document


# ----- strategic merge patch ----------------------------------------------------------------

_BY_NAME = frozenset(
    {
        "containers",
        "initContainers",
        "ephemeralContainers",
        "env",
        "volumes",
        "imagePullSecrets",
        "schedulingGates",
        "resourceClaims",
    }
)
_SETS = frozenset({"finalizers"})  # primitive lists merged as sets


def merge_key(field: str, *, parent: str) -> str | None:
    """The key a built-in list merges by, or None when the list is replaced whole."""
    if field in _BY_NAME:
        return "name"
    if field == "conditions":
        return "type"
    if field == "ports":
        container = parent in ("containers", "initContainers", "ephemeralContainers")
        return "containerPort" if container else "port"
    return {
        "volumeMounts": "mountPath",
        "volumeDevices": "devicePath",
        "ownerReferences": "uid",
        "addresses": "type",
        "hostAliases": "ip",
        "topologySpreadConstraints": "topologyKey",
    }.get(field)


def apply_strategic_merge_patch(target: Json, patch: Json) -> Json:
    """Strategic merge of ``patch`` into ``target`` with the built-in kinds' list keys."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    return _merge_map(target if isinstance(target, dict) else {}, patch, parent="")


def _merge_map(target: dict[str, Json], patch: dict[str, Json], *, parent: str) -> Json:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    body = {k: v for k, v in patch.items() if k != "$patch"}
    if directive == "replace":
        return _strip_directives(body)
    result = dict(target)
    retain = body.pop("$retainKeys", None)
    for key, value in body.items():
        if key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            merged = _merge_map(current if isinstance(current, dict) else {}, value, parent=key)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, field=key, parent=parent)
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(target: Json, patch: list[Json], *, field: str, parent: str) -> list[Json]:
    current = target if isinstance(target, list) else []
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [_strip_directives(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    if field in _SETS:
        return list(current) + [v for v in patch if v not in current]
    key = merge_key(field, parent=parent)
    if key is None or not all(isinstance(p, dict) for p in patch):
        return [_strip_directives(p) for p in patch]
    result = list(current)
    for item in patch:
        position = next(
            (
                i
                for i, c in enumerate(result)
                if isinstance(c, dict) and c.get(key) == item.get(key)
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if position is not None:
                del result[position]
            continue
        if position is None:
            result.append(_strip_directives(item))
        else:
            result[position] = _merge_map(result[position], item, parent=field)
    return result


def _strip_directives(value: Json) -> Json:
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if not k.startswith("$") and v is not None
        }
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
