"""DRA allocator answers kept from cycle to cycle (``dynamic_resources.answers``).

We test these aspects:

- a stream of pods, one a cycle, each with one claim from a template (scheduler_perf's
  SchedulingWithResourceClaimTemplate): after the first cycle, a cycle searches only the node
  whose devices changed (and allocates on the node chosen), not every node again;
- a kept answer is given only while the node's pools are as it was worked out on: a node's only
  device taken, the next pod waits for it; the device freed, the pod fits again;
- a class changed (a new catalog) drops what was kept: a selector narrowed to no device makes
  the next pod wait, though the nodes' usage is as before.
"""

from __future__ import annotations

import collections.abc
import typing

import pytest

from berth.scheduler.plugins.dynamic_resources import allocator
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler import dra_builders as d
from tests.scheduler.plugins import harness

Obj = dict[str, typing.Any]


class _Stream:
    """Cycles of the default profile on an in-memory cluster, pods added between them."""

    def __init__(self, *objs: Obj) -> None:
        self.clock = clocks.VirtualClock(b.EPOCH)
        self.cluster = harness.in_memory(*objs, clock=self.clock)
        self.scheduler = harness.scheduler(harness.profile_with(), clock=self.clock)
        self.bindings: dict[str, str] = {}

    def cycle(self) -> dict[str, str]:
        self.clock.advance(1)
        result = self.scheduler.run_once(self.cluster, self.cluster)
        assert not result.errors, result.errors
        self.bindings.update(result.bindings())
        self.why = dict(result.pod_why)
        return result.bindings()


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> collections.abc.Iterator[list[str]]:
    """The nodes the allocator searched, in order."""
    searched: list[str] = []
    real = allocator.allocate

    def counting(*args: typing.Any, **kw: typing.Any) -> allocator.Outcome:
        searched.append(kw["node"])
        return real(*args, **kw)

    monkeypatch.setattr(allocator, "allocate", counting)
    yield searched


def test_a_stream_of_pods_searches_only_the_node_whose_devices_changed(
    searches: list[str],
) -> None:
    nodes = 20
    stream = _Stream(
        d.device_class("gpu"),
        d.template("one", d.request()),
        *[b.node(f"n{i}") for i in range(nodes)],
        *[d.node_slice(f"n{i}", devices=d.gpus(8)) for i in range(nodes)],
    )
    stream.cluster.put(d.pod_with_claims("p0", templates={"gpu": "one"}))
    assert len(stream.cycle()) == 1
    assert len(searches) >= nodes  # the first pod: every node is searched once
    for i in range(1, 30):
        searches.clear()
        stream.cluster.put(d.pod_with_claims(f"p{i}", templates={"gpu": "one"}))
        assert list(stream.cycle()) == [f"default/p{i}"]
        # The node the last pod went to (its usage changed), and the allocation on the node
        # this pod goes to: not the 20 nodes again.
        assert len(searches) <= 2, searches
        changed = {stream.bindings[f"default/p{i - 1}"], stream.bindings[f"default/p{i}"]}
        assert set(searches) <= changed
    # Every pod got a device of its own node.
    taken: set[tuple[str, str]] = set()
    for claim in stream.cluster.objects("ResourceClaim"):
        pod = claim["status"]["reservedFor"][0]["name"]
        for result in claim["status"]["allocation"]["devices"]["results"]:
            assert result["pool"] == stream.bindings[f"default/{pod}"]
            taken.add((result["pool"], result["device"]))
    assert len(taken) == 30


def test_a_kept_answer_holds_only_while_the_nodes_devices_are_as_they_were() -> None:
    stream = _Stream(
        d.device_class("gpu"),
        d.template("one", d.request()),
        b.node("n1"),
        d.node_slice("n1", devices=d.gpus(1)),
    )
    stream.cluster.put(d.pod_with_claims("a", templates={"gpu": "one"}))
    assert stream.cycle() == {"default/a": "n1"}
    stream.cluster.put(d.pod_with_claims("b", templates={"gpu": "one"}))
    assert stream.cycle() == {}
    assert "too few free devices" in stream.why["default/b"].message
    assert stream.cycle() == {}  # still taken: the answer kept for a free device is not given
    stream.cluster.delete("Pod", namespace="default", name="a")  # its claim is deallocated
    assert stream.cycle() == {"default/b": "n1"}


def test_a_class_changed_drops_the_kept_answers() -> None:
    stream = _Stream(
        d.device_class("gpu"),
        d.template("one", d.request()),
        b.node("n1"),
        d.node_slice("n1", devices=d.gpus(4, model="a100")),
    )
    stream.cluster.put(d.pod_with_claims("a", templates={"gpu": "one"}))
    assert stream.cycle() == {"default/a": "n1"}
    stream.cluster.put(d.pod_with_claims("b", templates={"gpu": "one"}))
    assert stream.cycle() == {"default/b": "n1"}
    h100 = 'device.attributes["gpu.example.com"].model == "h100"'
    stream.cluster.put(d.device_class("gpu", selectors=[h100]))
    stream.cluster.put(d.pod_with_claims("c", templates={"gpu": "one"}))
    assert stream.cycle() == {}
    assert "no devices matching" in stream.why["default/c"].message
