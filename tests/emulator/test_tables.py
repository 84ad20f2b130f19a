"""Server-side printing: JSONPath for printer columns, ages, and the Table objects.

We test these aspects:
- the JSONPath subset (fields, quoted keys, indexes, slices, wildcards, recursion, filters);
- ``HumanDuration`` ages at each of its boundaries;
- CRD printer columns (condition filter, integer, date as age, missing as null), the default
  Age column, pod, node and Job columns (kube-apiserver's: status from the conditions,
  completions, duration, the template's containers and images, the selector), ``includeObject``
  and ``-o wide`` priorities.
"""

from __future__ import annotations

import typing

import pytest

from berth.emulator import jsonpaths, resources, tables

DOC = {
    "metadata": {"name": "x", "labels": {"app.kubernetes.io/name": "web", "a.b": "c"}},
    "status": {
        "conditions": [
            {"type": "Ready", "status": "True", "n": 2},
            {"type": "Done", "status": "False", "n": 5},
        ]
    },
    "spec": {"items": [1, 2, 3]},
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".metadata.name", ["x"]),
        ("{.metadata.name}", ["x"]),
        (".metadata.labels['app.kubernetes.io/name']", ["web"]),
        (".metadata.labels.a\\.b", ["c"]),
        (".spec.items[0]", [1]),
        (".spec.items[-1]", [3]),
        (".spec.items[0:2]", [1, 2]),
        (".spec.items[*]", [1, 2, 3]),
        ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
        (".status.conditions[?(@.n > 3)].type", ["Done"]),
        (".status.conditions[?(@.missing)].type", []),
        ("..type", ["Ready", "Done"]),
        (".nope.deeper", []),
    ],
    ids=[
        "field",
        "braces",
        "quoted-key",
        "escaped-dots",
        "index",
        "negative-index",
        "slice",
        "wildcard",
        "filter-equals",
        "filter-greater",
        "filter-exists",
        "recursive",
        "missing",
    ],
)
def test_jsonpath(path: str, expected: list[typing.Any]) -> None:
    assert jsonpaths.find(DOC, jsonpaths.compile_path(path)) == expected


@pytest.mark.parametrize(
    "path",
    [".a[", ".a[?(@.x=)]", ".a[foo bar]", "!x"],
    ids=["unterminated", "bad-filter", "bad-bracket", "bad-start"],
)
def test_bad_jsonpath(path: str) -> None:
    with pytest.raises(jsonpaths.JsonPathError):
        jsonpaths.compile_path(path)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (150, "2m30s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (5 * 3600 + 60, "5h1m"),
        (8 * 3600, "8h"),
        (48 * 3600, "2d"),
        (49 * 3600, "2d1h"),
        (8 * 86400, "8d"),
        (2 * 365 * 86400, "2y"),
        (2 * 365 * 86400 + 86400, "2y1d"),
        (9 * 365 * 86400, "9y"),
    ],
    ids=lambda v: str(v),
)
def test_human_duration(seconds: float, text: str) -> None:
    assert tables.human_duration(seconds) == text


WIDGETS = resources.Resource(
    group="test.berth.io",
    version="v1",
    kind="Widget",
    plural="widgets",
    namespaced=True,
    custom=True,
    printer_columns=(
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Wide", "type": "string", "jsonPath": ".spec.size", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ),
)
NOW = 1_767_225_700.0  # 100 s after 2026-01-01T00:00:00Z
WIDGET = {
    "metadata": {"name": "w", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"size": 3},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}


def test_crd_printer_columns() -> None:
    table = tables.render(WIDGETS, [WIDGET, {"metadata": {"name": "bare"}}], now=NOW)
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Ready",
        "Size",
        "Wide",
        "Age",
    ]
    assert [c["priority"] for c in table["columnDefinitions"]] == [0, 0, 0, 1, 0]
    assert table["rows"][0]["cells"] == ["w", "True", 3, "3", "100s"]
    assert table["rows"][1]["cells"] == ["bare", None, None, None, None]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_default_age_column_and_include_object() -> None:
    bare = resources.Resource(
        group="g.io", version="v1", kind="Thing", plural="things", namespaced=True, custom=True
    )
    table = tables.render(bare, [WIDGET], now=NOW, include_object="Object")
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Age"]
    assert table["rows"][0] == {"cells": ["w", "100s"], "object": WIDGET}
    assert (
        tables.render(bare, [WIDGET], now=NOW, include_object="None")["rows"][0]["object"] is None
    )


@pytest.mark.parametrize(
    ("pod", "status", "ready"),
    [
        ({"status": {"phase": "Pending"}}, "Pending", "0/1"),
        (
            {"status": {"phase": "Running", "containerStatuses": [{"ready": True}]}},
            "Running",
            "1/1",
        ),
        ({"status": {"phase": "Succeeded"}}, "Completed", "0/1"),
        (
            {
                "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
                "status": {"phase": "Running"},
            },
            "Terminating",
            "0/1",
        ),
        (
            {"spec": {"schedulingGates": [{"name": "g"}]}, "status": {"phase": "Pending"}},
            "SchedulingGated",
            "0/1",
        ),
        (
            {
                "status": {
                    "phase": "Pending",
                    "containerStatuses": [
                        {"ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}
                    ],
                }
            },
            "ContainerCreating",
            "0/1",
        ),
    ],
    ids=["pending", "running", "completed", "terminating", "gated", "waiting-reason"],
)
def test_pod_columns(pod: dict[str, typing.Any], status: str, ready: str) -> None:
    pods = resources.Resource(group="", version="v1", kind="Pod", plural="pods", namespaced=True)
    obj = {
        "metadata": {"name": "p", **pod.get("metadata", {})},
        "spec": {"containers": [{"name": "c"}], **pod.get("spec", {})},
        "status": pod["status"],
    }
    cells = tables.render(pods, [obj], now=NOW)["rows"][0]["cells"]
    assert cells[:4] == ["p", ready, status, 0]


JOBS = resources.Resource(group="batch", version="v1", kind="Job", plural="jobs", namespaced=True)
_TEMPLATE = {"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y"}]}}


@pytest.mark.parametrize(
    ("job", "cells"),
    [
        (
            {"spec": {"completions": 4, "parallelism": 2}, "status": {"succeeded": 1,
             "startTime": "2026-01-01T00:00:10Z"}},
            ["Running", "1/4", "90s"],
        ),
        (
            {"spec": {"parallelism": 3}, "status": {"startTime": "2026-01-01T00:00:00Z",
             "completionTime": "2026-01-01T00:00:40Z", "succeeded": 1,
             "conditions": [{"type": "Complete", "status": "True"}]}},
            ["Complete", "1/1 of 3", "40s"],
        ),
        (
            {"spec": {"completions": 1}, "status": {"conditions": [
                {"type": "Suspended", "status": "True"}]}},
            ["Suspended", "0/1", ""],
        ),
        (
            {"spec": {}, "status": {"conditions": [{"type": "Failed", "status": "True"},
             {"type": "FailureTarget", "status": "True"}]}},
            ["Failed", "0/1", ""],
        ),
    ],
    ids=["running", "complete-parallel", "suspended", "failed"],
)  # fmt: skip
def test_job_columns(job: dict[str, typing.Any], cells: list[str]) -> None:
    obj = {
        "metadata": {"name": "j", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            **job["spec"],
            "template": _TEMPLATE,
            "selector": {
                "matchLabels": {"b": "2", "a": "1"},
                "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]}],
            },
        },
        "status": job["status"],
    }
    table = tables.render(JOBS, [obj], now=NOW)
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector",
    ]  # fmt: skip
    assert table["rows"][0]["cells"] == [
        "j", *cells, "100s", "a,b", "x:1,y", "a=1,b=2,c in (x,y)",
    ]  # fmt: skip
