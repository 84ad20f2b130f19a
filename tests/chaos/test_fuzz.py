"""The hostile-tenant fuzzer against the emulator, bounded for CI (issue 20, "Must show" 5).

The operator runs in this process against the emulator (simulated nodes, an audit log); the
fuzzer (:mod:`berth.chaos.fuzz`) sends hypothesis-generated hostile Pods, PodGroups, Queues
and Reservations through the Python client and the real kubectl while the emulator injects
faults after it acted (bindings that land but are answered 500 or cut off), then checks: no
5xx, every pod bound at most once, the well-behaved tenant's limited queue exactly at its limit
and none of its pods failed, and a canary pod still bound.
"""

from __future__ import annotations

import asyncio
import pathlib

import pytest

from berth.chaos import fuzz
from berth.emulator import faults, testing
from berth.operator import main, scheduling, settings
from tests.kube import conftest

pytestmark = pytest.mark.slow


def test_generated_objects_are_hostile_and_reproducible() -> None:
    first, again = fuzz.generate(30, seed=3), fuzz.generate(30, seed=3)
    assert first == again
    assert {o["kind"] for o in first} == {"Pod", "PodGroup", "Queue", "Reservation"}


async def test_a_hostile_tenant_never_reaches_another(tmp_path: pathlib.Path) -> None:
    audit = tmp_path / "audit.log"
    running = testing.start_emulator(tmp_path, audit_log=audit)
    stop = asyncio.Event()
    operator: asyncio.Task[main.ExitCode] | None = None
    try:
        conftest.install_crds(running)
        running.start_kubelets(["4x cpu=4,memory=16Gi,pods=110"], speedup=10, start_delay=0)
        config = settings.Settings(
            kubeconfig=running.kubeconfig,
            namespace="default",
            http_host="127.0.0.1",
            http_port=0,
            leader_election={"identity": "fuzzed"},
        )
        operator = asyncio.create_task(
            main.run(config, stop=stop, leader_components=scheduling.leader_components)
        )
        binding = "/api/v1/namespaces/*/pods/*/binding"
        for fault in (
            faults.Fault("POST", binding, times=3, status=500, after=True),  # landed, answer lost
            faults.Fault("POST", binding, times=2, drop=True, after=True),  # landed, connection cut
            faults.Fault("POST", binding, times=2, status=500),  # refused
            faults.Fault("PATCH", "/api/v1/namespaces/*/pods/*/status", times=3, delay=2.0),
        ):
            running.faults.add(fault)
        report = await fuzz.run(
            kubeconfig=running.kubeconfig,
            examples=90,
            seed=20,
            kubectl=testing.kubectl_binary(),
            audit_log=audit,
            limit_cpu=4,
            settle=5.0,
        )
    finally:
        stop.set()
        if operator is not None:
            await operator
        running.threaded.stop()
    fired = len(running.faults.fired)
    print({**report.as_dict(), "faults_fired": fired})
    assert report.tried == 90 and report.through_kubectl == 30
    assert fired >= 5  # the bindings met the faults
    assert report.violations == []
    assert report.answers["4xx"] > 0  # the hostile objects really were hostile
