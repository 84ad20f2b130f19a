"""The whole path, with real clients: kubectl -> API server -> informers -> cache -> scheduling
loop -> binder -> simulated kubelets, and statuses, Events and the HTTP API back out.

We test these aspects (the operator runs in the test's loop, the emulator on its thread, with
simulated nodes; CRDs and ``examples/`` are applied with the real ``kubectl``):

- ``/readyz`` is 503 with ``caches-synced`` not ready until the informers listed everything,
  then 200;
- every example pod is placed and runs to completion; a GPU pod lands on the only GPU node,
  the reservation's owner in its reservation's node;
- ``kubectl get bpg`` shows phases, counts and reasons: the example gang Finished and
  ``Scheduled``, a gang that cannot fit ``Inqueue`` with ``NotEnoughResources`` and the
  scheduler's full explanation in its condition;
- ``kubectl get bq`` shows queue usage; ``kubectl get events`` shows ``Scheduled`` for pods
  and ``FailedScheduling`` for the gang that waits;
- ``/berth/v1/__services__`` lists every route, plugin routes included; ``/berth/v1/nodes/{n}``
  shows the scheduler's view of a node; ``/metrics`` has sensible values.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
import typing

import aiohttp
import pytest

from berth.emulator import faults, testing
from berth.operator import main, scheduling, settings
from tests.kube import conftest

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]
Object = dict[str, typing.Any]

EXTRA = """
apiVersion: v1
kind: Pod
metadata: {name: cuda}
spec:
  schedulerName: berth-scheduler
  containers:
  - {name: c, image: busybox, resources: {requests: {cpu: 100m, nvidia.com/gpu: 1}}}
---
apiVersion: scheduling.berth.io/v1alpha1
kind: PodGroup
metadata: {name: huge}
spec: {minMember: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: huge-0, labels: {scheduling.berth.io/pod-group: huge}}
spec:
  schedulerName: berth-scheduler
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "64"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: huge-1, labels: {scheduling.berth.io/pod-group: huge}}
spec:
  schedulerName: berth-scheduler
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "64"}}}]
"""


async def kubectl(emulator: testing.RunningEmulator, *args: str, input: str | None = None) -> str:
    # In a thread: the operator runs on this loop and must keep going meanwhile.
    done = await asyncio.to_thread(emulator.kubectl, *args, input=input)
    return done.stdout


def pods_by_name(emulator: testing.RunningEmulator) -> dict[str, Object]:
    api = emulator.api
    resource = emulator.call(api.resource, "v1", "pods")
    return {p["metadata"]["name"]: p for p in emulator.call(api.storage.list, resource.key)}


async def get(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as r,
    ):
        return r.status, await r.text()


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match is not None, f"{name} not exposed"
    return float(match.group(1))


async def test_examples_applied_with_kubectl_are_placed_run_and_explained(
    emulator: testing.RunningEmulator, tmp_path: pathlib.Path
) -> None:
    emulator.start_kubelets(
        ["3x cpu=8,memory=32Gi", "1x cpu=8,memory=32Gi,nvidia.com/gpu=4 label=pool=gpu name=gpu"],
        speedup=30,
    )
    await kubectl(emulator, "apply", "-f", str(ROOT / "crds"))
    # The first pod list is slow: readiness must wait for it.
    emulator.faults.add(faults.Fault("GET", "/api/v1/pods", delay=1.0))
    config = settings.Settings(
        kubeconfig=emulator.kubeconfig,
        namespace="default",
        http_host="127.0.0.1",
        http_authorization=False,  # the emulator reviews no tokens
        http_port=0,
        leader_election={"identity": "whole-path"},
    )
    stop = asyncio.Event()
    ports: list[int] = []
    operator = asyncio.create_task(
        main.run(
            config,
            stop=stop,
            leader_components=scheduling.leader_components,
            on_serving=ports.append,
        )
    )
    try:
        await conftest.until(lambda: bool(ports), timeout=60)
        port = ports[0]
        await conftest.until(lambda: emulator.faults.pending == 0, timeout=60)
        status, body = await get(port, "/readyz")
        conditions = {c["name"]: c for c in json.loads(body)["conditions"]}
        assert status == 503
        assert not conditions["caches-synced"]["ready"]
        for _ in range(100):
            status, body = await get(port, "/readyz")
            if status == 200:
                break
            await asyncio.sleep(0.05)
        assert status == 200, body

        examples = ROOT / "examples"
        for folder in ("01-queues", "02-gang", "04-plain-pod"):
            await kubectl(emulator, "apply", "-f", str(examples / folder))
        await kubectl(emulator, "apply", "-f", "-", input=EXTRA)
        # The owner follows once its reservation holds the capacity, as a user would start it.
        await kubectl(emulator, "apply", "-f", str(examples / "03-reservation/10-reservation.yaml"))

        def placed() -> bool:
            api = emulator.api
            resource = emulator.call(api.resource, "scheduling.berth.io/v1alpha1", "reservations")
            found = emulator.call(api.storage.get, resource.key, "default", "train-capacity")
            return bool(found and (found.get("status") or {}).get("phase") == "Available")

        await conftest.until(placed, timeout=60)
        await kubectl(emulator, "apply", "-f", str(examples / "03-reservation/20-owner.yaml"))

        examples = ("train-0", "train-1", "train-2", "train-3", "trainer", "hello")

        def finished() -> bool:
            pods = pods_by_name(emulator)
            done = all(
                pods.get(n, {}).get("status", {}).get("phase") == "Succeeded" for n in examples
            )
            return done and pods["cuda"].get("status", {}).get("phase") == "Running"

        await conftest.until(finished, timeout=30)
        pods = pods_by_name(emulator)
        assert pods["cuda"]["spec"]["nodeName"] == "gpu-0"
        assert "nodeName" not in pods["huge-0"]["spec"]
        reservation = json.loads(
            await kubectl(emulator, "get", "resv", "train-capacity", "-o", "json")
        )
        assert reservation["status"]["nodeName"] == pods["trainer"]["spec"]["nodeName"]

        async def groups() -> str:
            return await kubectl(emulator, "get", "bpg")

        for _ in range(100):
            table = await groups()
            if re.search(r"train\s+Finished", table) and "ClusterTooSmall" in table:
                break
            await asyncio.sleep(0.1)
        assert re.search(r"^train\s+Finished\s+team-a\s+4\s+0\s+Scheduled", table, re.M), table
        # Two pods of 64 cpu on four nodes of 8: it can never fit, and says so.
        assert re.search(r"^huge\s+Inqueue\s+default\s+2\s+0\s+ClusterTooSmall", table, re.M)
        huge = json.loads(await kubectl(emulator, "get", "bpg", "huge", "-o", "json"))
        (condition,) = huge["status"]["conditions"]
        assert condition["message"] == "can never fit: needs 128 cpu, the cluster has 32"

        queues = await kubectl(emulator, "get", "bq")
        assert re.search(r"^team-a\s+Open\s+research\s+8 cpu, 32Gi mem\s", queues, re.M), queues

        listed = await kubectl(emulator, "get", "events")
        assert re.search(
            r"Normal\s+Scheduled\s+pod/cuda\s+Successfully assigned default/cuda to gpu-0", listed
        )
        assert re.search(r"Warning\s+FailedScheduling\s+podgroup/huge", listed), listed

        status, body = await get(port, "/berth/v1/__services__")
        services = json.loads(body)
        assert {
            "/healthz",
            "/readyz",
            "/metrics",
            "/berth/v1/__services__",
            "/berth/v1/nodes/{name}",
        } <= set(services["GET"])
        assert any(path.startswith("/berth/v1/plugins/Reservation/") for path in services["GET"])
        status, body = await get(port, "/berth/v1/nodes/gpu-0")
        node = json.loads(body)
        assert node["allocatableMilli"]["nvidia.com/gpu"] == 4000
        assert node["requestedMilli"]["nvidia.com/gpu"] == 1000
        assert "default/cuda" in node["pods"]

        status, text = await get(port, "/metrics")
        assert metric(text, 'berth_schedule_attempts_total{result="scheduled"}') >= 7
        assert metric(text, "berth_binding_duration_seconds_count") >= 7
        assert metric(text, "berth_e2e_scheduling_duration_seconds_count") >= 7
        assert metric(text, "berth_leader_status") == 1
        assert (
            metric(text, 'berth_queue_guaranteed{queue="team-a",resource="cpu",unit="core"}') == 8
        )
        assert metric(text, 'berth_pending_pods{queue="default"}') == 2
        assert metric(text, 'berth_podgroups{phase="Inqueue"}') == 1
        assert metric(text, 'berth_schedule_attempts_total{result="unschedulable"}') >= 1
    finally:
        stop.set()
        code = await asyncio.wait_for(operator, 30)
    assert code is main.ExitCode.OK
