"""The operator process: one ``async def run(settings)`` that composes every part.

``berth run`` calls :func:`run`; so do ``berth up`` and the tests. In order (docs/architecture.md):

0. pin the C allocator's mmap threshold (:mod:`berth.util.allocator`): with glibc's adjusting
   one, asyncio's read buffers fragment the heap and the RSS creeps for the process's life;
1. start the HTTP server (probes, metrics, the scheduler's API): followers serve it too;
2. connect to the API server (kubeconfig or in-cluster) through :mod:`berth.kube.transport.clients`;
3. campaign for the Lease (:mod:`berth.operator.leadership`), or lead at once with
   ``--no-leader-elect``; with an election, every write for the leader is fenced
   (:mod:`berth.kube.transport.fencing`) by the last renewal;
4. as leader, start the leader-only :class:`~berth.operator.components.Component` list, in
   order: whatever ``leader_components`` builds from the :class:`Context` (the composition
   root, :mod:`berth.operator.scheduling`: informers and the leader's Kopf -> cache, the
   binder, the scheduling loop, the plugins' controllers that the scheduler registered in the
   handle); lend the plugins' routes to the HTTP server;
5. on a stop request: stop the components, release the Lease, close the server: exit 0.
   On losing the Lease, or when a leader-only component dies: stop the components at once and
   exit 1, so that Kubernetes restarts the pod as a follower while another replica leads.

The one seam for what runs as leader is ``leader_components``, a function of the
:class:`Context`; a component that fails calls ``context.fail`` (a :class:`TaskComponent` does so
by itself through ``on_exit=context.fail``). The scheduler's component builds its plugins with
``context.handle`` (their controllers and routes land there), reads its profile from
``context.settings.profile_document()``, and lends ``context.providers`` its node view and
score-table switch.

Everything runs on one event loop: the HTTP server, the Lease renewals, both embedded Kopf
operators (the admission webhooks' and the leader's, as tasks: :mod:`berth.operator.embedding`)
and every leader-only part. A scheduling cycle that held the loop longer than the renew deadline
would lose the Lease, so cycles run in a worker thread (``asyncio.to_thread``); no other thread
runs Berth's code.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import enum
import logging

from berth.kube.transport import clients, fencing, leases, reviews
from berth.operator import (
    components,
    errors,
    http,
    leadership,
    probing,
    settings,
    webhooks,
)
from berth.operator import metrics as berth_metrics
from berth.scheduler.framework import handles
from berth.util import allocator, clocks, wakeups

__all__ = ["ComponentFactory", "Context", "ExitCode", "no_components", "run"]

logger = logging.getLogger(__name__)


class ExitCode(enum.IntEnum):
    """How the process ends; the CLI exits with this number."""

    OK = 0  # asked to stop, stopped cleanly
    FAILED = 1  # lost the Lease, or a leader-only part failed: restart as a follower


@dataclasses.dataclass(frozen=True)
class Context:
    """What leader-only components are built from (one per process)."""

    settings: settings.Settings
    api: clients.AsyncApiClient  # the process's API client; closed when run() returns
    clock: clocks.Clock
    metrics: berth_metrics.Metrics
    readiness: probing.Readiness  # register e.g. "caches-synced" here while leading
    providers: http.Providers  # lend the HTTP server the node view and score-table switch
    handle: handles.ExtendedHandle  # the scheduler's one handle: build the plugins with it
    fail: components.ExitCallback  # call when a leader-only part died: the process steps down
    fence: fencing.Fence | None = None  # None: leader election is off (nothing to fence)


ComponentFactory = collections.abc.Callable[
    [Context], collections.abc.Sequence[components.Component]
]
"""Builds the leader-only components (in start order) when this replica starts leading."""


def no_components(context: Context) -> list[components.Component]:
    """No leader-only components: a process that only serves HTTP and campaigns (the tests
    of leadership). ``berth run`` passes :func:`berth.operator.scheduling.leader_components`
    instead."""
    return []


async def run(
    config: settings.Settings,
    *,
    stop: asyncio.Event,
    leader_components: ComponentFactory = no_components,
    clock: clocks.Clock | None = None,
    on_serving: collections.abc.Callable[[int], None] | None = None,
    on_connected: collections.abc.Callable[[], None] | None = None,
) -> ExitCode:
    """Run the operator until ``stop`` is set (OK) or leadership is lost or fails (FAILED).

    ``on_serving`` is told the HTTP port once the server listens (port 0 picks a free one);
    ``on_connected`` is called once the API server is reached and the admission webhooks, when
    served, listen: from then on a pod created is gated as it should be, not refused.
    """
    if allocator.pin_mmap_threshold():
        logger.debug("C allocator: mmap threshold pinned at %d bytes", allocator.MMAP_THRESHOLD)
    process = _Process(config, leader_components=leader_components, clock=clock)
    return await process.run(stop=stop, on_serving=on_serving, on_connected=on_connected)


class _Process:
    def __init__(
        self,
        config: settings.Settings,
        *,
        leader_components: ComponentFactory,
        clock: clocks.Clock | None,
    ) -> None:
        self._config = config
        self._factory = leader_components
        self._clock = clock if clock is not None else clocks.SystemClock()
        self._metrics = berth_metrics.Metrics()
        self._readiness = probing.Readiness()
        self._providers = http.Providers()
        self._handle = handles.ExtendedHandle(clock=self._clock)
        self._halt = asyncio.Event()  # stop asked, or a component failed
        self._failure: str | None = None
        self._supervisor: components.Supervisor | None = None
        self._reviewer: reviews.Reviewer | None = None  # once connected (HTTP authorization)

    async def run(
        self,
        *,
        stop: asyncio.Event,
        on_serving: collections.abc.Callable[[int], None] | None,
        on_connected: collections.abc.Callable[[], None] | None = None,
    ) -> ExitCode:
        app = http.build_app(
            readiness=self._readiness,
            metrics=self._metrics,
            providers=self._providers,
            debug_api=self._config.enable_debug_api,
            authorizer=(lambda: self._reviewer) if self._config.http_authorization else None,
        )
        server = http.HttpServer(app, host=self._config.http_host, port=self._config.http_port)
        await server.start()
        relay = asyncio.create_task(self._relay(stop), name="stop relay")
        try:
            if on_serving is not None and server.port is not None:
                on_serving(server.port)
            kubeconfig = str(self._config.kubeconfig) if self._config.kubeconfig else None
            async with (
                clients.connect_async(kubeconfig=kubeconfig) as connection,
                # Admission mode (or the queue-access check): every replica answers.
                webhooks.serving(self._config, api=connection.api, on_exit=self._fail),
            ):
                logger.info("connected to %s (%s)", connection.server, connection.origin)
                self._reviewer = reviews.Reviewer(connection.api)
                if on_connected is not None:
                    on_connected()
                return await self._lead_or_follow(connection.api)
        finally:
            relay.cancel()
            await server.stop()
            logger.info("stopped")

    async def _relay(self, stop: asyncio.Event) -> None:
        await wakeups.first_set(stop)
        logger.info("asked to stop")
        self._halt.set()

    async def _lead_or_follow(self, api: clients.AsyncApiClient) -> ExitCode:
        election = self._config.leader_election
        fence: fencing.Fence | None = None
        if election.enabled:
            # Every write for the leader is checked against the last renewal just before it is
            # sent (berth.kube.transport.fencing); the Lease calls themselves are exempt.
            fence = fencing.Fence(
                renew_deadline=election.renew_deadline, now=asyncio.get_running_loop().time
            )
            fencing.install(api, fence)
        context = Context(
            settings=self._config,
            api=api,
            clock=self._clock,
            metrics=self._metrics,
            readiness=self._readiness,
            providers=self._providers,
            handle=self._handle,
            fail=self._fail,
            fence=fence,
        )
        self._supervisor = components.Supervisor(
            lambda: self._components(context), stop_timeout=self._config.shutdown_timeout
        )
        # Who sent what, in the API server's audit log and the chaos harness's counts.
        api.user_agent = f"berth/{election.identity}"
        try:
            if fence is not None:
                elector = leadership.LeaderElector(
                    election,
                    leases_client=leases.LeaseClient(
                        api, namespace=self._config.namespace, name=election.lease_name
                    ),
                    clock=self._clock,
                    readiness=self._readiness,
                    metrics=self._metrics,
                    fence=fence,
                )
                await elector.run(
                    stop=self._halt,
                    on_started_leading=self._start_leading,
                    on_stopped_leading=self._stop_leading,
                )
            else:
                logger.warning("leader election is off: this replica leads unconditionally")
                await self._start_leading()
                self._metrics.set_leader(True)
                try:
                    await wakeups.first_set(self._halt)
                finally:
                    self._metrics.set_leader(False)
                    await self._stop_leading()
        except errors.LeadershipLost as exc:
            logger.error("%s; exiting so that the pod restarts as a follower", exc)
            return ExitCode.FAILED
        except Exception:
            logger.exception("a leader-only part failed to start; exiting")
            return ExitCode.FAILED
        if self._failure is not None:
            logger.error("%s; exiting so that another replica leads", self._failure)
            return ExitCode.FAILED
        return ExitCode.OK

    def _components(self, context: Context) -> list[components.Component]:
        return list(self._factory(context))

    async def _start_leading(self) -> None:
        assert self._supervisor is not None
        await self._supervisor.start()
        self._providers.services = self._handle.services

    async def _stop_leading(self) -> None:
        assert self._supervisor is not None
        self._providers.clear()
        await self._supervisor.stop()

    def _fail(self, name: str, error: BaseException | None) -> None:
        why = f": {error!r}" if error is not None else ""
        self._failure = f"leader-only component {name} ended unexpectedly{why}"
        self._halt.set()
