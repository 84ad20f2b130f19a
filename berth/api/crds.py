"""Rendering the three CustomResourceDefinitions (``apiextensions.k8s.io/v1``) from the models.

The models are the single source: their JSON schema (pydantic) becomes a *structural*
``openAPIV3Schema`` -- every ``$ref`` inlined, optional fields' ``anyOf [X, null]`` collapsed to
``X``, a ``type`` on every node (quantities stay int-or-string), attribute docstrings as
descriptions, defaults, enums, patterns and bounds kept, ``x-kubernetes-preserve-unknown-fields``
where a model keeps unknown keys, and the CEL rules the models declare
(:mod:`berth.api.rules`). :func:`render_all` adds names, scope, the status subresource and the
printer columns. ``berth crds`` writes the result to ``crds/`` and ``--check`` compares; the
emulator registers the same dicts.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import pathlib
import typing

import pydantic
import yaml

from berth.api import (
    apiextensions,
    errors,
    keys,
    meta,
    podgroups,
    queues,
    reservations,
    rules,
    schemas,
)

__all__ = [
    "CATEGORY",
    "CRD_API_VERSION",
    "DEFINITIONS",
    "Definition",
    "PrinterColumn",
    "RenderError",
    "check",
    "dump",
    "render",
    "render_all",
    "structural_schema",
    "write",
]

CRD_API_VERSION = apiextensions.API_VERSION
CATEGORY = "berth"
"""The category of every Berth CRD: ``kubectl get berth`` lists them all."""

_INT_OR_STRING: typing.Final = "x-kubernetes-int-or-string"
_PRESERVE: typing.Final = "x-kubernetes-preserve-unknown-fields"
# Keys of a JSON schema node that a structural schema keeps as they are.
_KEPT = (
    "type",
    "format",
    "description",
    "default",
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "maxProperties",
    _INT_OR_STRING,
    rules.KEY,
)


# The order of keys in a rendered schema node: what it is first, then what it holds.
_ORDER = (
    "type",
    "description",
    "format",
    "enum",
    "default",
    "pattern",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "maxProperties",
    _INT_OR_STRING,
    "anyOf",
    _PRESERVE,
    "required",
    "properties",
    "additionalProperties",
    "items",
    rules.KEY,
)


class RenderError(errors.ApiError):
    """A model whose schema cannot be made structural (a bug in the model, not in input)."""


@dataclasses.dataclass(frozen=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry: what ``kubectl get`` shows."""

    name: str
    type: typing.Literal["string", "integer", "number", "boolean", "date"]
    json_path: str
    description: str
    priority: int = 0

    def to_api(self) -> apiextensions.CustomResourceColumnDefinition:
        out: apiextensions.CustomResourceColumnDefinition = {
            "name": self.name,
            "type": self.type,
            "jsonPath": self.json_path,
            "description": self.description,
        }
        if self.priority:
            out["priority"] = self.priority
        return out


_AGE = PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation.")


@dataclasses.dataclass(frozen=True)
class Definition:
    """What a CRD needs beyond the model: its names, scope and printer columns."""

    model: type[meta.ApiModel]
    kind: str
    plural: str
    short_names: tuple[str, ...]
    scope: typing.Literal["Namespaced", "Cluster"]
    columns: tuple[PrinterColumn, ...]

    @property
    def name(self) -> str:
        """The CRD's name, ``<plural>.<group>``."""
        return f"{self.plural}.{keys.GROUP}"

    @property
    def filename(self) -> str:
        """The file under ``crds/`` that holds it."""
        return f"{self.plural}.yaml"


DEFINITIONS: tuple[Definition, ...] = (
    Definition(
        model=queues.Queue,
        kind=queues.KIND,
        plural=queues.PLURAL,
        short_names=("bq",),
        scope="Cluster",
        columns=(
            PrinterColumn("State", "string", ".status.state", "Open, Closed or Invalid."),
            PrinterColumn("Parent", "string", ".spec.parent", "The parent queue."),
            PrinterColumn(
                "Guaranteed", "string", ".status.summary.guaranteed", "Guaranteed resources."
            ),
            PrinterColumn("Allocated", "string", ".status.summary.allocated", "Resources in use."),
            PrinterColumn(
                "FairShare", "string", ".status.summary.fairShare", "What it is entitled to now."
            ),
            PrinterColumn("Pending", "integer", ".status.pendingPods", "Pods waiting."),
            PrinterColumn("Running", "integer", ".status.runningPods", "Pods placed."),
            PrinterColumn("Reason", "string", ".status.stateReason", "Why Closed or Invalid."),
            PrinterColumn("Weight", "integer", ".spec.weight", "Share above guarantees.", 1),
            PrinterColumn("Priority", "integer", ".spec.priority", "Served first if higher.", 1),
            PrinterColumn("Limit", "string", ".status.summary.limit", "Hard cap.", 1),
            PrinterColumn("PendingGroups", "integer", ".status.pending", "PodGroups waiting.", 1),
            PrinterColumn("RunningGroups", "integer", ".status.running", "PodGroups running.", 1),
            _AGE,
        ),
    ),
    Definition(
        model=podgroups.PodGroup,
        kind=podgroups.KIND,
        plural=podgroups.PLURAL,
        short_names=("bpg",),
        scope="Namespaced",
        columns=(
            PrinterColumn("Phase", "string", ".status.phase", "Where the group is in its life."),
            PrinterColumn("Queue", "string", ".spec.queue", "The queue the group is charged to."),
            PrinterColumn("MinMember", "integer", ".spec.minMember", "Pods placed together."),
            PrinterColumn("Running", "integer", ".status.running", "Pods running."),
            PrinterColumn(
                "Reason",
                "string",
                f'.status.conditions[?(@.type=="{podgroups.CONDITION_SCHEDULED}")].reason',
                "Why the group waits (or that it was scheduled).",
            ),
            PrinterColumn(
                "Position", "integer", ".status.queuePosition", "Place among its queue's waiting."
            ),
            PrinterColumn(
                "Waiting", "integer", ".status.queuePending", "Groups waiting in its queue.", 1
            ),
            PrinterColumn(
                "Message",
                "string",
                f'.status.conditions[?(@.type=="{podgroups.CONDITION_SCHEDULED}")].message',
                "The scheduler's full explanation.",
                1,
            ),
            _AGE,
        ),
    ),
    Definition(
        model=reservations.Reservation,
        kind=reservations.KIND,
        plural=reservations.PLURAL,
        short_names=("resv",),
        scope="Namespaced",
        columns=(
            PrinterColumn("Phase", "string", ".status.phase", "Where the reservation is."),
            PrinterColumn("Node", "string", ".status.nodeName", "Node holding the capacity."),
            PrinterColumn("Owner", "string", ".status.ownerSelector", "Who may use the capacity."),
            # A string, not a date: kubectl shows future dates as "<invalid>".
            PrinterColumn("Expires", "string", ".status.expiresAt", "When it expires."),
            _AGE,
        ),
    ),
)
"""The three CRDs, in the order ``berth crds`` writes them."""


def _describe(text: str) -> str:
    # Docstrings are Sphinx prose (``literal``); kubectl explain shows plain text.
    return " ".join(text.replace("``", "").split())


_Definitions = dict[str, schemas.JSONSchemaProps]
"""pydantic's ``$defs``: the schemas a ``$ref`` names, by name."""


def _resolve(node: schemas.JSONSchemaProps, defs: _Definitions) -> schemas.JSONSchemaProps:
    """``node`` with its ``$ref`` replaced by the definition (node's own keys win)."""
    if "$ref" not in node:
        return node.copy()
    ref = node["$ref"]
    name = ref.removeprefix("#/$defs/")
    if name not in defs:
        raise RenderError(f"unresolvable $ref {ref}")
    merged = defs[name].copy()
    rest = node.copy()
    del rest["$ref"]
    merged.update(rest)
    return merged


def _kept(node: schemas.JSONSchemaProps) -> schemas.JSONSchemaProps:
    """A deep copy of the keywords of ``node`` that a structural schema keeps as they are."""
    # Picked from node's own keys by name: the copy is a JSONSchemaProps too.
    return typing.cast(
        schemas.JSONSchemaProps, {k: copy.deepcopy(v) for k, v in node.items() if k in _KEPT}
    )


def _ordered(node: schemas.JSONSchemaProps) -> schemas.JSONSchemaProps:
    """``node`` with its keys in :data:`_ORDER` (what it is first, then what it holds)."""
    # The same keys and values, reordered: still a JSONSchemaProps.
    return typing.cast(
        schemas.JSONSchemaProps, dict(sorted(node.items(), key=lambda kv: _ORDER.index(kv[0])))
    )


def _convert(
    node: schemas.JSONSchemaProps, defs: _Definitions, where: str
) -> schemas.JSONSchemaProps:
    node = _resolve(node, defs)
    if "anyOf" in node and not node.get(_INT_OR_STRING):
        branches = [b for b in node["anyOf"] if b != {"type": "null"}]
        if len(branches) != 1:
            raise RenderError(f"{where}: a union other than int-or-string is not structural")
        outer = node.copy()
        del outer["anyOf"]
        node = _resolve(branches[0], defs)
        node.update(outer)
    out = _kept(node)
    if out.get("default", ...) is None:
        del out["default"]
    if "description" in out:
        out["description"] = _describe(out["description"])
    if node.get(_INT_OR_STRING):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in node:
        out["type"] = "object"
        out["properties"] = {
            name: _convert(child, defs, f"{where}.{name}")
            for name, child in node["properties"].items()
        }
        if node.get("required"):
            out["required"] = list(node["required"])
        if node.get("additionalProperties") is True:
            out[_PRESERVE] = True
    elif isinstance(extra := node.get("additionalProperties"), collections.abc.Mapping):
        out["additionalProperties"] = _convert(extra, defs, f"{where}[*]")
    elif node.get("type") == "object":
        out[_PRESERVE] = True
    if "items" in node:
        out["items"] = _convert(node["items"], defs, f"{where}[*]")
    if "type" not in out and not out.get(_INT_OR_STRING):
        raise RenderError(f"{where}: schema node has no type: {dict(node)}")
    if rules.KEY in out:
        # Spelt in the order people write rules, whatever order the schema generator chose.
        out[rules.KEY] = [_rule_in_order(r) for r in out[rules.KEY]]
    return _ordered(out)


def _rule_in_order(rule: schemas.ValidationRule) -> schemas.ValidationRule:
    """``rule``'s rule, message, fieldPath and reason, in that order."""
    out = schemas.ValidationRule(rule=rule["rule"])
    if "message" in rule:
        out["message"] = rule["message"]
    if "fieldPath" in rule:
        out["fieldPath"] = rule["fieldPath"]
    if "reason" in rule:
        out["reason"] = rule["reason"]
    return out


def structural_schema(model: type[pydantic.BaseModel]) -> schemas.JSONSchemaProps:
    """The structural ``openAPIV3Schema`` of a top-level API model."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    # pydantic's JSON schema of Berth's models uses only keywords JSONSchemaProps names, plus
    # its definitions under "$defs" (JSON Schema 2020-12's name; a CRD's schema has none).
    defs = typing.cast(_Definitions, raw.get("$defs", {}))
    schema = _convert(typing.cast(schemas.JSONSchemaProps, raw), defs, model.__name__)
    properties = schema["properties"]
    # The API server owns apiVersion, kind and metadata; a CRD may only say they are there.
    for name in ("apiVersion", "kind"):
        properties[name] = {"type": "string", "description": properties[name]["description"]}
    properties["metadata"] = {"type": "object"}
    # An omitted spec is defaulted to {} so that the field defaults inside it apply, exactly as
    # the model fills in a spec it was not given.
    spec_field = model.model_fields.get("spec")
    if spec_field is not None and not spec_field.is_required():
        properties["spec"] = _ordered({"default": {}, **properties["spec"]})
    schema["required"] = [name for name in schema.get("required", []) if name == "spec"]
    if not schema["required"]:
        del schema["required"]
    return schema


def render(definition: Definition) -> apiextensions.CustomResourceDefinition:
    """The CustomResourceDefinition of ``definition``."""
    singular = definition.kind.lower()
    return {
        "apiVersion": CRD_API_VERSION,
        "kind": "CustomResourceDefinition",
        "metadata": {"name": definition.name},
        "spec": {
            "group": keys.GROUP,
            "names": {
                "kind": definition.kind,
                "listKind": f"{definition.kind}List",
                "plural": definition.plural,
                "singular": singular,
                "shortNames": list(definition.short_names),
                "categories": [CATEGORY],
            },
            "scope": definition.scope,
            "versions": [
                {
                    "name": keys.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [c.to_api() for c in definition.columns],
                    "schema": {"openAPIV3Schema": structural_schema(definition.model)},
                }
            ],
        },
    }


def render_all() -> dict[str, apiextensions.CustomResourceDefinition]:
    """Every CRD by the file name it is written to (``queues.yaml`` ...)."""
    return {d.filename: render(d) for d in DEFINITIONS}


def dump(crd: apiextensions.CustomResourceDefinition) -> str:
    """YAML text of ``crd``; keys in the order rendered (stable), never reflowed."""
    header = "# Generated by `berth crds` from berth/api; do not edit.\n"
    return header + yaml.safe_dump(
        dict(crd), sort_keys=False, default_flow_style=False, width=1_000_000, allow_unicode=True
    )


def write(directory: pathlib.Path) -> list[pathlib.Path]:
    """Write every CRD into ``directory`` (created if missing); the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, crd in render_all().items():
        path = directory / filename
        path.write_text(dump(crd), encoding="utf-8")
        written.append(path)
    return written


def check(directory: pathlib.Path) -> list[pathlib.Path]:
    """The files in ``directory`` that differ from (or lack) what the models render."""
    return [
        directory / filename
        for filename, crd in render_all().items()
        if not (directory / filename).is_file()
        or (directory / filename).read_text(encoding="utf-8") != dump(crd)
    ]
