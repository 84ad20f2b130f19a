"""Berth's Prometheus metrics: every series the operator exposes on ``/metrics``.

One :class:`Metrics` object per process owns its own :class:`prometheus_client.CollectorRegistry`
(never the library's global one, so tests and two operators in one process do not collide).
The composition (:mod:`berth.operator.main`) creates it, the HTTP server exposes it, and the
leader-only parts record into it through the typed methods below: the scheduling loop after
each cycle, the binder per binding, the controllers when they write statuses, leadership when it
changes. Recording never does I/O.

Names follow Prometheus' conventions: the ``berth_`` prefix, base units (seconds, cores, bytes)
and ``_total`` on counters. Queue resources are one series per resource with a ``unit`` label
(``core``, ``byte``, ``integer``), as kube-state-metrics publishes requests and limits.

Metrics describing current state (pending pods, queue resources, phases) are replaced as a whole
by their ``set_*`` method, so that a queue that disappears stops being reported.
"""

from __future__ import annotations

import collections.abc
import enum

import prometheus_client
import prometheus_client.core
import prometheus_client.exposition
import prometheus_client.registry

from berth.api import resources

__all__ = ["AttemptResult", "Metrics", "PREFIX", "unit_of"]

PREFIX = "berth"

# Per-attempt and per-binding latencies: 1 ms .. ~16 s, doubling (kube-scheduler's buckets).
_FAST_BUCKETS = tuple(0.001 * 2**i for i in range(15))
# Whole-pod latency from creation to bound includes queueing: 10 ms .. ~1.5 h, doubling.
_E2E_BUCKETS = tuple(0.01 * 2**i for i in range(20))

_BYTE_RESOURCES = frozenset({resources.MEMORY, resources.EPHEMERAL_STORAGE})


class AttemptResult(enum.StrEnum):
    """The outcome of one attempt to schedule one pod (kube-scheduler's label values)."""

    SCHEDULED = "scheduled"
    UNSCHEDULABLE = "unschedulable"
    ERROR = "error"


def unit_of(resource: str) -> str:
    """The base unit a resource's value is reported in: ``core``, ``byte`` or ``integer``."""
    if resource == resources.CPU:
        return "core"
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        return "byte"
    return "integer"


class _StateGauge(prometheus_client.registry.Collector):
    """A gauge family whose whole set of series is replaced at once.

    prometheus-client's ``Gauge`` can only clear and refill, and a scrape in between would see a
    half-filled family; swapping one dict is atomic, so a scrape sees the old or the new state.
    """

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...]) -> None:
        self._name = name
        self._documentation = documentation
        self._labels = labels
        self._values: dict[tuple[str, ...], float] = {}

    def replace(self, values: collections.abc.Mapping[tuple[str, ...], float]) -> None:
        for key in values:
            if len(key) != len(self._labels):
                raise ValueError(f"{self._name}: expected labels {self._labels}, got {key}")
        self._values = dict(values)

    def collect(self) -> collections.abc.Iterable[prometheus_client.core.Metric]:
        family = prometheus_client.core.GaugeMetricFamily(
            self._name, self._documentation, labels=self._labels
        )
        for key, value in sorted(self._values.items()):
            family.add_metric(list(key), value)
        yield family


class Metrics:
    """All of Berth's metrics, in one registry of their own."""

    def __init__(self) -> None:
        self.registry = prometheus_client.CollectorRegistry(auto_describe=True)
        reg = self.registry

        # Scheduling ----------------------------------------------------------------------
        self._attempts = prometheus_client.Counter(
            f"{PREFIX}_schedule_attempts_total",
            "Attempts to schedule a pod, by result (scheduled, unschedulable, error).",
            ["result"],
            registry=reg,
        )
        self._e2e = prometheus_client.Histogram(
            f"{PREFIX}_e2e_scheduling_duration_seconds",
            "Time from a pod's creation until Berth bound it.",
            buckets=_E2E_BUCKETS,
            registry=reg,
        )
        self._algorithm = prometheus_client.Histogram(
            f"{PREFIX}_scheduling_algorithm_duration_seconds",
            "Time the scheduling algorithm (filter, score, select) spent on one pod.",
            buckets=_FAST_BUCKETS,
            registry=reg,
        )
        self._session = prometheus_client.Histogram(
            f"{PREFIX}_session_duration_seconds",
            "Time of one scheduling session: snapshot, open, actions, close.",
            buckets=_FAST_BUCKETS,
            registry=reg,
        )
        self._action = prometheus_client.Histogram(
            f"{PREFIX}_action_duration_seconds",
            "Time one action (timelimit, allocate, backfill, ...) took in one session.",
            ["action"],
            buckets=_FAST_BUCKETS,
            registry=reg,
        )
        self._plugin = prometheus_client.Histogram(
            f"{PREFIX}_plugin_duration_seconds",
            "Time one plugin spent at one extension point in one session (in scheduling"
            " attempts: estimated from the one attempt in ten that is timed).",
            ["plugin", "extension_point"],
            buckets=_FAST_BUCKETS,
            registry=reg,
        )
        # The labelled children, kept: never removed from their metric.
        self._action_children: dict[str, prometheus_client.Histogram] = {}
        self._plugin_children: dict[tuple[str, str], prometheus_client.Histogram] = {}
        self._attempt_children = {
            result: self._attempts.labels(result=result.value) for result in AttemptResult
        }
        self._victims = prometheus_client.Counter(
            f"{PREFIX}_preemption_victims_total",
            "Pods evicted to make room for others (reclaim and preemption).",
            registry=reg,
        )

        # Binding -------------------------------------------------------------------------
        self._binding = prometheus_client.Histogram(
            f"{PREFIX}_binding_duration_seconds",
            "Time of one binding request to the API server, successful or not.",
            buckets=_FAST_BUCKETS,
            registry=reg,
        )
        self._binding_failures = prometheus_client.Counter(
            f"{PREFIX}_binding_failures_total",
            "Binding requests that failed, by reason (conflict, not_found, timeout, error).",
            ["reason"],
            registry=reg,
        )

        # Current state -------------------------------------------------------------------
        self._pending = _StateGauge(
            f"{PREFIX}_pending_pods",
            "Pods of Berth's scheduler waiting to be placed, by queue.",
            ("queue",),
        )
        self._allocated = _StateGauge(
            f"{PREFIX}_queue_allocated",
            "Resources allocated to a queue's pods, in the resource's base unit.",
            ("queue", "resource", "unit"),
        )
        self._guaranteed = _StateGauge(
            f"{PREFIX}_queue_guaranteed",
            "A queue's guaranteed resources, in the resource's base unit.",
            ("queue", "resource", "unit"),
        )
        self._fair_share = _StateGauge(
            f"{PREFIX}_queue_fair_share",
            "A queue's computed fair share, in the resource's base unit.",
            ("queue", "resource", "unit"),
        )
        self._podgroups = _StateGauge(
            f"{PREFIX}_podgroups",
            "PodGroups by phase.",
            ("phase",),
        )
        self._reservations = _StateGauge(
            f"{PREFIX}_reservations",
            "Reservations by phase.",
            ("phase",),
        )
        self._waiting = _StateGauge(
            f"{PREFIX}_waiting_podgroups",
            "PodGroups the last cycle left pending, by reason code (the condition's reason).",
            ("reason",),
        )
        for collector in (
            self._waiting,
            self._pending,
            self._allocated,
            self._guaranteed,
            self._fair_share,
            self._podgroups,
            self._reservations,
        ):
            reg.register(collector)

        # Leadership ----------------------------------------------------------------------
        self._leader = prometheus_client.Gauge(
            f"{PREFIX}_leader_status",
            "1 while this replica holds the leader Lease, else 0.",
            registry=reg,
        )

    # Recording -----------------------------------------------------------------------------
    def record_attempt(self, result: AttemptResult, *, algorithm_seconds: float | None) -> None:
        """One pod's scheduling attempt; ``algorithm_seconds`` is None when none ran."""
        self._attempt_children[result].inc()
        if algorithm_seconds is not None:
            self._algorithm.observe(algorithm_seconds)

    def observe_e2e(self, seconds: float) -> None:
        """A pod was bound ``seconds`` after it was created."""
        self._e2e.observe(seconds)

    def observe_session(self, seconds: float) -> None:
        self._session.observe(seconds)

    def observe_action(self, action: str, *, seconds: float) -> None:
        child = self._action_children.get(action)
        if child is None:
            child = self._action_children[action] = self._action.labels(action=action)
        child.observe(seconds)

    def observe_plugin(self, plugin: str, *, extension_point: str, seconds: float) -> None:
        # Every plugin at every session: the child is kept, not looked up by its labels each
        # time (``labels()`` costs more than the observation itself: 1.6 against 1.0 µs).
        key = (plugin, extension_point)
        child = self._plugin_children.get(key)
        if child is None:
            child = self._plugin_children[key] = self._plugin.labels(
                plugin=plugin, extension_point=extension_point
            )
        child.observe(seconds)

    def count_preemption_victims(self, count: int) -> None:
        if count < 0:
            raise ValueError(f"a victim count cannot be negative, got {count}")
        self._victims.inc(count)

    def observe_binding(self, seconds: float, *, failure: str | None = None) -> None:
        """One binding request that took ``seconds``; ``failure`` names why it failed."""
        self._binding.observe(seconds)
        if failure is not None:
            self._binding_failures.labels(reason=failure).inc()

    def set_pending_pods(self, by_queue: collections.abc.Mapping[str, int]) -> None:
        """Replace the pending-pod counts (queue name -> count)."""
        self._pending.replace({(queue,): count for queue, count in by_queue.items()})

    def set_queue_resources(
        self,
        *,
        allocated: collections.abc.Mapping[str, resources.ResourceList],
        guaranteed: collections.abc.Mapping[str, resources.ResourceList],
        fair_share: collections.abc.Mapping[str, resources.ResourceList],
    ) -> None:
        """Replace every queue's allocated, guaranteed and fair-share resources."""
        self._allocated.replace(_resource_series(allocated))
        self._guaranteed.replace(_resource_series(guaranteed))
        self._fair_share.replace(_resource_series(fair_share))

    def set_podgroup_phases(self, counts: collections.abc.Mapping[str, int]) -> None:
        self._podgroups.replace({(phase,): n for phase, n in counts.items()})

    def set_waiting_reasons(self, counts: collections.abc.Mapping[str, int]) -> None:
        """Pending PodGroups by reason code, replaced after each cycle."""
        self._waiting.replace({(code,): n for code, n in counts.items()})

    def set_reservation_phases(self, counts: collections.abc.Mapping[str, int]) -> None:
        self._reservations.replace({(phase,): n for phase, n in counts.items()})

    def set_leader(self, leading: bool) -> None:
        self._leader.set(1 if leading else 0)

    # Exposition ----------------------------------------------------------------------------
    def exposition(self, *, accept: str = "") -> tuple[bytes, str]:
        """The registry in the format the ``Accept`` header asks for, and its content type."""
        encoder, content_type = prometheus_client.exposition.choose_encoder(accept)
        return encoder(self.registry), content_type


def _resource_series(
    by_queue: collections.abc.Mapping[str, resources.ResourceList],
) -> dict[tuple[str, ...], float]:
    series: dict[tuple[str, ...], float] = {}
    for queue, amounts in by_queue.items():
        for resource, milli in amounts.items():
            # Milli-units to base units: cores, bytes, counts.
            series[(queue, resource, unit_of(resource))] = milli / 1000
    return series
