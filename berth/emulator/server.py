"""The emulator as a server: an aiohttp application on 127.0.0.1, and its in-process handles.

:class:`Emulator` wires storage, the resource registry, the REST semantics and the handlers
into an ``aiohttp`` application and runs it (port 0 picks a free port). Its middleware counts
requests per (method, path template) and per (method, path) — so a test can count the binding
requests of one pod — writes the audit log when asked (:mod:`berth.emulator.auditing`: who
sent what, when, as kube-apiserver's ``--audit-log-path``), applies armed faults
(:mod:`berth.emulator.faults`), and turns every error into a Kubernetes Status response: a
client never sees a traceback page.

:class:`ThreadedEmulator` runs an :class:`Emulator` on its own event loop in a daemon thread, so
that synchronous clients (the ``kubernetes`` package, ``kubectl`` subprocesses) and asynchronous
ones (kopf, ``kubernetes_asyncio``) in the test's own loop can all talk to it.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import pathlib
import threading
import typing

import yaml
from aiohttp import web

from berth.api import kubeconfigs
from berth.emulator import (
    auditing,
    binder,
    claimcontroller,
    errors,
    faults,
    handlers,
    kubelets,
    resources,
    rest,
    routes,
    storage,
)
from berth.util import clocks, wakeups

__all__ = ["Emulator", "ThreadedEmulator", "kubeconfig"]

logger = logging.getLogger(__name__)
T = typing.TypeVar("T")


def kubeconfig(
    server: str, *, name: str = "berth-emulator", namespace: str = "default"
) -> kubeconfigs.Kubeconfig:
    """A kubeconfig (as a dict) whose current context points at ``server``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": {"token": "berth-emulator"}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
        ],
        "current-context": name,
        "preferences": {},
    }


class Emulator:
    """An in-memory Kubernetes API server (start with ``async with`` or :meth:`start`)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: clocks.Clock | None = None,
        history: int = 10_000,
        bookmark_interval: float = 60.0,
        seed: int | None = None,
        audit_log: str | pathlib.Path | None = None,
    ) -> None:
        self.host = host
        self.audit = auditing.AuditLog(audit_log) if audit_log is not None else None
        """Every served request in kube-apiserver's audit format, when a path is given."""
        self.requested_port = port
        self.clock: clocks.Clock = clock or clocks.SystemClock()
        self.registry = resources.Registry()
        self.storage = storage.Storage(history=history)
        self.api = rest.Api(registry=self.registry, store=self.storage, clock=self.clock, seed=seed)
        self.faults = faults.Faults()
        self.requests: collections.Counter[tuple[str, str]] = collections.Counter()
        """Requests served, per (method, path template) such as
        ``("POST", "/api/v1/namespaces/{namespace}/pods/{name}/binding")``."""
        self.requests_by_path: collections.Counter[tuple[str, str]] = collections.Counter()
        """Requests served, per (method, actual path)."""
        self.handlers = handlers.Handlers(api=self.api, bookmark_interval=bookmark_interval)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self.kubelets: list[kubelets.Kubelets] = []
        self.claims = claimcontroller.ResourceClaimController(self.api)
        """The resourceclaim controller (DRA): claims from templates, clean-up after pods."""
        self.binder: binder.Binder | None = None

    # ----- lifecycle ------------------------------------------------------------------------

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=handlers.MAX_BODY + 1)
        h = self.handlers
        app.router.add_get("/version", h.version)
        for probe in ("/healthz", "/livez", "/readyz"):
            app.router.add_get(probe, h.health)
        app.router.add_get("/openapi/v2", h.openapi_v2)
        app.router.add_get("/openapi/v3", h.openapi_root)
        app.router.add_get("/openapi/v3/{tail:.+}", h.openapi_document)
        app.router.add_route("*", "/api", h.dispatch)
        app.router.add_route("*", "/api/{tail:.*}", h.dispatch)
        app.router.add_route("*", "/apis", h.dispatch)
        app.router.add_route("*", "/apis/{tail:.*}", h.dispatch)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.application(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.requested_port)
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or ()
        self._port = int(sockets[0].getsockname()[1]) if sockets else self.requested_port
        await self.claims.start()

    async def start_kubelets(
        self,
        pools: typing.Sequence[kubelets.NodePool],
        *,
        speedup: float = 1.0,
        heartbeat: float = 10.0,
        start_delay: float = 1.0,
    ) -> kubelets.Kubelets:
        """Add simulated nodes (see :mod:`berth.emulator.kubelets`); they stop with the server."""
        simulated = kubelets.Kubelets(
            self.api, pools=pools, speedup=speedup, heartbeat=heartbeat, start_delay=start_delay
        )
        await simulated.start()
        self.kubelets.append(simulated)
        return simulated

    async def start_binder(self) -> binder.Binder:
        """Bind the default scheduler's pods with the stand-in for kube-scheduler (see
        :mod:`berth.emulator.binder`); it stops with the server."""
        if self.binder is None:
            self.binder = binder.Binder(self.api)
            await self.binder.start()
        return self.binder

    async def stop(self) -> None:
        await self.claims.stop()
        if self.binder is not None:
            await self.binder.stop()
            self.binder = None
        for simulated in self.kubelets:
            await simulated.stop()
        self.kubelets.clear()
        self.storage.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.audit is not None:
            self.audit.close()

    async def __aenter__(self) -> Emulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the emulator is not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def kubeconfig(self, *, namespace: str = "default") -> kubeconfigs.Kubeconfig:
        return kubeconfig(self.url, namespace=namespace)

    def write_kubeconfig(
        self, path: str | pathlib.Path, *, namespace: str = "default"
    ) -> pathlib.Path:
        target = pathlib.Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(self.kubeconfig(namespace=namespace), sort_keys=False))
        return target

    def count(self, method: str, template: str) -> int:
        """Requests served for ``method`` and a path template (see :attr:`requests`)."""
        return self.requests[(method.upper(), template)]

    # ----- middleware -----------------------------------------------------------------------

    @web.middleware
    async def _middleware(
        self,
        request: web.Request,
        handler: typing.Callable[[web.Request], typing.Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        route = routes.parse(request.path, registry=self.registry)
        template = route.template if route is not None else request.path
        self.requests[(request.method, template)] += 1
        self.requests_by_path[(request.method, request.path)] += 1
        response = await self._serve(request, handler)
        if self.audit is not None:
            self.audit.record(
                method=request.method,
                uri=request.path_qs,
                user_agent=request.headers.get("User-Agent", ""),
                code=response.status,
                at=self.clock.now(),
                watch=request.query.get("watch") in ("1", "true"),
            )
        return response

    async def _serve(
        self,
        request: web.Request,
        handler: typing.Callable[[web.Request], typing.Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        try:
            fault = self.faults.take(request.method, request.path)
            if fault is not None and fault.after:
                await handler(request)  # it lands; the answer is lost below
            if fault is not None:
                if fault.drop:
                    if request.transport is not None:
                        request.transport.abort()
                    return web.Response(status=499)  # never sent: the connection is gone
                if fault.status is not None:
                    raise errors.StatusError(fault.message, code=fault.status, reason=fault.reason)
                await wakeups.sleep_or_stop(fault.delay)  # injected latency: only a delay
            return await handler(request)
        except errors.StatusError as exc:
            return handlers.json_response(exc.status(), status=exc.code)
        except web.HTTPException as exc:
            if exc.status == 404:
                failure = errors.resource_not_found()
            elif exc.status == 405:
                failure = errors.method_not_allowed(request.method, what=request.path)
            else:
                failure = errors.StatusError(
                    exc.reason, code=exc.status, reason=exc.reason.replace(" ", "")
                )
            return handlers.json_response(failure.status(), status=failure.code)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:
            logger.exception(
                "emulator: unexpected error serving %s %s", request.method, request.path
            )
            failure = errors.internal(f"{type(exc).__name__}: {exc}")
            return handlers.json_response(failure.status(), status=500)


class ThreadedEmulator:
    """An :class:`Emulator` served from its own event loop in a background thread."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="berth-emulator", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def start(self, *, timeout: float = 10.0) -> ThreadedEmulator:
        self._thread.start()
        self.run(self.emulator.start(), timeout=timeout)
        return self

    def stop(self, *, timeout: float = 10.0) -> None:
        if not self._thread.is_alive():
            return
        try:
            self.run(self.emulator.stop(), timeout=timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            if not self._thread.is_alive():
                self._loop.close()

    def run(
        self, coroutine: typing.Coroutine[typing.Any, typing.Any, T], *, timeout: float = 30.0
    ) -> T:
        """Run ``coroutine`` on the emulator's loop and wait for its result."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def call(self, fn: typing.Callable[..., T], /, *args: typing.Any, **kwargs: typing.Any) -> T:
        """Call ``fn`` on the emulator's loop (the in-process API is not thread-safe)."""

        async def invoke() -> T:
            return fn(*args, **kwargs)

        return self.run(invoke())

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop
