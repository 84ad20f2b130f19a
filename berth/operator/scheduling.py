"""What the leader runs: informers -> cache -> scheduling loop -> binder, statuses, Events, Kopf.

:func:`leader_components` is the ``leader_components`` factory ``berth run`` hands to
:func:`berth.operator.main.run`. Each leadership term builds, from the :class:`~berth.
operator.main.Context`:

- the scheduler (profile from the config file, else the default profile; plugins built once
  with the process's handle, so their controllers and routes are known);
- a :class:`~berth.scheduler.snapshot.cache.ClusterCache` kept current by
  :class:`~berth.kube.informers.ClusterInformers` (readiness ``caches-synced``);
- :class:`~berth.kube.snapshots.CacheSource` and :class:`~berth.kube.decisions.ApiSink`
  around the cache, wrapped by :class:`~berth.kube.admission.Admission` (on in both modes, so
  a restart with the other ``--mode`` adopts the pods the previous one left;
  docs/admission.md), the :class:`~berth.kube.events.EventRecorder`, and the Kopf operator
  (:class:`~berth.operator.embedding.KopfOperator`, tasks on this loop) whose handlers own
  PodGroups' and Queues' statuses (:mod:`berth.controllers.statuses`) and Reservations'
  statuses from the facts the binder publishes (:mod:`berth.controllers.reservation_statuses`),
  writing through the operator's fenced client;

and returns them as components in start order: Events, informers, binder, admission, the
scheduling loop (which waits for the caches before its first cycle: a cycle on a half-listed cluster
would place pods on capacity that is taken), Kopf (whose status handlers also run the
Reservations' lifetimes, :mod:`berth.controllers.reservations`), and the plugins' controllers
(:mod:`berth.controllers.plugins`). After every cycle the
metrics are fed and Kopf's status passes are kicked. ``/berth/v1/nodes/{name}`` and
``/debug/flags/s`` are lent the cache's node view and the score-table switch.

:func:`build` is the composition root: it builds every part from :class:`Inputs` with its
dependencies passed in (no callback is set on a part after it is built), in dependency order,
the informers last. The operator, ``berth up``/``demo``, the benchmarks and the tests
(``tests/admission/stack.py``) build with it. :class:`Parts` exposes what a term built.
"""

from __future__ import annotations

import asyncio
import collections
import collections.abc
import dataclasses
import logging
import time

from berth.api import keys
from berth.controllers import observed, plugins, reservation_statuses, reservations, statuses
from berth.controllers import registry as kopf_registry
from berth.kube import (
    admission,
    clients,
    credentials,
    decisions,
    events,
    fencing,
    informers,
    interop_groups,
    owner_groups,
    snapshots,
    writes,
)
from berth.operator import components, embedding, main, visibility
from berth.operator import metrics as berth_metrics
from berth.operator import settings as settings_module
from berth.scheduler import loop
from berth.scheduler.framework import decisions as cycle_decisions
from berth.scheduler.framework import handles, profiles, reasons, registries
from berth.scheduler.plugins import registry as plugin_registry
from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import snapshots as snapshot_types
from berth.util import clocks
from berth.workloads import interop

__all__ = ["Inputs", "Parts", "build", "leader_components", "load_profile", "with_registry"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Parts:
    """What one leadership term built (see the module docstring)."""

    scheduler: loop.Scheduler
    cache: cluster_cache.ClusterCache
    informers: informers.ClusterInformers
    source: snapshots.CacheSource
    sink: decisions.ApiSink
    recorder: events.EventRecorder
    objects: observed.ObservedObjects
    writer: statuses.StatusWriter  # PodGroup and Queue statuses
    trigger: asyncio.Event  # set by the informers: wakes the scheduling loop
    admission: admission.Admission  # around source and sink: the loop's source and sink
    grouper: owner_groups.OwnerGrouper | None = None  # None: grouping by owner is off
    interop: interop_groups.InteropGroups | None = None  # None: no other PodGroup API honoured
    kube_writer: writes.Writer | None = None  # the write primitive the parts share


def load_profile(document: collections.abc.Mapping[str, object]) -> profiles.Profile:
    """The profile a settings document describes: the default one unless it lists plugins
    or actions (``schedulerName`` alone only renames the default profile)."""
    if set(document) <= {"schedulerName"}:
        name = document.get("schedulerName")
        default = plugin_registry.default_profile()
        return default.model_copy(update={"scheduler_name": name}) if name else default
    return profiles.parse(dict(document), source="the config file's profile")


def leader_components(context: main.Context) -> list[components.Component]:
    """The leader-only components with the in-tree plugins."""
    return list(with_registry(plugin_registry.in_tree_registry())(context))


def with_registry(
    registry: registries.Registry,
    *,
    on_parts: collections.abc.Callable[[Parts], None] | None = None,
    on_bound: collections.abc.Callable[[decisions.BindOutcome], None] | None = None,
) -> main.ComponentFactory:
    """A ``leader_components`` factory scheduling with ``registry``'s plugins (out-of-tree
    plugins merged in by the caller); ``on_parts`` sees what each term built, ``on_bound``
    how each binding ended (the benchmarks)."""

    def factory(context: main.Context) -> list[components.Component]:
        parts = _build(context, registry=registry, on_bound=on_bound)
        if on_parts is not None:
            on_parts(parts)
        return _components(context, parts)

    return factory


class _Board:
    def __init__(self, source: snapshots.CacheSource, sink: decisions.ApiSink) -> None:
        self._source = source
        self._sink = sink

    def snapshot(self) -> snapshot_types.Snapshot | None:
        return self._source.last

    def result(self) -> cycle_decisions.CycleResult | None:
        return self._sink.last_result


@dataclasses.dataclass(frozen=True, kw_only=True)
class Inputs:
    """What :func:`build` builds a scheduling stack from: everything passed in, nothing set
    on the parts afterwards."""

    api: clients.AsyncApiClient
    settings: settings_module.Settings
    clock: clocks.Clock
    registry: registries.Registry
    handle: handles.ExtendedHandle | None = None  # None: a handle of its own
    metrics: berth_metrics.Metrics | None = None  # None: no binding metrics
    readiness: informers.ReadinessSink | None = None  # where "caches-synced" goes
    fence: fencing.Fence | None = None  # the leader's fence for the write primitive
    on_bound: collections.abc.Callable[[decisions.BindOutcome], None] | None = None
    wrap_sink: collections.abc.Callable[[decisions.ApiSink], admission.Sink] | None = None
    """Decorates the binder as admission's sink (tests record every cycle's result)."""


def build(inputs: Inputs) -> Parts:
    """The composition root: one scheduling stack, each part built with its dependencies.

    The order follows the dependencies: scheduler, cache, the write primitive, Events, the
    binder (with the live-pod book it waits on), the snapshot source, admission around them,
    and last the informers, which feed the cache and tell admission and the binder about pods.
    ``berth run`` (:func:`with_registry`), ``berth up``/``demo``/the benchmarks (through
    ``with_registry``) and the tests (:mod:`tests.admission.stack`) all build with it.
    """
    config = inputs.settings
    profile = load_profile(config.profile_document())
    scheduler = loop.Scheduler(
        profile,
        registry=inputs.registry,
        clock=inputs.clock,
        handle=inputs.handle,
        hints=config.queueing_hints,
        revisit_seconds=config.queueing_hints_revisit,
    )
    # The profile's name first: it schedules Reservations' placeholder pods.
    names = (profile.scheduler_name, *config.claimed_scheduler_names)
    cache = cluster_cache.ClusterCache(
        scheduler_names=names,
        plain_pods_queue=keys.DEFAULT_QUEUE if config.admit_plain_pods else None,
        group_by_owner=config.group_by_owner,
    )
    writer = writes.Writer(inputs.api, fence=inputs.fence)
    recorder = events.EventRecorder(
        inputs.api,
        clock=inputs.clock,
        component=profile.scheduler_name,
        instance=config.leader_election.identity,
    )
    live = informers.LivePods()
    # The one cycle of the graph: the binder reads the snapshot the source made last (for its
    # Events), and the source reads the binder's backoffs. A lookup closes it.
    made: list[snapshots.CacheSource] = []
    sink = decisions.ApiSink(
        inputs.api,
        cache=cache,
        clock=inputs.clock,
        recorder=recorder,
        observer=inputs.metrics,
        last_snapshot=lambda: made[0].last if made else None,
        concurrency=config.bind_concurrency,
        bind_timeout=config.bind_timeout,
        presence=live,
        eviction_wait=config.eviction_wait,
        writer=writer,
        on_bound=inputs.on_bound,
    )
    source = snapshots.CacheSource(cache, clock=inputs.clock, backoffs=sink)
    made.append(source)
    admitting = admission.Admission(
        inputs.api,
        cache=cache,
        source=source,
        sink=inputs.wrap_sink(sink) if inputs.wrap_sink is not None else sink,
        clock=inputs.clock,
        scheduler_names=names,
        recorder=recorder,
        bind_timeout=config.admission.bind_timeout,
        victims=sink.victims,  # admitted preemptors wait for their victims as bound ones do
        writer=writer,
    )
    trigger = asyncio.Event()
    watched = informers.ClusterInformers(
        inputs.api,
        cache=cache,
        scheduler_names=names,
        trigger=trigger,
        readiness=inputs.readiness,
        live=live,
        also_ours=admitting.observe_pod,
        on_pod_removed=admitting.pod_removed,  # passes it on to the binder
        on_pod_released=sink.pod_released,  # wakes preemptors waiting for their victims
        on_claim_changed=sink.claim_changed,  # wakes bindings waiting for their claims
    )
    objects = observed.ObservedObjects()
    board = _Board(source, sink)
    status_writer = statuses.StatusWriter(
        inputs.api,
        objects=objects,
        board=board,
        clock=inputs.clock,
        recorder=recorder,
        interval=max(config.period, 1.0),
        on_podgroup_phases=inputs.metrics.set_podgroup_phases if inputs.metrics else None,
        fence=inputs.fence,
    )
    grouper = (
        owner_groups.OwnerGrouper(
            inputs.api,
            clock=inputs.clock,
            recorder=recorder,
            namespace_queue=cache.namespace_queue,
            writer=writer,
        )
        if config.group_by_owner
        else None
    )
    return Parts(
        scheduler,
        cache,
        watched,
        source,
        sink,
        recorder,
        objects,
        status_writer,
        trigger,
        admitting,
        grouper,
        _interop(inputs, recorder=recorder, writer=writer),
        writer,
    )


def _build(
    context: main.Context,
    *,
    registry: registries.Registry,
    on_bound: collections.abc.Callable[[decisions.BindOutcome], None] | None,
) -> Parts:
    parts = build(
        Inputs(
            api=context.api,
            settings=context.settings,
            clock=context.clock,
            registry=registry,
            handle=context.handle,
            metrics=context.metrics,
            readiness=context.readiness,
            fence=context.fence,
            on_bound=on_bound,
        )
    )
    # The HTTP server outlives leadership terms: each term lends it its views.
    context.providers.node_lookup = parts.source.node
    context.providers.visibility = visibility.Visibility(
        _Board(parts.source, parts.sink), clock=context.clock
    )
    scheduler = parts.scheduler

    def set_top_n(top_n: int) -> None:
        scheduler.debug_top_n = top_n

    context.providers.score_table = set_top_n
    return parts


def _interop(
    inputs: Inputs, *, recorder: events.EventRecorder, writer: writes.Writer
) -> interop_groups.InteropGroups | None:
    config = inputs.settings
    flavors = [
        flavor
        for flavor, enabled in (
            (interop.SCHEDULER_PLUGINS, config.interop_scheduler_plugins),
            (interop.VOLCANO, config.interop_volcano),
            (interop.KUBERNETES, config.interop_workload_api),
            (interop.WORKLOADS, config.interop_workload_api),
        )
        if enabled
    ]
    if not flavors:
        return None
    return interop_groups.InteropGroups(
        inputs.api, flavors=flavors, recorder=recorder, writer=writer
    )


def _components(context: main.Context, parts: Parts) -> list[components.Component]:
    config = context.settings
    feed = _MetricsFeed(context.metrics)
    timed = _TimedSource(parts.admission, feed)
    # Reservations' expiry, owners and garbage collection, written from this loop.
    reserving = reservations.ReservationController(
        context.api,
        objects=parts.objects,
        board=_Board(parts.source, parts.sink),
        clock=context.clock,
        recorder=parts.recorder,
        retention=config.reservation_retention,
        field_manager=reservation_statuses.MANAGER,
        fence=context.fence,
    )

    async def run_informers(stop: asyncio.Event) -> None:
        try:
            await parts.informers.run(stop)
        finally:
            # A follower has no caches: the condition leaves with the informers.
            context.readiness.remove(informers.READINESS_CONDITION)

    async def run_loop(stop: asyncio.Event) -> None:
        if not await _wait_or_stop(parts.informers.synced, stop=stop):
            return
        logger.info("caches synced: scheduling pods of %s", parts.scheduler.profile.scheduler_name)

        def on_result(result: cycle_decisions.CycleResult) -> None:
            feed.cycle(result, snapshot=parts.source.last)
            seen = context.providers.visibility
            if seen is not None:
                seen.observe()
            parts.writer.kick()
            reserving.kick()
            last = timed.last
            if parts.grouper is not None and last is not None:
                parts.grouper.offer(last)
            if parts.interop is not None and last is not None:
                parts.interop.offer(last, reasons=_Messages(result.group_why))

        await loop.run(
            parts.scheduler,
            source=timed,
            sink=parts.admission,
            stop=stop,
            trigger=parts.trigger,
            period=config.period,
            on_result=on_result,
        )

    reservation_writer = reservation_statuses.ReservationStatusWriter(
        context.api,
        facts=parts.sink.reservation_facts,
        clock=context.clock,
        recorder=parts.recorder,
        interval=max(config.period, 1.0),
        fence=context.fence,
    )

    async def login() -> credentials.Credentials:
        # Kopf runs on this loop: it logs in with the operator's own client.
        return await credentials.credentials_of(context.api)

    timeout = config.shutdown_timeout
    # The plugins' controllers: a component of their own, tasks on this loop.
    plugin_controllers = plugins.PluginControllers(context.handle.controllers, stop_timeout=timeout)

    def task(
        name: str, run: collections.abc.Callable[[asyncio.Event], collections.abc.Awaitable[None]]
    ) -> components.TaskComponent:
        return components.TaskComponent(name, run, stop_timeout=timeout, on_exit=context.fail)

    grouping = [] if parts.grouper is None else [task("owner grouper", parts.grouper.run)]
    if parts.interop is not None:
        grouping.append(task("interop podgroups", parts.interop.run))
    return [
        task("events", parts.recorder.run),
        task("informers", run_informers),
        task("binder", parts.sink.run),
        task("admission", parts.admission.run),
        task("scheduling loop", run_loop),
        *grouping,
        embedding.KopfOperator(
            registry=lambda: kopf_registry.build(
                objects=parts.objects,
                login=login,
                writer=parts.writer,
                reservation_writer=reservation_writer,
                reservation_controller=reserving,
            ),
            settings=kopf_registry.operator_settings,
            stop_timeout=timeout,
            on_exit=context.fail,
        ),
        plugin_controllers,
    ]


async def _wait_or_stop(event: asyncio.Event, *, stop: asyncio.Event) -> bool:
    """Wait for ``event``; False if ``stop`` came first."""
    waiters = {asyncio.ensure_future(event.wait()), asyncio.ensure_future(stop.wait())}
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
    return event.is_set() and not stop.is_set()


class _TimedSource:
    """The snapshot source, noting when each cycle began (for the session histogram) and what
    it returned (for the owner grouper and the interop status writer)."""

    def __init__(self, source: loop.SnapshotSource, feed: _MetricsFeed) -> None:
        self._source = source
        self._feed = feed

    last: snapshot_types.Snapshot | None = None
    """The snapshot the loop last scheduled from (admission mode's view: gated pods pending)."""

    def snapshot(self) -> snapshot_types.Snapshot:
        self._feed.started = time.perf_counter()
        self.last = self._source.snapshot()
        return self.last


class _Messages(collections.abc.Mapping[str, str]):
    """Group key -> its reason's message, read on demand (a parked backlog's reasons are
    many; the readers look up few)."""

    __slots__ = ("_why",)

    def __init__(self, why: collections.abc.Mapping[str, reasons.Reason]) -> None:
        self._why = why

    def __getitem__(self, key: str) -> str:
        return self._why[key].message

    def __iter__(self) -> collections.abc.Iterator[str]:
        return iter(self._why)

    def __len__(self) -> int:
        return len(self._why)


class _MetricsFeed:
    """Turns each cycle's result and snapshot into the operator's metrics."""

    def __init__(self, metrics: berth_metrics.Metrics) -> None:
        self._metrics = metrics
        self.started: float | None = None
        self._counted_reasons: collections.abc.Mapping[str, reasons.Reason] | None = None

    def cycle(
        self, result: cycle_decisions.CycleResult, *, snapshot: snapshot_types.Snapshot | None
    ) -> None:
        metrics = self._metrics
        if self.started is not None:
            metrics.observe_session(time.perf_counter() - self.started)
            self.started = None
        for action, seconds in result.action_seconds.items():
            metrics.observe_action(action, seconds=seconds)
        for plugin, seconds in result.plugin_seconds.items():
            metrics.observe_plugin(plugin, extension_point="session", seconds=seconds)
        bound = result.bindings()
        # The pods this session tried and left pending: it told the sink why. Parked pods keep
        # their reasons in ``pod_why`` without being tried again, and a skipped session
        # (nothing changed) tried nothing at all.
        outcomes = [berth_metrics.AttemptResult.SCHEDULED] * len(bound) + [
            berth_metrics.AttemptResult.UNSCHEDULABLE
            for told in result.of_kind(cycle_decisions.Unschedulable)
            if told.subject is not cycle_decisions.Subject.GROUP
            and told.reason.code is not reasons.ReasonCode.NOT_TRIED
        ]
        outcomes += [berth_metrics.AttemptResult.ERROR] * len(result.errors)
        durations = list(result.attempt_seconds)
        for i, outcome in enumerate(outcomes):
            metrics.record_attempt(
                outcome, algorithm_seconds=durations[i] if i < len(durations) else None
            )
        if result.group_why is not self._counted_reasons:
            # A skipped session repeats the last one's reasons (the same mapping): counting a
            # long backlog's again would cost what the skipped session saved.
            self._counted_reasons = result.group_why
            metrics.set_waiting_reasons(
                collections.Counter(why.code.value for why in result.group_why.values())
            )
        victims = len(result.of_kind(cycle_decisions.EvictPod))
        if victims:
            metrics.count_preemption_victims(victims)
        if snapshot is None:
            return
        pending: collections.Counter[str] = collections.Counter()
        for pod in snapshot.pending:
            if pod.key not in bound:
                pending[pod.queue or "default"] += 1
        metrics.set_pending_pods(pending)
        summaries = result.queues
        metrics.set_queue_resources(
            allocated={name: s.allocated for name, s in summaries.items()},
            guaranteed={name: q.guaranteed for name, q in snapshot.queues.items()},
            fair_share={name: s.fair_share for name, s in summaries.items()},
        )
        phases: collections.Counter[str] = collections.Counter(
            r.phase for r in snapshot.reservations.values()
        )
        metrics.set_reservation_phases(phases)
