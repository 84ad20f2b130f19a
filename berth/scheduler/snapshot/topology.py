"""Topology domains: the nodes sharing one value of a label key, as integer ids per row.

Inter-pod affinity and topology spreading count pods per domain (``zone=a``, or one node for
``kubernetes.io/hostname``). :func:`domains` numbers the values of a key once per node table
static part (cached like any mask), so that a count per row becomes a count per domain with one
``bincount`` and back with one fancy index, for every node at once.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from berth.scheduler.snapshot import nodetable

__all__ = ["Domains", "domains"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclasses.dataclass(frozen=True, eq=False)
class Domains:
    """The domains of one label key over a table's rows."""

    key: str
    ids: IntArray  # per row: the domain id, -1 where the node lacks the key (read-only)
    values: tuple[str, ...]  # per domain id: the label value
    has: BoolArray  # per row: the node has the key (read-only)
    one_per_row: bool  # every row has the key and its own value (a hostname-like key)

    @property
    def count(self) -> int:
        """How many domains exist (distinct values)."""
        return len(self.values)

    def totals(self, per_row: IntArray, /, *, rows: BoolArray | None = None) -> IntArray:
        """Per domain, the sum of ``per_row`` over the rows that have the key (and ``rows``)."""
        if self.one_per_row and rows is None:
            return per_row
        take = self.has if rows is None else self.has & rows
        return np.bincount(self.ids[take], weights=per_row[take], minlength=self.count).astype(
            np.int64
        )

    def per_row(self, per_domain: IntArray, /, *, missing: int = 0) -> IntArray:
        """Each row's domain's value from ``per_domain`` (``missing`` where it lacks the key)."""
        if self.one_per_row:
            return per_domain
        if not self.count:
            return np.full(len(self.ids), missing, dtype=np.int64)
        out = per_domain[np.maximum(self.ids, 0)]
        return np.where(self.has, out, missing)

    def spread(self, per_row: IntArray, /) -> IntArray:
        """Per row, the sum of ``per_row`` over its whole domain (0 where it lacks the key)."""
        if self.one_per_row:
            return per_row
        return self.per_row(self.totals(per_row))


def domains(nodes: nodetable.NodeTable, key: str, /) -> Domains:
    """The domains of ``key`` over ``nodes`` (cached with the table's static part)."""

    def compute() -> Domains:
        by_value: dict[str, int] = {}
        ids = np.full(len(nodes), -1, dtype=np.int64)
        for row, labels in enumerate(nodes.labels):
            value = labels.get(key)
            if value is not None:
                ids[row] = by_value.setdefault(value, len(by_value))
        ids.setflags(write=False)
        has = ids >= 0
        has.setflags(write=False)
        values = tuple(by_value)
        one_per_row = len(values) == len(nodes) and bool(has.all())
        if one_per_row:
            # Rows then are their own domains, in row order: totals are the counts themselves.
            ids = np.arange(len(nodes), dtype=np.int64)
            ids.setflags(write=False)
            values = tuple(nodes.labels[row][key] for row in range(len(nodes)))
        return Domains(key=key, ids=ids, values=values, has=has, one_per_row=one_per_row)

    return nodes.cached(("topology", key), compute=compute)
