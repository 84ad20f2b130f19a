"""kube-scheduler's refusals in admission mode (``kube.admission.refusals``, ``.rejections``),
pure, on virtual time (every call is given its ``now``).

We test these aspects:

- a refusal names, as data, what Berth sees on the node: the taint the pod does not tolerate,
  the cordon, the pod's ResourceClaim not allocated there; kube-scheduler's words are kept
  verbatim; the reason's details carry the claim and the taint;
- a refused node is forgotten when the cause may have gone — a device on it freed, its taint
  removed, the node replaced — and the pod may be offered again at once; a change elsewhere
  (another node, a claim on another node) forgets nothing, and without a cause seen to go the
  node is forgotten only after the ttl;
- a pod refused again and again waits 5, 10, 20, ... seconds (at most the maximum) before it
  is offered again, its gang with it; bound where Berth put it, it starts again from 5;
- a pod is sent back (deleted) at most once per minute: a second refusal within the minute
  waits for the minute's end.
"""

from __future__ import annotations

import typing

from berth.kube.admission import admission_states as states
from berth.kube.admission import refusals, rejections
from berth.scheduler.snapshot import cache as cache_module
from berth.scheduler.snapshot import pods, snapshots
from tests.scheduler import builders as b
from tests.scheduler import dra_builders as d

Obj = dict[str, typing.Any]
TAINT = {"key": "maintenance", "value": "yes", "effect": "NoSchedule"}


class _World:
    """The objects of a small cluster, changed by the test, read as snapshots."""

    def __init__(self) -> None:
        self.nodes = {
            "n1": b.node("n1", taints=[TAINT]),
            "n2": b.node("n2"),
        }
        self.claims: dict[str, Obj] = {
            "held": d.claim("held", status=d.allocated((d.GPU_DRIVER, "n1", "gpu-0"), node="n1")),
            "other": d.claim("other", status=d.allocated((d.GPU_DRIVER, "n2", "gpu-0"), node="n2")),
            "wanted": d.claim("wanted"),
        }
        self.slices = [
            d.node_slice("n1", devices=d.gpus(1)),
            d.node_slice("n2", devices=d.gpus(1)),
        ]

    def snapshot(self, now: float) -> snapshots.Snapshot:
        cache = cache_module.ClusterCache(dynamic_resources=True)
        cache.add_device_class(d.device_class("gpu"))
        for node in self.nodes.values():
            cache.add_node(node)
        for made in self.slices:
            cache.add_resource_slice(made)
        for claim in self.claims.values():
            cache.add_resource_claim(claim)
        return cache.snapshot(now)


def _pod(**kw: typing.Any) -> pods.PodInfo:
    return pods.pod_info(d.pod_with_claims("p", claims={"gpu": "wanted"}, **kw))


def _refused(world: _World, now: float, *, node: str = "n1") -> refusals.Refusal:
    return refusals.refusal(
        world.snapshot(now),
        _pod(),
        node=node,
        how=states.Event.UNSCHEDULABLE,
        said="0/2 nodes are available: 1 cannot allocate all claims.",
    )


def test_a_refusal_names_the_taint_and_the_claim_as_data() -> None:
    refusal = _refused(_World(), 0)
    assert [t.key for t in refusal.taints] == ["maintenance"]
    assert refusal.claims == ("default/wanted",)
    assert not refusal.cordoned
    assert "untolerated taint {maintenance: yes}" in refusal.message
    assert "resourceclaim default/wanted not allocated there" in refusal.message
    assert refusal.message.endswith(
        "it said: 0/2 nodes are available: 1 cannot allocate all claims."
    )
    details = refusal.reason(message="x").details
    assert details["resourceClaims"] == "default/wanted"
    assert details["taints"] == "maintenance=yes:NoSchedule"
    assert details["node"] == "n1" and details["rejection"] == "unschedulable"
    tolerant = refusals.refusal(
        _World().snapshot(0),
        _pod(tolerations=[{"key": "maintenance", "operator": "Exists"}]),
        node="n1",
        how=states.Event.BIND_TIMEOUT,
        timeout=30,
    )
    assert tolerant.taints == ()
    assert "not bound within 30s" in tolerant.message


def _remembered(world: _World) -> rejections.Rejections:
    memory = rejections.Rejections(ttl=600)
    memory.remember("default/p", group=None, node="n1", now=0, refusal=_refused(world, 0))
    return memory


def _forget(memory: rejections.Rejections, world: _World, now: float) -> list[str]:
    seen = world.snapshot(now)
    return memory.forget_changed(lambda node: refusals.mark(seen, node), now=now)


def test_a_device_freed_on_the_node_forgets_it_and_ends_the_backoff() -> None:
    world = _World()
    memory = _remembered(world)
    assert memory.retry_at("default/p", group=None, now=1) == 5.0
    # Another node's device freed: nothing about n1 changed.
    world.claims["other"] = d.claim("other")
    assert _forget(memory, world, 2) == []
    assert memory.nodes_of("default/p", group=None, now=2) == {"n1"}
    world.claims["held"] = d.claim("held")  # n1's device freed
    assert _forget(memory, world, 3) == ["default/p"]
    assert memory.nodes_of("default/p", group=None, now=3) == frozenset()
    assert memory.retry_at("default/p", group=None, now=3) is None


def test_a_taint_removed_or_the_node_replaced_forgets_it() -> None:
    world = _World()
    memory = _remembered(world)
    world.nodes["n1"] = b.node("n1")  # untainted
    assert _forget(memory, world, 1) == ["default/p"]

    world = _World()
    memory = _remembered(world)
    del world.nodes["n1"]  # gone (one coming back under the name is another node)
    assert _forget(memory, world, 1) == ["default/p"]


def test_without_a_cause_seen_to_go_only_time_forgets() -> None:
    world = _World()
    memory = _remembered(world)
    for now in (10.0, 300.0, 599.0):
        assert _forget(memory, world, now) == []
        assert memory.nodes_of("default/p", group=None, now=now) == {"n1"}
    assert memory.nodes_of("default/p", group=None, now=600) == frozenset()
    # A refusal Berth knows nothing of (no snapshot): no mark, only time forgets.
    blind = rejections.Rejections(ttl=60)
    blind.remember("default/q", group=None, node="n1", now=0)
    assert _forget(blind, _World(), 59) == []
    assert blind.nodes_of("default/q", group=None, now=59) == {"n1"}


def test_the_backoff_doubles_per_refusal_for_the_pod_and_its_gang() -> None:
    memory = rejections.Rejections(ttl=3600, initial_backoff=5, max_backoff=40)
    now = 0.0
    waits = []
    for _ in range(6):
        retry = memory.remember("default/g-0", group="default/g", node="n1", now=now)
        waits.append(retry - now)
        assert memory.retry_at("default/g-1", group="default/g", now=now) == retry  # the gang
        assert memory.retry_at("default/g-0", group="default/g", now=retry) is None
        now = retry
    assert waits == [5, 10, 20, 40, 40, 40]
    memory.bound("default/g-0")
    memory.forget_group("default/g")
    assert memory.remember("default/g-0", group=None, node="n2", now=now) == now + 5


def test_a_pod_is_sent_back_at_most_once_a_minute() -> None:
    memory = rejections.Rejections()
    assert memory.send_back_at("default/p", now=100) == 100
    memory.sent_back("default/p", now=100)
    assert memory.send_back_at("default/p", now=110) == 160
    assert memory.send_back_at("default/other", now=110) == 110
    assert memory.send_back_at("default/p", now=175) == 175
    memory.sent_back("default/p", now=175)
    memory.forget_pod("default/p")  # deleted by its user: a new pod under the name
    assert memory.send_back_at("default/p", now=176) == 176
