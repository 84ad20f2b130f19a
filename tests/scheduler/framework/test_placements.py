"""``Placements``: the session's pods on nodes, kept in step with every change.

We test these aspects:
- counts and groupings start from the snapshot's placed pods (finished and reserve pods left
  out) and follow additions, moves and removals, whether they were asked for before or after
  the changes, always equal to a recount from scratch;
- groupings walk only the pods that constrain others; a node unknown to the table is ignored;
- from one session to the next (property, hypothesis): over any sequence of pods stored,
  moved, finished and forgotten, nodes added, reserve pods named and the sessions' own
  tentative changes, and snapshots no session ran over, what a session takes over equals a
  recount from scratch, and it costs the pods that changed, not every pod (a change of the
  world counts afresh).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.scheduler.framework import placements
from berth.scheduler.snapshot import cache, podconstraints, pods
from tests.scheduler import builders as b
from tests.scheduler.constraints import specs as s
from tests.scheduler.plugins import harness

PORT = s.ports((80, "TCP", ""))


def _web(pod: pods.PodInfo) -> bool:
    return pod.labels.get("app") == "web"


def _ports(pod: pods.PodInfo) -> collections.abc.Iterable[podconstraints.HostPort]:
    return pod.host_ports


def _setup(
    *, reserve_pods: frozenset[str] = frozenset()
) -> tuple[placements.Placements, list[str]]:
    snapshot = harness.snapshot(
        b.node("n1"),
        b.node("n2"),
        b.pod("w1", node="n1", labels={"app": "web"}, spec=PORT),
        b.pod("w2", node="n2", labels={"app": "web"}),
        b.pod("done", node="n2", labels={"app": "web"}, phase="Succeeded"),
        b.pod("db", node="n2", labels={"app": "db"}),
    )
    built = placements.Placements(snapshot, nodes=snapshot.nodes, reserve_pods=reserve_pods)
    return built, list(snapshot.nodes.names)


def _info(name: str, **fields: typing.Any) -> pods.PodInfo:
    return pods.pod_info(b.pod(name, **fields))


def test_counts_follow_changes_asked_before_or_after() -> None:
    early, _ = _setup()
    late, _ = _setup()
    counts = early.counts("web", predicate=_web)
    ports = early.grouped("ports", extract=_ports)
    assert counts.tolist() == [1, 1]
    assert {p.port: c.tolist() for p, c in ports.items()} == {80: [1, 0]}
    changes: list[tuple[str, pods.PodInfo, str | None]] = [
        ("add", _info("new", labels={"app": "web"}, spec=PORT), "n2"),
        ("remove", _info("w1", node="n1", labels={"app": "web"}, spec=PORT), None),
        ("add", _info("new", labels={"app": "web"}, spec=PORT), "n1"),  # moved
        ("add", _info("w1", node="n1", labels={"app": "web"}, spec=PORT), "n1"),  # undone
        ("add", _info("elsewhere", labels={"app": "web"}), "ghost"),
    ]
    for placed in (early, late):
        for op, pod, node in changes:
            if op == "add":
                assert node is not None
                placed.add(pod, node)
            else:
                placed.remove(pod)
    for placed in (early, late):
        assert placed.counts("web", predicate=_web).tolist() == [2, 1]
        grouped = placed.grouped("ports", extract=_ports)
        assert {p.port: c.tolist() for p, c in grouped.items()} == {80: [2, 0]}
        recount = np.zeros(2, dtype=np.int64)
        for pod, row in placed.placed().values():
            recount[row] += _web(pod)
        assert recount.tolist() == [2, 1]
        assert "default/done" not in placed.placed()


def test_reserve_pods_never_count() -> None:
    # Reserve pods (a Reservation's in-memory pod) are named by a plugin for the session
    # (SessionHooks.reserve_pods), never known from a user-writable annotation.
    placed, _ = _setup(reserve_pods=frozenset({"default/r"}))
    reserve = dataclasses.replace(_info("r", labels={"app": "web"}), reserve=True)
    placed.add(reserve, "n1")
    assert placed.counts("web", predicate=_web).tolist() == [1, 1]


# From one session to the next ----------------------------------------------------------------
_NAMES = [f"p{i}" for i in range(6)]
_NODES = ["n1", "n2", "n3"]

_put = st.tuples(
    st.just("put"),
    st.sampled_from(_NAMES),
    st.sampled_from([None, *_NODES]),
    st.booleans(),  # labelled web
    st.booleans(),  # finished
)
_forget = st.tuples(st.just("forget"), st.sampled_from(_NAMES))
_node = st.tuples(st.just("node"), st.sampled_from(["n4", "n5"]))
_reserve = st.tuples(st.just("reserve"), st.sampled_from(_NAMES))
_tentative = st.tuples(st.just("tentative"), st.sampled_from(_NAMES), st.sampled_from(_NODES))
_evict = st.tuples(st.just("evict"), st.sampled_from(_NAMES))
_skip = st.tuples(st.just("skip"))  # the loop runs no session over this snapshot
_step = st.lists(st.one_of(_put, _forget, _node, _reserve, _tentative, _evict, _skip), max_size=4)


def _web_counts(placed: placements.Placements, *, carried: bool) -> list[int]:
    return typing.cast("list[int]", placed.counts("web", predicate=_web, carried=carried).tolist())


def _port_counts(placed: placements.Placements, *, carried: bool) -> dict[int, list[int]]:
    grouped = placed.grouped("ports", extract=_ports, carried=carried)
    return {p.port: c.tolist() for p, c in grouped.items() if c.any()}


@settings(max_examples=150, deadline=None)
@given(st.lists(_step, min_size=1, max_size=8))
def test_what_a_session_takes_over_equals_a_recount(
    steps: list[list[tuple[typing.Any, ...]]],
) -> None:
    known = cache.ClusterCache()
    for name in _NODES:
        known.add_node(b.node(name))
    reserve: set[str] = set()
    carried: placements.Carried | None = None
    for at, step in enumerate(steps):
        session_ops = []
        for op in step:
            if op[0] == "put":
                _, name, node, web, finished = op
                known.add_pod(
                    b.pod(
                        name,
                        node=node,
                        labels={"app": "web" if web else "db"},
                        phase="Succeeded" if finished else None,
                        spec=PORT,
                    )
                )
            elif op[0] == "forget":
                known.remove_pod(f"default/{op[1]}")
            elif op[0] == "node":
                known.add_node(b.node(op[1]))
            elif op[0] == "reserve":
                reserve ^= {f"default/{op[1]}"}
            elif op[0] != "skip":
                session_ops.append(op)
        snapshot = known.snapshot(b.EPOCH + at)
        if ("skip",) in step:
            carried = carried.passed_over(snapshot) if carried is not None else None
            continue
        taking = placements.Placements(
            snapshot, nodes=snapshot.nodes, reserve_pods=set(reserve), carried=carried
        )
        fresh = placements.Placements(snapshot, nodes=snapshot.nodes, reserve_pods=set(reserve))
        for placed in (taking, fresh):
            for op in session_ops:
                if op[0] == "tentative":
                    placed.add(_info(op[1], labels={"app": "web"}, spec=PORT), op[2])
                else:
                    placed.remove(_info(op[1]))
        assert _web_counts(taking, carried=True) == _web_counts(fresh, carried=False)
        assert _port_counts(taking, carried=True) == _port_counts(fresh, carried=False)
        assert dict(taking.placed()) == dict(fresh.placed())
        carried = taking.hand_on()


def test_taking_over_costs_the_pods_that_changed() -> None:
    known = cache.ClusterCache()
    for name in _NODES:
        known.add_node(b.node(name))
    for i in range(300):
        known.add_pod(b.pod(f"w{i}", node=_NODES[i % 3], labels={"app": "web"}))
    asked: list[str] = []

    def counted(pod: pods.PodInfo) -> bool:
        asked.append(pod.key)
        return _web(pod)

    def session(at: int, carried: placements.Carried | None) -> placements.Placements:
        snapshot = known.snapshot(b.EPOCH + at)
        placed = placements.Placements(snapshot, nodes=snapshot.nodes, carried=carried)
        placed.counts("web", predicate=counted, carried=True)
        return placed

    first = session(0, None)
    assert len(asked) == 300
    known.add_pod(b.pod("w0", node="n2", labels={"app": "web"}))  # moved
    known.add_pod(b.pod("new", node="n3", labels={"app": "web"}))
    asked.clear()
    second = session(1, first.hand_on())
    assert sorted(asked) == ["default/new", "default/w0", "default/w0"]  # out of n1, into n2
    assert second.counts("web", predicate=counted).tolist() == [99, 101, 101]
    known.add_pod(b.pod("w1", node="n1", labels={"app": "db"}))  # moved, no longer web
    passed = second.hand_on()
    assert passed is not None
    passed = passed.passed_over(known.snapshot(b.EPOCH + 2))  # no session ran over it
    asked.clear()
    third = session(3, passed)
    assert sorted(asked) == ["default/w1", "default/w1"]
    assert third.counts("web", predicate=counted).tolist() == [99, 100, 101]
    second = third
    known.add_node(b.node("n4"))  # the rows change: counted afresh
    asked.clear()
    session(4, second.hand_on())
    assert len(asked) == 301


def test_a_namespace_relabelled_is_counted_afresh() -> None:
    # Pod affinity's namespaceSelector reads the namespaces' labels: counts kept from a
    # session before the relabelling would still name the old team's pods.
    def namespace(team: str) -> dict[str, typing.Any]:
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "default", "labels": {"team": team}},
        }

    known = cache.ClusterCache()
    known.add_node(b.node("n1"))
    known.add_namespace(namespace("a"))
    known.add_pod(b.pod("w", node="n1"))
    carried = None
    for at, team in enumerate(("a", "b")):
        if team == "b":
            known.add_namespace(namespace("b"))
        snapshot = known.snapshot(b.EPOCH + at)

        def of_team_a(
            pod: pods.PodInfo,
            labels: collections.abc.Mapping[
                str, collections.abc.Mapping[str, str]
            ] = snapshot.namespace_labels,
        ) -> bool:
            return labels.get(pod.namespace, {}).get("team") == "a"

        placed = placements.Placements(snapshot, nodes=snapshot.nodes, carried=carried)
        counted = placed.counts("team a", predicate=of_team_a, carried=True).tolist()
        assert counted == ([1] if team == "a" else [0])
        carried = placed.hand_on()


def test_placements_handed_on_are_spent() -> None:
    placed, _ = _setup()
    placed.counts("web", predicate=_web, carried=True)
    placed.hand_on()
    with pytest.raises(RuntimeError, match="handed on"):
        placed.counts("web", predicate=_web)
