"""API objects cross Berth's edge as typed records, not as untyped dicts (issue #31).

We test these aspects:

- no module of ``berth/`` names ``dict[str, Any]`` or ``Mapping[str, Any]`` (anywhere: an
  annotation, an alias, a cast), a bare ``dict``/``Mapping`` annotation, or an alias of those
  defined in ``berth/`` (``Raw = Mapping[str, Any]`` counts at each use) more often than
  ``PENDING`` lists; a listed module with fewer than listed fails too, so the list only shrinks;
- the guard finds what it looks for (it is not blind), aliases included.

The typed records are in ``berth/api`` (:mod:`berth.api.objects`, :mod:`~berth.api.core`,
:mod:`~berth.api.custom_objects`, ...). What is left is either still to type or really
arbitrary JSON (an OpenAPI schema, a user's configuration document, a driver's opaque
configuration), which says so in a comment where it is written.
"""

from __future__ import annotations

import ast
import collections
import pathlib

BERTH = pathlib.Path(__file__).resolve().parents[2] / "berth"
_MAPS = {"dict", "Dict", "Mapping", "MutableMapping"}

# Module -> how many untyped maps it still names. One module a line, so that the rooms working
# on them at once merge cleanly.
PENDING = {
    "api/meta.py": 1,
    "cli/run.py": 1,
    "cli/up.py": 1,
    "emulator/protobuf.py": 3,
    "kube/transport/clients.py": 1,
    "kube/transport/rest.py": 3,
    "operator/settings.py": 6,
    "operator/webhooks.py": 5,
    "scheduler/framework/profiles.py": 1,
    "scheduler/framework/registries.py": 1,
    "scheduler/snapshot/pods.py": 1,
    "sim/pod_events.py": 5,
    "sim/scenarios.py": 5,
    "sim/stress.py": 1,
    "sim/traces.py": 1,
}


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_untyped_map(node: ast.AST) -> bool:
    """``dict[str, Any]``, ``typing.Mapping[str, typing.Any]`` and the like."""
    if not isinstance(node, ast.Subscript) or _name(node.value) not in _MAPS:
        return False
    args = node.slice
    return (
        isinstance(args, ast.Tuple)
        and len(args.elts) == 2
        and _name(args.elts[0]) == "str"
        and _name(args.elts[1]) == "Any"
    )


def _annotations(tree: ast.AST) -> list[ast.expr]:
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return found


def _aliases(tree: ast.Module) -> set[str]:
    """Names a module binds at top level to an untyped map (``Raw = Mapping[str, Any]``)."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and _is_untyped_map(value):
            out.add(target.id)
    return out


def _untyped(source: str, *, aliases: dict[str, set[str]], module: str = "m") -> list[int]:
    """The lines of ``source`` that name an untyped map. ``aliases``: defining module's last
    name (``wire``) -> its alias names, for ``wire.Raw``; the module's own are found here."""
    tree = ast.parse(source)
    own = _aliases(tree)
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name in aliases.get((node.module or "").rsplit(".", 1)[-1], set())
    }
    found = [node.lineno for node in ast.walk(tree) if _is_untyped_map(node)]
    for annotation in _annotations(tree):
        subscripted = {id(n.value) for n in ast.walk(annotation) if isinstance(n, ast.Subscript)}
        for node in ast.walk(annotation):
            bare = (
                isinstance(node, ast.Name | ast.Attribute)
                and id(node) not in subscripted
                and _name(node) in {"dict", "Dict"}
            )
            alias = (isinstance(node, ast.Name) and node.id in own | imported) or (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.attr in aliases.get(node.value.id, set())
            )
            if bare or alias:
                found.append(node.lineno)
    return found


def _all_untyped() -> dict[str, list[int]]:
    sources = {
        str(path.relative_to(BERTH)): path.read_text() for path in sorted(BERTH.rglob("*.py"))
    }
    aliases: dict[str, set[str]] = collections.defaultdict(set)
    for module, source in sources.items():
        aliases[pathlib.PurePath(module).stem] |= _aliases(ast.parse(source))
    found = {module: _untyped(source, aliases=aliases) for module, source in sources.items()}
    return {module: lines for module, lines in found.items() if lines}


def test_the_guard_finds_untyped_maps() -> None:
    source = (
        "Raw = collections.abc.Mapping[str, typing.Any]\n"
        "def f(a: dict[str, Any], b: Raw, c: list[dict], d: wire.Obj) -> typing.Dict[str, Any]:\n"
        "    e: dict = {}\n"
        "    return typing.cast(dict[str, typing.Any], a)\n"
    )
    found = _untyped(source, aliases={"wire": {"Obj"}})
    assert sorted(found) == [1, 2, 2, 2, 2, 2, 3, 4]
    typed = "def f(pod: core.Pod, labels: dict[str, str]) -> objects.ObjectMeta: ...\n"
    assert _untyped(typed, aliases={"wire": {"Obj"}}) == []


def test_no_module_names_more_untyped_maps_than_listed() -> None:
    lines = _all_untyped()
    found = {module: len(at) for module, at in lines.items()}
    new = {m: at for m, at in lines.items() if m not in PENDING}
    assert not new, f"type API objects with berth.api's records (module: lines): {new}"
    moved = {m: (PENDING[m], found.get(m, 0)) for m in PENDING if found.get(m, 0) != PENDING[m]}
    assert not moved, f"PENDING is out of date (module: (listed, found)); shrink it: {moved}"
