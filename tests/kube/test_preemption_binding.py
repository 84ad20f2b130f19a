"""A preemptor's binding waits for its victims (``berth.kube.binder.decisions.ApiSink``).

Run against the emulator with simulated kubelets, the informers feeding the cache and telling
the sink which pods still hold capacity. The victims are slow to go: the Eviction API answers
late (an injected delay), as a pod terminating within its grace period would.

We test these aspects:

- the race is real: a sink that cannot see the pods binds at once, and the kubelet fails the
  preemptor ``OutOfcpu``;
- with the informers' view the preemptor's binding waits until the victim is gone, then the
  preemptor runs, bound exactly once; a binding to another node in the same result does not
  wait;
- a victim that stays (its eviction refused): after ``eviction_wait`` the preemptor is
  forgotten, backs off, gets a ``FailedScheduling`` Event naming the victim, and nothing was
  posted; a later cycle that evicts it binds the preemptor once;
- a preemptor deleted while it waits is given up without a binding.
"""

from __future__ import annotations

import asyncio
import collections.abc
import typing

import pytest

from berth.emulator import faults, testing
from berth.kube.binder import binding, decisions
from berth.kube.informers import cluster_informers
from berth.kube.transport import clients, events
from berth.scheduler.framework import decisions as d
from berth.scheduler.snapshot import cache as cluster_cache
from berth.util import clocks
from tests.kube import conftest

Object = dict[str, typing.Any]
EVICTION = "/api/v1/namespaces/*/pods/*/eviction"


class Cluster:
    """Informers, cache, sink and Event recorder in the test's loop, over simulated nodes."""

    def __init__(
        self,
        emulator: testing.RunningEmulator,
        api: clients.AsyncApiClient,
        *,
        presence: bool,
        eviction_wait: float,
    ) -> None:
        self.emulator = emulator
        self.clock = clocks.SystemClock()
        self.cache = cluster_cache.ClusterCache()
        live = cluster_informers.LivePods()
        self.recorder = events.EventRecorder(api, clock=self.clock)
        self.outcomes: list[binding.BindOutcome] = []
        self.victims_at_bind: list[bool] = []  # was the victim still stored at each outcome?
        self.sink = decisions.ApiSink(
            api,
            cache=self.cache,
            clock=self.clock,
            recorder=self.recorder,
            bind_timeout=2.0,
            on_bound=self._bound,
            presence=live if presence else None,
            eviction_wait=eviction_wait,
        )
        self.informers = cluster_informers.ClusterInformers(
            api,
            cache=self.cache,
            scheduler_names={"berth-scheduler"},
            trigger=asyncio.Event(),
            watch_timeout=30,
            live=live,
            on_pod_removed=self.sink.pod_removed,
            on_pod_released=self.sink.pod_released,
            on_claim_changed=self.sink.claim_changed,
        )
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    def _bound(self, outcome: binding.BindOutcome) -> None:
        self.outcomes.append(outcome)
        self.victims_at_bind.append(self.pod("victim") is not None)

    async def start(self) -> None:
        self.tasks = [
            asyncio.create_task(self.informers.run(self.stop)),
            asyncio.create_task(self.sink.run(self.stop)),
            asyncio.create_task(self.recorder.run(self.stop)),
        ]
        await asyncio.wait_for(self.informers.synced.wait(), 10)

    async def close(self) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)

    def pod(self, name: str) -> Object | None:
        api = self.emulator.api
        resource = self.emulator.call(api.resource, "v1", "pods")
        found = self.emulator.call(api.storage.get, resource.key, "default", name)
        return dict(found) if found is not None else None

    def phase(self, name: str) -> str | None:
        found = self.pod(name)
        return (found or {}).get("status", {}).get("phase")

    def create(self, name: str, *, cpu: str, node: str | None = None) -> Object:
        return conftest.create(self.emulator, conftest.pod(name, cpu=cpu, node=node), plural="pods")

    def evict(self, victim: Object, *, preemptor: str) -> d.EvictPod:
        meta = victim["metadata"]
        return d.EvictPod(
            namespace="default",
            name=meta["name"],
            uid=meta["uid"],
            node=victim["spec"]["nodeName"],
            reason=f"preempted by default/{preemptor}",
        )

    def bind(self, pod: Object, node: str) -> d.BindPod:
        meta = pod["metadata"]
        return d.BindPod(namespace="default", name=meta["name"], uid=meta["uid"], node=node)

    def apply(self, *decided: d.Decision) -> None:
        self.sink.apply(d.CycleResult(session_id="s", decisions=decided))

    def bindings(self, name: str) -> int:
        return self.emulator.server.requests_by_path[
            ("POST", f"/api/v1/namespaces/default/pods/{name}/binding")
        ]

    def events(self) -> list[tuple[str, str, str]]:
        api = self.emulator.api
        resource = self.emulator.call(api.resource, "v1", "events")
        return [
            (e["involvedObject"]["name"], e["reason"], e["message"])
            for e in self.emulator.call(api.storage.list, resource.key)
        ]

    async def running_victim(self) -> Object:
        """A victim filling node ``n-0``, Running, and a pending preemptor, both cached."""
        victim = self.create("victim", cpu="2", node="n-0")
        self.create("preemptor", cpu="2")
        await conftest.until(lambda: self.phase("victim") == "Running")
        await conftest.until(lambda: self.informers.holds_capacity("default/victim"))
        await conftest.until(lambda: self.informers.holds_capacity("default/preemptor"))
        return victim


Factory = collections.abc.Callable[..., collections.abc.Awaitable[Cluster]]


@pytest.fixture
async def cluster(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> collections.abc.AsyncIterator[Factory]:
    berth_crds.start_kubelets(["2x cpu=2,memory=8Gi name=n"], speedup=20)
    made: list[Cluster] = []

    async def make(*, presence: bool = True, eviction_wait: float = 10.0) -> Cluster:
        running = Cluster(
            berth_crds, connection.api, presence=presence, eviction_wait=eviction_wait
        )
        made.append(running)
        await running.start()
        return running

    try:
        yield make
    finally:
        for running in made:
            await running.close()


async def _settled(name: str, running: Cluster) -> str | None:
    await conftest.until(lambda: running.phase(name) in ("Running", "Failed"))
    return running.phase(name)


async def test_without_a_view_of_the_pods_the_preemptor_fails_out_of_cpu(
    cluster: Factory,
) -> None:
    running = await cluster(presence=False)
    victim = await running.running_victim()
    running.emulator.faults.add(faults.Fault("POST", EVICTION, delay=1.0))
    preemptor = running.pod("preemptor")
    assert preemptor is not None
    running.apply(running.evict(victim, preemptor="preemptor"), running.bind(preemptor, "n-0"))
    assert await _settled("preemptor", running) == "Failed"
    stored = running.pod("preemptor")
    assert stored is not None and stored["status"]["reason"] == "OutOfcpu"


async def test_preemptor_binds_once_its_victim_is_gone_and_runs(cluster: Factory) -> None:
    running = await cluster()
    victim = await running.running_victim()
    bystander = running.create("bystander", cpu="1")
    await conftest.until(lambda: running.informers.holds_capacity("default/bystander"))
    running.emulator.faults.add(faults.Fault("POST", EVICTION, delay=1.0))
    preemptor = running.pod("preemptor")
    assert preemptor is not None
    running.apply(
        running.evict(victim, preemptor="preemptor"),
        running.bind(preemptor, "n-0"),
        running.bind(bystander, "n-1"),
    )
    assert running.cache.snapshot(running.clock.now()).pods["default/preemptor"].node_name == "n-0"
    await asyncio.wait_for(running.sink.drain(), 10)
    assert await _settled("preemptor", running) == "Running"
    assert [(o.key, o.bound) for o in running.outcomes] == [
        ("default/bystander", True),  # the other node did not wait for the eviction
        ("default/preemptor", True),
    ]
    assert running.victims_at_bind == [True, False]
    assert running.bindings("preemptor") == 1
    assert await _settled("bystander", running) == "Running"


async def test_a_victim_that_stays_gives_the_preemptor_up_until_a_later_cycle(
    cluster: Factory,
) -> None:
    running = await cluster(eviction_wait=0.3)
    victim = await running.running_victim()
    running.emulator.faults.add(
        faults.Fault("POST", EVICTION, status=429, message="disruption budget")
    )
    preemptor = running.pod("preemptor")
    assert preemptor is not None
    running.apply(running.evict(victim, preemptor="preemptor"), running.bind(preemptor, "n-0"))
    await asyncio.wait_for(running.sink.drain(), 10)
    assert running.outcomes == [binding.BindOutcome("default/preemptor", "n-0", False, "victims")]
    assert running.bindings("preemptor") == 0
    assert running.cache.snapshot(running.clock.now()).pods["default/preemptor"].node_name is None
    assert running.sink.holding(running.clock.now()) == {"default/preemptor"}
    await asyncio.wait_for(running.recorder.drain(), 10)
    assert (
        "preemptor",
        "FailedScheduling",
        "Preemption victims default/victim were still on n-0 after 0.3s; not binding there "
        "now, the pod will be tried again",
    ) in running.events()
    # A later cycle evicts it again, and this time it goes.
    running.apply(running.evict(victim, preemptor="preemptor"), running.bind(preemptor, "n-0"))
    await asyncio.wait_for(running.sink.drain(), 10)
    assert await _settled("preemptor", running) == "Running"
    assert running.bindings("preemptor") == 1


async def test_a_preemptor_deleted_while_it_waits_is_not_bound(cluster: Factory) -> None:
    running = await cluster()
    victim = await running.running_victim()
    running.emulator.faults.add(faults.Fault("POST", EVICTION, status=429))
    preemptor = running.pod("preemptor")
    assert preemptor is not None
    running.apply(running.evict(victim, preemptor="preemptor"), running.bind(preemptor, "n-0"))
    api = running.emulator.api
    pods = running.emulator.call(api.resource, "v1", "pods")
    running.emulator.call(api.delete, pods, namespace="default", name="preemptor")
    await asyncio.wait_for(running.sink.drain(), 5)
    assert running.outcomes == [binding.BindOutcome("default/preemptor", "n-0", False, "gone")]
    assert running.bindings("preemptor") == 0
    assert running.phase("victim") == "Running"
