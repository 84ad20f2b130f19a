"""The composition root: every part the leader runs, built in one place.

:func:`build` builds one leadership term's parts from :class:`Inputs`, each with its
dependencies passed in (no callback is set on a part after it is built), in dependency order, and
returns them as :class:`Parts`, with the leader-only components in start order:

0. ``default queue``: creates the Queue ``default`` when it is missing
   (:mod:`berth.kube.grouping.default_queue`), then waits;
1. ``events``: the :class:`~berth.kube.transport.events.EventRecorder`;
2. ``informers``: :class:`~berth.kube.informers.cluster_informers.ClusterInformers`, the one watch
of every kind
   but Berth's own, feeding the :class:`~berth.scheduler.snapshot.cache.ClusterCache`;
3. ``binder``: :class:`~berth.kube.binder.decisions.ApiSink`, and ``admission``:
   :class:`~berth.kube.admission.admission.Admission` around the snapshot source and the binder (on
   in both modes, so that a restart with the other ``--mode`` adopts the pods the previous one left;
   docs/admission.md);
4. ``kopf``: the leader's Kopf operator (:class:`~berth.operator.embedding.KopfOperator`), the one
   watch of Queues, PodGroups and Reservations (its handlers feed the same cache:
   :mod:`berth.controllers.indexing`) and the owner of their statuses
   (:mod:`berth.controllers.statuses`, :mod:`berth.controllers.reservation_statuses`, the
   Reservations' lifetimes: :mod:`berth.controllers.reservations`); it starts once Berth's CRDs
   are served;
5. ``plugin controllers``: the plugins' ``ControllerProvider`` controllers
   (:mod:`berth.controllers.plugins`);
6. ``scheduling loop``: :func:`berth.scheduler.loop.run`, which waits until the cache holds the
   first list of every kind (a cycle on a half-listed cluster would place pods on capacity that
   is taken); after every cycle the metrics are fed, the status passes and the Reservation
   controller kicked, the owner grouper and the interop mirrors offered the snapshot, the node
   writer (:class:`~berth.kube.autoscaling.node_protection.NodeProtection`) told what holds each
   node and the capacity requests
   (:class:`~berth.kube.autoscaling.capacity_requests.CapacityRequests`) what to ask autoscalers for
   (groups' reasons carry what those say);
7. the owner grouper, the interop mirrors, the node writer and the capacity requests, when they
   are on.

All of it runs on the operator's one event loop: Kopf as tasks beside the others, no thread but
the worker the scheduling cycle runs in (``asyncio.to_thread``) and the loop's executor for
blocking calls. ``/berth/v1/nodes/{name}``, the visibility API and ``/debug/flags/s`` are lent the
cache's node view, the scheduler's results and the score-table switch (``Inputs.providers``).

``berth run`` (:func:`leader_components`), ``berth up``/``demo`` and the benchmarks
(:func:`with_registry`) and the tests (``tests/admission/stack.py``) build with it.
"""

from __future__ import annotations

import asyncio
import collections
import collections.abc
import dataclasses
import logging
import math
import time

from berth.api import keys
from berth.controllers import (
    indexing,
    observed,
    plugins,
    reservation_statuses,
    reservations,
    statuses,
)
from berth.controllers import registry as kopf_registry
from berth.kube.admission import admission
from berth.kube.autoscaling import capacity_requests, node_protection
from berth.kube.binder import binding, decisions
from berth.kube.devices import gpu_reservations
from berth.kube.grouping import default_queue, interop_groups, owner_groups
from berth.kube.informers import cache_sync, cluster_informers, snapshots
from berth.kube.transport import clients, credentials, events, fencing, writes
from berth.operator import components, embedding, http, main, visibility
from berth.operator import metrics as berth_metrics
from berth.operator import settings as settings_module
from berth.scheduler import loop
from berth.scheduler.framework import decisions as cycle_decisions
from berth.scheduler.framework import handles, pending, profiles, reasons, registries
from berth.scheduler.plugins import registry as plugin_registry
from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import cowmaps
from berth.scheduler.snapshot import snapshots as snapshot_types
from berth.util import clocks, wakeups
from berth.workloads import interop

__all__ = ["Inputs", "Parts", "build", "leader_components", "load_profile", "with_registry"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Parts:
    """What one leadership term built (see the module docstring)."""

    scheduler: loop.Scheduler
    cache: cluster_cache.ClusterCache
    informers: cluster_informers.ClusterInformers
    source: snapshots.CacheSource
    sink: decisions.ApiSink
    recorder: events.EventRecorder
    objects: observed.ObservedObjects
    writer: statuses.StatusWriter  # PodGroup and Queue statuses
    trigger: asyncio.Event  # set by the informers and Kopf's handlers: wakes the scheduling loop
    admission: admission.Admission  # around source and sink: the loop's source and sink
    feed: indexing.CacheFeed  # Kopf's handlers of Berth's kinds -> the cache
    reservation_writer: reservation_statuses.ReservationStatusWriter
    reservations: reservations.ReservationController
    plugin_controllers: plugins.PluginControllers
    kopf: embedding.KopfOperator  # the leader's Kopf
    kube_writer: writes.Writer  # the write primitive the parts share
    components: tuple[components.Component, ...]  # the leader-only components, in start order
    grouper: owner_groups.OwnerGrouper | None = None  # None: grouping by owner is off
    interop: interop_groups.InteropGroups | None = None  # None: no other PodGroup API honoured
    protection: node_protection.NodeProtection | None = None  # None: nodes are not annotated
    gpu_holders: gpu_reservations.GpuReservations | None = None  # shared GPUs' reservation pods
    requests: capacity_requests.CapacityRequests | None = None  # None: autoscalers not asked


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
    on_bound: collections.abc.Callable[[binding.BindOutcome], None] | None = None,
) -> main.ComponentFactory:
    """A ``leader_components`` factory scheduling with ``registry``'s plugins (out-of-tree
    plugins merged in by the caller); ``on_parts`` sees what each term built, ``on_bound``
    how each binding ended (the benchmarks)."""

    def factory(context: main.Context) -> list[components.Component]:
        parts = build(
            Inputs(
                api=context.api,
                settings=context.settings,
                clock=context.clock,
                registry=registry,
                handle=context.handle,
                metrics=context.metrics,
                readiness=context.readiness,
                providers=context.providers,
                fence=context.fence,
                on_bound=on_bound,
                on_exit=context.fail,
            )
        )
        if on_parts is not None:
            on_parts(parts)
        return list(parts.components)

    return factory


class _Board:
    def __init__(
        self,
        source: snapshots.CacheSource,
        sink: decisions.ApiSink,
        requests: capacity_requests.CapacityRequests | None = None,
    ) -> None:
        self._source = source
        self._sink = sink
        self._requests = requests
        self.view: _TimedSource | None = None

    def snapshot(self) -> snapshot_types.Snapshot | None:
        # What the scheduler last scheduled from (admission mode's view: the pods Berth's gate
        # holds offered as pending), so that statuses and the visibility API count the work
        # the cycle's result is about; the cache's own until a cycle ran.
        seen = self.view.last if self.view is not None else None
        return seen if seen is not None else self._source.last

    def result(self) -> cycle_decisions.CycleResult | None:
        # Groups' reasons carry what the autoscaler was asked and says (docs/autoscaling.md).
        result = self._sink.last_result
        if self._requests is None or result is None:
            return result
        return self._requests.noted(result)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Inputs:
    """What :func:`build` builds a term from: everything passed in, nothing set on the parts
    afterwards."""

    api: clients.AsyncApiClient
    settings: settings_module.Settings
    clock: clocks.Clock
    registry: registries.Registry
    handle: handles.ExtendedHandle | None = None  # None: a handle of its own
    metrics: berth_metrics.Metrics | None = None  # None: no metrics fed
    readiness: cache_sync.ReadinessSink | None = None  # where "caches-synced" goes
    providers: http.Providers | None = None  # what the HTTP server is lent (None: nothing)
    fence: fencing.Fence | None = None  # the leader's fence for the write primitive
    on_bound: collections.abc.Callable[[binding.BindOutcome], None] | None = None
    on_exit: components.ExitCallback | None = None  # told when a component died
    wrap_sink: collections.abc.Callable[[decisions.ApiSink], admission.Sink] | None = None
    """Decorates the binder as admission's sink (tests record every cycle's result)."""
    in_thread: bool = True
    """Run each scheduling cycle in a worker thread (False: on the loop; tests)."""


def build(inputs: Inputs) -> Parts:
    """The composition root: one leadership term's parts, each built with its dependencies.

    The order follows the dependencies: scheduler, cache, the write primitive, Events, the
    binder (with the live-pod book it waits on), the snapshot source, admission around them,
    the status writers, the interop mirrors, the Kopf feed of Berth's kinds and the informers
    (which feed the cache and tell admission and the binder about pods), the leader's Kopf, and
    last the components that run them (see the module docstring).
    """
    config = inputs.settings
    handle = inputs.handle
    if handle is None:
        handle = handles.ExtendedHandle(clock=inputs.clock)
    profile = load_profile(config.profile_document())
    scheduler = loop.Scheduler(
        profile,
        registry=inputs.registry,
        clock=inputs.clock,
        handle=handle,
        hints=config.queueing_hints,
        revisit_seconds=config.queueing_hints_revisit,
        placement_limit=config.placements_per_cycle or None,
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
    live = cluster_informers.LivePods()
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
    autoscaling = config.autoscaling
    requests = (
        capacity_requests.CapacityRequests(
            inputs.api,
            writer=writer,
            clock=inputs.clock,
            recorder=recorder,
            answer_timeout=autoscaling.answer_timeout,
            retry_after=autoscaling.retry_after,
            hold_backoff=(autoscaling.hold_backoff, autoscaling.hold_backoff_max),
            resync=max(config.period, 5.0),
            on_hold=sink.hold_pending,
        )
        if autoscaling.capacity_requests
        else None
    )
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
        before_pin=requests.withdraw if requests is not None else None,
    )
    board = _Board(source, sink, requests)
    objects = observed.ObservedObjects()
    interval = max(config.period, 1.0)
    status_writer = statuses.StatusWriter(
        inputs.api,
        objects=objects,
        board=board,
        clock=inputs.clock,
        recorder=recorder,
        interval=interval,
        on_podgroup_phases=inputs.metrics.set_podgroup_phases if inputs.metrics else None,
        fence=inputs.fence,
        scale_ups=(lambda: requests.verdicts) if requests is not None else None,
    )
    reservation_writer = reservation_statuses.ReservationStatusWriter(
        inputs.api,
        facts=sink.reservation_facts,
        clock=inputs.clock,
        recorder=recorder,
        interval=interval,
        fence=inputs.fence,
    )
    # Reservations' expiry, owners and garbage collection.
    reserving = reservations.ReservationController(
        inputs.api,
        objects=objects,
        board=board,
        clock=inputs.clock,
        recorder=recorder,
        retention=config.reservation_retention,
        field_manager=reservation_statuses.MANAGER,
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
    mirrors = _interop(inputs, recorder=recorder, writer=writer)
    protection = (
        node_protection.NodeProtection(writer) if config.autoscaling.protect_nodes else None
    )
    trigger = asyncio.Event()
    sync = cache_sync.CacheSync(inputs.readiness)
    feed = indexing.CacheFeed(
        inputs.api,
        cache=cache,
        objects=objects,
        trigger=trigger,
        sync=sync,
        on_crd=[mirrors.crd_seen] if mirrors is not None else [],
    )
    watched = cluster_informers.ClusterInformers(
        inputs.api,
        cache=cache,
        scheduler_names=names,
        trigger=trigger,
        sync=sync,
        live=live,
        also_ours=admitting.observe_pod,
        on_pod_removed=admitting.pod_removed,  # passes it on to the binder
        on_pod_released=sink.pod_released,  # wakes preemptors waiting for their victims
        on_claim_changed=sink.claim_changed,  # wakes bindings waiting for their claims
        on_node=protection.node_seen if protection is not None else None,
        on_node_gone=protection.node_gone if protection is not None else None,
    )

    async def login() -> credentials.Credentials:
        return await credentials.credentials_of(inputs.api)

    timeout = config.shutdown_timeout
    leader_kopf = embedding.KopfOperator(
        registry=lambda: kopf_registry.build(
            feed=feed,
            login=login,
            writer=status_writer,
            reservation_writer=reservation_writer,
            reservation_controller=reserving,
        ),
        settings=kopf_registry.operator_settings,
        prerequisite=feed.served,
        stop_timeout=timeout,
        on_exit=inputs.on_exit,
    )
    plugin_controllers = plugins.PluginControllers(handle.controllers, stop_timeout=timeout)
    parts = Parts(
        scheduler=scheduler,
        cache=cache,
        informers=watched,
        source=source,
        sink=sink,
        recorder=recorder,
        objects=objects,
        writer=status_writer,
        trigger=trigger,
        admission=admitting,
        feed=feed,
        reservation_writer=reservation_writer,
        reservations=reserving,
        plugin_controllers=plugin_controllers,
        kopf=leader_kopf,
        kube_writer=writer,
        components=(),
        grouper=grouper,
        interop=mirrors,
        protection=protection,
        gpu_holders=(
            gpu_reservations.GpuReservations(writer, schedulers=names)
            if config.gpu_reservation_pods
            else None
        ),
        requests=requests,
    )
    if inputs.providers is not None:
        _lend(inputs.providers, scheduler=scheduler, source=source, board=board, clock=inputs.clock)
    return dataclasses.replace(parts, components=_components(inputs, parts, board=board))


def _components(inputs: Inputs, parts: Parts, *, board: _Board) -> tuple[components.Component, ...]:
    """The leader-only components running ``parts``, in start order (module docstring)."""
    config = inputs.settings
    feed = _MetricsFeed(inputs.metrics) if inputs.metrics is not None else None
    timed = _TimedSource(parts.admission, feed)
    board.view = timed
    seen = inputs.providers.visibility if inputs.providers is not None else None

    async def run_informers(stop: asyncio.Event) -> None:
        try:
            await parts.informers.run(stop)
        finally:
            # A follower has no caches: the condition leaves with the informers.
            if inputs.readiness is not None:
                inputs.readiness.remove(cache_sync.READINESS_CONDITION)

    def on_result(result: cycle_decisions.CycleResult) -> None:
        if feed is not None:
            feed.cycle(result, snapshot=parts.source.last)
        if seen is not None:
            seen.observe()
        parts.writer.kick()
        parts.reservations.kick()
        last = timed.last
        if parts.grouper is not None and last is not None:
            parts.grouper.offer(last)
        if parts.interop is not None and last is not None:
            parts.interop.offer(last, reasons=_Messages(result.group_why))
        if parts.requests is not None and last is not None:
            parts.requests.offer(last, result, gated=parts.admission.through_gate)
        if parts.gpu_holders is not None and last is not None:
            parts.gpu_holders.offer(last)
        if parts.protection is not None and last is not None:
            parts.protection.offer(
                last, nominated=parts.sink.nominated, pinned=parts.admission.pinned
            )

    async def run_loop(stop: asyncio.Event) -> None:
        await wakeups.first_set(parts.informers.synced, stop)
        if stop.is_set():
            return
        logger.info("caches synced: scheduling pods of %s", parts.scheduler.profile.scheduler_name)
        await loop.run(
            parts.scheduler,
            source=timed,
            sink=parts.admission,
            stop=stop,
            trigger=parts.trigger,
            period=config.period,
            on_result=on_result,
            in_thread=inputs.in_thread,
        )

    def task(
        name: str, run: collections.abc.Callable[[asyncio.Event], collections.abc.Awaitable[None]]
    ) -> components.TaskComponent:
        return components.TaskComponent(
            name, run, stop_timeout=config.shutdown_timeout, on_exit=inputs.on_exit
        )

    grouping = [] if parts.grouper is None else [task("owner grouper", parts.grouper.run)]
    if parts.interop is not None:
        grouping.append(task("interop podgroups", parts.interop.run))
    if parts.protection is not None:
        grouping.append(task("node protection", parts.protection.run))
    if parts.gpu_holders is not None:
        grouping.append(task("gpu reservation pods", parts.gpu_holders.run))
    if parts.requests is not None:
        grouping.append(task("capacity requests", parts.requests.run))
    return (
        # Work naming no queue goes to `default`: a Queue object, so users see it (created once).
        task("default queue", lambda stop: default_queue.keep(parts.kube_writer, stop)),
        task("events", parts.recorder.run),
        task("informers", run_informers),
        task("binder", parts.sink.run),
        task("admission", parts.admission.run),
        parts.kopf,
        parts.plugin_controllers,
        task("scheduling loop", run_loop),
        *grouping,
    )


def _lend(
    providers: http.Providers,
    *,
    scheduler: loop.Scheduler,
    source: snapshots.CacheSource,
    board: _Board,
    clock: clocks.Clock,
) -> None:
    """The HTTP server outlives leadership terms: each term lends it its views."""
    providers.node_lookup = source.node
    providers.visibility = visibility.Visibility(board, clock=clock)

    def set_top_n(top_n: int) -> None:
        scheduler.debug_top_n = top_n

    providers.score_table = set_top_n


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


class _TimedSource:
    """The snapshot source, noting when each cycle began (for the session histogram) and what
    it returned (for the owner grouper and the interop status writer)."""

    def __init__(self, source: loop.SnapshotSource, feed: _MetricsFeed | None) -> None:
        self._source = source
        self._feed = feed

    last: snapshot_types.Snapshot | None = None
    """The snapshot the loop last scheduled from (admission mode's view: gated pods pending)."""

    def snapshot(self) -> snapshot_types.Snapshot:
        if self._feed is not None:
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


BACKLOG_GAUGES_EVERY = 1.0
"""Seconds at least between two counts of the whole backlog for the gauges (pending pods by
queue, waiting groups by reason): each walks every waiting pod or group, which would make a
cycle's cost grow with the standing backlog; a scrape reads them every 15 s or more."""

BACKLOG_GAUGES_SHARE = 0.02
"""The share of one core the counts may take: after a count that took ``t`` seconds, the
next waits ``t / BACKLOG_GAUGES_SHARE`` if that is longer than :data:`BACKLOG_GAUGES_EVERY`
(a longer backlog is counted less often, never at a greater cost)."""


class _MetricsFeed:
    """Turns each cycle's result and snapshot into the operator's metrics."""

    def __init__(self, metrics: berth_metrics.Metrics) -> None:
        self._metrics = metrics
        self.started: float | None = None
        self._counted_reasons: collections.abc.Mapping[str, reasons.Reason] | None = None
        self._backlog_due = -math.inf  # time.monotonic() when the backlog may be counted again

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
            and told.reason.code not in pending.NO_NEWS
        ]
        outcomes += [berth_metrics.AttemptResult.ERROR] * len(result.errors)
        durations = list(result.attempt_seconds)
        for i, outcome in enumerate(outcomes):
            metrics.record_attempt(
                outcome, algorithm_seconds=durations[i] if i < len(durations) else None
            )
        now = time.monotonic()
        if now >= self._backlog_due:
            began = time.perf_counter()
            self._count_backlog(result, snapshot=snapshot, bound=bound)
            took = time.perf_counter() - began
            self._backlog_due = now + max(BACKLOG_GAUGES_EVERY, took / BACKLOG_GAUGES_SHARE)
        victims = len(result.of_kind(cycle_decisions.EvictPod))
        if victims:
            metrics.count_preemption_victims(victims)
        if snapshot is None:
            return
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

    def _count_backlog(
        self,
        result: cycle_decisions.CycleResult,
        *,
        snapshot: snapshot_types.Snapshot | None,
        bound: collections.abc.Mapping[str, str],
    ) -> None:
        """The gauges of the whole backlog: waiting groups by reason, pending pods by queue."""
        if result.group_why is not self._counted_reasons:
            # A skipped session repeats the last one's reasons (the same mapping): counting a
            # long backlog's again would cost what the skipped session saved.
            self._counted_reasons = result.group_why
            self._metrics.set_waiting_reasons(
                collections.Counter(why.code.value for why in result.group_why.values())
            )
        if snapshot is None:
            return
        waiting: collections.Counter[str] = collections.Counter()
        for pod in cowmaps.in_any_order(snapshot.pending):
            if pod.key not in bound:
                waiting[pod.queue or "default"] += 1
        self._metrics.set_pending_pods(waiting)
