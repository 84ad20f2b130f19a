"""The runtime: one pod's attempt through every point, errors, caching, scoring, debug table.

We test these aspects:
- an exception escaping a plugin becomes an ERROR status naming the plugin, is logged once per
  window (not again in the next session: a bad object failing every cycle is one line), is
  listed in every session's errors, and the cycle goes on for other pods;
- a raising Score plugin fails that pod's attempt; a raising PreEnqueue rejects the pod;
- a profile without exactly one QueueSort and at least one Bind plugin is refused when built;
- a StaticFilterPlugin is evaluated once per pod signature per session;
- PreFilter ``SKIP`` skips the plugin's Filter; a single feasible row is not scored;
- weights multiply, ties go to the lowest row;
- plugin seconds count every attempt, estimated from the timed tenth;
- the debug score table's exact text, switched on at run time;
- an unplaceable pod's reason aggregates the filters' reasons.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from berth.scheduler.framework import (
    cyclestate,
    errors,
    filtering,
    handles,
    interfaces,
    profiles,
    runtime,
    statuses,
)
from berth.scheduler.snapshot import nodetable, pods
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler.framework import toys

ERROR_LINE = "plugin Boom raised ValueError: boom in filter"


def three_nodes() -> list[b.Obj]:
    return [b.node("n1"), b.node("n2"), b.node("n3")]


def test_a_raising_filter_is_an_error_logged_once_and_the_cycle_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    framework = toys.framework_of(toys.Fit(), toys.Boom(at={"filter"}, prefix="bad"), toys.Binder())
    snapshot = toys.snapshot_of(*three_nodes(), b.pod("bad-1"), b.pod("bad-2"), b.pod("good-1"))
    with caplog.at_level(logging.ERROR, logger="berth.scheduler.framework.runtime"):
        result = toys.run_allocate(framework, snapshot)
    assert result.bindings() == {"default/good-1": "n1"}
    assert result.pod_reasons == {"default/bad-1": ERROR_LINE, "default/bad-2": ERROR_LINE}
    assert result.errors == (ERROR_LINE,)
    assert [r.getMessage() for r in caplog.records] == [f"{ERROR_LINE} (logged once per 300s)"]
    assert caplog.records[0].exc_info is not None

    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="berth.scheduler.framework.runtime"):
        again = toys.run_allocate(framework, toys.snapshot_of(*three_nodes(), b.pod("bad-3")))
    assert again.errors == (ERROR_LINE,)  # the session's result still says so
    assert caplog.records == []  # the log does not, within the window


def test_a_raising_score_plugin_fails_the_attempt_of_that_pod_only() -> None:
    framework = toys.framework_of(
        toys.Fit(), toys.Boom(at={"score"}, prefix="bad"), toys.LastRow(), toys.Binder()
    )
    result = toys.run_allocate(
        framework, toys.snapshot_of(*three_nodes(), b.pod("bad"), b.pod("good"))
    )
    assert result.bindings() == {"default/good": "n3"}  # not placed on a partly scored table
    assert result.pod_reasons == {"default/bad": "plugin Boom raised ValueError: boom in score"}
    assert result.errors == ("plugin Boom raised ValueError: boom in score",)


@pytest.mark.parametrize(
    ("plugins", "problem"),
    [
        ((toys.Fit(), toys.Binder()), "exactly one QueueSort plugin must be enabled (found: none)"),
        (
            (toys.ArrivalOrder(), toys.Fit()),
            "at least one Bind plugin must be enabled (found: none)",
        ),
    ],
    ids=["no-queue-sort", "no-binder"],
)
def test_a_profile_that_cannot_order_or_bind_is_refused_when_built(
    plugins: tuple[interfaces.Plugin, ...], problem: str
) -> None:
    profile = profiles.Profile(plugins=tuple(profiles.PluginConfig(name=p.name) for p in plugins))
    resolved = profiles.resolve(profile, registry=toys.registry_of(*plugins), actions={"allocate"})
    with pytest.raises(errors.ProfileError) as caught:
        runtime.Framework(
            resolved, handle=handles.ExtendedHandle(clock=clocks.VirtualClock(b.EPOCH))
        )
    assert str(caught.value) == f"profile 'berth-scheduler' is not usable:\n  {problem}"


def test_two_queue_sort_plugins_are_refused() -> None:
    class Other(toys.ArrivalOrder):
        name = "OtherOrder"

    with pytest.raises(errors.ProfileError, match=r"found: ArrivalOrder, OtherOrder"):
        toys.framework_of(toys.ArrivalOrder(), Other(), toys.Binder())


def test_a_raising_pre_enqueue_rejects_the_pod_with_the_error() -> None:
    framework = toys.framework_of(toys.Boom(at={"pre_enqueue"}, prefix="bad"), toys.Binder())
    result = toys.run_allocate(framework, toys.snapshot_of(b.node("n1"), b.pod("bad"), b.pod("ok")))
    assert result.bindings() == {"default/ok": "n1"}
    assert result.pod_reasons == {
        "default/bad": "plugin Boom raised ValueError: boom in pre_enqueue"
    }


def test_a_static_filter_runs_once_per_signature_per_session() -> None:
    selector = toys.Selector()
    framework = toys.framework_of(selector, toys.Fit(), toys.Binder())
    nodes = [b.node("n1", labels={"zone": "a"}), b.node("n2", labels={"zone": "b"})]
    pending = [b.pod(f"a-{i}", node_selector={"zone": "a"}) for i in range(5)]
    pending += [b.pod(f"b-{i}", node_selector={"zone": "b"}) for i in range(5)]
    result = toys.run_allocate(framework, toys.snapshot_of(*nodes, *pending))
    assert selector.calls == 2
    assert set(result.bindings().values()) == {"n1", "n2"}
    assert all(
        node == ("n1" if key.startswith("default/a") else "n2")
        for key, node in result.bindings().items()
    )
    toys.run_allocate(
        framework, toys.snapshot_of(*nodes, b.pod("again", node_selector={"zone": "a"}))
    )
    assert selector.calls == 3  # the cache does not outlive the session


class SkipMe(interfaces.PreFilterPlugin, interfaces.FilterPlugin):
    """Rejects every row, unless its PreFilter skipped it (pods labelled skip=yes)."""

    name = "SkipMe"

    def pre_filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> statuses.Status:
        return statuses.SKIP if pod.labels.get("skip") == "yes" else statuses.SUCCESS

    def filter(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> filtering.NodeFilter:
        return filtering.rejecting(len(nodes), reason="never")


def test_pre_filter_skip_skips_the_filter() -> None:
    framework = toys.framework_of(SkipMe(), toys.Binder())
    snapshot = toys.snapshot_of(
        b.node("n1"), b.pod("skipped", labels={"skip": "yes"}), b.pod("kept")
    )
    result = toys.run_allocate(framework, snapshot)
    assert result.bindings() == {"default/skipped": "n1"}
    assert result.pod_reasons == {"default/kept": "0/1 nodes fit: 1 never"}


class CountingScore(toys.Flat):
    name = "CountingScore"

    def __init__(self) -> None:
        self.calls = 0

    def score(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        feasible: filtering.BoolArray,
    ) -> interfaces.ScoreArray:
        self.calls += 1
        return super().score(state, pod, nodes, feasible)


def test_a_single_feasible_row_is_not_scored() -> None:
    scorer = CountingScore()
    framework = toys.framework_of(toys.Selector(), scorer, toys.Binder())
    nodes = [b.node("n1", labels={"zone": "a"}), b.node("n2", labels={"zone": "b"})]
    result = toys.run_allocate(
        framework, toys.snapshot_of(*nodes, b.pod("one", node_selector={"zone": "b"}), b.pod("two"))
    )
    assert result.bindings() == {"default/one": "n2", "default/two": "n1"}
    assert scorer.calls == 1


def test_plugin_seconds_count_every_attempt_from_a_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A clock that moves one second per reading: a timed Filter call lasts one second.
    ticks = iter(range(1_000_000))
    monkeypatch.setattr(runtime, "_perf", lambda: float(next(ticks)))
    framework = toys.framework_of(toys.Fit(), toys.Binder())
    pending = [b.pod(f"p{i:02d}", cpu="1") for i in range(25)]
    snapshot = toys.snapshot_of(b.node("n1", cpu="64"), *pending)
    result = toys.run_allocate(framework, snapshot)
    assert len(result.bindings()) == 25
    # Every tenth attempt is timed (3 of 25), and stands for the ones that were not.
    assert result.plugin_seconds["Fit"] == pytest.approx(25.0)


@pytest.mark.parametrize(
    ("plugins", "weights", "expected"),
    [
        ([toys.Flat()], {}, "n1"),
        ([toys.Flat(), toys.LastRow()], {}, "n3"),
        ([toys.MostFreeCpu()], {}, "n2"),
        ([toys.MostFreeCpu(), toys.LastRow()], {}, "n3"),
        ([toys.MostFreeCpu(), toys.LastRow()], {"MostFreeCpu": 2}, "n2"),
        ([toys.MostFreeCpu(), toys.LastRow()], {"LastRow": 3}, "n3"),
    ],
    ids=["tie-goes-to-lowest-row", "raw-scores", "normalised", "sum", "weighted-tie", "weighted"],
)
def test_scores_are_weighted_summed_and_ties_go_to_the_lowest_row(
    plugins: list[interfaces.ScorePlugin], weights: dict[str, int], expected: str
) -> None:
    framework = toys.framework_of(toys.Fit(), *plugins, toys.Binder(), weights=weights)
    # n1: 2 cores free, n2: 4, n3: 3  ->  MostFreeCpu normalised 50, 100, 75 (minus the pod).
    snapshot = toys.snapshot_of(
        *three_nodes(),
        b.pod("u1", node="n1", cpu="2"),
        b.pod("u3", node="n3", cpu="1"),
        b.pod("p", cpu="0"),
    )
    assert toys.run_allocate(framework, snapshot).bindings() == {"default/p": expected}


def test_debug_score_table_exact_text() -> None:
    framework = toys.framework_of(
        toys.Fit(), toys.MostFreeCpu(), toys.LastRow(), toys.Binder(), weights={"MostFreeCpu": 2}
    )
    tables: list[str] = []
    framework.score_table_sink = lambda pod, text: tables.append(text)
    snapshot = toys.snapshot_of(
        *three_nodes(),
        b.pod("u1", node="n1", cpu="1"),
        b.pod("u2", node="n2", cpu="3"),
        b.pod("p", cpu="100m"),
    )
    toys.run_allocate(framework, snapshot)
    assert tables == []  # off by default
    framework.debug_top_n = 2
    result = toys.run_allocate(framework, snapshot)
    assert result.bindings() == {"default/p": "n3"}
    assert tables == [
        "default/p: top 2 of 3 feasible nodes\n"
        "| node | MostFreeCpu | LastRow | total |\n"
        "|---|---:|---:|---:|\n"
        "| n3 | 200 | 100 | 300 |\n"
        "| n1 | 200 | 0 | 200 |"
    ]


def test_debug_score_table_goes_to_the_scores_log_by_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    framework = toys.framework_of(toys.Flat(), toys.Binder())
    framework.debug_top_n = 1
    with caplog.at_level(logging.INFO, logger="berth.scheduler.scores"):
        toys.run_allocate(framework, toys.snapshot_of(b.node("a"), b.node("b"), b.pod("p")))
    assert [r.getMessage() for r in caplog.records] == [
        "default/p: top 1 of 2 feasible nodes\n"
        "| node | Flat | total |\n"
        "|---|---:|---:|\n"
        "| a | 50 | 50 |"
    ]


def test_an_unplaceable_pod_gets_the_aggregated_reason() -> None:
    framework = toys.framework_of(toys.Selector(), toys.Fit(), toys.Binder())
    snapshot = toys.snapshot_of(
        b.node("a1", cpu="1", labels={"zone": "a"}),
        b.node("a2", cpu="1", labels={"zone": "a"}),
        b.node("a3", cpu="1", gpu=1, labels={"zone": "a"}),
        b.node("b1", cpu="8", labels={"zone": "b"}),
        b.pod("big", cpu="2", gpu=1, node_selector={"zone": "a"}),
    )
    result = toys.run_allocate(framework, snapshot)
    assert result.pod_reasons == {
        "default/big": "0/4 nodes fit: 3 Insufficient cpu, 2 Insufficient nvidia.com/gpu,"
        " 1 node(s) didn't match Pod's node affinity/selector"
    }


def test_find_node_without_filters_considers_every_row() -> None:
    framework = toys.framework_of(toys.LastRow())
    snapshot = toys.snapshot_of(*three_nodes(), b.pod("p"))
    attempt = framework.find_node(snapshot.pending[0], nodes=snapshot.nodes)
    assert attempt.row == 2
    assert attempt.status is statuses.SUCCESS
    assert np.count_nonzero(snapshot.nodes.requested) == 0  # an attempt changes nothing


class Explainer(interfaces.PostFilterPlugin):
    name = "Explainer"

    def post_filter(
        self,
        state: cyclestate.CycleState,
        pod: pods.PodInfo,
        nodes: nodetable.NodeTable,
        *,
        reason: str,
    ) -> statuses.Status:
        return statuses.new(statuses.Code.UNSCHEDULABLE, "preemption may free room")


def test_post_filter_reasons_are_appended_to_the_pods_reason() -> None:
    framework = toys.framework_of(toys.Fit(), Explainer(), toys.Binder())
    result = toys.run_allocate(
        framework, toys.snapshot_of(b.node("n1", cpu="1"), b.pod("p", cpu="2"))
    )
    assert result.pod_reasons == {
        "default/p": "0/1 nodes fit: 1 Insufficient cpu; preemption may free room"
    }


class Borrow(interfaces.FilterHook, interfaces.PreFilterHook):
    """Hands 4 more cores to pods labelled owner=yes on node n2 (a reservation's way), and
    shows Filter a smaller pod for pods labelled shrink=yes."""

    name = "Borrow"

    def pre_filter_hook(
        self, state: cyclestate.CycleState, pod: pods.PodInfo
    ) -> pods.PodInfo | None:
        if pod.labels.get("shrink") != "yes":
            return None
        return toys.snapshot_of(b.pod("tiny", cpu="100m")).pending[0]

    def filter_hook(
        self, state: cyclestate.CycleState, pod: pods.PodInfo, nodes: nodetable.NodeTable
    ) -> nodetable.NodeTable | None:
        if pod.labels.get("owner") != "yes":
            return None
        view = nodes.copy()
        view.allocatable[view.index["n2"], view.column["cpu"]] += 4000
        return view


@pytest.mark.parametrize(
    ("labels", "expected"),
    [({}, None), ({"owner": "yes"}, "n2"), ({"shrink": "yes"}, "n1")],
    ids=["no-hook-applies", "filter-hook-view", "pre-filter-hook-pod"],
)
def test_phase_hooks_change_what_filter_sees(labels: dict[str, str], expected: str | None) -> None:
    framework = toys.framework_of(Borrow(), toys.Fit(), toys.Binder())
    snapshot = toys.snapshot_of(
        b.node("n1", cpu="2"), b.node("n2", cpu="2"), b.pod("p", cpu="3", labels=labels)
    )
    result = toys.run_allocate(framework, snapshot)
    assert result.bindings() == ({"default/p": expected} if expected else {})
    assert snapshot.nodes.allocatable[1, snapshot.nodes.column["cpu"]] == 2000  # view only
