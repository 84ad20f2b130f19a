"""The machinery of ``berth bench e2e --real``, on the emulator with the null scheduler.

The real control plane is not needed to check how a race is run and reported: the emulator
serves the same API (pods, bindings, watches, field selectors), and the null scheduler
(:mod:`berth.cli.e2e_null`) runs as its own process against it, as it does in the benchmark.
A small task plays kube-controller-manager's ServiceAccount controller for new namespaces.

We test these aspects:
- the null scheduler binds only its own unbound pods, round-robin over the nodes in name order;
- with the ``dra`` shape's claims, it waits for each pod's claim from the template, allocates
  it on the node it binds the pod to (a device of that node's slice, the pod in
  ``reservedFor``, the finalizer on) and the race counts the claims allocated;
- a stream race reports every pod bound, rates, latencies, the scheduler's CPU per 1000 pods
  and its peak RSS, and the other processes' cores;
- a backlog race keeps the scheduler stopped while the pods are created: nothing is bound
  before it resumes, then everything is;
- pods nobody binds end the race at its timeout, marked ``timed_out`` with what was bound;
- a scheduler killed mid-race ends it with an error naming it and its log;
- standing pods' ``PodScheduled=False`` marks are counted by the tracker.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import json
import os
import pathlib
import signal
import sys
import typing

import aiohttp
import pytest

from berth.cli import e2e_race, e2e_shapes
from berth.emulator import testing
from berth.realcluster import processes

NULL = "berth-bench-null"
Object = dict[str, typing.Any]


@pytest.fixture
def null_scheduler(
    emulator: testing.RunningEmulator, tmp_path: pathlib.Path
) -> collections.abc.Iterator[processes.Process]:
    emulator.start_kubelets([f"3x cpu=8,memory=32Gi devices={e2e_shapes.DRA_DRIVER}:2 name=node"])
    process = processes.Process(
        "null-scheduler",
        [
            sys.executable,
            "-m",
            "berth.cli.e2e_null",
            f"--server={emulator.url}",
            f"--scheduler={NULL}",
            "--concurrency=4",
        ],
        log=tmp_path / "null-scheduler.log",
    ).start()
    try:
        processes.wait_until(
            "the null scheduler",
            lambda: "watching pods" in processes.tail(process.log),
            timeout=30.0,
            watch=[process],
        )
        yield process
    finally:
        process.stop()


async def _service_accounts(session: aiohttp.ClientSession) -> None:
    """Make each new namespace's default ServiceAccount, as kube-controller-manager does."""
    made: set[str] = set()
    while True:
        async with session.get("/api/v1/namespaces") as response:
            names = [n["metadata"]["name"] for n in (await response.json())["items"]]
        for name in names:
            if name not in made:
                body = {"metadata": {"name": "default"}}
                async with session.post(f"/api/v1/namespaces/{name}/serviceaccounts", json=body):
                    made.add(name)
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def _race(
    emulator: testing.RunningEmulator, process: processes.Process, *, timeout: float = 30.0
) -> collections.abc.AsyncIterator[e2e_race.Race]:
    async with aiohttp.ClientSession(base_url=emulator.url) as session:
        helper = asyncio.create_task(_service_accounts(session))
        try:
            yield e2e_race.Race(
                session=session,
                processes={"null-scheduler": process},
                concurrency=4,
                timeout=timeout,
                bench_pid=os.getpid(),
            )
        finally:
            helper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await helper


def _pods(count: int, *, scheduler: str = NULL) -> list[Object]:
    shape = e2e_shapes.SHAPES["basic"]
    return e2e_shapes.measured_pods(shape, count, contender="null", scheduler=scheduler)


def _placements(emulator: testing.RunningEmulator, namespace: str) -> dict[str, str | None]:
    listed = json.loads(emulator.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in listed["items"]}


async def test_the_null_scheduler_binds_its_own_pods_round_robin(
    emulator: testing.RunningEmulator, null_scheduler: processes.Process
) -> None:
    contender = e2e_race.Contender("null", NULL, null_scheduler)
    async with _race(emulator, null_scheduler) as race:
        others = _pods(2, scheduler="someone-else")
        for pod in others:
            pod["metadata"]["name"] = "other-" + pod["metadata"]["name"]
        result = await e2e_race.phase(
            race, contender, namespace="mine", init=[], before=others, pods=_pods(9), paused=False
        )
    assert result["bound"] == 9 and not result.get("timed_out")
    placed = _placements(emulator, "mine")
    nodes = [placed[f"p-{i:06d}"] for i in range(9)]
    assert sorted(nodes) == sorted(["node-0", "node-1", "node-2"] * 3)
    assert placed["other-p-000000"] is None and placed["other-p-000001"] is None


async def test_the_null_scheduler_allocates_each_pods_claim_where_it_binds_it(
    emulator: testing.RunningEmulator, null_scheduler: processes.Process
) -> None:
    contender = e2e_race.Contender("null", NULL, null_scheduler)
    shape = e2e_shapes.SHAPES[e2e_shapes.DRA]
    pods = e2e_shapes.measured_pods(shape, 6, contender="null", scheduler=NULL)
    async with _race(emulator, null_scheduler) as race:
        result = await e2e_race.phase(
            race,
            contender,
            namespace="claims",
            init=[],
            before=e2e_shapes.claim_objects(shape),
            pods=pods,
            paused=False,
        )
        allocated = await e2e_race.allocated_claims(race, "claims")
    assert result["bound"] == 6 and not result.get("timed_out")
    assert allocated == 6
    placed = _placements(emulator, "claims")
    listed = emulator.kubectl("get", "resourceclaims", "-n", "claims", "-o", "json").stdout
    devices = set()
    for claim in json.loads(listed)["items"]:
        (owner,) = claim["metadata"]["ownerReferences"]
        (result_,) = claim["status"]["allocation"]["devices"]["results"]
        assert result_["pool"] == placed[owner["name"]]  # the fake driver's pool is its node
        assert result_["driver"] == e2e_shapes.DRA_DRIVER and result_["request"] == "gpu"
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": owner["name"], "uid": owner["uid"]}
        ]
        assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        devices.add((result_["pool"], result_["device"]))
    assert len(devices) == 6  # 3 nodes of 2 devices, in turn: each device once


async def test_a_stream_race_reports_rates_latencies_and_costs(
    emulator: testing.RunningEmulator, null_scheduler: processes.Process
) -> None:
    contender = e2e_race.Contender("null", NULL, null_scheduler)
    async with _race(emulator, null_scheduler) as race:
        result = await e2e_race.phase(
            race, contender, namespace="stream", init=[], before=[], pods=_pods(30), paused=False
        )
    assert result["pods"] == result["bound"] == 30
    assert result["seconds"] > 0 and result["pods_per_second"] > 0
    assert result["creates_per_second"] > 0
    assert 0 < result["p50_ms"] <= result["p99_ms"]
    # The first pod is bound after the clock started and before the race ended. (Not "within
    # the p99": a stream's first pod may be sent late, when the machine is slow to create it.)
    assert 0 < result["first_bound_ms"] <= result["seconds"] * 1000
    assert result["cpu_seconds"] is not None and result["cpu_seconds"] >= 0
    assert result["cpu_seconds_per_1000_pods"] == pytest.approx(
        result["cpu_seconds"] / 30 * 1000, abs=0.01
    )
    assert result["peak_rss_mb"] > 0
    assert set(result["cores"]) == {"bench"}  # every other process; the scheduler's apart


async def test_a_backlog_race_binds_nothing_until_the_scheduler_resumes(
    emulator: testing.RunningEmulator, null_scheduler: processes.Process
) -> None:
    contender = e2e_race.Contender("null", NULL, null_scheduler)
    bound_while_stopped: list[int] = []
    original = e2e_race.create

    async def create_and_look(*args: typing.Any, **kwargs: typing.Any) -> None:
        await original(*args, **kwargs)
        if kwargs.get("sent") is not None:  # the measured pods: the scheduler is stopped
            await asyncio.sleep(1.0)
            bound_while_stopped.append(
                sum(1 for node in _placements(emulator, "backlog").values() if node)
            )

    async with _race(emulator, null_scheduler) as race:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(e2e_race, "create", create_and_look)
            result = await e2e_race.phase(
                race,
                contender,
                namespace="backlog",
                init=[],
                before=[],
                pods=_pods(20),
                paused=True,
            )
    assert bound_while_stopped == [0]
    assert result["bound"] == 20 and "creates_per_second" not in result
    # Every pod counts as sent when the scheduler resumed: the first bound is the quickest.
    assert 0 < result["first_bound_ms"] <= result["p50_ms"]
    assert null_scheduler.running()


async def test_pods_nobody_binds_time_out_and_say_how_far_they_got(
    emulator: testing.RunningEmulator, null_scheduler: processes.Process
) -> None:
    # The contender's process is the null scheduler, but the pods name nobody.
    contender = e2e_race.Contender("null", "nobody", null_scheduler)
    async with _race(emulator, null_scheduler, timeout=3.0) as race:
        result = await e2e_race.phase(
            race,
            contender,
            namespace="never",
            init=[],
            before=[],
            pods=_pods(5, scheduler="nobody"),
            paused=False,
        )
    assert result["timed_out"] is True
    assert result["bound"] == 0 and result["pods"] == 5


async def test_a_scheduler_dying_mid_race_names_itself_and_its_log(
    emulator: testing.RunningEmulator, null_scheduler: processes.Process
) -> None:
    contender = e2e_race.Contender("null", "nobody", null_scheduler)
    async with _race(emulator, null_scheduler, timeout=60.0) as race:
        asyncio.get_running_loop().call_later(2.0, null_scheduler.signal, signal.SIGKILL)
        with pytest.raises(processes.ComponentFailed) as failed:
            await e2e_race.phase(
                race,
                contender,
                namespace="dies",
                init=[],
                before=[],
                pods=_pods(5, scheduler="nobody"),
                paused=False,
            )
    message = str(failed.value)
    assert "null-scheduler exited" in message and str(null_scheduler.log) in message


async def test_the_tracker_counts_pods_marked_unschedulable(
    emulator: testing.RunningEmulator, null_scheduler: processes.Process
) -> None:
    async with _race(emulator, null_scheduler) as race:
        await e2e_race.create_namespace(race, "standing")
        tracker = await e2e_race.Tracker(race.session, "standing").start()
        try:
            standing = e2e_shapes.standing_pods(0, 3, scheduler="nobody")
            await e2e_race.create(race.session, "standing", standing, concurrency=2)
            condition = {
                "status": {
                    "conditions": [
                        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                    ]
                }
            }
            for name in ("u-000000", "u-000002"):
                async with race.session.patch(
                    f"/api/v1/namespaces/standing/pods/{name}/status",
                    json=condition,
                    headers={"Content-Type": "application/merge-patch+json"},
                ) as response:
                    assert response.status == 200
            assert await tracker.wait(
                lambda: len(tracker.unschedulable) >= 2, timeout=10, race=race
            )
            assert tracker.unschedulable == {"u-000000", "u-000002"}
        finally:
            await tracker.stop()
