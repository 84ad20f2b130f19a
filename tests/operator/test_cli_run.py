"""``berth run`` as a process: the real command line against the emulator, in real time.

We test these aspects:

- it starts, serves ``/healthz``, becomes the leader under its pod name (``POD_NAME``), and on
  SIGTERM releases the Lease and exits 0;
- when another holder takes the Lease it exits 1 (so that Kubernetes restarts it);
- with default settings (no flag about HTTP) it authenticates and authorizes its HTTP API: an
  anonymous request gets 401 from every route it serves (metrics, the scheduler's API under
  ``/berth/v1``, the plugins' routes, the dashboard), from the debug routes it does not serve
  and from paths it does not know, and only the probes answer;
- unusable settings (a missing config file, a bad flag value) exit 2 with a clear message,
  before anything starts.
"""

from __future__ import annotations

import collections.abc
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import typing
import urllib.error
import urllib.request

import click.testing
import pytest

from berth.cli import main as cli_main
from berth.emulator import testing
from berth.operator import http, metrics, probing

LEASE = "berth-scheduler"
BERTH = str(pathlib.Path(sys.executable).parent / "berth")  # the venv's console script
_SERVING = re.compile(r"serving HTTP on [^:]+:(\d+)")


def lease_spec(emulator: testing.RunningEmulator) -> dict[str, typing.Any] | None:
    api = emulator.api
    resource = api.resource("coordination.k8s.io/v1", "leases")

    def read() -> dict[str, typing.Any] | None:
        try:
            return dict(api.get(resource, namespace="default", name=LEASE)["spec"])
        except Exception:  # not created yet
            return None

    return emulator.call(read)


def wait_for(condition: collections.abc.Callable[[], bool], *, limit: float = 60) -> None:
    """Poll another process's effect (no event to await across processes), bounded."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


@pytest.fixture
def berth_run(
    emulator: testing.RunningEmulator,
) -> collections.abc.Iterator[collections.abc.Callable[[str], tuple[subprocess.Popen[str], int]]]:
    started: list[subprocess.Popen[str]] = []

    def run(pod_name: str) -> tuple[subprocess.Popen[str], int]:
        env = emulator.env() | {"POD_NAME": pod_name, "POD_NAMESPACE": "default"}
        env = {k: v for k, v in env.items() if not k.startswith("BERTH_")}
        process = subprocess.Popen(
            [BERTH, "run", "--http-port", "0"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        assert process.stderr is not None
        for line in process.stderr:  # ends if the process dies: then the assertion below fails
            match = _SERVING.search(line)
            if match:
                return process, int(match.group(1))
        raise AssertionError(f"berth run exited {process.wait()} before serving HTTP")

    yield run
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)


def test_berth_run_serves_leads_and_stops_on_sigterm(
    emulator: testing.RunningEmulator,
    berth_run: collections.abc.Callable[[str], tuple[subprocess.Popen[str], int]],
) -> None:
    process, port = berth_run("berth-0")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
        assert (response.status, response.read()) == (200, b"ok")
    wait_for(lambda: (lease_spec(emulator) or {}).get("holderIdentity") == "berth-0")

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    assert (lease_spec(emulator) or {}).get("holderIdentity") == ""


def test_berth_run_exits_1_when_its_lease_is_taken(
    emulator: testing.RunningEmulator,
    berth_run: collections.abc.Callable[[str], tuple[subprocess.Popen[str], int]],
) -> None:
    process, _ = berth_run("berth-0")
    wait_for(lambda: (lease_spec(emulator) or {}).get("holderIdentity") == "berth-0")
    api = emulator.api
    resource = api.resource("coordination.k8s.io/v1", "leases")

    def steal() -> None:
        lease = api.get(resource, namespace="default", name=LEASE)
        lease["spec"]["holderIdentity"] = "usurper"
        api.replace(resource, lease, namespace="default", name=LEASE)

    emulator.call(steal)
    assert process.wait(timeout=60) == 1  # at its next renewal, within the retry period
    assert (lease_spec(emulator) or {}).get("holderIdentity") == "usurper"


def every_route() -> list[tuple[str, str]]:
    """(method, path) of every route the HTTP server has, debug ones included, parameters
    filled in, plus paths it does not know."""
    app = http.build_app(
        readiness=probing.Readiness(),
        metrics=metrics.Metrics(),
        providers=http.Providers(),
        debug_api=True,
    )
    found = set()
    for route in app.router.routes():
        if route.method in ("HEAD", "*") or route.resource is None:
            continue
        path = re.sub(r"\{[^}]+\}", "x", route.resource.canonical)
        found.add((route.method, path))
    found |= {
        ("GET", f"{http.PLUGINS_PREFIX}/Reservation/nodeReservations/n"),
        ("GET", "/berth/v1/unknown"),
        ("GET", "/apis/v1/queues"),  # where the API used to be
    }
    return sorted(found)


def status_of(port: int, method: str, path: str) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_berth_run_by_default_answers_anonymous_requests_401_but_for_the_probes(
    emulator: testing.RunningEmulator,
    berth_run: collections.abc.Callable[[str], tuple[subprocess.Popen[str], int]],
) -> None:
    _, port = berth_run("berth-0")
    # Connected (it leads): the reviewer is there, every answer below is its verdict.
    wait_for(lambda: (lease_spec(emulator) or {}).get("holderIdentity") == "berth-0")
    assert status_of(port, "GET", "/healthz") == 200
    assert status_of(port, "GET", "/readyz") in (200, 503)  # open, whatever it says
    routes = every_route()
    assert ("GET", "/berth/v1/queues") in routes and ("POST", "/debug/flags/v") in routes
    answers = {
        (method, path): status_of(port, method, path)
        for method, path in routes
        if path not in http.OPEN_PATHS
    }
    assert answers == dict.fromkeys(answers, 401)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "/nonexistent/profile.yaml"], "config file /nonexistent/profile.yaml"),
        (["--log-level", "chatty"], "log_level: unknown log level 'chatty'"),
        (["--eviction-wait", "soon"], "eviction_wait: duration 'soon' is malformed"),
        (["--eviction-wait", "0s"], "eviction_wait: Input should be greater than 0"),
    ],
    ids=["missing-config", "bad-log-level", "bad-eviction-wait", "zero-eviction-wait"],
)
def test_unusable_settings_exit_2_before_starting(args: list[str], message: str) -> None:
    runner = click.testing.CliRunner()
    result = runner.invoke(cli_main.cli, ["run", *args], env={"KUBECONFIG": os.devnull})
    assert result.exit_code == 2
    assert message in result.output
