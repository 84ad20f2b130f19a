"""A binding waits for the pod's PersistentVolumeClaims (``berth.kube.binder.decisions.ApiSink``).

Run against the emulator with simulated kubelets and the informers feeding the cache. Nothing
in the emulator binds claims: the test plays kube-controller-manager's PV binder (it binds the
claim once the selected-node annotation is there), so the wait is seen from both sides.

We test these aspects:

- ``SelectClaimNode`` writes ``volume.kubernetes.io/selected-node``; the pod's binding is not
  posted while its claim is unbound (a ``WaitingForVolumes`` Event says why), and is posted
  once, right after the claim is bound; the pod then runs on that node;
- a claim that stays unbound: after ``claim_wait`` the pod is forgotten (not bound, backing
  off) and a ``FailedScheduling`` Event names the claim;
- a pod whose claims are already bound binds at once;
- ``BindClaimVolume`` at the volume's version: the cache shows the volume as the claim's from
  the decision on (before the write lands or the watch tells), the write lands with the claim's
  ``claimRef``, and the pod binds once the claim is bound;
- ``BindClaimVolume`` at a version the volume is no longer at (another claim took it since):
  the write is refused and changes nothing, the assumption is dropped, and the pod waiting for
  the claim gives up at once (no ``claim_wait``): forgotten, backing off, a ``FailedScheduling``
  Event naming the claim and the volume.
"""

from __future__ import annotations

import asyncio
import collections.abc
import typing

import pytest

from berth.emulator import patches, testing
from berth.kube.binder import binding
from berth.kube.transport import clients
from berth.scheduler.framework import decisions as d
from berth.scheduler.snapshot import volumes
from tests.kube import conftest
from tests.kube.test_preemption_binding import Cluster

Object = dict[str, typing.Any]


def claim(name: str, *, volume: str | None = None) -> Object:
    spec: Object = {
        "storageClassName": "local",
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    if volume is not None:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def with_claim(pod: Object, name: str) -> Object:
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]
    return pod


class Claims:
    """The emulator's claims, read and bound in process (the PV binder's part)."""

    def __init__(self, emulator: testing.RunningEmulator) -> None:
        self.emulator = emulator
        self.resource = emulator.call(emulator.api.resource, "v1", "persistentvolumeclaims")

    def get(self, name: str) -> Object:
        found = self.emulator.call(
            self.emulator.api.storage.get, self.resource.key, "default", name
        )
        assert found is not None
        return dict(found)

    def bind(self, name: str, *, volume: str) -> None:
        api = self.emulator.api
        for body, sub in (
            ({"spec": {"volumeName": volume}}, ""),
            ({"status": {"phase": "Bound"}}, "status"),
        ):
            self.emulator.call(
                api.patch,
                self.resource,
                body,
                namespace="default",
                name=name,
                patch_type=patches.MERGE_PATCH,
                subresource=sub,
            )


Factory = collections.abc.Callable[..., collections.abc.Awaitable[Cluster]]


@pytest.fixture
async def cluster(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> collections.abc.AsyncIterator[Factory]:
    berth_crds.start_kubelets(["2x cpu=2,memory=8Gi name=n"], speedup=20)
    made: list[Cluster] = []

    async def make(*, claim_wait: float = 10.0) -> Cluster:
        running = Cluster(berth_crds, connection.api, presence=True, eviction_wait=10.0)
        running.sink.claims.timeout = claim_wait
        made.append(running)
        await running.start()
        return running

    try:
        yield make
    finally:
        for running in made:
            await running.close()


async def _pending_with_claim(running: Cluster, name: str, *, volume: str | None = None) -> Object:
    conftest.create(
        running.emulator, claim(f"{name}-data", volume=volume), plural="persistentvolumeclaims"
    )
    if volume is not None:
        Claims(running.emulator).bind(f"{name}-data", volume=volume)
    pod = conftest.create(
        running.emulator, with_claim(conftest.pod(name, cpu="100m"), f"{name}-data"), plural="pods"
    )
    key = f"default/{name}-data"
    await conftest.until(lambda: running.cache.claim(key) is not None)
    await conftest.until(lambda: running.informers.holds_capacity(f"default/{name}"))
    return pod


def _decisions(pod: Object, node: str, *, select: bool) -> list[d.Decision]:
    name = pod["metadata"]["name"]
    out: list[d.Decision] = []
    if select:
        out.append(
            d.SelectClaimNode(
                namespace="default", name=f"{name}-data", node=node, pod=f"default/{name}"
            )
        )
    out.append(
        d.BindPod(
            namespace="default",
            name=name,
            uid=pod["metadata"]["uid"],
            node=node,
            claims=(f"default/{name}-data",),
        )
    )
    return out


async def test_binding_waits_for_the_claim_the_pv_binder_binds(cluster: Factory) -> None:
    running = await cluster()
    pod = await _pending_with_claim(running, "p")
    claims = Claims(running.emulator)
    running.apply(*_decisions(pod, "n-1", select=True))
    await conftest.until(
        lambda: (
            claims.get("p-data")["metadata"].get("annotations", {}).get(volumes.SELECTED_NODE)
            == "n-1"
        )
    )
    await conftest.until(lambda: any(e[1] == "WaitingForVolumes" for e in running.events()))
    await asyncio.sleep(0.3)  # the binder had every chance to post the binding early
    assert running.bindings("p") == 0
    assert running.cache.snapshot(running.clock.now()).pods["default/p"].node_name == "n-1"
    claims.bind("p-data", volume="pv-1")
    await conftest.until(lambda: running.phase("p") == "Running")
    stored = running.pod("p")
    assert stored is not None and stored["spec"]["nodeName"] == "n-1"
    assert running.bindings("p") == 1
    assert [(o.key, o.bound) for o in running.outcomes] == [("default/p", True)]
    waiting = [e for e in running.events() if e[1] == "WaitingForVolumes"]
    assert waiting[0][2].startswith(
        "binding to n-1 waits for PersistentVolumeClaims default/p-data"
    )


async def test_a_claim_that_stays_unbound_gives_the_pod_up(cluster: Factory) -> None:
    running = await cluster(claim_wait=0.3)
    pod = await _pending_with_claim(running, "p")
    running.apply(*_decisions(pod, "n-0", select=True))
    await asyncio.wait_for(running.sink.drain(), 10)
    assert running.outcomes == [binding.BindOutcome("default/p", "n-0", False, "claims")]
    assert running.bindings("p") == 0
    assert running.cache.snapshot(running.clock.now()).pods["default/p"].node_name is None
    assert "default/p" in running.sink.holding(running.clock.now())
    failed = [e for e in running.events() if e[1] == "FailedScheduling"]
    assert (
        failed and "PersistentVolumeClaims default/p-data were not bound after 0.3s" in failed[0][2]
    )


async def test_a_pod_whose_claims_are_bound_binds_at_once(cluster: Factory) -> None:
    running = await cluster()
    pod = await _pending_with_claim(running, "p", volume="pv-0")
    await conftest.until(lambda: bool((c := running.cache.claim("default/p-data")) and c.bound))
    running.apply(*_decisions(pod, "n-0", select=False))
    await asyncio.wait_for(running.sink.drain(), 10)
    assert [(o.key, o.bound) for o in running.outcomes] == [("default/p", True)]
    assert not any(e[1] == "WaitingForVolumes" for e in running.events())


def local_volume(name: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": "local",
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "local": {"path": f"/mnt/{name}"},
        },
    }


def _reserve(pod: Object, node: str, *, volume: str, version: str) -> list[d.Decision]:
    name = pod["metadata"]["name"]
    return [
        d.BindClaimVolume(
            namespace="default",
            name=f"{name}-data",
            uid="",
            volume=volume,
            version=version,
            pod=f"default/{name}",
        ),
        *_decisions(pod, node, select=False),
    ]


def _holder(running: Cluster, volume: str) -> str | None:
    return running.cache.snapshot(running.clock.now()).volumes.volumes[volume].claim


async def test_a_volume_reserved_at_its_version_is_the_claims_at_once(cluster: Factory) -> None:
    running = await cluster()
    conftest.create(
        running.emulator, local_volume("pv-a"), plural="persistentvolumes", namespace=None
    )
    pod = await _pending_with_claim(running, "p")
    await conftest.until(
        lambda: "pv-a" in running.cache.snapshot(running.clock.now()).volumes.volumes
    )
    version = running.cache.snapshot(running.clock.now()).volumes.volumes["pv-a"].version
    running.apply(*_reserve(pod, "n-0", volume="pv-a", version=version))
    assert _holder(running, "pv-a") == "default/p-data"  # assumed: no later cycle may take it
    resource = running.emulator.call(running.emulator.api.resource, "v1", "persistentvolumes")

    def stored() -> Object:
        found = running.emulator.call(running.emulator.api.storage.get, resource.key, "", "pv-a")
        return dict(found or {})

    await conftest.until(lambda: (stored()["spec"].get("claimRef") or {}).get("name") == "p-data")
    assert _holder(running, "pv-a") == "default/p-data"  # the API's word now, the same
    Claims(running.emulator).bind("p-data", volume="pv-a")
    await conftest.until(lambda: running.phase("p") == "Running")
    assert [(o.key, o.bound) for o in running.outcomes] == [("default/p", True)]


async def test_a_volume_changed_since_it_was_chosen_is_not_written(cluster: Factory) -> None:
    running = await cluster(claim_wait=60.0)
    conftest.create(
        running.emulator, local_volume("pv-b"), plural="persistentvolumes", namespace=None
    )
    pod = await _pending_with_claim(running, "p")
    await conftest.until(
        lambda: "pv-b" in running.cache.snapshot(running.clock.now()).volumes.volumes
    )
    version = running.cache.snapshot(running.clock.now()).volumes.volumes["pv-b"].version
    # Another claim took the volume meanwhile (another scheduler, a user's claimRef).
    resource = running.emulator.call(running.emulator.api.resource, "v1", "persistentvolumes")
    running.emulator.call(
        running.emulator.api.patch,
        resource,
        {"spec": {"claimRef": {"namespace": "default", "name": "someone-else"}}},
        namespace=None,
        name="pv-b",
        patch_type=patches.MERGE_PATCH,
    )
    running.apply(*_reserve(pod, "n-0", volume="pv-b", version=version))
    await asyncio.wait_for(running.sink.drain(), 10)  # long before the 60 s claim_wait
    stored = running.emulator.call(running.emulator.api.storage.get, resource.key, "", "pv-b")
    assert stored["spec"]["claimRef"]["name"] == "someone-else"  # refused: nothing changed
    assert running.outcomes == [binding.BindOutcome("default/p", "n-0", False, "claims")]
    assert running.bindings("p") == 0
    assert running.cache.snapshot(running.clock.now()).pods["default/p"].node_name is None
    assert "default/p" in running.sink.holding(running.clock.now())
    await conftest.until(lambda: _holder(running, "pv-b") == "default/someone-else")
    failed = [e[2] for e in running.events() if e[1] == "FailedScheduling"]
    assert failed and failed[0].startswith(
        "PersistentVolumeClaim default/p-data: persistentvolume pv-b was not reserved for it:"
    ), failed
