"""Fault injection: the next N matching requests answer a status, wait, or lose their connection.

We test these aspects:
- a status fault answers that code (as a Status) N times, then requests are served again;
- only the method and path pattern given are affected;
- a delay fault delays but serves; a drop fault closes the connection without an answer;
- faults must say exactly one thing to do.
"""

from __future__ import annotations

import time

import kubernetes
import pytest
import urllib3
from kubernetes.client.rest import ApiException

from berth.emulator import faults, testing

BINDING = "/api/v1/namespaces/*/pods/*/binding"


def _pod(name: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


def _bind(core: kubernetes.client.CoreV1Api, name: str) -> None:
    core.create_namespaced_pod_binding(
        name,
        "default",
        {"metadata": {"name": name}, "target": {"name": "n1"}},
        _preload_content=False,
    )


def test_status_fault_fires_n_times_then_clears(
    emulator: testing.RunningEmulator, client: kubernetes.client.ApiClient
) -> None:
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_pod("default", _pod("p"))
    emulator.faults.add(faults.Fault("POST", BINDING, times=2, status=503, message="try later"))
    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            _bind(core, "p")
        assert caught.value.status == 503 and "try later" in caught.value.body
    core.read_namespaced_pod("p", "default")  # other requests were never affected
    _bind(core, "p")
    assert core.read_namespaced_pod("p", "default").spec.node_name == "n1"
    assert emulator.faults.pending == 0
    assert [path for _, path, _ in emulator.faults.fired] == [
        "/api/v1/namespaces/default/pods/p/binding"
    ] * 2


def test_delay_fault_delays_then_serves(
    emulator: testing.RunningEmulator, client: kubernetes.client.ApiClient
) -> None:
    core = kubernetes.client.CoreV1Api(client)
    emulator.faults.add(faults.Fault("GET", "/api/v1/namespaces/default/pods", delay=0.3))
    started = time.monotonic()
    assert core.list_namespaced_pod("default").items == []
    assert time.monotonic() - started >= 0.3


def test_drop_fault_closes_the_connection(
    emulator: testing.RunningEmulator, client: kubernetes.client.ApiClient
) -> None:
    core = kubernetes.client.CoreV1Api(client)
    path = "/api/v1/namespaces/default/configmaps"
    emulator.faults.add(faults.Fault("*", path, times=10, drop=True))
    with pytest.raises(urllib3.exceptions.HTTPError):  # urllib3 retries 3 times, then gives up
        core.list_namespaced_config_map("default", _request_timeout=5)
    assert emulator.server.requests_by_path[("GET", path)] == 4
    emulator.faults.clear()
    assert core.list_namespaced_config_map("default").items == []


@pytest.mark.parametrize(
    "fault",
    [
        faults.Fault("GET", "/x"),
        faults.Fault("GET", "/x", status=500, drop=True),
        faults.Fault("GET", "/x", status=500, times=0),
    ],
    ids=["nothing", "two-things", "zero-times"],
)
def test_faults_must_say_one_thing(fault: faults.Fault) -> None:
    with pytest.raises(ValueError):
        faults.Faults().add(fault)
