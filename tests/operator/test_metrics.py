"""Berth's metrics and their exposition.

We test these aspects:

- every metric the issue lists exists with the ``berth_`` prefix, base units and ``_total``
  counters, in the process's own registry (never prometheus-client's global one);
- two ``Metrics`` objects do not collide (two operators in one test process);
- recorded values appear with the right labels; queue resources are in base units with a
  ``unit`` label; state gauges are replaced as a whole (a vanished queue disappears);
- a negative victim count is refused;
- the PodGroups a cycle left pending are counted by their reason code.
"""

from __future__ import annotations

import prometheus_client
import prometheus_client.parser
import pytest

from berth.api import resources
from berth.operator import metrics, scheduling
from tests.scheduler import builders as b
from tests.scheduler.queues import runs


def samples(m: metrics.Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = m.exposition()[0].decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in prometheus_client.parser.text_string_to_metric_families(text)
        for sample in family.samples
    }


def family_types(m: metrics.Metrics) -> dict[str, str]:
    text = m.exposition()[0].decode()
    return {
        family.name: family.type
        for family in prometheus_client.parser.text_string_to_metric_families(text)
    }


EXPECTED_FAMILIES = {
    # scheduling attempts by result
    "berth_schedule_attempts": "counter",
    # e2e and algorithm latency
    "berth_e2e_scheduling_duration_seconds": "histogram",
    "berth_scheduling_algorithm_duration_seconds": "histogram",
    # bind latency and failures
    "berth_binding_duration_seconds": "histogram",
    "berth_binding_failures": "counter",
    # pending pods by queue; queue allocated/guaranteed/fair share by resource
    "berth_pending_pods": "gauge",
    "berth_queue_allocated": "gauge",
    "berth_queue_guaranteed": "gauge",
    "berth_queue_fair_share": "gauge",
    # PodGroups and Reservations by phase
    "berth_podgroups": "gauge",
    "berth_reservations": "gauge",
    # session, per-action and per-plugin durations
    "berth_session_duration_seconds": "histogram",
    "berth_action_duration_seconds": "histogram",
    "berth_plugin_duration_seconds": "histogram",
    # preemption victims
    "berth_preemption_victims": "counter",
    # leader status
    "berth_leader_status": "gauge",
}


def test_every_issue_metric_is_exposed_with_its_type() -> None:
    types = family_types(metrics.Metrics())
    assert {name: types.get(name) for name in EXPECTED_FAMILIES} == EXPECTED_FAMILIES


def test_counters_end_in_total_on_the_wire() -> None:
    m = metrics.Metrics()
    m.record_attempt(metrics.AttemptResult.SCHEDULED, algorithm_seconds=None)
    m.observe_binding(0.01, failure="conflict")
    m.count_preemption_victims(2)
    names = {name for name, _ in samples(m)}
    assert {
        "berth_schedule_attempts_total",
        "berth_binding_failures_total",
        "berth_preemption_victims_total",
    } <= names


def test_metrics_stay_out_of_the_global_registry() -> None:
    metrics.Metrics()
    global_names = {
        family.name
        for family in prometheus_client.parser.text_string_to_metric_families(
            prometheus_client.generate_latest().decode()
        )
    }
    assert not any(name.startswith("berth_") for name in global_names)


def test_two_processes_worth_of_metrics_do_not_collide() -> None:
    first, second = metrics.Metrics(), metrics.Metrics()
    first.set_leader(True)
    assert samples(first)[("berth_leader_status", ())] == 1.0
    assert samples(second)[("berth_leader_status", ())] == 0.0


def test_attempts_and_latencies_are_recorded_by_label() -> None:
    m = metrics.Metrics()
    m.record_attempt(metrics.AttemptResult.SCHEDULED, algorithm_seconds=0.003)
    m.record_attempt(metrics.AttemptResult.SCHEDULED, algorithm_seconds=0.003)
    m.record_attempt(metrics.AttemptResult.UNSCHEDULABLE, algorithm_seconds=None)
    m.observe_action("allocate", seconds=0.2)
    m.observe_action("allocate", seconds=0.1)
    m.observe_action("backfill", seconds=0.05)
    m.observe_plugin("Gang", extension_point="Filter", seconds=0.001)
    m.observe_plugin("Gang", extension_point="Filter", seconds=0.001)
    m.observe_plugin("Gang", extension_point="session", seconds=0.002)
    m.observe_e2e(1.5)
    got = samples(m)
    assert got[("berth_schedule_attempts_total", (("result", "scheduled"),))] == 2
    assert got[("berth_schedule_attempts_total", (("result", "unschedulable"),))] == 1
    assert got[("berth_scheduling_algorithm_duration_seconds_count", ())] == 2
    assert got[("berth_action_duration_seconds_sum", (("action", "allocate"),))] == pytest.approx(
        0.3
    )
    assert got[("berth_action_duration_seconds_count", (("action", "backfill"),))] == 1
    plugin_labels = (("extension_point", "Filter"), ("plugin", "Gang"))
    assert got[("berth_plugin_duration_seconds_count", plugin_labels)] == 2
    session_labels = (("extension_point", "session"), ("plugin", "Gang"))
    assert got[("berth_plugin_duration_seconds_sum", session_labels)] == 0.002
    assert got[("berth_e2e_scheduling_duration_seconds_bucket", (("le", "2.56"),))] == 1
    assert got[("berth_e2e_scheduling_duration_seconds_bucket", (("le", "1.28"),))] == 0


def test_binding_failures_are_counted_by_reason() -> None:
    m = metrics.Metrics()
    m.observe_binding(0.02)
    m.observe_binding(0.5, failure="timeout")
    got = samples(m)
    assert got[("berth_binding_duration_seconds_count", ())] == 2
    assert got[("berth_binding_failures_total", (("reason", "timeout"),))] == 1


def test_queue_resources_are_in_base_units() -> None:
    m = metrics.Metrics()
    allocated = resources.ResourceList.parse(
        {"cpu": "1500m", "memory": "2Gi", "nvidia.com/gpu": "2", "pods": "3"}
    )
    m.set_queue_resources(
        allocated={"team-a": allocated},
        guaranteed={"team-a": resources.ResourceList.parse({"cpu": "4"})},
        fair_share={"team-a": resources.ResourceList.parse({"cpu": "2500m"})},
    )
    got = samples(m)

    def series(name: str, resource: str, unit: str) -> float:
        return got[(name, (("queue", "team-a"), ("resource", resource), ("unit", unit)))]

    assert series("berth_queue_allocated", "cpu", "core") == 1.5
    assert series("berth_queue_allocated", "memory", "byte") == 2 * 1024**3
    assert series("berth_queue_allocated", "nvidia.com/gpu", "integer") == 2
    assert series("berth_queue_allocated", "pods", "integer") == 3
    assert series("berth_queue_guaranteed", "cpu", "core") == 4
    assert series("berth_queue_fair_share", "cpu", "core") == 2.5


def test_state_gauges_are_replaced_as_a_whole() -> None:
    m = metrics.Metrics()
    m.set_pending_pods({"team-a": 3, "team-b": 1})
    m.set_pending_pods({"team-b": 4})
    m.set_podgroup_phases({"Pending": 2, "Running": 1})
    m.set_reservation_phases({"Available": 1})
    got = samples(m)
    pending = {labels: v for (name, labels), v in got.items() if name == "berth_pending_pods"}
    assert pending == {(("queue", "team-b"),): 4}
    assert got[("berth_podgroups", (("phase", "Pending"),))] == 2
    assert got[("berth_reservations", (("phase", "Available"),))] == 1


@pytest.mark.parametrize(
    ("resource", "unit"),
    [
        ("cpu", "core"),
        ("memory", "byte"),
        ("hugepages-2Mi", "byte"),
        ("example.com/fpga", "integer"),
    ],
    ids=["cpu", "memory", "hugepages", "extended"],
)
def test_unit_of_resources(resource: str, unit: str) -> None:
    assert metrics.unit_of(resource) == unit


def test_negative_victim_count_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be negative"):
        metrics.Metrics().count_preemption_victims(-1)


def test_waiting_podgroups_are_counted_by_reason_code() -> None:
    run = runs.Run(
        b.node("n1", cpu="4"),
        runs.queue("open"),
        runs.queue("shut", state="Closed"),
        *runs.gang("big", 8, queue="open"),  # eight one-cpu pods on a four-cpu node: never
        *runs.gang("new", 1, queue="shut"),
        *runs.gang("lost", 1, queue="gone"),
    )
    result = run.cycle().result
    m = metrics.Metrics()
    scheduling._MetricsFeed(m).cycle(result, snapshot=None)
    got = {
        labels: v for (name, labels), v in samples(m).items() if name == "berth_waiting_podgroups"
    }
    assert got == {
        (("reason", "ClusterTooSmall"),): 1,
        (("reason", "QueueClosed"),): 1,
        (("reason", "QueueNotFound"),): 1,
    }
