"""The operator's HTTP routes, through aiohttp's test client and one real 127.0.0.1 server.

We test these aspects:

- ``/healthz`` answers while the loop runs; ``/readyz`` is 503 while any condition is false,
  lists the conditions, and turns 200 when they clear;
- ``/metrics`` serves the process's own registry in Prometheus text, or OpenMetrics on request;
- ``/berth/v1/__services__`` lists every route grouped by method, including the plugins' current
  routes and the debug routes only when enabled;
- ``/berth/v1/nodes/{name}``: 503 on a replica without a cache, 404 for an unknown node;
- plugin routes: path and query parameters reach the handler, KeyError is 404, a failing
  handler is a logged 500, a wrong method is 405 with ``Allow``;
- ``POST /debug/flags/s`` and ``/debug/flags/v``: absent unless enabled; set the score table's
  top N and the log level; bad bodies are 400;
- :class:`HttpServer` binds a free port when asked for port 0 and closes on stop.
"""

from __future__ import annotations

import collections.abc
import logging

import aiohttp
import aiohttp.test_utils
import pytest

from berth.operator import http, metrics, probing
from berth.scheduler.framework import handles, interfaces

ClientFactory = collections.abc.Callable[
    ..., collections.abc.Awaitable[aiohttp.test_utils.TestClient]
]


@pytest.fixture
def readiness() -> probing.Readiness:
    return probing.Readiness()


@pytest.fixture
def providers() -> http.Providers:
    return http.Providers()


@pytest.fixture
def process_metrics() -> metrics.Metrics:
    return metrics.Metrics()


@pytest.fixture
async def make_client(
    readiness: probing.Readiness,
    providers: http.Providers,
    process_metrics: metrics.Metrics,
) -> collections.abc.AsyncIterator[ClientFactory]:
    clients: list[aiohttp.test_utils.TestClient] = []

    async def make(*, debug_api: bool = False) -> aiohttp.test_utils.TestClient:
        app = http.build_app(
            readiness=readiness, metrics=process_metrics, providers=providers, debug_api=debug_api
        )
        client = aiohttp.test_utils.TestClient(aiohttp.test_utils.TestServer(app))
        await client.start_server()
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


@pytest.fixture
def root_level() -> collections.abc.Iterator[None]:
    """Restore the root logger's level after a test changed it through the debug API."""
    root = logging.getLogger()
    before = root.level
    yield
    root.setLevel(before)


def services_with(*routes: tuple[str, interfaces.Route]) -> handles.ServiceRegistry:
    registry = handles.ServiceRegistry()
    by_plugin: dict[str, list[interfaces.Route]] = {}
    for plugin, route in routes:
        by_plugin.setdefault(plugin, []).append(route)
    for plugin, plugin_routes in by_plugin.items():
        registry.register(plugin, routes=plugin_routes)
    return registry


async def test_healthz_answers_ok(make_client: ClientFactory) -> None:
    client = await make_client()
    response = await client.get("/healthz")
    assert (response.status, await response.text()) == (200, "ok")


async def test_readyz_is_ready_without_conditions(make_client: ClientFactory) -> None:
    client = await make_client()
    response = await client.get("/readyz")
    assert response.status == 200
    assert await response.json() == {"ready": True, "conditions": []}


async def test_readyz_is_503_until_every_condition_holds(
    make_client: ClientFactory, readiness: probing.Readiness
) -> None:
    client = await make_client()
    readiness.set("caches-synced", ready=False, reason="pods not listed yet")
    readiness.set("leader-election", ready=True)

    response = await client.get("/readyz")
    assert response.status == 503
    assert await response.json() == {
        "ready": False,
        "conditions": [
            {"name": "caches-synced", "ready": False, "reason": "pods not listed yet"},
            {"name": "leader-election", "ready": True, "reason": ""},
        ],
    }

    readiness.set("caches-synced", ready=True)
    assert (await client.get("/readyz")).status == 200


async def test_metrics_serves_the_process_registry(
    make_client: ClientFactory, process_metrics: metrics.Metrics
) -> None:
    client = await make_client()
    process_metrics.set_leader(True)
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    assert "berth_leader_status 1.0" in await response.text()


async def test_metrics_speaks_openmetrics_when_asked(make_client: ClientFactory) -> None:
    client = await make_client()
    response = await client.get(
        "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert response.headers["Content-Type"].startswith("application/openmetrics-text")
    assert (await response.text()).endswith("# EOF\n")


@pytest.mark.parametrize(
    ("debug_api", "posts"),
    [(False, []), (True, ["/debug/flags/s", "/debug/flags/v"])],
    ids=["debug-off", "debug-on"],
)
async def test_services_lists_every_route_by_method(
    make_client: ClientFactory,
    providers: http.Providers,
    debug_api: bool,
    posts: list[str],
) -> None:
    providers.services = services_with(
        ("Reservation", interfaces.Route(method="GET", path="reservations/{name}", handler=dict)),
        ("Gang", interfaces.Route(method="post", path="/gangs/", handler=dict)),
    )
    client = await make_client(debug_api=debug_api)
    response = await client.get("/berth/v1/__services__")
    assert await response.json() == {
        "GET": [
            "/berth/v1/__services__",
            "/berth/v1/namespaces/{namespace}/podgroups/{name}/position",
            "/berth/v1/nodes/{name}",
            "/berth/v1/overview",
            "/berth/v1/plugins/Reservation/reservations/{name}",
            "/berth/v1/queues",
            "/berth/v1/queues/{name}/waiting",
            "/dashboard",
            "/healthz",
            "/metrics",
            "/readyz",
        ],
        "POST": sorted(["/berth/v1/plugins/Gang/gangs", *posts]),
    }


async def test_visibility_is_unavailable_on_a_follower(make_client: ClientFactory) -> None:
    client = await make_client()
    response = await client.get("/berth/v1/queues/team-a/waiting")
    assert response.status == 503
    assert "only on the leader" in (await response.json())["error"]


async def test_node_view_is_unavailable_without_a_cache(make_client: ClientFactory) -> None:
    client = await make_client()
    response = await client.get("/berth/v1/nodes/node-1")
    assert response.status == 503
    assert "only on the leader" in (await response.json())["error"]


async def test_node_view_comes_from_the_provider(
    make_client: ClientFactory, providers: http.Providers
) -> None:
    nodes = {"node-1": {"name": "node-1", "allocatable": {"cpu": "4"}}}
    providers.node_lookup = nodes.get
    client = await make_client()

    found = await client.get("/berth/v1/nodes/node-1")
    assert (found.status, await found.json()) == (200, nodes["node-1"])
    missing = await client.get("/berth/v1/nodes/node-2")
    assert missing.status == 404
    assert await missing.json() == {"error": "node 'node-2' is not in the scheduler's cache"}


def echo(request: interfaces.RouteRequest) -> interfaces.JSONValue:
    return {"path": dict(request.path_params), "query": dict(request.query)}


def lookup(request: interfaces.RouteRequest) -> interfaces.JSONValue:
    raise KeyError(f"reservation {request.path_params['name']}")


def broken(request: interfaces.RouteRequest) -> interfaces.JSONValue:
    raise RuntimeError("plugin bug")


@pytest.mark.parametrize(
    ("method", "path", "status", "body"),
    [
        (
            "GET",
            "/berth/v1/plugins/Demo/things/ns-1/thing-1?verbose=1",
            200,
            {"path": {"namespace": "ns-1", "name": "thing-1"}, "query": {"verbose": "1"}},
        ),
        ("GET", "/berth/v1/plugins/Demo", 200, {"path": {}, "query": {}}),
        ("GET", "/berth/v1/plugins/Demo/missing/x", 404, {"error": "reservation x not found"}),
        (
            "GET",
            "/berth/v1/plugins/Demo/broken",
            500,
            {"error": "plugin Demo failed; see the scheduler's log"},
        ),
        ("DELETE", "/berth/v1/plugins/Demo/broken", 405, {"error": "DELETE is not allowed here"}),
        (
            "GET",
            "/berth/v1/plugins/Demo/nothing/here",
            404,
            {"error": "plugin 'Demo' has no route 'nothing/here'"},
        ),
        (
            "GET",
            "/berth/v1/plugins/Other/x",
            404,
            {"error": "no plugin 'Other' serves routes on this replica"},
        ),
    ],
    ids=[
        "params-and-query",
        "plugin-root",
        "key-error",
        "handler-bug",
        "wrong-method",
        "no-route",
        "no-plugin",
    ],
)
async def test_plugin_routes_dispatch_to_handlers(
    make_client: ClientFactory,
    providers: http.Providers,
    method: str,
    path: str,
    status: int,
    body: object,
) -> None:
    providers.services = services_with(
        ("Demo", interfaces.Route(method="GET", path="things/{namespace}/{name}", handler=echo)),
        ("Demo", interfaces.Route(method="GET", path="", handler=echo)),
        ("Demo", interfaces.Route(method="GET", path="missing/{name}", handler=lookup)),
        ("Demo", interfaces.Route(method="GET", path="broken", handler=broken)),
    )
    client = await make_client()
    response = await client.request(method, path)
    assert response.status == status
    assert await response.json() == body
    if status == 405:
        assert response.headers["Allow"] == "GET"


async def test_failing_plugin_handler_is_logged_with_the_plugin_name(
    make_client: ClientFactory, providers: http.Providers, caplog: pytest.LogCaptureFixture
) -> None:
    providers.services = services_with(
        ("Demo", interfaces.Route(method="GET", path="broken", handler=broken))
    )
    client = await make_client()
    await client.get("/berth/v1/plugins/Demo/broken")
    assert "plugin Demo failed to serve GET broken" in caplog.text
    assert "RuntimeError: plugin bug" in caplog.text


@pytest.mark.parametrize("path", ["/debug/flags/s", "/debug/flags/v"], ids=["s", "v"])
async def test_debug_routes_are_absent_unless_enabled(
    make_client: ClientFactory, providers: http.Providers, path: str
) -> None:
    providers.score_table = lambda n: None
    client = await make_client(debug_api=False)
    assert (await client.post(path, data="5")).status == 404


async def test_debug_score_table_sets_top_n(
    make_client: ClientFactory, providers: http.Providers
) -> None:
    chosen: list[int] = []
    providers.score_table = chosen.append
    client = await make_client(debug_api=True)
    response = await client.post("/debug/flags/s", data="7\n")
    assert (response.status, await response.json()) == (200, {"topN": 7})
    assert chosen == [7]


@pytest.mark.parametrize(
    ("body", "message"),
    [("many", "expected the number of nodes"), ("-1", "must not be negative")],
    ids=["not-a-number", "negative"],
)
async def test_debug_score_table_refuses_bad_bodies(
    make_client: ClientFactory, providers: http.Providers, body: str, message: str
) -> None:
    chosen: list[int] = []
    providers.score_table = chosen.append
    client = await make_client(debug_api=True)
    response = await client.post("/debug/flags/s", data=body)
    assert response.status == 400
    assert message in (await response.json())["error"]
    assert chosen == []


async def test_debug_score_table_is_unavailable_without_a_scheduler(
    make_client: ClientFactory,
) -> None:
    client = await make_client(debug_api=True)
    assert (await client.post("/debug/flags/s", data="3")).status == 503


@pytest.mark.usefixtures("root_level")
@pytest.mark.parametrize(
    ("body", "level"),
    [
        ("debug", logging.DEBUG),
        ("WARNING", logging.WARNING),
        ("4", logging.DEBUG),
        ("2", logging.INFO),
    ],
    ids=["name", "upper-case-name", "klog-debug", "klog-info"],
)
async def test_debug_log_level_changes_the_root_level(
    make_client: ClientFactory, body: str, level: int
) -> None:
    client = await make_client(debug_api=True)
    response = await client.post("/debug/flags/v", data=body)
    assert (response.status, await response.json()) == (200, {"level": logging.getLevelName(level)})
    assert logging.getLogger().level == level


@pytest.mark.usefixtures("root_level")
async def test_debug_log_level_refuses_unknown_levels(make_client: ClientFactory) -> None:
    logging.getLogger().setLevel(logging.INFO)
    client = await make_client(debug_api=True)
    response = await client.post("/debug/flags/v", data="chatty")
    assert response.status == 400
    assert logging.getLogger().level == logging.INFO


async def test_server_binds_a_free_port_and_stops(
    readiness: probing.Readiness, providers: http.Providers, process_metrics: metrics.Metrics
) -> None:
    app = http.build_app(
        readiness=readiness, metrics=process_metrics, providers=providers, debug_api=False
    )
    server = http.HttpServer(app, host="127.0.0.1", port=0)
    await server.start()
    assert server.port is not None and server.port > 0
    url = f"http://127.0.0.1:{server.port}/healthz"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert (response.status, await response.text()) == (200, "ok")
    await server.stop()
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            await session.get(url)
