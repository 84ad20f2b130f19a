"""YAML with positions: load a document and remember where each value was written.

:func:`load` parses one YAML document into plain Python data *and* a :class:`Locator` mapping
every path in the data (``("spec", "workloads", 2, "requests", "cpu")``) to the line and
column it came from, using the marks of PyYAML's composed node tree. The scenario loader uses
it to turn a validation error's path into ``scenario.yaml:14:9: spec.workloads[2].requests.cpu``.
Duplicate mapping keys, which PyYAML silently collapses, are reported as issues here.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import re
import typing

import yaml

from berth.sim import errors

__all__ = ["Locator", "Path", "Position", "format_path", "load"]

Path = tuple[str | int, ...]

_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclasses.dataclass(frozen=True)
class Position:
    """A place in the source text, 1-based as editors count."""

    line: int
    column: int


class Locator:
    """Where each path of a loaded document was written.

    A path that is not in the document (a required field that is missing, say) resolves to its
    nearest ancestor that is, so every error gets a line.
    """

    def __init__(self, positions: dict[Path, Position]) -> None:
        self._positions = positions

    @classmethod
    def empty(cls) -> Locator:
        """A locator for data that did not come from a file."""
        return cls({})

    def locate(self, path: collections.abc.Sequence[str | int]) -> Position | None:
        """The position of ``path`` or of its nearest written ancestor."""
        probe = tuple(path)
        while True:
            if probe in self._positions:
                return self._positions[probe]
            if not probe:
                return None
            probe = probe[:-1]

    def issue(self, path: collections.abc.Sequence[str | int], message: str) -> errors.Issue:
        """An issue at ``path`` with the position filled in."""
        position = self.locate(path)
        return errors.Issue(
            path=format_path(path),
            message=message,
            line=position.line if position else None,
            column=position.column if position else None,
        )


def format_path(path: collections.abc.Sequence[str | int]) -> str:
    """``spec.workloads[2].requests.cpu``; keys that are not plain words are quoted in brackets
    (``requests["nvidia.com/gpu"]``) so the path stays unambiguous."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out


def load(text: str) -> tuple[typing.Any, Locator]:
    """Parse one YAML document; a syntax error or a duplicate key raises ``ScenarioError``."""
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            raise errors.ScenarioError(
                [
                    errors.Issue(
                        path="",
                        message=f"not valid YAML: {exc.problem or exc.context}",
                        line=mark.line + 1 if mark else None,
                        column=mark.column + 1 if mark else None,
                    )
                ]
            ) from None
        except yaml.YAMLError as exc:
            raise errors.ScenarioError([errors.Issue(path="", message=str(exc))]) from None
        if node is None:
            return None, Locator.empty()
        positions: dict[Path, Position] = {}
        duplicates: list[errors.Issue] = []
        _walk(loader, node, (), positions, duplicates)
        if duplicates:
            raise errors.ScenarioError(duplicates)
        try:
            data = loader.construct_document(node)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            raise errors.ScenarioError(
                [
                    errors.Issue(
                        path="",
                        message=f"not valid YAML: {exc.problem}",
                        line=mark.line + 1 if mark else None,
                        column=mark.column + 1 if mark else None,
                    )
                ]
            ) from None
        return data, Locator(positions)
    finally:
        loader.dispose()


def _position(mark: yaml.Mark) -> Position:
    return Position(line=mark.line + 1, column=mark.column + 1)


def _walk(
    loader: yaml.SafeLoader,
    node: yaml.Node,
    path: Path,
    positions: dict[Path, Position],
    duplicates: list[errors.Issue],
) -> None:
    positions.setdefault(path, _position(node.start_mark))
    if isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(loader, item, (*path, index), positions, duplicates)
    elif isinstance(node, yaml.MappingNode):
        seen: set[str | int] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # complex keys never name a field; validation reports them
            key = _key(loader, key_node)
            if key == "<<":
                continue  # a merge key: its values are positioned where they were written
            child = (*path, key)
            if key in seen:
                where = _position(key_node.start_mark)
                duplicates.append(
                    errors.Issue(
                        path=format_path(child),
                        message="duplicate key (a later value would silently win)",
                        line=where.line,
                        column=where.column,
                    )
                )
            seen.add(key)
            # The key's line is where a reader looks for the field, even for nested values.
            positions[child] = _position(key_node.start_mark)
            _walk(loader, value_node, child, positions, duplicates)


def _key(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str | int:
    value = loader.construct_object(node)
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else str(value)
