"""Errors raised by :mod:`berth.sim` when its input cannot be simulated.

::

    SimError
    ├── ScenarioError      a scenario file breaks the schema: each issue names the path
    │                      in the file (``spec.workloads[2].requests.cpu``) and its line
    ├── TraceError         a job trace (CSV) has a missing column or a bad row
    └── NodeSpecError      a ``--nodes`` pool spec is malformed

The CLI turns every one of them into exit code 2 before anything is simulated.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Issue", "NodeSpecError", "ScenarioError", "SimError", "TraceError"]


class SimError(ValueError):
    """Input the simulator refuses; nothing has run when it is raised."""


@dataclasses.dataclass(frozen=True)
class Issue:
    """One problem in a scenario: where it is and what is wrong."""

    path: str  # "spec.workloads[2].requests.cpu"; "" for the document itself
    message: str
    line: int | None = None  # 1-based; None when the input did not come from a file
    column: int | None = None  # 1-based

    def render(self, source: str | None = None) -> str:
        """``file:line:column: path: message``, leaving out the parts that are unknown."""
        where = [part for part in (source, self.line, self.column) if part is not None]
        prefix = ":".join(str(part) for part in where)
        body = f"{self.path}: {self.message}" if self.path else self.message
        return f"{prefix}: {body}" if prefix else body


class ScenarioError(SimError):
    """A scenario that does not follow ``sim.berth.io/v1alpha1``; carries every issue found."""

    def __init__(self, issues: list[Issue], *, source: str | None = None) -> None:
        self.issues = sorted(issues, key=lambda i: (i.line or 0, i.column or 0, i.path))
        self.source = source
        lines = [issue.render(source) for issue in self.issues]
        super().__init__("invalid scenario:\n" + "\n".join(f"  {line}" for line in lines))


class TraceError(SimError):
    """A job trace that cannot be turned into workloads."""


class NodeSpecError(SimError):
    """A node pool spec (``--nodes``) that cannot be parsed."""
