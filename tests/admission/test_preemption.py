"""Admission mode: a preemptor admitted onto its victims' node is ungated only once they are gone.

Runs on the emulator with simulated kubelets, Berth's informers, cache, binder and
:class:`~berth.kube.admission.admission.Admission` wired as the operator wires them (the binder's
victim waits shared, the informers waking them), and the tests' stand-in kube-scheduler
(``tests/admission/stack.py``). The cycle's result is handed to admission directly: an
``EvictPod`` of the victim filling node ``n-0`` and a ``BindPod`` of the gated preemptor there.
The victim is slow to go: the Eviction API answers late (an injected delay). We test these
aspects:

- the preemptor is pinned but stays gated while the victim is still there, is ungated only
  after it is gone, is bound to ``n-0`` by the stand-in and ends Running — never ``OutOfcpu``,
  never rejected;
- a victim that stays (its eviction refused): after ``eviction_wait`` the allocation is dropped
  (the cache forgets the assumed place), the pod is left pinned and gated, and a
  ``FailedScheduling`` Event names the victim.
"""

from __future__ import annotations

import asyncio
import collections.abc
import typing

import kubernetes_asyncio.client
import kubernetes_asyncio.config
import pytest

from berth.api import keys
from berth.emulator import faults, testing
from berth.kube.admission import admission
from berth.kube.binder import decisions
from berth.kube.informers import cluster_informers, snapshots
from berth.kube.transport import events
from berth.scheduler.framework import decisions as d
from berth.scheduler.snapshot import cache as cluster_cache
from berth.util import clocks
from tests.admission import stack

pytestmark = pytest.mark.timeout(60)

Object = dict[str, typing.Any]
EVICTION = "/api/v1/namespaces/*/pods/*/eviction"


class Admitting:
    """Informers, cache, binder and admission in the test's loop, without a scheduling loop."""

    def __init__(
        self,
        emulator: testing.RunningEmulator,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        eviction_wait: float,
    ) -> None:
        self.emulator = emulator
        self.clock = clocks.SystemClock()
        names = {stack.SCHEDULER_NAME}
        self.cache = cluster_cache.ClusterCache(scheduler_names=names)
        live = cluster_informers.LivePods()
        self.recorder = events.EventRecorder(api, clock=self.clock)
        self.sink = decisions.ApiSink(
            api,
            cache=self.cache,
            clock=self.clock,
            presence=live,
            eviction_wait=eviction_wait,
        )
        self.admission = admission.Admission(
            api,
            cache=self.cache,
            source=snapshots.CacheSource(self.cache, clock=self.clock, backoffs=self.sink),
            sink=self.sink,
            clock=self.clock,
            scheduler_names=names,
            recorder=self.recorder,
            bind_timeout=10.0,
            victims=self.sink.victims,
        )
        self.informers = cluster_informers.ClusterInformers(
            api,
            cache=self.cache,
            scheduler_names=names,
            trigger=asyncio.Event(),
            live=live,
            also_ours=self.admission.observe_pod,
            on_pod_removed=self.admission.pod_removed,
            on_pod_released=self.sink.pod_released,
        )

    def events(self) -> list[tuple[str, str, str]]:
        api = self.emulator.api
        resource = self.emulator.call(api.resource, "v1", "events")
        return [
            (e["involvedObject"]["name"], e["reason"], e["message"])
            for e in self.emulator.call(api.storage.list, resource.key)
        ]

    def preempt(self, victim: Object, preemptor: Object) -> None:
        """One cycle's result: evict ``victim``, admit ``preemptor`` onto its node."""
        node = victim["spec"]["nodeName"]
        result = d.CycleResult(
            session_id="s",
            decisions=(
                d.EvictPod(
                    namespace="default",
                    name=victim["metadata"]["name"],
                    uid=victim["metadata"]["uid"],
                    node=node,
                    reason="preempted by default/preemptor",
                ),
                d.BindPod(
                    namespace="default",
                    name=preemptor["metadata"]["name"],
                    uid=preemptor["metadata"]["uid"],
                    node=node,
                ),
            ),
        )
        self.admission.snapshot()  # the view: which gated pods admission offers (and admits)
        self.admission.apply(result)


@pytest.fixture
async def admitting(
    emulator: testing.RunningEmulator, request: pytest.FixtureRequest
) -> collections.abc.AsyncIterator[tuple[Admitting, stack.StandInScheduler]]:
    """The pieces running over one node ``n-0``; ``eviction_wait`` is the indirect param (10 s)."""
    stack.install_crds(emulator)
    emulator.start_kubelets(["1x cpu=2,memory=8Gi name=n"], speedup=20, start_delay=0)
    api = await kubernetes_asyncio.config.new_client_from_config(
        config_file=str(emulator.kubeconfig)
    )
    running = Admitting(emulator, api, eviction_wait=getattr(request, "param", 10.0))
    stop = asyncio.Event()
    async with stack.stand_in(emulator) as kube_scheduler:
        tasks = [
            asyncio.create_task(part(stop))
            for part in (
                running.informers.run,
                running.sink.run,
                running.admission.run,
                running.recorder.run,
            )
        ]
        try:
            await asyncio.wait_for(running.informers.synced.wait(), 10)
            yield running, kube_scheduler
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            await api.close()


def _phase(emulator: testing.RunningEmulator, name: str) -> str | None:
    found = stack.get_pod(emulator, name)
    return (found or {}).get("status", {}).get("phase")


async def _victim_and_preemptor(running: Admitting) -> tuple[Object, Object]:
    """A victim filling ``n-0``, Running; a gated preemptor of the ``default`` queue; both seen."""
    emulator = running.emulator
    victim_spec = stack.pod("victim", cpu="2", gated=False)
    victim_spec["spec"]["nodeName"] = "n-0"
    victim = stack.create(emulator, "v1", "pods", victim_spec)
    preemptor = stack.create(
        emulator,
        "v1",
        "pods",
        stack.pod("preemptor", cpu="2", labels={keys.QUEUE_LABEL: "default"}),
    )
    await stack.eventually(lambda: _phase(emulator, "victim") == "Running", what="victim runs")
    await stack.eventually(
        lambda: (
            running.informers.holds_capacity("default/victim")
            and "default/preemptor" in running.admission.snapshot().pods
        ),
        what="both pods seen",
    )
    return victim, preemptor


def _admitted_node(obj: Object | None) -> str | None:
    annotations = (obj or {}).get("metadata", {}).get("annotations") or {}
    return typing.cast(str | None, annotations.get(keys.ADMITTED_NODE_ANNOTATION))


async def test_preemptor_is_ungated_only_after_its_victim_is_gone_and_runs(
    admitting: tuple[Admitting, stack.StandInScheduler],
) -> None:
    running, kube_scheduler = admitting
    emulator = running.emulator
    victim, preemptor = await _victim_and_preemptor(running)
    emulator.faults.add(faults.Fault("POST", EVICTION, delay=1.0))
    running.preempt(victim, preemptor)
    await stack.eventually(
        lambda: _admitted_node(stack.get_pod(emulator, "preemptor")) == "n-0", what="the pin"
    )
    # Pinned while the eviction is still in flight: the gate must stay until the victim goes.
    pinned = stack.get_pod(emulator, "preemptor")
    assert pinned is not None and stack.gates(pinned) == [keys.ADMISSION_GATE]
    assert stack.get_pod(emulator, "victim") is not None
    assert "preemptor" not in kube_scheduler.bound
    await stack.eventually(lambda: "preemptor" in kube_scheduler.bound, what="the binding")
    assert kube_scheduler.bound["preemptor"] == "n-0"
    gone = stack.get_pod(emulator, "victim")
    assert gone is None or gone["status"].get("phase") in ("Succeeded", "Failed")
    await stack.eventually(
        lambda: _phase(emulator, "preemptor") in ("Running", "Failed"), what="it settles"
    )
    settled = stack.get_pod(emulator, "preemptor")
    assert settled is not None and settled["status"]["phase"] == "Running"
    assert settled["status"].get("reason") != "OutOfcpu"
    assert running.admission.rejected == 0


@pytest.mark.parametrize("admitting", [0.3], indirect=True, ids=["eviction-wait-0.3s"])
async def test_a_victim_that_stays_releases_the_preemptor_pinned_and_gated(
    admitting: tuple[Admitting, stack.StandInScheduler],
) -> None:
    running, kube_scheduler = admitting
    emulator = running.emulator
    victim, preemptor = await _victim_and_preemptor(running)
    emulator.faults.add(faults.Fault("POST", EVICTION, status=429, message="disruption budget"))
    running.preempt(victim, preemptor)
    assert running.cache.snapshot(running.clock.now()).pods["default/preemptor"].node_name == "n-0"
    await asyncio.wait_for(running.admission.drain(), 10)
    assert "default/preemptor" not in running.admission.allocations
    assert running.cache.snapshot(running.clock.now()).pods["default/preemptor"].node_name is None
    stored = stack.get_pod(emulator, "preemptor")
    assert stored is not None and stack.gates(stored) == [keys.ADMISSION_GATE]
    assert _admitted_node(stored) == "n-0"
    assert "preemptor" not in kube_scheduler.bound
    await asyncio.wait_for(running.recorder.drain(), 10)
    assert (
        "preemptor",
        "FailedScheduling",
        "Preemption victims default/victim were still on n-0 after 0.3s; not admitting there "
        "now, the pod will be tried again",
    ) in running.events()
    assert _phase(emulator, "victim") == "Running"
