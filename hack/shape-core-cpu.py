"""The scheduling core's CPU per pod on a race shape's stream, in process (no API server).

    .venv/bin/python hack/shape-core-cpu.py unschedulable-backlog --nodes 5000 --standing 10000
    .venv/bin/python hack/shape-core-cpu.py spread --nodes 5000 --pods 5000 --per 10

``berth bench e2e --real`` measures Berth's whole process beside a real API server; this
isolates its scheduling core on the same objects (:mod:`berth.cli.e2e_shapes`): a cache with
``--nodes`` nodes in three zones, the shape's init pods bound, ``--standing`` pods no node fits
(the ``unschedulable-backlog`` shape's) left a few cycles to be marked and parked, then the
measured pods added ``--per`` at a time with a session over each, as a stream brings them. Each
binding is fed back as the watch would bring it (the pod bound, then ``Running``), each with a
session, as the live loop runs one for what the watch brought. The loop is the live one
(:class:`berth.scheduler.loop.Scheduler` with queueing hints and its placement limit) on a
virtual clock. Prints one JSON object: CPU milliseconds per measured pod (``time.process_time``:
the cache's events and the sessions), the pods bound, the sessions run.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
import typing

from berth.api import keys
from berth.cli import e2e_shapes
from berth.operator import settings
from berth.scheduler import loop
from berth.scheduler.framework import decisions
from berth.scheduler.plugins import registry
from berth.scheduler.snapshot import cache
from berth.util import clocks

EPOCH = 1_767_225_600.0
CREATED = "2026-01-01T00:00:00Z"


def _node(name: str, zone: str) -> dict[str, typing.Any]:  # a Node's wire form
    allocatable = dict(item.split("=") for item in e2e_shapes.NODE_ALLOCATABLE.split(","))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, e2e_shapes.ZONE_KEY: zone},
            "creationTimestamp": CREATED,
        },
        "spec": {},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("shape", choices=sorted(e2e_shapes.SHAPES))
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=2000, help="measured pods")
    parser.add_argument("--per", type=int, default=10, help="pods added before each session")
    parser.add_argument("--standing", type=int, default=0, help="pods no node fits, first")
    options = parser.parse_args()
    shape = e2e_shapes.SHAPES[options.shape]
    scheduler = keys.DEFAULT_SCHEDULER_NAME
    made = 0

    def stamped(obj: typing.Any) -> typing.Any:
        nonlocal made
        made += 1
        meta = obj["metadata"]
        meta.update(namespace="bench", uid=f"u{made}", creationTimestamp=CREATED)
        return obj

    known = cache.ClusterCache(plain_pods_queue="default", group_by_owner=True)
    known.add_queue(
        {"apiVersion": f"{keys.GROUP}/{keys.VERSION}", "kind": "Queue",
         "metadata": {"name": "default", "uid": "q-default"}, "spec": {"weight": 1}}
    )  # fmt: skip
    names = []
    for i in range(options.nodes):
        zone = e2e_shapes.ZONES[i % len(e2e_shapes.ZONES)]
        names.append(f"{zone}-{i:05d}")
        known.add_node(_node(names[-1], zone))
    init, _ = shape.counts(options.nodes, None)
    for pod in e2e_shapes.init_pods(shape, init, nodes=names):
        known.add_pod(stamped(pod))
    for group in e2e_shapes.gang_objects(shape, options.pods, contender="berth"):
        known.add_pod_group(stamped(group))
    measured = e2e_shapes.measured_pods(shape, options.pods, contender="berth", scheduler=scheduler)
    clock = clocks.VirtualClock(EPOCH)
    scheduling = loop.Scheduler(
        registry.default_profile(),
        registry=registry.in_tree_registry(),
        clock=clock,
        hints=True,
        placement_limit=settings.Settings().placements_per_cycle or None,
    )
    bound: dict[str, str] = {}
    sessions = 0

    def cycle() -> decisions.CycleResult:
        nonlocal sessions
        clock.advance(0.05)
        sessions += 1
        result = scheduling.run_session(known.snapshot(clock.now()))
        for decision in result.of_kind(decisions.BindPod):
            known.assume_pod(decision.key, node=decision.node)
            bound[decision.key] = decision.node
        return result

    for pod in e2e_shapes.standing_pods(0, options.standing, scheduler=scheduler):
        known.add_pod(stamped(pod))
    for _ in range(3):  # marked, then parked
        cycle()
        clock.advance(1.0)
    cycle()
    by_key = {f"bench/{p['metadata']['name']}": p for p in measured}
    sessions = 0
    started = time.process_time()
    for i in range(0, len(measured), options.per):
        for pod in measured[i : i + options.per]:
            known.add_pod(stamped(pod))
        before = set(bound)
        while cycle().cut_short:
            pass
        placed = [key for key in bound if key not in before and key in by_key]
        echoes = [copy.deepcopy(by_key[key]) for key in placed]
        for echo in echoes:  # the binding's echo, then the kubelet's Running
            echo["spec"]["nodeName"] = bound[f"bench/{echo['metadata']['name']}"]
            known.add_pod(echo)
        cycle()
        for echo in echoes:
            echo["status"] = {"phase": "Running"}
            known.add_pod(echo)
        cycle()
    used = time.process_time() - started
    print(
        json.dumps(
            {
                "shape": shape.name,
                "nodes": options.nodes,
                "standing": options.standing,
                "pods": len(measured),
                "bound": sum(1 for key in bound if key in by_key),
                "sessions": sessions,
                "cpu_ms_per_pod": round(used / len(measured) * 1000, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
