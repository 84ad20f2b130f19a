"""Who may read Berth's HTTP API, decided by the real API server's authentication and RBAC.

``berth run`` with its default settings (no flag about HTTP) runs as the chart installs it. We
test these aspects (the issue's "must show" 3 and 5):

- an anonymous request gets 401 from every route but the probes;
- a ServiceAccount with no RoleBinding — whose token the API server authenticates, and which
  the default roles let read ``/api/*`` and ``/apis/*`` — gets 403 from every route but the
  probes: metrics, the scheduler's API under ``/berth/v1``, the plugins' routes, the dashboard,
  the debug routes;
- a ServiceAccount bound to the chart's ``berth-viewer`` ClusterRole reads the scheduler's
  API, the dashboard and the metrics, and still may not use the debug routes (POST).
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest

from berth.operator import http, metrics, probing
from berth.realcluster import processes
from tests.realcluster import cluster

pytestmark = pytest.mark.realcluster


def _routes() -> list[tuple[str, str]]:
    """(method, path) of every route the HTTP server has, debug ones included, parameters
    filled in."""
    app = http.build_app(
        readiness=probing.Readiness(),
        metrics=metrics.Metrics(),
        providers=http.Providers(),
        debug_api=True,
    )
    found = {
        (route.method, re.sub(r"\{[^}]+\}", "x", route.resource.canonical))
        for route in app.router.routes()
        if route.method not in ("HEAD", "*") and route.resource is not None
    }
    found.add(("GET", f"{http.PLUGINS_PREFIX}/Reservation/nodeReservations/small-0"))
    return sorted(p for p in found if p[1] not in http.OPEN_PATHS)


def _status(port: int, method: str, path: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        method=method,
        headers=headers,
        data=b"" if method == "POST" else None,
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _token(real: cluster.RealCluster, namespace: str, account: str) -> str:
    real.kubectl("create", "serviceaccount", account, "-n", namespace)
    made = real.kubectl("create", "token", account, "-n", namespace, "--duration", "1h")
    return str(made.stdout).strip()


@pytest.mark.timeout(300)
def test_only_whom_rbac_names_reads_the_http_api(real: cluster.RealCluster) -> None:
    replica = real.berth()  # default settings: authorization on
    namespace = real.namespace()
    nobody = _token(real, namespace, "nobody")
    reader = _token(real, namespace, "reader")
    binding = f"{namespace}-reads-berth"
    real.kubectl(
        "create", "clusterrolebinding", binding, "--clusterrole=berth-viewer",
        f"--serviceaccount={namespace}:reader",
    )  # fmt: skip
    try:
        port = replica.http_port
        routes = _routes()
        assert ("GET", "/berth/v1/queues") in routes and ("GET", "/dashboard") in routes
        # Ready, and leading: the scheduler's API has its data (503 on a follower).
        processes.wait_until(
            "berth ready and serving its queues",
            lambda: (
                _status(port, "GET", "/readyz", None) == 200
                and _status(port, "GET", "/berth/v1/queues", reader) == 200
            ),
            timeout=120.0,
            interval=0.5,
            watch=[replica.process],
        )
        assert _status(port, "GET", "/healthz", None) == 200
        anonymous = {route: _status(port, *route, None) for route in routes}
        assert anonymous == dict.fromkeys(routes, 401)
        refused = {route: _status(port, *route, nobody) for route in routes}
        assert refused == dict.fromkeys(routes, 403)
        read = {route: _status(port, *route, reader) for route in routes}
        gets = {r: code for r, code in read.items() if r[0] == "GET"}
        # Served (200), or a node, queue or group the scheduler does not know (404).
        assert set(gets.values()) <= {200, 404}, gets
        for path in ("/berth/v1/queues", "/berth/v1/overview", "/dashboard", "/metrics"):
            assert gets[("GET", path)] == 200, path
        posts = {r: code for r, code in read.items() if r[0] == "POST"}
        assert posts and set(posts.values()) == {403}, posts
    finally:
        real.kubectl("delete", "clusterrolebinding", binding, "--wait=false")
