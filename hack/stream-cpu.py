"""Berth's CPU per 1000 pods on a stream, in process: ``berth bench e2e`` paced like a real race.

    nice -n 10 .venv/bin/python hack/stream-cpu.py --nodes 100 --pods 800 --rate 25
    nice -n 10 .venv/bin/python hack/stream-cpu.py --nodes 100 --standing 2000 --pods 600

``berth bench e2e`` (without ``--real``) creates its pods as fast as 32 clients can, so its
cycles place many pods each: a backlog. A real race's stream brings a pod or two per cycle,
and what each cycle costs whatever it places (snapshot, session, metrics, writers) is paid per
pod. This runs the same benchmark (:func:`berth.cli.e2e.measure`: the emulator in a process of
its own, Berth's operator in this one) with the pods created at ``--rate`` per second, after
``--standing`` pods created and bound first (a real race's ``init`` pods), and reports this
process's CPU seconds (``time.process_time``: the operator, and the clients creating the pods)
from the first create of the stream until its last binding, per 1000 pods, and the CPU of the
scheduling sessions (their worker thread's ``time.thread_time``) and how many ran. CPU, not wall
time: on a loaded machine wall time moves with the load, CPU much less. One JSON object.

It changes nothing in Berth: it wraps the benchmark's pod creation and the operator's hooks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import typing

import aiohttp

from berth.cli import e2e
from berth.kube.binder import binding
from berth.operator import scheduling
from berth.scheduler import loop
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import snapshots


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods", type=int, default=800, help="pods in the stream")
    parser.add_argument("--rate", type=float, default=25.0, help="pods created per second")
    parser.add_argument("--standing", type=int, default=0, help="pods bound before the stream")
    args = parser.parse_args()
    pods, rate, standing = args.pods, args.rate, args.standing

    marks: dict[str, float] = {}
    bound: set[str] = set()
    sessions = {"cpu": 0.0, "count": 0.0}

    async def create_all(session: aiohttp.ClientSession, **kw: typing.Any) -> None:
        if standing and "standing" not in marks:
            marks["standing"] = 1.0

            def made(index: int) -> dict[str, typing.Any]:
                return e2e._pod(index, prefix="standing")

            await original_create(session, pods=standing, concurrency=32, sent={}, make=made)
            while len(bound) < standing:
                await asyncio.sleep(0.05)
        marks["start"] = time.process_time()
        sent: dict[str, float] = kw["sent"]
        started = time.perf_counter()

        async def one(index: int) -> None:
            await asyncio.sleep(max(0.0, started + index / rate - time.perf_counter()))
            body = e2e._pod(index)
            sent[f"{e2e._NAMESPACE}/{body['metadata']['name']}"] = time.perf_counter()
            async with session.post(f"/api/v1/namespaces/{e2e._NAMESPACE}/pods", json=body) as r:
                if r.status != 201:
                    raise RuntimeError(f"creating a pod: {r.status} {await r.text()}")

        await asyncio.gather(*(one(i) for i in range(kw["pods"])))

    def with_registry(
        registry: typing.Any, *, on_parts: typing.Any = None, on_bound: typing.Any = None
    ) -> typing.Any:
        def told(outcome: binding.BindOutcome) -> None:
            if outcome.bound:
                bound.add(outcome.key)
                if len(bound) >= pods + standing and "end" not in marks:
                    marks["end"] = time.process_time()
            if not outcome.key.startswith(f"{e2e._NAMESPACE}/standing-"):
                on_bound(outcome)

        return original_registry(registry, on_parts=on_parts, on_bound=told)

    def run_session(self: loop.Scheduler, snapshot: snapshots.Snapshot) -> decisions.CycleResult:
        counted = "start" in marks and "end" not in marks
        began = time.thread_time()
        try:
            return original_session(self, snapshot)
        finally:
            if counted:
                sessions["cpu"] += time.thread_time() - began
                sessions["count"] += 1

    original_create, original_registry = e2e._create_all, scheduling.with_registry
    original_session = loop.Scheduler.run_session
    e2e._create_all = create_all  # type: ignore[assignment]
    scheduling.with_registry = with_registry
    loop.Scheduler.run_session = run_session  # type: ignore[method-assign]
    result = e2e.measure(nodes=args.nodes, pods=pods, concurrency=32, timeout=300)
    cpu = marks["end"] - marks["start"]
    count = int(sessions["count"])
    print(
        json.dumps(
            {
                **result,
                "rate": rate,
                "standing": standing,
                "cpu_seconds": round(cpu, 3),
                "cpu_seconds_per_1000_pods": round(cpu / pods * 1000, 3),
                "session_cpu_seconds": round(sessions["cpu"], 3),
                "sessions": count,
                "session_cpu_ms": round(sessions["cpu"] / count * 1000, 3) if count else None,
            }
        )
    )


if __name__ == "__main__":
    main()
