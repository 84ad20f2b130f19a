"""The node writer (``berth.kube.autoscaling.node_protection``) against the emulator.

We test these aspects:

- a node holding an Available Reservation gets both autoscalers' opt-outs and Berth's record,
  in one write through the write primitive; asking again writes nothing;
- when the reservation ends (or goes), exactly what Berth set is removed: an opt-out a user set
  stays;
- a node protected by an earlier leader and holding nothing now is cleaned up on the first
  cycle; a pod nominated to a node holds it only while it waits;
- a write from a replica that lost its Lease is refused by the fence, and nothing is written.
"""

from __future__ import annotations

import json
import typing

from berth.emulator import testing
from berth.kube.autoscaling import node_protection
from berth.kube.transport import clients, fencing, writes
from berth.scheduler.snapshot import cache as cluster_cache
from berth.status import nodes
from berth.util import clocks
from tests.kube import conftest

Object = dict[str, typing.Any]
KARPENTER, CA = nodes.KARPENTER_DO_NOT_DISRUPT, nodes.CLUSTER_AUTOSCALER_SCALE_DOWN_DISABLED


def _reservation(name: str, *, phase: str, node: str | None) -> Object:
    status: Object = {"phase": phase}
    if node is not None:
        status.update(nodeName=node, allocatable={"cpu": "2", "pods": "1"})
    return {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "r", "resources": {"requests": {"cpu": "2"}}}]}
            },
            "owners": [{"object": {"name": "trainer"}}],
        },
        "status": status,
    }


class World:
    def __init__(self, emulator: testing.RunningEmulator, writer: writes.Writer) -> None:
        self.emulator = emulator
        self.cache = cluster_cache.ClusterCache()
        self.protection = node_protection.NodeProtection(writer)
        self.clock = clocks.SystemClock()

    def node(self, name: str, *, annotations: dict[str, str] | None = None) -> None:
        obj = conftest.node(name)
        if annotations:
            obj["metadata"]["annotations"] = annotations
        created = conftest.create(self.emulator, obj, plural="nodes", namespace=None)
        self.cache.add_node(created)
        self.protection.node_seen(created)

    def stored(self, name: str) -> dict[str, str]:
        api = self.emulator.api
        resource = self.emulator.call(api.resource, "v1", "nodes")
        obj = self.emulator.call(api.storage.get, resource.key, "", name)
        assert obj is not None
        annotations: dict[str, str] = obj["metadata"].get("annotations") or {}
        return annotations

    async def cycle(self, *, nominated: dict[str, str] | None = None) -> int:
        """One cycle's offer and the writes it queued; how many nodes were written."""
        before = self.protection.written
        self.protection.offer(
            self.cache.snapshot(self.clock.now()), nominated=nominated or {}, pinned={}
        )
        await self.protection.write_queued()
        # What the watch would bring next: the nodes as stored now.
        for name in ("n1", "n2"):
            api = self.emulator.api
            resource = self.emulator.call(api.resource, "v1", "nodes")
            obj = self.emulator.call(api.storage.get, resource.key, "", name)
            if obj is not None:
                self.protection.node_seen(obj)
        return self.protection.written - before


async def test_a_reserved_node_is_protected_while_the_reservation_holds_it(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    world = World(emulator, writes.Writer(connection.api))
    world.node("n1", annotations={CA: "true"})  # the user's own opt-out
    world.node("n2")
    world.cache.add_reservation(_reservation("r", phase="Available", node="n1"))
    assert await world.cycle() == 1
    held = world.stored("n1")
    assert held[KARPENTER] == "true" and held[CA] == "true"
    record = json.loads(held[nodes.PROTECTION_ANNOTATION])
    assert record == {"set": [KARPENTER], "holds": ["Reservation default/r"]}
    assert nodes.PROTECTION_ANNOTATION not in world.stored("n2")
    assert await world.cycle() == 0  # nothing changed: nothing written

    world.cache.add_reservation(_reservation("r", phase="Expired", node="n1"))
    assert await world.cycle() == 1
    assert world.stored("n1") == {CA: "true"}  # Berth's gone, the user's stays


async def test_a_node_left_protected_by_an_earlier_leader_is_released(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    world = World(emulator, writes.Writer(connection.api))
    record = json.dumps({"set": [KARPENTER, CA], "holds": ["Reservation default/gone"]})
    world.node(
        "n1", annotations={KARPENTER: "true", CA: "true", nodes.PROTECTION_ANNOTATION: record}
    )
    assert await world.cycle() == 1
    assert world.stored("n1") == {}


async def test_a_nomination_holds_its_node_only_while_the_pod_waits(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    world = World(emulator, writes.Writer(connection.api))
    world.node("n1")
    waiting = conftest.pod("p")
    waiting["metadata"]["uid"] = "uid-p"
    world.cache.add_pod(waiting)
    assert await world.cycle(nominated={"default/p": "n1"}) == 1
    assert json.loads(world.stored("n1")[nodes.PROTECTION_ANNOTATION])["holds"] == [
        "Nominated default/p"
    ]
    world.cache.add_pod(conftest.pod("p", node="n1") | {"metadata": waiting["metadata"]})
    assert await world.cycle(nominated={"default/p": "n1"}) == 1
    assert world.stored("n1") == {}


async def test_a_fenced_writer_writes_nothing(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    fence = fencing.Fence(renew_deadline=10.0)  # never renewed: not the leader
    world = World(emulator, writes.Writer(connection.api, fence=fence))
    world.node("n1")
    world.cache.add_reservation(_reservation("r", phase="Available", node="n1"))
    assert await world.cycle() == 0
    assert world.stored("n1") == {}
