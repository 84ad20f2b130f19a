"""YAML with positions: where each value of a scenario file was written.

We test these aspects:
- every path of a document maps to the line and column of its key (or item);
- a path that is not in the document resolves to its nearest written ancestor;
- paths are formatted as ``spec.workloads[2].requests.cpu``, odd keys quoted in brackets;
- duplicate keys and YAML syntax errors are issues with a line.
"""

from __future__ import annotations

import pytest

from berth.sim import errors, locations

TEXT = """\
spec:
  workloads:
    - name: a
      requests: {cpu: "1"}
    - name: b
      requests:
        nvidia.com/gpu: "2"
"""


@pytest.mark.parametrize(
    ("path", "line", "column"),
    [
        ((), 1, 1),
        (("spec",), 1, 1),
        (("spec", "workloads"), 2, 3),
        (("spec", "workloads", 0), 3, 7),
        (("spec", "workloads", 0, "requests", "cpu"), 4, 18),
        (("spec", "workloads", 1, "requests", "nvidia.com/gpu"), 7, 9),
        (("spec", "workloads", 1, "duration"), 5, 7),  # missing: its mapping
        (("spec", "workloads", 7, "name"), 2, 3),  # no such item: the list
    ],
    ids=["root", "key", "nested-key", "item", "flow-mapping", "slash-key", "missing", "no-item"],
)
def test_paths_resolve_to_where_they_were_written(
    path: tuple[str | int, ...], line: int, column: int
) -> None:
    _, locator = locations.load(TEXT)
    assert locator.locate(path) == locations.Position(line=line, column=column)


def test_load_returns_the_plain_data() -> None:
    data, _ = locations.load(TEXT)
    assert data["spec"]["workloads"][1]["requests"] == {"nvidia.com/gpu": "2"}


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (("spec", "workloads", 2, "requests", "cpu"), "spec.workloads[2].requests.cpu"),
        (("requests", "nvidia.com/gpu"), 'requests["nvidia.com/gpu"]'),
        ((0, "a"), "[0].a"),
        ((), ""),
    ],
    ids=["dotted", "quoted", "leading-index", "empty"],
)
def test_paths_are_formatted_for_humans(path: tuple[str | int, ...], text: str) -> None:
    assert locations.format_path(path) == text


def test_duplicate_keys_are_issues_with_their_line() -> None:
    with pytest.raises(errors.ScenarioError) as info:
        locations.load("spec:\n  seed: 1\n  seed: 2\n")
    (issue,) = info.value.issues
    assert (issue.path, issue.line, issue.column) == ("spec.seed", 3, 3)
    assert "duplicate key" in issue.message


def test_syntax_errors_are_issues_with_their_line() -> None:
    with pytest.raises(errors.ScenarioError) as info:
        locations.load("spec:\n  nodes: [1, 2\n")
    (issue,) = info.value.issues
    assert issue.line == 3
    assert issue.message.startswith("not valid YAML")


def test_an_empty_document_is_none() -> None:
    data, locator = locations.load("")
    assert data is None
    assert locator.locate(("spec",)) is None
