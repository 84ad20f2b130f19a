"""An out-of-tree plugin, written only against ``berth.scheduler.framework``'s public names.

We test these aspects:
- registered with ``Registry.merge`` next to the in-tree plugins, it receives an
  ``ExtendedHandle`` when the scheduler builds it;
- it takes part in Filter (a node under maintenance is never used), Score (nodes with SSDs are
  preferred) and the session (an allocate event handler counts placements);
- its ControllerProvider controllers and APIServiceProvider routes are discovered, and the
  controller runs until told to stop.
"""

from __future__ import annotations

import asyncio
import collections.abc

import numpy as np

import berth.scheduler.framework as framework
from berth.scheduler import loop
from berth.scheduler.plugins import registry as in_tree
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler.framework import toys

# The plugin: nothing below imports anything of Berth but berth.scheduler.framework. ----------


class Heartbeat:
    name = "heartbeat"

    def __init__(self) -> None:
        self.beats = 0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.beats += 1
            await asyncio.sleep(0)


class Maintenance(
    framework.FilterPlugin,
    framework.ScorePlugin,
    framework.SessionPlugin,
    framework.ControllerProvider,
    framework.APIServiceProvider,
):
    """Avoids nodes labelled ``maintenance=true``, prefers ``ssd=true``, counts placements."""

    name = "Maintenance"

    def __init__(self, handle: framework.ExtendedHandle) -> None:
        self.handle = handle
        self.heartbeat = Heartbeat()
        self.placed = 0
        self.published = 0

    def filter(
        self, state: framework.CycleState, pod: framework.PodInfo, nodes: framework.NodeTable
    ) -> framework.NodeFilter:
        passed = np.array([labels.get("maintenance") != "true" for labels in nodes.labels])
        return framework.NodeFilter(
            passed=passed,
            code=framework.Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            reason="node under maintenance",
        )

    def score(
        self,
        state: framework.CycleState,
        pod: framework.PodInfo,
        nodes: framework.NodeTable,
        feasible: framework.BoolArray,
    ) -> framework.ScoreArray:
        ssd = [labels.get("ssd") == "true" for labels in nodes.labels]
        return np.where(ssd, framework.MAX_NODE_SCORE, framework.MIN_NODE_SCORE).astype(np.int64)

    def score_extensions(self) -> framework.ScoreExtensions | None:
        return None

    def on_session_open(self, session: framework.Session) -> None:
        self.placed = 0

        def count(event: framework.Event) -> None:
            self.placed += 1

        session.hooks.allocated.add(count, plugin=self.name)

    def on_session_close(self, session: framework.Session) -> None:
        self.published = self.placed
        self.placed = 0

    def new_controllers(self) -> collections.abc.Sequence[framework.Controller]:
        return [self.heartbeat]

    def routes(self) -> collections.abc.Sequence[framework.Route]:
        return [
            framework.Route(
                method="GET", path="placements", handler=lambda request: {"placed": self.published}
            )
        ]


built: list[Maintenance] = []


def new(args: framework.NoArgs, handle: framework.ExtendedHandle) -> Maintenance:
    plugin = Maintenance(handle)
    built.append(plugin)
    return plugin


# The test. -------------------------------------------------------------------------------------


def scheduler() -> loop.Scheduler:
    registry = in_tree.in_tree_registry()
    registry.merge(framework.Registry({"Maintenance": framework.PluginFactory(new=new)}))
    default = in_tree.default_profile()
    profile = default.model_copy(
        update={
            "plugins": (*default.plugins, framework.PluginConfig(name="Maintenance", weight=10))
        }
    )
    return loop.Scheduler(profile, registry=registry, clock=clocks.VirtualClock(b.EPOCH))


def test_out_of_tree_plugin_takes_part_in_filter_score_and_session() -> None:
    built.clear()
    sched = scheduler()
    (plugin,) = built
    assert isinstance(plugin.handle, framework.ExtendedHandle)
    assert plugin.handle is sched.handle
    snapshot = toys.snapshot_of(
        b.node("n1", cpu="8", labels={"maintenance": "true"}),
        b.node("n2", cpu="8"),
        b.node("n3", cpu="2", labels={"ssd": "true"}),
        *[b.pod(f"p{i}", cpu="1", created=b.EPOCH + i) for i in range(3)],
    )
    result = sched.run_session(snapshot)
    assert result.bindings() == {"default/p0": "n3", "default/p1": "n3", "default/p2": "n2"}
    assert plugin.published == 3
    assert "Maintenance" in result.plugin_seconds


def test_out_of_tree_controllers_and_routes_are_discovered() -> None:
    built.clear()
    sched = scheduler()
    assert len(built) == 1
    assert [(owner, c.name) for owner, c in sched.controllers.controllers()] == [
        ("Maintenance", "heartbeat")
    ]
    # In-tree plugins (Reservation) serve routes of their own; this test is about Maintenance.
    ((owner, route),) = [(o, r) for o, r in sched.services.routes() if o == "Maintenance"]
    assert (
        framework.ServiceRegistry.full_path(owner, route)
        == "/berth/v1/plugins/Maintenance/placements"
    )
    assert route.handler(framework.RouteRequest()) == {"placed": 0}


async def test_out_of_tree_controller_runs_until_stopped() -> None:
    built.clear()
    sched = scheduler()
    ((_, controller),) = sched.controllers.controllers()
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    for _ in range(3):
        await asyncio.sleep(0)
    stop.set()
    await asyncio.wait_for(task, timeout=5)
    assert built[0].heartbeat.beats >= 1
