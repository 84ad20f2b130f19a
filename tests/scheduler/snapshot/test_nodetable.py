"""NodeTable: the vectorised node state.

We test these aspects:
- rows are in node-name order, columns are the base resources then the others sorted;
- ``vector`` and ``missing`` for requests, including a resource no node has;
- assume/forget change requested, bump the row's version and the generation, and copies are
  independent in quantities while sharing static masks;
- fresh copies (the next snapshot) keep the static caches, not the incremental results, and
  the memo starts over at ``MEMO_LIMIT``;
- label masks for every operator agree with the one-node reference (hypothesis), term masks
  AND/OR like the reference, matchFields select by name, masks are cached and read-only;
- the taint matrix lists distinct taints per row;
- ``incremental`` refreshes exactly the changed rows (hypothesis: equal to a full recompute,
  through both the NumPy and the per-row path) and recomputes when its log is too short;
- snapshot to snapshot: a snapshot's table takes over the result an earlier one computed
  before its session changed anything and refreshes only the rows the master changed since;
  one whose session already changed it, or a plain copy, hands nothing on; property
  (hypothesis): through any interleaving of master changes, snapshots, session changes and
  modified copies every result equals a full recompute.
"""

from __future__ import annotations

import collections.abc
import typing

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.api import resources
from berth.scheduler.snapshot import nodes, nodetable, selectors, taints
from tests.scheduler import builders as b


def table(*objs: dict[str, object]) -> nodetable.NodeTable:
    return nodetable.NodeTable.build([nodes.node_info(o) for o in objs])


def test_rows_are_sorted_by_name_and_columns_are_stable() -> None:
    t = table(b.node("b", gpu=1), b.node("a", extra={"example.com/fpga": 2}), b.node("c"))
    assert t.names == ["a", "b", "c"]
    assert t.index == {"a": 0, "b": 1, "c": 2}
    assert t.resources == ("cpu", "memory", "ephemeral-storage", "pods", "example.com/fpga", b.GPU)
    assert t.allocatable[1, t.column[b.GPU]] == 1000
    assert t.allocatable[0, t.column["pods"]] == 110_000
    assert len(t) == 3


def test_vector_and_missing() -> None:
    t = table(b.node("a", gpu=1))
    requests = resources.ResourceList({"cpu": 500, b.GPU: 1000, "example.com/fpga": 1000})
    assert t.vector(requests).tolist() == [500, 0, 0, 0, 1000]
    assert t.missing(requests) == ["example.com/fpga"]
    assert t.missing(resources.ResourceList({"cpu": 1})) == []


def test_assume_forget_and_copies() -> None:
    t = table(b.node("a"), b.node("b"))
    vec = t.vector(resources.ResourceList({"cpu": 100, "pods": 1000}))
    twin = t.copy()
    t.assume(1, vec)
    assert t.requested[1].tolist() == [100, 0, 0, 1000]
    assert t.version.tolist() == [0, 1]
    assert t.generation == 1
    assert twin.requested[1].tolist() == [0, 0, 0, 0]
    assert t.free()[1, 0] == 4000 - 100
    t.forget(1, vec)
    assert t.requested[1].tolist() == [0, 0, 0, 0]
    assert t.version.tolist() == [0, 2]
    mask = t.requirement_mask(selectors.Requirement("kubernetes.io/hostname", "In", ("b",)))
    assert (
        twin.requirement_mask(selectors.Requirement("kubernetes.io/hostname", "In", ("b",))) is mask
    )


def test_fresh_copies_keep_static_caches_until_the_memo_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t = table(b.node("a", taints=[{"key": "k", "effect": "NoSchedule"}]), b.node("b"))
    req = selectors.Requirement("kubernetes.io/hostname", "In", ("b",))
    mask, matrix = t.requirement_mask(req), t.taint_matrix()
    calls: list[object] = []

    def compute(rows: nodetable.IntArray | None) -> nodetable.IntArray:
        calls.append(rows)
        return np.zeros(len(t), dtype=np.int64)

    t.incremental("k", compute=compute)
    fresh = t.fresh_copy()
    # The next snapshot reuses what depends on the static part alone ...
    assert fresh.requirement_mask(req) is mask
    assert fresh.taint_matrix() is matrix
    # ... but not the per-table incremental results (its quantities are its own).
    fresh.incremental("k", compute=compute)
    assert calls == [None, None]
    monkeypatch.setattr(nodetable, "MEMO_LIMIT", 1)
    later = fresh.fresh_copy()
    assert later.requirement_mask(req) is not mask  # the memo started over
    assert later.taint_matrix() is matrix  # indexes are kept: they are bounded by the nodes
    assert t.requirement_mask(req) is mask  # a table taken earlier keeps its own


def test_masks_are_cached_and_read_only() -> None:
    t = table(b.node("a", labels={"zone": "x"}), b.node("b"))
    req = selectors.Requirement("zone", "Exists")
    mask = t.requirement_mask(req)
    assert mask.tolist() == [True, False]
    assert t.requirement_mask(selectors.Requirement("zone", "Exists")) is mask
    with pytest.raises(ValueError, match="read-only"):
        mask[0] = False


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        (
            selectors.SelectorTerm(
                fields=(selectors.Requirement("metadata.name", "In", ("b", "zz")),)
            ),
            [False, True, False],
        ),
        (
            selectors.SelectorTerm(
                fields=(selectors.Requirement("metadata.name", "NotIn", ("b",)),)
            ),
            [True, False, True],
        ),
        (
            selectors.SelectorTerm(
                expressions=(selectors.Requirement("zone", "In", ("x",)),),
                fields=(selectors.Requirement("metadata.name", "NotIn", ("a",)),),
            ),
            [False, True, False],
        ),
        (selectors.SelectorTerm(), [False, False, False]),
    ],
    ids=["field-in", "field-notin", "field-and-label", "empty"],
)
def test_term_masks(term: selectors.SelectorTerm, expected: list[bool]) -> None:
    t = table(b.node("a", labels={"zone": "x"}), b.node("b", labels={"zone": "x"}), b.node("c"))
    assert t.term_mask(term).tolist() == expected


def test_taint_matrix_has_one_column_per_distinct_taint() -> None:
    t = table(
        b.node("a", taints=[b.taint("gpu", effect="NoSchedule"), b.taint("spot", "true")]),
        b.node("b", taints=[b.taint("gpu", effect="NoSchedule")]),
        b.node("c"),
    )
    assert t.distinct_taints == (
        taints.Taint("gpu", "", "NoSchedule"),
        taints.Taint("spot", "true", "NoSchedule"),
    )
    assert t.taint_matrix().tolist() == [[True, True], [True, False], [False, False]]
    assert t.taints[0][1] == taints.Taint("spot", "true", "NoSchedule")


_label_values = st.sampled_from(["a", "b", "1", "7", "12", "-3", "x1"])
_operators = st.sampled_from([*sorted(selectors.OPERATORS), "Bogus"])


@settings(max_examples=150, deadline=None)
@given(
    labels=st.lists(
        st.dictionaries(st.sampled_from(["k", "j"]), _label_values, max_size=2),
        min_size=1,
        max_size=8,
    ),
    key=st.sampled_from(["k", "j", "missing"]),
    operator=_operators,
    values=st.lists(_label_values, max_size=3),
)
def test_label_masks_agree_with_the_reference(
    labels: list[dict[str, str]], key: str, operator: str, values: list[str]
) -> None:
    t = table(*[b.node(f"n{i}", labels=lab) for i, lab in enumerate(labels)])
    req = selectors.Requirement(key, operator, tuple(values))
    expected = [selectors.requirement_matches(req, value=lab.get(key)) for lab in t.labels]
    assert t.requirement_mask(req).tolist() == expected
    term = selectors.SelectorTerm(expressions=(req, selectors.Requirement("k", "Exists")))
    assert t.term_mask(term).tolist() == [
        selectors.matches(term, labels=lab, node_name=name)
        for lab, name in zip(t.labels, t.names, strict=True)
    ]


def _sums(t: nodetable.NodeTable) -> nodetable.IntArray:
    return t.requested.sum(axis=1)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 3), st.booleans()), min_size=1, max_size=40
    ),
    per_row=st.booleans(),
)
def test_incremental_equals_a_full_recompute(
    steps: list[tuple[int, int, bool]], per_row: bool
) -> None:
    t = table(*[b.node(f"n{i}") for i in range(6)])
    calls: list[int] = []

    def compute(rows: nodetable.IntArray | None) -> nodetable.IntArray:
        calls.append(len(t) if rows is None else len(rows))
        return _sums(t) if rows is None else _sums(t)[rows]

    def row_fn(allocatable: list[int], requested: list[int]) -> int:
        return sum(requested)

    for row, amount, check in steps:
        vec = np.array([amount, 0, 0, 1000], dtype=np.int64)
        t.assume(row, vec)
        if amount % 2:
            t.forget(row, vec)
        if check:
            got = t.incremental("sum", compute=compute, per_row=row_fn if per_row else None)
            assert got.tolist() == _sums(t).tolist()
    if calls:
        assert calls[0] == len(t)  # the first call computes every row, later ones fewer
    assert all(c <= len(t) for c in calls)


def test_incremental_recomputes_only_changed_rows_and_everything_after_a_copy() -> None:
    t = table(*[b.node(f"n{i}") for i in range(4)])
    seen: list[list[int] | None] = []

    def compute(rows: nodetable.IntArray | None) -> nodetable.IntArray:
        seen.append(None if rows is None else rows.tolist())
        return _sums(t) if rows is None else _sums(t)[rows]

    t.incremental("k", compute=compute)
    t.incremental("k", compute=compute)
    t.assume(2, np.array([1, 0, 0, 0], dtype=np.int64))
    t.assume(0, np.array([1, 0, 0, 0], dtype=np.int64))
    t.assume(2, np.array([1, 0, 0, 0], dtype=np.int64))
    assert t.incremental("k", compute=compute).tolist() == [1, 0, 2, 0]
    assert seen == [None, [0, 2]]
    assert t.rows_changed_since(t.generation + 1) is None
    twin = t.copy()
    twin.incremental("k", compute=lambda rows: _sums(twin))
    assert t.incremental("k", compute=compute).tolist() == [1, 0, 2, 0]


# Results handed from snapshot to snapshot --------------------------------------------------


def _unit(amount: int) -> nodetable.IntArray:
    return np.array([amount, 0, 0, 1000], dtype=np.int64)


def test_a_snapshot_takes_over_an_earlier_snapshots_result() -> None:
    master = table(*[b.node(f"n{i}") for i in range(4)])
    seen: list[list[int] | None] = []

    def computing(t: nodetable.NodeTable) -> collections.abc.Callable[..., nodetable.IntArray]:
        def compute(rows: nodetable.IntArray | None) -> nodetable.IntArray:
            seen.append(None if rows is None else rows.tolist())
            return _sums(t) if rows is None else _sums(t)[rows]

        return compute

    first = master.fresh_copy()
    first.incremental("k", compute=computing(first))
    first.assume(1, _unit(5))  # its session's own change: not the master's
    first.incremental("k", compute=computing(first))
    master.assume(3, _unit(1))  # what the cache saw happen since
    second = master.fresh_copy()
    assert second.incremental("k", compute=computing(second)).tolist() == [0, 0, 0, 1001]
    assert seen == [None, [1], [3]]  # the whole table once, then the changed rows only
    view = second.copy()
    view.requested[0, 0] += 7  # a FilterHook's altered view: neither takes nor hands on
    assert view.incremental("k", compute=computing(view)).tolist() == [7, 0, 0, 1001]
    assert seen[-1] is None
    third = master.fresh_copy()
    assert third.incremental("k", compute=computing(third)).tolist() == [0, 0, 0, 1001]
    assert seen[-1] is None or seen[-1] == []  # second's result, nothing changed since


_table_ops = st.one_of(
    st.tuples(st.just("master"), st.integers(0, 5), st.integers(0, 3)),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("session"), st.integers(0, 5), st.integers(0, 3)),
    st.tuples(st.just("query"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("view"), st.integers(0, 5)),
)


@settings(max_examples=80, deadline=None)
@given(ops=st.lists(_table_ops, max_size=60), per_row=st.booleans())
def test_results_handed_on_equal_a_full_recompute(
    ops: list[tuple[typing.Any, ...]], per_row: bool
) -> None:
    master = table(*[b.node(f"n{i}") for i in range(6)])
    snap = master.fresh_copy()

    def row_fn(allocatable: list[int], requested: list[int]) -> int:
        return sum(requested)

    for op in ops:
        if op[0] == "master":
            master.assume(op[1], _unit(op[2]))  # the cache follows a pod change
            if op[2] % 2:
                master.forget(op[1], _unit(op[2]))
        elif op[0] == "snapshot":
            snap = master.fresh_copy()
        elif op[0] == "session":
            snap.assume(op[1], _unit(op[2]))
        else:
            target = snap
            if op[0] == "view":
                target = snap.copy()
                target.requested[op[1]] += 3
            key = op[1] if op[0] == "query" else "a"

            def compute(
                rows: nodetable.IntArray | None, t: nodetable.NodeTable = target
            ) -> nodetable.IntArray:
                return _sums(t) if rows is None else _sums(t)[rows]

            got = target.incremental(key, compute=compute, per_row=row_fn if per_row else None)
            assert got.tolist() == _sums(target).tolist()
