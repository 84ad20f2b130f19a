"""Accounting plugins fail closed: an error stops placement where the books are wrong.

A session plugin that cannot do its accounting must not wave work through the checks it exists
for (before: the session ran on without it and a queue limited to 8 cpu took everything). We
test these aspects, with the default profile plus one out-of-tree session plugin ``Ledger``:

- ``Ledger`` raising in ``on_session_open``: nothing is placed, every group's reason names the
  plugin and its error;
- ``Ledger``'s allocate handler raising on one queue's pod: that queue takes nothing more this
  session (reason names the plugin), other queues go on;
- ``Ledger`` raising when asked whether a queue is overused: the queue counts as overused;
- ``Ledger`` raising when asked when a waiting job looks again: the cycle still places the
  others and says so, and the job is asked again next cycle rather than parked;
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
    """Raises where told: ``open``, ``allocate`` (for pods of queue ``bad``), ``overused``,
    ``revisit`` (for jobs of queue ``bad``)."""

    name = "Ledger"
    at: typing.ClassVar[set[str]] = set()

    def on_session_open(self, session: sessions.Session) -> None:
        if "open" in self.at:
            raise OverflowError("Python int too large to convert to C long")

        def allocated(event: framework.Event) -> None:
            if "allocate" in self.at and event.pod.queue == "bad":
                raise OverflowError("allocated overflows")

        session.hooks.allocated.add(allocated, plugin=self.name)
        if "overused" in self.at:

            def overused(queue: framework.QueueInfo) -> bool:
                if queue.name == "bad":
                    raise OverflowError("usage overflows")
                return False

            session.hooks.queue_overused.add(overused, plugin=self.name)
        if "revisit" in self.at:

            def revisit_at(job: framework.Job) -> float | None:
                if job.queue == "bad":
                    raise OverflowError("revisit time overflows")
                return None

            session.hooks.revisit_at.add(revisit_at, plugin=self.name)

    def on_session_close(self, session: sessions.Session) -> None:
        pass


def scheduler(*at: str, hints: bool = False) -> tuple[loop.Scheduler, sim_cluster.InMemoryCluster]:
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
    return loop.Scheduler(profile, registry=registry, clock=clock, hints=hints), cluster


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


def test_a_raising_revisit_time_keeps_the_cycle_and_the_job_in_sight() -> None:
    sched, cluster = scheduler("revisit", hints=True)
    cluster.put(cpu_pod("huge", queue="bad", cpu="64", created=runs.t(-200)))
    result = sched.run_once(cluster, cluster)
    bound = {k.split("/")[1] for k in result.bindings()}
    assert {"good0", "good1", "good2", "bad0", "bad1", "bad2"} <= bound
    assert result.errors == ("plugin Ledger raised OverflowError: revisit time overflows",)
    assert "Insufficient cpu" in result.pod_reasons["default/huge"]
    # Nothing changed, yet the pod is tried again (one scheduling attempt): a job whose
    # revisit time is unknown is not parked until something else happens.
    again = sched.run_once(cluster, cluster)
    assert len(again.attempt_seconds) == 1
    assert again.errors == result.errors


def test_a_recurring_error_is_logged_once_per_window(caplog: pytest.LogCaptureFixture) -> None:
    sched, cluster = scheduler("open")
    with caplog.at_level(logging.ERROR, logger="berth.scheduler.framework.runtime"):
        for _ in range(20):
            result = sched.run_once(cluster, cluster)
            assert result.errors  # every cycle's result still says so
    assert len(caplog.records) == 1
