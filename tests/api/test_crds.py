"""The rendered CRDs: names, scope, subresources, printer columns, and a structural schema.

We test these aspects:
- names, short names, category, scope, status subresource of each kind;
- printer columns in the order the issue lists, with valid JSONPaths;
- the schema is structural: no ``$ref``/``$defs``/``allOf``/``oneOf``/``title``/``const``,
  ``anyOf`` only for int-or-string, a ``type`` on every node, descriptions on every field;
- defaults and enums the models declare appear; unknown-key preservation is where the pod
  template allows unknown keys; rules compile with cel-python.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import cel, crds, keys

Schema = dict[str, typing.Any]
RENDERED = {d.kind: crds.render(d) for d in crds.DEFINITIONS}


def _version(kind: str) -> dict[str, typing.Any]:
    version: dict[str, typing.Any] = RENDERED[kind]["spec"]["versions"][0]
    return version


def _schema(kind: str) -> Schema:
    schema: Schema = _version(kind)["schema"]["openAPIV3Schema"]
    return schema


def _at(schema: Schema, path: str) -> Schema:
    node = schema
    for part in path.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def _nodes(schema: Schema, path: str = "") -> typing.Iterator[tuple[str, Schema]]:
    yield path, schema
    for name, child in (schema.get("properties") or {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}[*]")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}[]")


@pytest.mark.parametrize(
    ("kind", "plural", "short", "scope"),
    [
        ("Queue", "queues", "bq", "Cluster"),
        ("PodGroup", "podgroups", "bpg", "Namespaced"),
        ("Reservation", "reservations", "resv", "Namespaced"),
    ],
    ids=["queue", "podgroup", "reservation"],
)
def test_names_and_scope(kind: str, plural: str, short: str, scope: str) -> None:
    crd = RENDERED[kind]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{plural}.{keys.GROUP}"
    assert crd["spec"]["group"] == keys.GROUP
    assert crd["spec"]["scope"] == scope
    assert crd["spec"]["names"] == {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
        "shortNames": [short],
        "categories": ["berth"],
    }
    version = _version(kind)
    assert (version["name"], version["served"], version["storage"]) == (keys.VERSION, True, True)
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize(
    ("kind", "columns"),
    [
        (
            "Queue",
            [
                "State",
                "Parent",
                "Guaranteed",
                "Allocated",
                "FairShare",
                "Pending",
                "Running",
                "Reason",
                "Weight",
                "Priority",
                "Limit",
                "PendingGroups",
                "RunningGroups",
                "Age",
            ],
        ),
        (
            "PodGroup",
            [
                "Phase",
                "Queue",
                "MinMember",
                "Running",
                "Reason",
                "Position",
                "Waiting",
                "Message",
                "Age",
            ],
        ),
        ("Reservation", ["Phase", "Node", "Owner", "Expires", "Age"]),
    ],
    ids=["queue", "podgroup", "reservation"],
)
def test_printer_columns(kind: str, columns: list[str]) -> None:
    rendered = _version(kind)["additionalPrinterColumns"]
    assert [c["name"] for c in rendered] == columns
    for column in rendered:
        assert column["jsonPath"].startswith(".")
        assert column["type"] in {"string", "integer", "number", "boolean", "date"}
        assert column["description"]
    assert rendered[-1] == {
        "name": "Age",
        "type": "date",
        "jsonPath": ".metadata.creationTimestamp",
        "description": "Time since creation.",
    }


def test_pod_group_reason_column_reads_the_scheduled_condition() -> None:
    (reason,) = [
        c for c in _version("PodGroup")["additionalPrinterColumns"] if c["name"] == "Reason"
    ]
    assert reason["jsonPath"] == '.status.conditions[?(@.type=="Scheduled")].reason'


@pytest.mark.parametrize("kind", sorted(RENDERED), ids=str.lower)
def test_schema_is_structural(kind: str) -> None:
    forbidden = {"$ref", "$defs", "allOf", "oneOf", "not", "title", "const", "nullable"}
    for path, node in _nodes(_schema(kind)):
        assert not forbidden & set(node), (path, forbidden & set(node))
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string") is True, path
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            assert "type" not in node, path
        else:
            assert node.get("type") in {
                "object",
                "array",
                "string",
                "integer",
                "number",
                "boolean",
            }, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("type") == "array":
            assert "items" in node, path


@pytest.mark.parametrize("kind", sorted(RENDERED), ids=str.lower)
def test_every_field_has_a_description(kind: str) -> None:
    schema = _schema(kind)
    undescribed = [
        path
        for path, node in _nodes(schema)
        if path
        and not path.endswith("[*]")
        and not path.startswith(".metadata")
        and not node.get("description")
        and not path.endswith("[]")
    ]
    assert undescribed == []
    assert "``" not in str(schema), "Sphinx markup is stripped for kubectl explain"


def test_metadata_is_left_to_the_api_server() -> None:
    for kind in RENDERED:
        assert _schema(kind)["properties"]["metadata"] == {"type": "object"}


@pytest.mark.parametrize(
    ("kind", "path", "default"),
    [
        ("Queue", "spec", {}),
        ("Queue", "spec.weight", 1),
        ("Queue", "spec.priority", 0),
        ("Queue", "spec.reclaimable", True),
        ("Queue", "spec.state", "Open"),
        ("PodGroup", "spec", {}),
        ("PodGroup", "spec.minMember", 1),
        ("PodGroup", "spec.queue", "default"),
        ("PodGroup", "status.phase", "Pending"),
        ("Reservation", "spec.allocateOnce", True),
        ("Reservation", "spec.unschedulable", False),
    ],
    ids=lambda v: str(v),
)
def test_defaults(kind: str, path: str, default: object) -> None:
    assert _at(_schema(kind), path)["default"] == default


def test_ttl_has_no_schema_default_because_expires_excludes_it() -> None:
    # A defaulted ttl would make every object that sets expires break the ttl/expires rule.
    ttl = _at(_schema("Reservation"), "spec.ttl")
    assert "default" not in ttl
    assert "24h" in ttl["description"]
    assert "pattern" in ttl


@pytest.mark.parametrize(
    ("kind", "path", "values"),
    [
        ("Queue", "spec.state", ["Open", "Closed"]),
        (
            "PodGroup",
            "status.phase",
            ["Pending", "Inqueue", "Scheduled", "Running", "Finished", "Failed"],
        ),
        ("Reservation", "status.phase", ["Pending", "Available", "Succeeded", "Expired", "Failed"]),
        ("PodGroup", "status.conditions.[].status", ["True", "False", "Unknown"]),
    ],
    ids=["queue-state", "podgroup-phase", "reservation-phase", "condition-status"],
)
def test_enums(kind: str, path: str, values: list[str]) -> None:
    assert _at(_schema(kind), path)["enum"] == values


@pytest.mark.parametrize(
    ("path", "preserved"),
    [
        ("spec.template.spec", True),
        ("spec.template.spec.containers.[]", True),
        ("spec.template.spec.affinity", True),
        ("spec.template.metadata", True),
        ("spec", False),
        ("spec.owners.[]", False),
        ("spec.template.spec.affinity.nodeAffinity", False),
    ],
    ids=lambda v: str(v),
)
def test_unknown_keys_are_preserved_only_in_the_pod_template(path: str, preserved: bool) -> None:
    node = _at(_schema("Reservation"), path)
    assert node.get("x-kubernetes-preserve-unknown-fields", False) is preserved


def test_quantities_are_int_or_string_with_the_api_pattern() -> None:
    value = _at(_schema("Queue"), "spec.guaranteed")["additionalProperties"]
    assert value["x-kubernetes-int-or-string"] is True
    assert value["pattern"].startswith("^")
    assert value["maxLength"] > 0


@pytest.mark.parametrize("kind", sorted(RENDERED), ids=str.lower)
def test_every_rule_compiles_and_has_a_message(kind: str) -> None:
    validator = cel.crd_validator(RENDERED[kind])
    assert validator.rules
    for rule in validator.rules:
        assert list(rule)[:2] == ["rule", "message"]
        assert rule["message"]


def test_a_union_that_is_not_int_or_string_is_refused() -> None:

    from berth.api import meta

    class Bad(meta.ApiModel):
        value: int | str

    with pytest.raises(crds.RenderError, match="union"):
        crds.structural_schema(Bad)
