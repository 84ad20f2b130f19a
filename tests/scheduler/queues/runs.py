"""Running default-profile cycles on the in-memory cluster for the queue tests.

``Run`` holds a simulated cluster and its scheduler; ``cycle()`` runs one session and returns
what it did: bindings, evictions (pod names), reasons and the published queue statuses.
Pod names are unique across namespaces in these tests, so results are keyed by name.
"""

from __future__ import annotations

import dataclasses
import typing

from berth.scheduler import loop
from berth.scheduler.framework import decisions, profiles
from berth.scheduler.plugins import registry
from berth.sim import cluster as sim_cluster
from berth.util import clocks
from tests.scheduler import builders as b

Obj = dict[str, typing.Any]


def t(seconds: float) -> float:
    """A time ``seconds`` after the epoch (negative: before the cycles run)."""
    return b.EPOCH + seconds


def cpu_pod(name: str, **fields: typing.Any) -> Obj:
    """A pod asking for one cpu and 1Gi (unless told otherwise)."""
    fields.setdefault("cpu", "1")
    fields.setdefault("memory", "1Gi")
    return b.pod(name, **fields)


def gang(
    name: str, size: int, *, queue: str, min_member: int | None = None, **fields: typing.Any
) -> list[Obj]:
    """A PodGroup in ``queue`` and its ``size`` one-cpu pods ``name-<i>``."""
    group = b.pod_group(
        name,
        min_member=size if min_member is None else min_member,
        queue=queue,
        created=fields.get("created"),
        priority_class=fields.pop("priority_class", None),
    )
    return [group, *[cpu_pod(f"{name}-{i}", group=name, **fields) for i in range(size)]]


def queue(name: str, *, reclaimable: bool = True, **fields: typing.Any) -> Obj:
    obj = b.queue(name, **fields)
    if not reclaimable:
        obj["spec"]["reclaimable"] = False
    return obj


@dataclasses.dataclass
class Outcome:
    bound: dict[str, str]  # pod name -> node, bound this cycle
    evicted: set[str]
    pod_reasons: dict[str, str]  # pod name -> why pending
    group_reasons: dict[str, str]  # group name -> why pending
    queues: dict[str, decisions.QueueStatusSummary]
    result: decisions.CycleResult


class Run:
    """A cluster, a clock and the scheduler over them."""

    def __init__(self, *objs: Obj, profile: profiles.Profile | None = None) -> None:
        self.clock = clocks.VirtualClock(b.EPOCH)
        self.cluster = sim_cluster.InMemoryCluster(clock=self.clock)
        self.scheduler = loop.Scheduler(
            profile or registry.default_profile(),
            registry=registry.in_tree_registry(),
            clock=self.clock,
        )
        self.put(*objs)

    def put(self, *objs: Obj) -> None:
        for obj in objs:
            self.cluster.put(obj)

    def cycle(self) -> Outcome:
        result = self.scheduler.run_once(self.cluster, self.cluster)
        assert result.errors == ()
        return Outcome(
            bound={k.split("/", 1)[1]: v for k, v in result.bindings().items()},
            evicted={d.name for d in result.of_kind(decisions.EvictPod)},
            pod_reasons={k.split("/", 1)[1]: v for k, v in result.pod_reasons.items()},
            group_reasons={k.split("/", 1)[1]: v for k, v in result.group_reasons.items()},
            queues=dict(result.queues),
            result=result,
        )

    def nodes_of(self) -> dict[str, str | None]:
        """Every pod's node now, by pod name."""
        return {
            p["metadata"]["name"]: p["spec"].get("nodeName") for p in self.cluster.objects("Pod")
        }


def profile_with(args: dict[str, dict[str, typing.Any]]) -> profiles.Profile:
    """The default profile with ``args`` by plugin name."""
    base = registry.default_profile()
    return profiles.parse(
        {
            "schedulerName": base.scheduler_name,
            "actions": list(base.actions),
            "plugins": [{"name": p.name, "args": args.get(p.name, {})} for p in base.plugins],
        }
    )
