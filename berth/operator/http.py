"""The operator's HTTP server: probes, metrics, the scheduler's read-only API and debug flags.

Routes (docs/architecture.md):

- ``GET /healthz``: 200 while the process's event loop runs (liveness);
- ``GET /readyz``: 200 when every :class:`~berth.operator.probing.Readiness` condition holds,
  else 503; the body lists the conditions either way;
- ``GET /metrics``: :class:`~berth.operator.metrics.Metrics` in the Prometheus text format (or
  OpenMetrics when the scraper asks for it);
- ``GET /berth/v1/__services__``: every route this server answers, grouped by method;
- ``GET /berth/v1/nodes/{name}``: the scheduler's view of one node;
- the visibility API (:mod:`berth.operator.visibility`): ``GET /berth/v1/queues``,
  ``GET /berth/v1/queues/{name}/waiting?limit=N&continue=T`` (the line, a page at a time),
  ``GET /berth/v1/namespaces/{namespace}/podgroups/{name}/position``, ``GET /berth/v1/overview``;
- ``GET /dashboard``: one read-only HTML page drawing ``/berth/v1/overview`` (no build step);
- ``/berth/v1/plugins/<Plugin>/...``: the routes plugins offer as ``APIServiceProvider``;
- ``POST /debug/flags/s`` (body: N) and ``POST /debug/flags/v`` (body: a log level), only when
  the debug API is enabled: they change the process's behaviour.

Berth's own routes live under :data:`API_PREFIX` (``/berth/v1``), a path no default
Kubernetes role grants: ``system:discovery`` lets every authenticated identity ``get``
``/api/*`` and ``/apis/*`` (which is where they used to be), ``system:monitoring`` the
``/metrics`` of its group. Like kube-scheduler's own endpoints (``/configz``, ``/metrics``),
they are read only by those RBAC names: the chart's ``berth-viewer`` ClusterRole grants ``get``
on ``/berth/*``, ``/dashboard`` and ``/metrics``.

With authorization on (``httpAuthorization``, the default; ``berth up`` turns it off for its
local cluster), every route but ``/healthz``, ``/readyz`` and ``/livez`` needs a bearer token
that the API server authenticates (TokenReview) and authorizes for the path and verb
(SubjectAccessReview, per path), as kube-scheduler's secure port does: 401 without one (or
with one the API server does not accept), 403 when RBAC says no.

The server starts before the leader election and serves followers too. What only a leader has
(the scheduler's cache, the plugins) reaches it late, through :class:`Providers`: the leader-side
composition fills the slots when it starts and empties them when it stops; an empty slot
answers 503 ("not available on this replica"). :class:`HttpServer` is started and stopped by
:mod:`berth.operator.main`.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import logging
import re
import typing

import aiohttp.web

from berth.kube.informers import snapshots as informer_snapshots
from berth.kube.transport import reviews
from berth.operator import dashboards, probing, visibility
from berth.operator import metrics as berth_metrics
from berth.scheduler.framework import handles, interfaces
from berth.util import logging as berth_logging

__all__ = [
    "API_PREFIX",
    "OPEN_PATHS",
    "Authorizer",
    "HttpServer",
    "NodeLookup",
    "Providers",
    "ScoreTableSwitch",
    "build_app",
    "list_services",
    "match_route",
]

logger = logging.getLogger(__name__)

API_PREFIX = "/berth/v1"
"""Where Berth's read-only API is served: a path no default Kubernetes role grants."""
PLUGINS_PREFIX = f"{API_PREFIX}/plugins"
SERVICES_PATH = f"{API_PREFIX}/__services__"

_PATH_PARAM = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")
# A debug body is one short token; anything longer is a mistake, not a level.
_MAX_FLAG_BODY = 64

NodeLookup: typing.TypeAlias = collections.abc.Callable[[str], informer_snapshots.NodeView | None]
"""Returns the scheduler's view of the named node as JSON-able data, or None if unknown."""

ScoreTableSwitch: typing.TypeAlias = collections.abc.Callable[[int], None]
"""Sets how many top-scoring nodes per pod the score table logs; 0 turns it off."""


class Providers:
    """What the leader-only side lends the HTTP server while it runs; None means "not here"."""

    def __init__(self) -> None:
        self.node_lookup: NodeLookup | None = None
        """The scheduler cache's node view (set when the cache is built)."""
        self.score_table: ScoreTableSwitch | None = None
        """The runtime's score-table switch (set when the scheduler is built)."""
        self.services: handles.ServiceRegistry | None = None
        """The plugins' routes (the scheduler handle's service registry)."""
        self.visibility: visibility.Visibility | None = None
        """The queues, their lines and the dashboard's data (set when the scheduler runs)."""

    def clear(self) -> None:
        """Forget everything the leader lent (it stopped)."""
        self.node_lookup = None
        self.score_table = None
        self.services = None
        self.visibility = None

    def plugin_routes(self) -> list[tuple[str, interfaces.Route]]:
        """``(plugin, route)`` pairs currently served; none while nothing is lent."""
        return self.services.routes() if self.services is not None else []


def match_route(route: interfaces.Route, *, method: str, tail: str) -> dict[str, str] | None:
    """The path parameters if ``route`` answers ``method`` on ``tail``, else None.

    ``tail`` is the request path after ``/berth/v1/plugins/<plugin>/``; a ``{param}`` segment of
    the route's path matches exactly one non-empty segment.
    """
    if method != route.method.upper():
        return None
    want = [s for s in route.path.strip("/").split("/") if s]
    got = [s for s in tail.strip("/").split("/") if s]
    if len(want) != len(got):
        return None
    params: dict[str, str] = {}
    for pattern, segment in zip(want, got, strict=True):
        param = _PATH_PARAM.match(pattern)
        if param is not None:
            params[param.group(1)] = segment
        elif pattern != segment:
            return None
    return params


class Authorizer(typing.Protocol):
    """Decides whether a request may be served (:class:`berth.kube.transport.reviews.Reviewer`)."""

    async def review(self, *, token: str | None, path: str, verb: str) -> reviews.Decision: ...


OPEN_PATHS = frozenset({"/healthz", "/readyz", "/livez"})
"""Served to anyone: the kubelet's probes carry no credentials."""


def _guard(
    authorizer: collections.abc.Callable[[], Authorizer | None],
) -> typing.Any:
    """A middleware admitting a request to anything but :data:`OPEN_PATHS` only when the
    Kubernetes API authenticates its bearer token and authorizes the path and verb."""

    @aiohttp.web.middleware
    async def guard(
        request: aiohttp.web.Request,
        handler: collections.abc.Callable[
            [aiohttp.web.Request], collections.abc.Awaitable[aiohttp.web.StreamResponse]
        ],
    ) -> aiohttp.web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        reviewer = authorizer()
        if reviewer is None:
            return _error(503, "authentication is not ready yet")
        header = request.headers.get("Authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else None
        decision = await reviewer.review(
            token=token, path=request.path, verb=_VERBS.get(request.method, "get")
        )
        if decision.allowed:
            return await handler(request)
        return _error(decision.status, decision.reason)

    return guard


_VERBS = {"GET": "get", "HEAD": "get", "POST": "post", "PUT": "put", "DELETE": "delete"}


def build_app(
    *,
    readiness: probing.Readiness,
    metrics: berth_metrics.Metrics,
    providers: Providers,
    debug_api: bool,
    authorizer: collections.abc.Callable[[], Authorizer | None] | None = None,
) -> aiohttp.web.Application:
    """The aiohttp application with every route; debug routes only if ``debug_api``.

    With ``authorizer`` (a getter: the API client exists only after the server started),
    everything but the probes is served only to callers the Kubernetes API authenticates and
    authorizes, as kube-scheduler's secure port does.
    """
    handlers = _Handlers(readiness=readiness, metrics=metrics, providers=providers)
    middlewares = [_guard(authorizer)] if authorizer is not None else []
    app = aiohttp.web.Application(middlewares=middlewares)
    app.router.add_get("/healthz", handlers.healthz)
    app.router.add_get("/readyz", handlers.readyz)
    app.router.add_get("/metrics", handlers.metrics)
    app.router.add_get(SERVICES_PATH, handlers.services)
    app.router.add_get(f"{API_PREFIX}/nodes/{{name}}", handlers.node)
    app.router.add_get(f"{API_PREFIX}/queues", handlers.queues)
    app.router.add_get(f"{API_PREFIX}/queues/{{name}}/waiting", handlers.waiting)
    app.router.add_get(
        f"{API_PREFIX}/namespaces/{{namespace}}/podgroups/{{name}}/position", handlers.position
    )
    app.router.add_get(dashboards.OVERVIEW_PATH, handlers.overview)
    app.router.add_get(dashboards.DASHBOARD_PATH, handlers.dashboard)
    app.router.add_route("*", PLUGINS_PREFIX + "/{plugin}/{tail:.*}", handlers.plugin)
    app.router.add_route("*", PLUGINS_PREFIX + "/{plugin}", handlers.plugin)
    if debug_api:
        app.router.add_post("/debug/flags/s", handlers.score_table)
        app.router.add_post("/debug/flags/v", handlers.log_level)
    return app


def list_services(app: aiohttp.web.Application, providers: Providers) -> dict[str, list[str]]:
    """Every route, grouped by method, sorted: the static ones and the plugins' current ones."""
    grouped: dict[str, set[str]] = {}
    for app_route in app.router.routes():
        path = app_route.resource.canonical if app_route.resource is not None else ""
        # The plugin catch-alls are listed as the concrete routes behind them; HEAD is implied
        # by GET in aiohttp and not a route anybody wrote.
        if path.startswith(PLUGINS_PREFIX) or app_route.method in ("HEAD", "*"):
            continue
        grouped.setdefault(app_route.method, set()).add(path)
    for plugin, route in providers.plugin_routes():
        full_path = handles.ServiceRegistry.full_path(plugin, route).rstrip("/")
        grouped.setdefault(route.method.upper(), set()).add(full_path)
    return {method: sorted(paths) for method, paths in sorted(grouped.items())}


class _Handlers:
    def __init__(
        self,
        *,
        readiness: probing.Readiness,
        metrics: berth_metrics.Metrics,
        providers: Providers,
    ) -> None:
        self._readiness = readiness
        self._metrics = metrics
        self._providers = providers

    async def healthz(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text="ok")

    async def readyz(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        conditions = self._readiness.report()
        ready = all(c.ready for c in conditions)
        body = {
            "ready": ready,
            "conditions": [dataclasses.asdict(c) for c in conditions],
        }
        return aiohttp.web.json_response(body, status=200 if ready else 503)

    async def metrics(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        body, content_type = self._metrics.exposition(accept=request.headers.get("Accept", ""))
        return aiohttp.web.Response(body=body, headers={"Content-Type": content_type})

    async def services(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.json_response(list_services(request.app, self._providers))

    async def node(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        lookup = self._providers.node_lookup
        if lookup is None:
            return _unavailable("the scheduler's node cache")
        name = request.match_info["name"]
        found = lookup(name)
        if found is None:
            return _error(404, f"node {name!r} is not in the scheduler's cache")
        return aiohttp.web.json_response(found)

    async def queues(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        return self._visible(lambda seen: seen.queues())

    async def waiting(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        name = request.match_info["name"]
        limit, token = request.query.get("limit"), request.query.get("continue")
        return self._visible(lambda seen: seen.waiting(name, limit=limit, token=token))

    async def position(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        return self._visible(lambda seen: seen.position(namespace, name))

    async def overview(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        return self._visible(lambda seen: seen.overview())

    async def dashboard(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text=dashboards.page(), content_type="text/html")

    def _visible(
        self, answer: collections.abc.Callable[[visibility.Visibility], visibility.Answer]
    ) -> aiohttp.web.Response:
        seen = self._providers.visibility
        if seen is None:
            return _unavailable("the scheduler's queues")
        try:
            return aiohttp.web.json_response(answer(seen))
        except visibility.NotFound as exc:
            return _error(404, str(exc))
        except visibility.BadRequest as exc:
            return _error(400, str(exc))
        except visibility.NotReady as exc:
            return _error(503, str(exc))

    async def plugin(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        plugin = request.match_info["plugin"]
        tail = request.match_info.get("tail", "")
        routes = [r for p, r in self._providers.plugin_routes() if p == plugin]
        if not routes:
            return _error(404, f"no plugin {plugin!r} serves routes on this replica")
        for route in routes:
            params = match_route(route, method=request.method, tail=tail)
            if params is not None:
                request_ = interfaces.RouteRequest(path_params=params, query=dict(request.query))
                return _call_plugin(plugin, route=route, request=request_)
        allowed = sorted(
            {
                r.method.upper()
                for r in routes
                if match_route(r, method=r.method.upper(), tail=tail) is not None
            }
        )
        if allowed:
            return _error(405, f"{request.method} is not allowed here", allow=allowed)
        return _error(404, f"plugin {plugin!r} has no route {tail!r}")

    async def score_table(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        switch = self._providers.score_table
        if switch is None:
            return _unavailable("the scheduler's score table")
        text = await _flag_body(request)
        try:
            top_n = int(text)
        except ValueError:
            return _error(400, f"expected the number of nodes to show per pod, got {text!r}")
        if top_n < 0:
            return _error(400, f"the number of nodes must not be negative, got {top_n}")
        switch(top_n)
        logger.info("debug: score table %s", f"shows the top {top_n} nodes" if top_n else "off")
        return aiohttp.web.json_response({"topN": top_n})

    async def log_level(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        text = await _flag_body(request)
        try:
            level = berth_logging.set_level(text)
        except berth_logging.LevelError as exc:
            return _error(400, str(exc))
        name = logging.getLevelName(level)
        logger.warning("debug: log level set to %s", name)
        return aiohttp.web.json_response({"level": name})


def _call_plugin(
    plugin: str, *, route: interfaces.Route, request: interfaces.RouteRequest
) -> aiohttp.web.Response:
    # The Route contract: a KeyError means "no such thing" (404), anything else is a bug.
    try:
        body = json.dumps(route.handler(request))
    except KeyError as exc:
        what = exc.args[0] if exc.args else "it"
        return _error(404, f"{what} not found")
    except Exception:
        logger.exception("plugin %s failed to serve %s %s", plugin, route.method, route.path)
        return _error(500, f"plugin {plugin} failed; see the scheduler's log")
    return aiohttp.web.Response(text=body, content_type="application/json")


async def _flag_body(request: aiohttp.web.Request) -> str:
    raw = await request.content.read(_MAX_FLAG_BODY + 1)
    return raw[:_MAX_FLAG_BODY].decode("utf-8", errors="replace").strip()


def _error(
    status: int, message: str, *, allow: collections.abc.Sequence[str] = ()
) -> aiohttp.web.Response:
    headers = {"Allow": ", ".join(allow)} if allow else None
    return aiohttp.web.json_response({"error": message}, status=status, headers=headers)


def _unavailable(what: str) -> aiohttp.web.Response:
    return _error(503, f"{what} is not available on this replica (it runs only on the leader)")


class HttpServer:
    """The running server: :meth:`start` binds and serves, :meth:`stop` closes every connection."""

    def __init__(self, app: aiohttp.web.Application, *, host: str, port: int) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._runner: aiohttp.web.AppRunner | None = None
        self.port: int | None = None
        """The bound port once started (useful when asked for port 0)."""

    async def start(self) -> None:
        runner = aiohttp.web.AppRunner(self._app, handle_signals=False)
        await runner.setup()
        site = aiohttp.web.TCPSite(runner, self._host, self._port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = _bound_port(runner)
        logger.info("serving HTTP on %s:%s", self._host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def _bound_port(runner: aiohttp.web.AppRunner) -> int:
    for address in runner.addresses:
        # IPv4 gives (host, port), IPv6 (host, port, flowinfo, scope).
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    raise RuntimeError("the HTTP server is listening on no TCP address")
