"""Preemption through the whole operator: the preemptor is bound only after its victim is gone.

The operator runs in the test's loop, the emulator on its thread with one simulated node that a
low-priority pod fills. A high-priority pod arrives; the scheduler evicts the low one and binds
the high one in the same cycle. The eviction is answered late (an injected delay), as a victim
terminating within its grace period would be.

We test these aspects:

- the preemptor ends Running on the node, never failed ``OutOfcpu`` by the kubelet, and is
  bound exactly once — the binding was posted after the victim was gone (the operator wires
  the informers' view of the pods into the binder).
"""

from __future__ import annotations

import asyncio
import typing

from berth.emulator import faults, testing
from berth.operator import main, scheduling, settings
from tests.kube import conftest

Object = dict[str, typing.Any]
EVICTION = "/api/v1/namespaces/*/pods/*/eviction"


def priority_class(name: str, value: int) -> Object:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def prioritised(name: str, *, priority: str) -> Object:
    # A queue label makes each pod a job of one, in the same queue: preempt stays in a queue.
    body = conftest.pod(name, cpu="2", labels={"scheduling.berth.io/queue": "default"})
    body["spec"]["priorityClassName"] = priority
    return body


def stored(emulator: testing.RunningEmulator, name: str) -> Object | None:
    api = emulator.api
    resource = emulator.call(api.resource, "v1", "pods")
    return emulator.call(api.storage.get, resource.key, "default", name)


def phase(emulator: testing.RunningEmulator, name: str) -> str | None:
    return ((stored(emulator, name) or {}).get("status") or {}).get("phase")


async def test_preemptor_runs_after_its_slow_victim_is_gone_bound_once(
    emulator: testing.RunningEmulator,
) -> None:
    conftest.install_crds(emulator)
    emulator.start_kubelets(["1x cpu=2,memory=8Gi name=n"], speedup=20)
    for name, value in (("low", 10), ("high", 1000)):
        conftest.create(
            emulator, priority_class(name, value), plural="priorityclasses", namespace=None
        )
    config = settings.Settings(
        kubeconfig=emulator.kubeconfig,
        namespace="default",
        http_host="127.0.0.1",
        http_authorization=False,  # the emulator reviews no tokens
        http_port=0,
        leader_election={"enabled": False},
    )
    stop = asyncio.Event()
    operator = asyncio.create_task(
        main.run(config, stop=stop, leader_components=scheduling.leader_components)
    )
    try:
        conftest.create(emulator, prioritised("victim", priority="low"), plural="pods")
        await conftest.until(lambda: phase(emulator, "victim") == "Running", timeout=60)
        emulator.faults.add(faults.Fault("POST", EVICTION, delay=1.5))
        conftest.create(emulator, prioritised("preemptor", priority="high"), plural="pods")
        await conftest.until(
            lambda: phase(emulator, "preemptor") in ("Running", "Failed"), timeout=60
        )
        preemptor = stored(emulator, "preemptor")
        assert preemptor is not None
        assert preemptor["status"]["phase"] == "Running", preemptor["status"]
        assert preemptor["spec"]["nodeName"] == "n-0"
        assert stored(emulator, "victim") is None
        assert emulator.faults.fired, "the eviction was not slowed down"
        binding = ("POST", "/api/v1/namespaces/default/pods/preemptor/binding")
        assert emulator.server.requests_by_path[binding] == 1
    finally:
        stop.set()
        await asyncio.wait_for(operator, 15)
