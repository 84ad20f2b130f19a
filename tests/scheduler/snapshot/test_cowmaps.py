"""CowMap and FrozenMap: the copy-on-write mappings behind snapshots.

We test these aspects:
- a frozen view keeps the entries of the moment it was taken, whatever is written afterwards
  (set, replace, delete, pop), and iterates in key order;
- freezing twice without a write in between gives the same view; a write gives a new one;
- missing keys: ``KeyError`` from ``[]``/``del``/``pop``, the default from ``get``/``pop``;
- a write after a freeze copies the one shard it touches, and only once;
- property (hypothesis): any sequence of writes and freezes behaves like a dict copied at
  every freeze, and freezing itself copies nothing; ``items_in_any_order`` gives a view's
  items (and a plain mapping's) as they are, each once;
- ``in_any_order`` gives a sorted-on-read sequence's items without sorting them.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.scheduler.snapshot import cowmaps


def test_a_frozen_view_keeps_what_it_saw() -> None:
    live: cowmaps.CowMap[int] = cowmaps.CowMap({"b": 2, "a": 1, "c": 3})
    view = live.freeze()
    live["a"] = 10
    live["d"] = 4
    del live["b"]
    assert live.pop("c") == 3
    assert dict(view) == {"a": 1, "b": 2, "c": 3}
    assert list(view) == ["a", "b", "c"]
    assert len(view) == 3
    assert "b" in view and "d" not in view
    assert view.get("d") is None and view.get("a") == 1
    later = live.freeze()
    assert list(later.items()) == [("a", 10), ("d", 4)]
    assert len(live) == 2


def test_a_write_after_a_freeze_copies_one_shard_once() -> None:
    live: cowmaps.CowMap[int] = cowmaps.CowMap({key: 0 for key in ("a", "b", "c", "d")})
    live.freeze()
    before = list(live._shards)
    live["a"] = 1
    copied = [i for i, shard in enumerate(live._shards) if shard is not before[i]]
    assert len(copied) == 1
    again = live._shards[copied[0]]
    live["a"] = 2
    assert live._shards[copied[0]] is again


def test_freezing_without_writes_gives_the_same_view() -> None:
    live: cowmaps.CowMap[int] = cowmaps.CowMap({"a": 1})
    first = live.freeze()
    assert live.freeze() is first
    live["a"] = 1
    assert live.freeze() is not first


@pytest.mark.parametrize(
    "action",
    [
        lambda m: m["nope"],
        lambda m: m.__delitem__("nope"),
        lambda m: m.pop("nope"),
        lambda m: m.freeze()["nope"],
    ],
    ids=["getitem", "delitem", "pop", "frozen-getitem"],
)
def test_missing_keys_raise(action: object) -> None:
    live: cowmaps.CowMap[int] = cowmaps.CowMap({"a": 1})
    with pytest.raises(KeyError):
        action(live)  # type: ignore[operator]


def test_missing_keys_give_defaults() -> None:
    live: cowmaps.CowMap[int] = cowmaps.CowMap()
    assert live.get("x", 7) == 7
    assert live.pop("x", 8) == 8
    assert live.freeze().get("x", 9) == 9


_KEYS = [f"ns/pod-{i}" for i in range(200)]
_ops = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(_KEYS), st.integers(0, 3)),
    st.tuples(st.just("del"), st.sampled_from(_KEYS)),
    st.tuples(st.just("freeze")),
    st.tuples(st.just("clear")),
)


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(_ops, max_size=120))
def test_writes_and_freezes_behave_like_copies(ops: list[tuple[object, ...]]) -> None:
    live: cowmaps.CowMap[int] = cowmaps.CowMap()
    model: dict[str, int] = {}
    views: list[tuple[cowmaps.FrozenMap[int], dict[str, int]]] = []
    for op in ops:
        if op[0] == "set":
            key, value = str(op[1]), int(str(op[2]))
            live[key] = value
            model[key] = value
        elif op[0] == "del":
            key = str(op[1])
            assert live.pop(key, None) == model.pop(key, None)
        elif op[0] == "clear":
            live.clear()
            model.clear()
        else:
            before = [id(shard) for shard in live._shards]
            views.append((live.freeze(), dict(model)))
            assert [id(shard) for shard in live._shards] == before  # freezing copies nothing
        assert len(live) == len(model)
    views.append((live.freeze(), dict(model)))
    for view, expected in views:
        assert dict(view) == expected
        assert list(view) == sorted(expected)
        assert len(view) == len(expected)
        assert sorted(cowmaps.items_in_any_order(view)) == sorted(expected.items())
        assert sorted(cowmaps.items_in_any_order(expected)) == sorted(expected.items())
        values = view.values_in_any_order()
        assert len(values) == len(expected)
        assert sorted(values) == sorted(expected.values())
        by_value = cowmaps.SortedOnRead(values, key=str)
        assert list(by_value) == sorted(expected.values(), key=str)


def test_in_any_order_reads_a_sequence_without_sorting_it() -> None:
    items = cowmaps.SortedOnRead(("c", "a", "b"), key=str)
    assert sorted(cowmaps.in_any_order(items)) == ["a", "b", "c"]
    assert items._sorted is None  # nothing sorted for it
    assert list(items) == ["a", "b", "c"]
    assert cowmaps.in_any_order(("z", "y")) == ("z", "y")
