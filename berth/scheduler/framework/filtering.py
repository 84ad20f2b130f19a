"""``NodeFilter``: a Filter plugin's answer for one pod over every row of a NodeTable.

Filters are vectorised: a plugin returns which rows pass as one boolean array, the code failing
rows get, and (lazily, only when the pod turns out unplaceable) which rows failed for which
reason. :func:`unplaceable` turns the filters of an unplaceable pod into the "why pending"
message users read::

    0/5000 nodes fit: 4812 Insufficient nvidia.com/gpu, 188 untolerated taint {dedicated: infer}

Each node is attributed to the first filter (in profile order) that rejected it, as Kubernetes
does; within that filter a node counts once for each reason it failed (a node short of cpu and
memory counts under both). Counts are listed largest first, ties by text.
:func:`unplaceable` returns that text as a rejection status.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools

import numpy as np
import numpy.typing as npt

from berth.scheduler.framework import reasons as reasons_
from berth.scheduler.framework import statuses

__all__ = [
    "BoolArray",
    "NodeFilter",
    "Reasons",
    "passing",
    "rejecting",
    "unplaceable",
]

BoolArray = npt.NDArray[np.bool_]
"""A boolean array with one entry per NodeTable row."""

Reasons = collections.abc.Mapping[str, BoolArray]
"""Reason text -> the rows that failed for that reason."""


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class NodeFilter:
    """Which rows a pod may use, according to one plugin (or one session predicate).

    ``explain`` is called at most once, and only when the reasons are needed; it returns the
    failing rows per reason. Without it, every failing row is given ``reason``.
    ``reason_code`` is what kind of obstacle failing rows are (``NotEnoughResources`` for a
    capacity filter), which :func:`unplaceable` hands on to the pod's reason.
    """

    passed: BoolArray
    code: statuses.Code = statuses.Code.UNSCHEDULABLE  # what failing rows mean for the pod
    reason: str = "node(s) didn't pass the filter"  # used when explain is None
    reason_code: reasons_.ReasonCode = reasons_.ReasonCode.UNSCHEDULABLE
    explain: collections.abc.Callable[[], Reasons] | None = None

    @functools.cached_property
    def _reasons(self) -> Reasons:
        if self.explain is None:
            return {self.reason: ~self.passed}
        return self.explain()

    def reasons(self) -> Reasons:
        """Failing rows per reason (computed once, on first use)."""
        return self._reasons


def passing(rows: int) -> NodeFilter:
    """A filter every one of ``rows`` rows passes."""
    return NodeFilter(passed=np.ones(rows, dtype=np.bool_))


def rejecting(
    rows: int, *, reason: str, code: statuses.Code = statuses.Code.UNSCHEDULABLE
) -> NodeFilter:
    """A filter no row passes, all for ``reason``."""
    return NodeFilter(passed=np.zeros(rows, dtype=np.bool_), code=code, reason=reason)


def unplaceable(
    filters: collections.abc.Sequence[tuple[str, NodeFilter]], *, rows: int
) -> statuses.Status:
    """Why no row fits a pod: ``"0/N nodes fit: <count> <reason>, ..."`` as a rejection status.

    ``filters`` are ``(plugin name, filter)`` pairs in the order they were evaluated. A
    failing row a plugin's reasons do not cover is counted as ``rejected by <plugin>``, so the
    counts always account for every node. The code is ``UNSCHEDULABLE`` when some node was
    rejected by a filter whose code is ``UNSCHEDULABLE`` (evicting might help there), else
    ``UNSCHEDULABLE_AND_UNRESOLVABLE``. The reason code is ``NotEnoughResources`` when some
    node was counted under a capacity filter; else the one code every counting filter gave
    (``VolumeNodeConflict`` when only volumes kept the pod off the nodes); else, when filters
    of different kinds share the nodes, ``Unschedulable``.
    """
    resolvable = statuses.Code.UNSCHEDULABLE
    short = reasons_.ReasonCode.NOT_ENOUGH_RESOURCES
    kinds: set[reasons_.ReasonCode] = set()
    if rows == 0:
        return statuses.new(resolvable, "0/0 nodes fit: no nodes in the cluster")
    remaining = np.ones(rows, dtype=np.bool_)
    counts: collections.Counter[str] = collections.Counter()
    code = statuses.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    for plugin, node_filter in filters:
        failed = remaining & ~node_filter.passed
        if not failed.any():
            continue
        if node_filter.code is resolvable:
            code = resolvable
        covered = np.zeros(rows, dtype=np.bool_)
        for reason, reason_rows in node_filter.reasons().items():
            hit = reason_rows & failed
            count = int(np.count_nonzero(hit))
            if count:
                counts[reason] += count
                covered |= hit
                kinds.add(node_filter.reason_code)
        uncovered = int(np.count_nonzero(failed & ~covered))
        if uncovered:
            counts[f"rejected by {plugin}"] += uncovered
            kinds.add(node_filter.reason_code)
        remaining &= node_filter.passed
    fitting = int(np.count_nonzero(remaining))
    parts = [f"{n} {reason}" for reason, n in sorted(counts.items(), key=lambda i: (-i[1], i[0]))]
    head = f"{fitting}/{rows} nodes fit"
    text = f"{head}: {', '.join(parts)}" if parts else head
    if short in kinds:
        return statuses.new(code, text, reason_code=short)
    if len(kinds) == 1 and reasons_.ReasonCode.UNSCHEDULABLE not in kinds:
        return statuses.new(code, text, reason_code=kinds.pop())
    return statuses.new(code, text)
