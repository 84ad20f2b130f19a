"""Session callbacks: every hook kind's combining rule and deterministic tie-break.

We test these aspects:
- Ordering: first non-zero comparator wins (registration order), then the fallback key; key
  functions sort like the equivalent comparators; a raising comparator has no opinion and is
  reported; ``first`` picks the same item ``sorted`` puts first;
- AllAgree: the first non-SUCCESS status in registration order wins, attributed to its plugin;
  none registered means SUCCESS; raising is an ERROR;
- AnyTrue / AllTrue: their answers with none, some and raising callbacks;
- FirstWins: only the first registered callback is asked;
- Events: every handler runs, in order, even after one raised;
- NodePredicates / NodeScores: rows ANDed, scores summed, failures contained.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import math

import numpy as np
import pytest

from berth.scheduler.framework import filtering, hooks, statuses


@dataclasses.dataclass(frozen=True)
class Item:
    name: str
    priority: int = 0
    size: int = 0
    created: float = 0.0


def by_priority(a: Item, b: Item) -> int:
    return b.priority - a.priority  # higher priority first


def by_size(a: Item, b: Item) -> int:
    return a.size - b.size  # smaller first


ITEMS = [
    Item("c", priority=1, size=2, created=3),
    Item("a", priority=1, size=2, created=1),
    Item("b", priority=5, size=9, created=2),
    Item("d", priority=1, size=1, created=4),
]


class Reports:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, plugin: str, exc: BaseException) -> None:
        self.seen.append((plugin, str(exc)))


def ordering(report: hooks.ErrorReport | None = None) -> hooks.Ordering[Item]:
    return hooks.Ordering(
        fallback=lambda item: (item.created, item.name), report=report or Reports()
    )


@pytest.mark.parametrize(
    ("comparators", "expected"),
    [
        ([], ["a", "b", "c", "d"]),
        ([by_priority], ["b", "a", "c", "d"]),
        ([by_priority, by_size], ["b", "d", "a", "c"]),
        ([by_size, by_priority], ["d", "a", "c", "b"]),
    ],
    ids=["fallback-only", "priority-then-fallback", "priority-then-size", "size-first"],
)
def test_ordering_first_non_zero_comparator_wins(
    comparators: list[collections.abc.Callable[[Item, Item], int]], expected: list[str]
) -> None:
    order = ordering()
    for fn in comparators:
        order.add(fn, plugin=fn.__name__)
    assert [i.name for i in order.sorted(ITEMS)] == expected
    first = order.first(ITEMS)
    assert first is not None and first.name == expected[0]


def test_ordering_key_functions_sort_like_comparators() -> None:
    with_keys = ordering()
    with_keys.add_key(lambda item: -item.priority, plugin="Priority")
    with_keys.add_key(lambda item: item.size, plugin="Size")
    with_cmp = ordering()
    with_cmp.add(by_priority, plugin="Priority")
    with_cmp.add(by_size, plugin="Size")
    assert with_keys.sorted(ITEMS) == with_cmp.sorted(ITEMS)
    assert with_keys.compare(ITEMS[0], ITEMS[1]) == with_cmp.compare(ITEMS[0], ITEMS[1]) == 1


def test_ordering_mixing_keys_and_comparators_keeps_registration_order() -> None:
    order = ordering()
    order.add(by_size, plugin="Size")
    order.add_key(lambda item: -item.priority, plugin="Priority")
    assert [i.name for i in order.sorted(ITEMS)] == ["d", "a", "c", "b"]


def test_ordering_ignores_a_raising_comparator_and_reports_it() -> None:
    reports = Reports()
    order = ordering(reports)

    def broken(a: Item, b: Item) -> int:
        raise ValueError("no order")

    order.add(broken, plugin="Broken")
    order.add(by_priority, plugin="Priority")
    assert [i.name for i in order.sorted(ITEMS)] == ["b", "a", "c", "d"]
    assert reports.seen[0] == ("Broken", "no order")


def test_all_agree_first_non_success_in_registration_order_wins() -> None:
    hook: hooks.AllAgree[[Item]] = hooks.AllAgree()
    assert hook(ITEMS[0]) is statuses.SUCCESS
    hook.add(lambda item: statuses.SUCCESS, plugin="Yes")
    hook.add(lambda item: statuses.new(statuses.Code.PENDING, "first no"), plugin="First")
    hook.add(lambda item: statuses.new(statuses.Code.UNSCHEDULABLE, "second"), plugin="Second")
    assert hook(ITEMS[0]) == statuses.Status(
        code=statuses.Code.PENDING, reasons=("first no",), plugin="First"
    )


def test_all_agree_turns_an_exception_into_an_error_status() -> None:
    reports = Reports()
    hook: hooks.AllAgree[[Item]] = hooks.AllAgree(report=reports)

    def broken(item: Item) -> statuses.Status:
        raise RuntimeError("bad")

    hook.add(broken, plugin="Broken")
    status = hook(ITEMS[0])
    assert (status.code, status.plugin, status.reasons) == (
        statuses.Code.ERROR,
        "Broken",
        ("plugin Broken raised RuntimeError: bad",),
    )
    assert reports.seen == [("Broken", "bad")]


@pytest.mark.parametrize(
    ("answers", "any_true", "all_true"),
    [
        ([], False, True),
        ([False, False], False, False),
        ([False, True], True, False),
        ([True, True], True, True),
        (["raise", True], True, False),
    ],
    ids=["none", "all-no", "mixed", "all-yes", "raising"],
)
def test_any_true_and_all_true(answers: list[object], any_true: bool, all_true: bool) -> None:
    any_hook: hooks.AnyTrue[[Item]] = hooks.AnyTrue()
    all_hook: hooks.AllTrue[[Item]] = hooks.AllTrue()
    for i, answer in enumerate(answers):

        def fn(item: Item, answer: object = answer) -> bool:
            if answer == "raise":
                raise ValueError("no")
            return bool(answer)

        any_hook.add(fn, plugin=f"P{i}")
        all_hook.add(fn, plugin=f"P{i}")
    assert any_hook(ITEMS[0]) is any_true
    assert all_hook(ITEMS[0]) is all_true


def test_first_wins_asks_only_the_first_registered() -> None:
    hook: hooks.FirstWins[[Item], int] = hooks.FirstWins()
    assert hook(ITEMS[0]) is None
    asked: list[str] = []
    hook.add(lambda item: asked.append("first") or 1, plugin="First")
    hook.add(lambda item: asked.append("second") or 2, plugin="Second")
    assert hook(ITEMS[0]) == 1
    assert asked == ["first"]


def test_earliest_names_the_earliest_time_and_a_failure_means_at_once() -> None:
    reports = Reports()
    hook: hooks.Earliest[[Item]] = hooks.Earliest(report=reports)
    assert hook(ITEMS[0]) is None
    hook.add(lambda item: None, plugin="NoOpinion")
    assert hook(ITEMS[0]) is None
    hook.add(lambda item: 300.0, plugin="Later")
    hook.add(lambda item: 120.0, plugin="Sooner")
    assert hook(ITEMS[0]) == 120.0
    assert reports.seen == []

    def broken(item: Item) -> float | None:
        raise KeyError("deadline")

    hook.add(broken, plugin="Broken")
    assert hook(ITEMS[0]) == -math.inf
    assert reports.seen == [("Broken", "'deadline'")]


def test_events_call_every_handler_in_order_even_after_one_raised() -> None:
    reports = Reports()
    hook: hooks.Events[[str]] = hooks.Events(report=reports)
    seen: list[str] = []

    def broken(event: str) -> None:
        raise KeyError(event)

    hook.add(lambda event: seen.append(f"a:{event}"), plugin="A")
    hook.add(broken, plugin="Broken")
    hook.add(lambda event: seen.append(f"c:{event}"), plugin="C")
    hook("x")
    assert seen == ["a:x", "c:x"]
    assert reports.seen == [("Broken", "'x'")]


def test_node_predicates_evaluate_in_order_and_contain_failures() -> None:
    predicates = hooks.NodePredicates()
    predicates.add(
        lambda pod, nodes: filtering.NodeFilter(passed=np.array([True, False])), plugin="Half"
    )

    def broken(pod: object, nodes: object) -> filtering.NodeFilter:
        raise ValueError("x")

    predicates.add(broken, plugin="Broken")
    fake_nodes = [0, 1]  # only len() is used for a failing predicate
    results = predicates.evaluate(None, fake_nodes)  # type: ignore[arg-type]
    assert [name for name, _ in results] == ["Half", "Broken"]
    assert results[1][1].passed.tolist() == [False, False]
    assert results[1][1].code is statuses.Code.ERROR


def test_node_scores_are_summed_and_a_failure_adds_nothing() -> None:
    scores = hooks.NodeScores()
    scores.add(lambda pod, nodes, feasible: np.array([1, 2], dtype=np.int64), plugin="A")
    scores.add(lambda pod, nodes, feasible: np.array([10, 0], dtype=np.int64), plugin="B")

    def broken(pod: object, nodes: object, feasible: object) -> np.ndarray:  # type: ignore[type-arg]
        raise ValueError("x")

    scores.add(broken, plugin="Broken")
    total = np.zeros(2, dtype=np.int64)
    scores.add_to(total, pod=None, nodes=None, feasible=np.ones(2, dtype=np.bool_))  # type: ignore[arg-type]
    assert total.tolist() == [11, 2]
