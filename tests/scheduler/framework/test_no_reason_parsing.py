"""Nothing in ``berth/`` decides anything by reading the text of a reason.

Why a pod waits is a :class:`~berth.scheduler.framework.reasons.Reason` (see "Reasons" in
docs/architecture.md): layers decide on its ``code``, and the message is only rendered. This
check walks the syntax tree of every module under ``berth/`` and fails on the ways text used
to be parsed back:

- a string method that inspects text (``startswith``, ``endswith``, ``removeprefix``,
  ``removesuffix``, ``find``, ``index``, ``partition``, ``split``, ``count``) called on a
  reason or message;
- ``"..." in reason`` (a literal, f-string or CONSTANT looked for in a reason or message);
- ``reason == "..."`` / ``!=`` against a string literal, an f-string or a CONSTANT.

"A reason or message" is an expression named so (``reason``, ``pod_reasons[k]``,
``decision.reason``, ``why``, ``status.message()``, ``self._reasons.get(k)``), or a local name
assigned from one. ``reason.code`` and ``reason.details`` are data and never flagged.

We test these aspects:

- ``berth/`` has no such expression outside the few places listed in :data:`ALLOWED`, each
  with why it is not a Berth reason;
- the check finds each kind of parsing in a snippet (so it can fail), including the ones this
  codebase used to have, and accepts deciding on codes.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import re
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "berth"

_NAMED = re.compile(r"^(.*_)?(reason|reasons|message|messages|why|explanation)$", re.I)
_ONE = re.compile(r"^(.*_)?(reason|message|why|explanation)$", re.I)
_CONSTANT = re.compile(r"^_?[A-Z][A-Z0-9_]*$")
_TEXT_METHODS = frozenset(
    {
        "startswith",
        "endswith",
        "removeprefix",
        "removesuffix",
        "find",
        "rfind",
        "index",
        "partition",
        "rpartition",
        "split",
        "count",
    }
)

ALLOWED: dict[tuple[str, str], str] = {
    ("berth/operator/embedding.py", "message"): (
        "a logging filter reading Kopf's own log lines, not a Berth reason"
    ),
    ("berth/emulator/cel.py", "message"): "the CEL library's error text, reworded for users",
    ("berth/sim/scenarios.py", "message"): "pydantic's validation error text, reworded",
    ("berth/kube/binder/binding.py", "message"): (
        "the API server's error message on a failed binding: Kubernetes gives no code for "
        "'already assigned' or 'being deleted'"
    ),
}
"""(module, the name examined) -> why that module may read text of that name."""


@dataclasses.dataclass(frozen=True)
class Finding:
    path: str
    line: int
    name: str  # the reason-like name examined
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what} on {self.name!r}"


def _identifier(node: ast.expr) -> str | None:
    """The name an expression is known by: ``x``, ``a.x``, ``a.x[k]``, ``a.x.get(k)``,
    ``a.x()``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _identifier(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "get":
            return _identifier(node.func.value)
        return node.func.attr
    return None


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.findings: list[Finding] = []
        self._tainted: list[set[str]] = [set()]

    # Names -----------------------------------------------------------------------------------
    def _reasonish(self, node: ast.expr, *, one: bool = False) -> str | None:
        name = _identifier(node)
        if name is None:
            return None
        if isinstance(node, ast.Name) and name in self._tainted[-1]:
            return name
        pattern = _ONE if one else _NAMED
        return name if pattern.match(name) else None

    def _flag(self, node: ast.AST, name: str, what: str) -> None:
        if (self.path, name) in ALLOWED:
            return
        self.findings.append(Finding(self.path, getattr(node, "lineno", 0), name, what))

    # Scopes and taint -----------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._tainted.append(set())
        self.generic_visit(node)
        self._tainted.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Assign(self, node: ast.Assign) -> None:
        if self._reasonish(node.value) is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self._tainted[-1].add(target.id)
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self._taint_loop(node.target, node.iter)
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self._taint_loop(node.target, node.iter)
        self.generic_visit(node)

    def _taint_loop(self, target: ast.expr, iterable: ast.expr) -> None:
        """``for r in pod_reasons.values()``: ``r`` is a reason too."""
        source = iterable
        if (
            isinstance(source, ast.Call)
            and isinstance(source.func, ast.Attribute)
            and source.func.attr == "values"
        ):
            source = source.func.value
        if isinstance(target, ast.Name) and self._reasonish(source) is not None:
            self._tainted[-1].add(target.id)

    # What is flagged --------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _TEXT_METHODS:
            name = self._reasonish(func.value, one=True)
            if name is not None:
                self._flag(node, name, f".{func.attr}()")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, ast.In | ast.NotIn):
                name = self._reasonish(right, one=True)
                if name is not None and _is_text(left):
                    self._flag(node, name, "a substring test")
            elif isinstance(op, ast.Eq | ast.NotEq):
                for side, other in ((left, right), (right, left)):
                    name = self._reasonish(side, one=True)
                    if name is not None and _is_text(other):
                        self._flag(node, name, "a comparison with fixed text")
            left = right
        self.generic_visit(node)


def _is_text(node: ast.expr) -> bool:
    """A string literal, an f-string, or a CONSTANT (``decisions.NOT_TRIED``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return isinstance(name, str) and bool(_CONSTANT.match(name))


def check(source: str, *, path: str = "snippet.py") -> list[Finding]:
    checker = _Checker(path)
    checker.visit(ast.parse(source))
    return checker.findings


def test_berth_parses_no_reason_text() -> None:
    findings: list[Finding] = []
    for module in sorted(PACKAGE.rglob("*.py")):
        relative = module.relative_to(ROOT).as_posix()
        findings += check(module.read_text(encoding="utf-8"), path=relative)
    assert [str(f) for f in findings] == []


def test_every_allowance_is_still_needed() -> None:
    used: set[tuple[str, str]] = set()
    for path, name in ALLOWED:
        checker = _Checker("")  # no allowance applies under this path
        checker.visit(ast.parse((ROOT / path).read_text(encoding="utf-8")))
        if any(f.name == name for f in checker.findings):
            used.add((path, name))
    assert used == set(ALLOWED)


@pytest.mark.parametrize(
    "snippet",
    [
        # What the PodGroup controller, the sessions and the CLI did before reasons were data.
        "if reason.startswith(gang.TIMEOUT_PREFIX): pass",
        """
        current = self.pod_reasons.get(pod.key)
        if current is None or current.startswith(derived):
            pass
        """,
        'if member.reason.startswith(f"pod group {member.group}: "): pass',
        "ok = [r for r in result.pod_reasons.values() if r != _NOT_TRIED]",
        "if decision.reason == decisions.NOT_TRIED: pass",
        'timed_out = "schedule timeout" in why',
        'if status.message().endswith("backing off"): pass',
        'code = "Timeout" if condition_reason.split(":")[0] == "x" else "y"',
        'if message == "not tried this cycle": pass',
    ],
)
def test_the_check_finds_parsing(snippet: str) -> None:
    assert check(textwrap.dedent(snippet)) != []


@pytest.mark.parametrize(
    "snippet",
    [
        "if reason.code is reasons.ReasonCode.GANG_TIMED_OUT: pass",
        'if why.details.get("group") == info.pod_group: pass',
        "if self._reasons.get(subject) == decision.reason: pass",  # two records, not text
        "if waiting[k].key in self.session.group_why: pass",  # a key in a map of reasons
        'print(f"{prefix}: {member.reason}")',  # rendering
        'if name.startswith("pod:"): pass',
    ],
)
def test_the_check_accepts_deciding_on_data(snippet: str) -> None:
    assert check(textwrap.dedent(snippet)) == []
