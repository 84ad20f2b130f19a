"""``Scope`` and ``ScopePlan``: the node subsets a job is tried in, one after the other.

A plugin that wants a job's pods to share one part of the cluster (the Topology plugin: one
rack, one zone) answers the session's ``job_scopes`` hook with a :class:`ScopePlan`: scopes,
best first. The allocate action then tries the job inside each scope in turn (one statement,
rolled back to a checkpoint between tries) and commits the first try where the job is ready;
while a scope is active, :meth:`Session.place <berth.scheduler.framework.sessions.Session.place>`
rejects the rows outside it for each pod (a scope's parts may restrict some pods only: one
role of the gang to its own rack), with the part's own reason. When no scope works the job waits
with the plan's reason, unless the plan falls back (``required`` false) to one more try over
every node.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import numpy as np

from berth.scheduler.framework import filtering, reasons

if typing.TYPE_CHECKING:
    from berth.scheduler.snapshot import pods

__all__ = ["MAX_TRIES", "Part", "Scope", "ScopePlan"]

MAX_TRIES = 4
"""Scopes a job is tried in per session at most (each try is a full attempt per pod)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Part:
    """Rows some of a job's pods may use in one try (a domain for the gang, or for a role)."""

    applies: collections.abc.Callable[[pods.PodInfo], bool]  # which of the job's pods
    rows: filtering.BoolArray  # over the session's node table (read-only)
    outside: str  # the reason of the rows outside: "node(s) outside rack r1 (spec...)"
    outside_code: reasons.ReasonCode = reasons.ReasonCode.UNSCHEDULABLE  # their kind


@dataclasses.dataclass(frozen=True, eq=False)
class Scope:
    """Where a job's pods may go in one try: every part that applies to a pod restricts it."""

    parts: tuple[Part, ...]

    def node_filter(self, pod: pods.PodInfo, rows: int) -> filtering.NodeFilter:
        """The scope as a filter for ``pod`` over a table of ``rows`` rows."""
        passed = np.ones(rows, dtype=np.bool_)
        explained: dict[str, filtering.BoolArray] = {}
        code = reasons.ReasonCode.UNSCHEDULABLE
        for part in self.parts:
            if not part.applies(pod):
                continue
            inside = part.rows if len(part.rows) == rows else np.zeros(rows, dtype=np.bool_)
            explained[part.outside] = passed & ~inside  # each row to the first part it fails
            passed = passed & inside
            code = part.outside_code
        return filtering.NodeFilter(passed=passed, explain=lambda: explained, reason_code=code)


@dataclasses.dataclass(frozen=True)
class ScopePlan:
    """Where to try a job, best first, and what happens when nowhere works."""

    scopes: tuple[Scope, ...]
    required: bool  # True: the job waits when no scope works; False: one more try anywhere
    reason: reasons.Reason  # the job's reason when it waits because no scope worked
