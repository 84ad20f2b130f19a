"""Accounting plugins fail closed: an error stops placement where the books are wrong.

A session plugin that cannot do its accounting must not wave work through the checks it exists
for (before: the session ran on without it and a queue limited to 8 cpu took everything). We
test these aspects, with the default profile plus one out-of-tree session plugin ``Ledger``:

- ``Ledger`` raising in ``on_session_open``: nothing is placed, every group's reason names the
  plugin and its error;
- ``Ledger``'s allocate handler raising on one queue's pod: that queue takes nothing more this
  session (reason names the plugin), other queues go on;
- ``Ledger`` raising when asked whether a queue is overused: the queue counts as overused;
- the error is logged once per window, not once per cycle.
"""

from __future__ import annotations

import logging
import typing

import pytest

import berth.scheduler.framework as framework
from berth.scheduler import loop
from berth.scheduler.framework import sessions
from berth.scheduler.plugins import registry as in_tree
from berth.sim import cluster as sim_cluster
from berth.util import clocks
from tests.scheduler import builders as b
from tests.scheduler.queues import runs
from tests.scheduler.queues.runs import cpu_pod, queue


class Ledger(framework.SessionPlugin):
    """Raises where told: ``open``, ``allocate`` (for pods of queue ``bad``), ``overused``."""

    name = "Ledger"
    at: typing.ClassVar[set[str]] = set()

    def on_session_open(self, session: sessions.Session) -> None:
        if "open" in self.at:
            raise OverflowError("Python int too large to convert to C long")

        def allocated(event: framework.Event) -> None:
            if "allocate" in self.at and event.pod.queue == "bad":
                raise OverflowError("allocated overflows")

        session.add_event_handler(plugin=self.name, allocate=allocated, deallocate=None)
        if "overused" in self.at:

            def overused(queue: framework.QueueInfo) -> bool:
                if queue.name == "bad":
                    raise OverflowError("usage overflows")
                return False

            session.hooks.queue_overused.add(overused, plugin=self.name)

    def on_session_close(self, session: sessions.Session) -> None:
        pass


def scheduler(*at: str) -> tuple[loop.Scheduler, sim_cluster.InMemoryCluster]:
    Ledger.at = set(at)
    registry = in_tree.in_tree_registry()
    registry.merge(
        framework.Registry({"Ledger": framework.PluginFactory(new=lambda args, handle: Ledger())})
    )
    default = in_tree.default_profile()
    profile = default.model_copy(
        update={"plugins": (*default.plugins, framework.PluginConfig(name="Ledger"))}
    )
    clock = clocks.VirtualClock(b.EPOCH)
    cluster = sim_cluster.InMemoryCluster(clock=clock)
    for obj in [
        *[b.node(f"n{i}", cpu="4", memory="64Gi") for i in range(4)],
        queue("bad"),
        queue("good"),
        *[cpu_pod(f"bad{i}", queue="bad", created=runs.t(-100 + i)) for i in range(3)],
        *[cpu_pod(f"good{i}", queue="good", created=runs.t(-50 + i)) for i in range(3)],
    ]:
        cluster.put(obj)
    return loop.Scheduler(profile, registry=registry, clock=clock), cluster


def test_a_plugin_failing_to_open_holds_every_placement_with_its_reason() -> None:
    sched, cluster = scheduler("open")
    result = sched.run_once(cluster, cluster)
    assert result.bindings() == {}
    reasons = set(result.group_reasons.values())
    assert reasons and all("plugin Ledger failed to open the session" in r for r in reasons)
    assert all("OverflowError" in r for r in reasons)


def test_a_handler_failing_on_one_queue_holds_only_that_queue() -> None:
    sched, cluster = scheduler("allocate")
    result = sched.run_once(cluster, cluster)
    bound = {k.split("/")[1] for k in result.bindings()}
    assert {"good0", "good1", "good2"} <= bound
    # The first of bad's pods was placed before the handler failed; nothing after it.
    assert len([name for name in bound if name.startswith("bad")]) <= 1
    held = [r for k, r in result.pod_reasons.items() if k.split("/")[1].startswith("bad")]
    assert held and all("plugin Ledger failed to account" in r for r in held)


def test_a_raising_overused_check_counts_the_queue_as_overused() -> None:
    sched, cluster = scheduler("overused")
    result = sched.run_once(cluster, cluster)
    bound = {k.split("/")[1] for k in result.bindings()}
    assert bound == {"good0", "good1", "good2"}


def test_a_recurring_error_is_logged_once_per_window(caplog: pytest.LogCaptureFixture) -> None:
    sched, cluster = scheduler("open")
    with caplog.at_level(logging.ERROR, logger="berth.scheduler.framework.runtime"):
        for _ in range(20):
            result = sched.run_once(cluster, cluster)
            assert result.errors  # every cycle's result still says so
    assert len(caplog.records) == 1
