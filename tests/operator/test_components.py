"""Leader-only components and the plugins' controllers, in virtual time (looptime).

We test these aspects:

- ``TaskComponent``: ``run`` gets a stop flag and returns when it is set; one that ignores the
  flag is cancelled after its stop timeout; one that ends on its own reports through
  ``on_exit`` (with its exception, if any); starting twice is a bug;
- ``Supervisor``: starts in order, stops every component at once (so a slow one does not delay
  the others), abandons a component that does not stop in time, and on a failed start stops
  what was started (including the failed one) and re-raises;
- ``PluginControllers``: runs every registered controller, sets their shared stop flag on
  stop, cancels one that does not return, keeps going when one fails, and refuses a second
  start in the same term.
"""

from __future__ import annotations

import asyncio

import looptime
import pytest

from berth.controllers import plugins as controllers
from berth.operator import components
from berth.scheduler.framework import handles, interfaces
from tests.operator import conftest

pytestmark = pytest.mark.looptime


async def test_task_component_returns_when_its_flag_is_set(
    looptime: looptime.LoopTimeProxy,
) -> None:
    seen: list[str] = []

    async def run(stop: asyncio.Event) -> None:
        seen.append("running")
        await stop.wait()
        seen.append("stopped")

    component = components.TaskComponent("loop", run, stop_timeout=5)
    await component.start()
    await asyncio.sleep(1)
    await component.stop()
    assert seen == ["running", "stopped"]
    assert looptime == 1


async def test_task_component_ignoring_its_flag_is_cancelled_after_the_timeout(
    looptime: looptime.LoopTimeProxy,
) -> None:
    cancelled = asyncio.Event()

    async def run(stop: asyncio.Event) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    component = components.TaskComponent("stubborn", run, stop_timeout=3)
    await component.start()
    await component.stop()
    assert cancelled.is_set()
    assert looptime == 3


@pytest.mark.parametrize(
    ("outcome", "expected_error"),
    [("return", None), ("raise", "RuntimeError('boom')")],
    ids=["returned", "raised"],
)
async def test_task_component_ending_on_its_own_reports_it(
    outcome: str, expected_error: str | None
) -> None:
    exits: list[tuple[str, str | None]] = []

    async def run(stop: asyncio.Event) -> None:
        await asyncio.sleep(2)
        if outcome == "raise":
            raise RuntimeError("boom")

    def on_exit(name: str, error: BaseException | None) -> None:
        exits.append((name, repr(error) if error is not None else None))

    component = components.TaskComponent("informers", run, on_exit=on_exit)
    await component.start()
    await asyncio.sleep(5)
    assert exits == [("informers", expected_error)]
    await component.stop()
    assert exits == [("informers", expected_error)]


async def test_task_component_stopped_on_request_does_not_report() -> None:
    exits: list[str] = []

    async def run(stop: asyncio.Event) -> None:
        await stop.wait()

    component = components.TaskComponent("kopf", run, on_exit=lambda name, _: exits.append(name))
    await component.start()
    await component.stop()
    assert exits == []


async def test_task_component_cannot_start_twice() -> None:
    async def run(stop: asyncio.Event) -> None:
        await stop.wait()

    component = components.TaskComponent("once", run)
    await component.start()
    with pytest.raises(RuntimeError, match="started twice"):
        await component.start()
    await component.stop()


async def test_supervisor_starts_in_order_and_stops_all_at_once(
    looptime: looptime.LoopTimeProxy,
) -> None:
    journal: list[str] = []
    supervisor = components.Supervisor(
        lambda: [
            conftest.Recorder("informers", journal, stop_delay=2),
            conftest.Recorder("loop", journal, stop_delay=1),
        ],
        stop_timeout=10,
    )
    await supervisor.start()
    assert supervisor.running == ["informers", "loop"]
    await supervisor.stop()
    assert journal == ["start informers", "start loop", "stop loop", "stop informers"]
    assert looptime == 2  # concurrently: the slowest, not the sum
    assert supervisor.running == []


async def test_supervisor_abandons_a_component_that_does_not_stop(
    looptime: looptime.LoopTimeProxy,
) -> None:
    journal: list[str] = []
    supervisor = components.Supervisor(
        lambda: [
            conftest.Recorder("stuck", journal, stop_delay=60),
            conftest.Recorder("quick", journal),
        ],
        stop_timeout=4,
    )
    await supervisor.start()
    await supervisor.stop()
    assert journal == ["start stuck", "start quick", "stop quick"]
    assert looptime == 4


async def test_supervisor_failed_start_stops_what_started_and_raises() -> None:
    journal: list[str] = []
    supervisor = components.Supervisor(
        lambda: [
            conftest.Recorder("informers", journal),
            conftest.Recorder("kopf", journal, fail_start=True),
            conftest.Recorder("loop", journal),
        ],
        stop_timeout=1,
    )
    with pytest.raises(RuntimeError, match="kopf cannot start"):
        await supervisor.start()
    assert journal == ["start informers", "start kopf", "stop kopf", "stop informers"]
    assert supervisor.running == []


class Controller:
    """A plugin controller that counts its runs and waits for its stop flag (or not)."""

    def __init__(self, name: str, *, mode: str = "wait") -> None:
        self.name = name
        self.mode = mode
        self.runs = 0
        self.stopped = False

    async def run(self, stop: asyncio.Event) -> None:
        self.runs += 1
        if self.mode == "fail":
            raise RuntimeError(f"{self.name} broke")
        if self.mode == "ignore":
            await asyncio.sleep(3600)
        await stop.wait()
        self.stopped = True


def registry_of(*pairs: tuple[str, Controller]) -> handles.ControllerRegistry:
    registry = handles.ControllerRegistry()
    by_plugin: dict[str, list[interfaces.Controller]] = {}
    for plugin, controller in pairs:
        by_plugin.setdefault(plugin, []).append(controller)
    for plugin, plugin_controllers in by_plugin.items():
        registry.register(plugin, controllers=plugin_controllers)
    return registry


async def settle() -> None:
    """Let freshly created tasks run up to their first wait."""
    await asyncio.sleep(0.1)


async def test_plugin_controllers_run_until_stopped() -> None:
    expiry, gc = Controller("expiry"), Controller("gc")
    runner = controllers.PluginControllers(
        registry_of(("Reservation", expiry), ("Gang", gc)), stop_timeout=5
    )
    await runner.start()
    await settle()
    assert runner.running == ["Gang/gc", "Reservation/expiry"]
    await runner.stop()
    assert (expiry.runs, expiry.stopped, gc.runs, gc.stopped) == (1, True, 1, True)
    assert runner.running == []


async def test_plugin_controller_ignoring_stop_is_cancelled(
    looptime: looptime.LoopTimeProxy,
) -> None:
    stubborn, polite = Controller("stubborn", mode="ignore"), Controller("polite")
    runner = controllers.PluginControllers(
        registry_of(("A", stubborn), ("B", polite)), stop_timeout=2
    )
    await runner.start()
    await settle()
    await runner.stop()
    assert polite.stopped and not stubborn.stopped
    assert runner.running == []
    assert looptime == pytest.approx(2.1)


async def test_failing_plugin_controller_is_logged_and_others_keep_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken, healthy = Controller("broken", mode="fail"), Controller("healthy")
    runner = controllers.PluginControllers(
        registry_of(("A", broken), ("B", healthy)), stop_timeout=2
    )
    await runner.start()
    await settle()
    assert runner.running == ["B/healthy"]
    assert "plugin controller A/broken failed" in caplog.text
    assert "RuntimeError: broken broke" in caplog.text
    await runner.stop()
    assert healthy.stopped and broken.runs == 1


async def test_plugin_controllers_run_once_per_term() -> None:
    runner = controllers.PluginControllers(registry_of(("A", Controller("c"))), stop_timeout=1)
    await runner.start()
    await runner.stop()
    with pytest.raises(RuntimeError, match="at most once per leadership term"):
        await runner.start()
