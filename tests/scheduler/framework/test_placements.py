"""``Placements``: the session's pods on nodes, kept in step with every change.

We test these aspects:
- counts and groupings start from the snapshot's placed pods (finished and reserve pods left
  out) and follow additions, moves and removals, whether they were asked for before or after
  the changes, always equal to a recount from scratch;
- groupings walk only the pods that constrain others; a node unknown to the table is ignored.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import numpy as np

from berth.scheduler.framework import placements
from berth.scheduler.snapshot import podconstraints, pods
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
