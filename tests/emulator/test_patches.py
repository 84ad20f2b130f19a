"""Patches: JSON merge, JSON patch and strategic merge, as pure functions.

We test these aspects:
- merge patch: nested merge, ``null`` deletes, lists replace;
- JSON patch: add/remove/replace/move/copy/test, ``-`` appends, escaped pointers, and failures
  (a failed ``test``, a missing path) raise PatchError;
- strategic merge: containers merge by name, conditions by type, container ports by
  containerPort, tolerations replace, finalizers union; ``$patch: delete``/``replace``,
  ``$retainKeys``, ``$deleteFromPrimitiveList``, ``$setElementOrder`` are obeyed;
- inputs are never changed.
"""

from __future__ import annotations

import copy
import typing

import pytest

from berth.emulator import patches

Json = typing.Any


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": {"b": 1, "c": 2}}, {"a": {"b": 3}}, {"a": {"b": 3, "c": 2}}),
        ({"a": 1, "b": 2}, {"a": None}, {"b": 2}),
        ({"l": [1, 2]}, {"l": [3]}, {"l": [3]}),
        ({"a": 1}, {"b": {"c": None}}, {"a": 1, "b": {}}),
    ],
    ids=["nested", "null-deletes", "lists-replace", "null-inside-new-map"],
)
def test_merge_patch(target: Json, patch: Json, expected: Json) -> None:
    before = copy.deepcopy(target)
    assert patches.apply_merge_patch(target, patch) == expected
    assert target == before


@pytest.mark.parametrize(
    ("operations", "expected"),
    [
        ([{"op": "add", "path": "/l/-", "value": 9}], {"a": {"b~c/d": 1}, "l": [1, 2, 9]}),
        ([{"op": "add", "path": "/l/0", "value": 0}], {"a": {"b~c/d": 1}, "l": [0, 1, 2]}),
        ([{"op": "remove", "path": "/a/b~0c~1d"}], {"a": {}, "l": [1, 2]}),
        ([{"op": "replace", "path": "/l/1", "value": 5}], {"a": {"b~c/d": 1}, "l": [1, 5]}),
        ([{"op": "move", "from": "/l", "path": "/m"}], {"a": {"b~c/d": 1}, "m": [1, 2]}),
        ([{"op": "copy", "from": "/l/0", "path": "/x"}], {"a": {"b~c/d": 1}, "l": [1, 2], "x": 1}),
        ([{"op": "test", "path": "/l", "value": [1, 2]}], {"a": {"b~c/d": 1}, "l": [1, 2]}),
    ],
    ids=["append", "insert", "remove-escaped", "replace", "move", "copy", "test-passes"],
)
def test_json_patch(operations: Json, expected: Json) -> None:
    target = {"a": {"b~c/d": 1}, "l": [1, 2]}
    assert patches.apply_json_patch(target, operations) == expected
    assert target == {"a": {"b~c/d": 1}, "l": [1, 2]}


@pytest.mark.parametrize(
    "operations",
    [
        [{"op": "test", "path": "/a", "value": 2}],
        [{"op": "test", "path": "/a", "value": True}],
        [{"op": "remove", "path": "/nope"}],
        [{"op": "replace", "path": "/l/5", "value": 1}],
        [{"op": "add", "path": "/x/y", "value": 1}],
        [{"op": "frobnicate", "path": "/a"}],
        {"op": "add"},
    ],
    ids=[
        "test-fails",
        "test-type-differs",
        "remove-missing",
        "index-out-of-range",
        "missing-parent",
        "unknown-op",
        "not-a-list",
    ],
)
def test_json_patch_failures(operations: Json) -> None:
    with pytest.raises(patches.PatchError):
        patches.apply_json_patch({"a": 1, "l": [1]}, operations)


POD = {
    "metadata": {"finalizers": ["a"]},
    "spec": {
        "containers": [
            {"name": "main", "image": "v1", "ports": [{"containerPort": 80, "name": "http"}]},
            {"name": "side", "image": "s1"},
        ],
        "tolerations": [{"key": "a"}, {"key": "b"}],
    },
    "status": {
        "conditions": [{"type": "Ready", "status": "False"}, {"type": "Init", "status": "True"}]
    },
}


@pytest.mark.parametrize(
    ("patch", "check"),
    [
        (
            {"spec": {"containers": [{"name": "main", "image": "v2"}]}},
            lambda r: [c["image"] for c in r["spec"]["containers"]] == ["v2", "s1"],
        ),
        (
            {"spec": {"containers": [{"name": "new", "image": "n"}]}},
            lambda r: [c["name"] for c in r["spec"]["containers"]] == ["main", "side", "new"],
        ),
        (
            {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}},
            lambda r: [c["name"] for c in r["spec"]["containers"]] == ["main"],
        ),
        (
            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            lambda r: (
                r["status"]["conditions"][0] == {"type": "Ready", "status": "True"}
                and len(r["status"]["conditions"]) == 2
            ),
        ),
        (
            {
                "spec": {
                    "containers": [
                        {"name": "main", "ports": [{"containerPort": 80, "protocol": "TCP"}]}
                    ]
                }
            },
            lambda r: (
                r["spec"]["containers"][0]["ports"]
                == [{"containerPort": 80, "name": "http", "protocol": "TCP"}]
            ),
        ),
        (
            {"spec": {"tolerations": [{"key": "c"}]}},
            lambda r: r["spec"]["tolerations"] == [{"key": "c"}],
        ),
        (
            {"metadata": {"finalizers": ["b", "a"]}},
            lambda r: r["metadata"]["finalizers"] == ["a", "b"],
        ),
        (
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}},
            lambda r: r["metadata"]["finalizers"] == [],
        ),
        (
            {"spec": {"$patch": "replace", "containers": []}},
            lambda r: r["spec"] == {"containers": []},
        ),
        (
            {"spec": {"$retainKeys": ["containers"], "containers": []}},
            lambda r: set(r["spec"]) == {"containers"},
        ),
        (
            {"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "main"}]}},
            lambda r: len(r["spec"]["containers"]) == 2,
        ),
        ({"status": None}, lambda r: "status" not in r),
    ],
    ids=[
        "merge-by-name",
        "append-by-name",
        "delete-directive",
        "conditions-by-type",
        "ports-by-container-port",
        "tolerations-replace",
        "finalizers-union",
        "delete-from-primitive-list",
        "replace-directive",
        "retain-keys",
        "set-element-order",
        "null-deletes",
    ],
)
def test_strategic_merge(patch: Json, check: typing.Callable[[Json], bool]) -> None:
    before = copy.deepcopy(POD)
    assert check(patches.apply_strategic_merge_patch(POD, patch))
    assert before == POD


def test_merge_keys_depend_on_the_parent() -> None:
    assert patches.merge_key("ports", parent="containers") == "containerPort"
    assert patches.merge_key("ports", parent="spec") == "port"
    assert patches.merge_key("tolerations", parent="spec") is None
