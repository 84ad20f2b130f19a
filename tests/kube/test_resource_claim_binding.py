"""ResourceClaims written before the binding, and released when it fails (``berth.kube``).

Run against the emulator (which serves ``resource.k8s.io/v1`` and plays the resourceclaim
controller) with simulated kubelets: the informers discover DRA and feed the cache, the real
scheduler decides a session over the cache's snapshot, and the binder (``ApiSink``) applies it.

We test these aspects:

- a pod claiming a GPU through a template: its claim gets the allocation (with the node
  selector), the delete-protection finalizer and the pod in ``reservedFor`` before the pod is
  bound — at the moment of the binding the claim already lists the pod;
- the next session counts the devices of writes still in flight (assumed in the cache): a second
  pod for the same GPUs is not placed on them;
- a claim allocated by someone else between the decision and the write is not overwritten; the
  pod is not bound, backs off, and a ``FailedScheduling`` Event names the claim;
- a binding that fails after the claim was written (the pod was bound elsewhere meanwhile)
  releases it: the pod leaves ``reservedFor`` and the claim, which nobody else reserves, is
  deallocated;
- two pods sharing one claim in one session: the first writes the allocation, the second is
  reserved after it, both bound; when the first write is refused, neither is bound;
- a claim left allocated where its pod cannot go and reserved by nobody (kube-scheduler's
  PostFilter): the pod's reason says it is freed, the binder deallocates it, and the next
  session allocates it where the pod fits; a claim another pod reserves is never freed, the pod
  waits naming the claim's allocation.
"""

from __future__ import annotations

import asyncio
import collections.abc
import typing

import pytest

from berth.emulator import patches, testing
from berth.kube.binder import binding
from berth.kube.transport import clients
from berth.scheduler import loop
from berth.scheduler.framework import decisions as d
from berth.scheduler.plugins import registry
from tests.kube import conftest
from tests.kube.test_preemption_binding import Cluster
from tests.scheduler import dra_builders as dra

Object = dict[str, typing.Any]
GPU = "gpu"


class Devices(Cluster):
    """The binder's test cluster with two nodes of two GPUs and the scheduler."""

    def __init__(self, emulator: testing.RunningEmulator, api: clients.AsyncApiClient) -> None:
        super().__init__(emulator, api, presence=True, eviction_wait=10.0)
        self.scheduler = loop.Scheduler(
            registry.default_profile(), registry=registry.in_tree_registry(), clock=self.clock
        )
        self.claim_at_bind: dict[str, Object | None] = {}

    def _bound(self, outcome: binding.BindOutcome) -> None:
        super()._bound(outcome)
        name = outcome.key.partition("/")[2]
        pod = self.pod(name) or {}
        claims = [
            s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
        ] + [
            e.get("resourceClaimName")
            for e in pod.get("spec", {}).get("resourceClaims") or ()
            if e.get("resourceClaimName")
        ]
        self.claim_at_bind[name] = self.claim(str(claims[0])) if claims else None

    def claim(self, name: str) -> Object | None:
        api = self.emulator.api
        resource = self.emulator.call(api.resource, "resource.k8s.io/v1", "resourceclaims")
        found = self.emulator.call(api.storage.get, resource.key, "default", name)
        return dict(found) if found is not None else None

    def session(self) -> d.CycleResult:
        return self.scheduler.run_session(self.cache.snapshot(self.clock.now()))

    def patch_claim_status(self, name: str, status: Object) -> None:
        api = self.emulator.api
        resource = self.emulator.call(api.resource, "resource.k8s.io/v1", "resourceclaims")
        self.emulator.call(
            api.patch,
            resource,
            {"status": status},
            namespace="default",
            name=name,
            patch_type=patches.MERGE_PATCH,
            subresource="status",
        )


Factory = collections.abc.Callable[[], collections.abc.Awaitable[Devices]]


@pytest.fixture
async def cluster(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> collections.abc.AsyncIterator[Factory]:
    emulator = berth_crds
    emulator.start_kubelets(["2x cpu=4,memory=8Gi name=n"], speedup=20)
    conftest.create(emulator, dra.device_class(GPU), plural="deviceclasses", namespace=None)
    for node in ("n-0", "n-1"):
        conftest.create(emulator, dra.node_slice(node), plural="resourceslices", namespace=None)
    made: list[Devices] = []

    async def make() -> Devices:
        running = Devices(emulator, connection.api)
        made.append(running)
        await running.start()
        await conftest.until(lambda: len(running.cache.snapshot(0).devices.catalog.slices) == 2)
        return running

    try:
        yield make
    finally:
        for running in made:
            await running.close()


def _pod(name: str, **kw: typing.Any) -> Object:
    pod = dra.pod_with_claims(name, **kw)
    pod["spec"]["schedulerName"] = "berth-scheduler"
    pod["metadata"].pop("uid", None)
    pod["metadata"].pop("resourceVersion", None)
    pod.pop("status", None)
    return pod


async def _created(running: Devices, *pods: Object) -> list[Object]:
    made = [conftest.create(running.emulator, pod, plural="pods") for pod in pods]

    def cached() -> bool:
        snapshot = running.cache.snapshot(running.clock.now())
        return all(
            (info := snapshot.pods.get(f"default/{p['metadata']['name']}")) is not None
            and all(
                key is not None and key in snapshot.devices.claims
                for key in info.resource_claim_keys
            )
            and len(info.resource_claim_keys) == len(p["spec"]["resourceClaims"])
            for p in made
        )

    await conftest.until(cached)
    return made


def _template(name: str, count: int) -> Object:
    return dra.template(name, dra.request(GPU, cls=GPU, count=count))


def _claim(name: str, count: int = 1) -> Object:
    claim = dra.claim(name, dra.request(GPU, cls=GPU, count=count))
    claim["metadata"].pop("uid")
    return claim


def _uid(pod: Object) -> str:
    return str(pod["metadata"]["uid"])


def _consumers(claim: Object | None) -> list[str]:
    return [c["uid"] for c in ((claim or {}).get("status") or {}).get("reservedFor") or ()]


async def test_the_claim_is_allocated_and_reserved_before_the_pod_is_bound(
    cluster: Factory,
) -> None:
    running = await cluster()
    conftest.create(running.emulator, _template("two", 2), plural="resourceclaimtemplates")
    [pod] = await _created(running, _pod("a", templates={GPU: "two"}))
    result = running.session()
    node = result.bindings()["default/a"]
    [reserve] = result.of_kind(d.ReserveClaim)
    assert reserve.allocation is not None and reserve.pod == "a"
    running.sink.apply(result)
    await asyncio.wait_for(running.sink.drain(), 10)
    assert [(o.key, o.bound) for o in running.outcomes] == [("default/a", True)]
    at_bind = running.claim_at_bind["a"]
    assert at_bind is not None and _consumers(at_bind) == [_uid(pod)]  # before the binding
    claim = running.claim(reserve.name)
    assert claim is not None
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    allocation = claim["status"]["allocation"]
    assert len(allocation["devices"]["results"]) == 2
    assert {r["pool"] for r in allocation["devices"]["results"]} == {node}
    terms = allocation["nodeSelector"]["nodeSelectorTerms"]
    assert terms[0]["matchFields"][0]["values"] == [node]
    assert (running.pod("a") or {})["spec"]["nodeName"] == node
    assert running.sink.resource_claims.pending() == set()
    # Two writes at the version the informer showed, as kube-scheduler's: no read.
    path = f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{reserve.name}"
    requests = running.emulator.server.requests_by_path
    assert (requests[("GET", path)], requests[("PATCH", path)]) == (0, 1)
    assert requests[("PATCH", f"{path}/status")] == 1


async def test_the_next_session_counts_the_devices_of_writes_in_flight(cluster: Factory) -> None:
    running = await cluster()
    conftest.create(running.emulator, _template("two", 2), plural="resourceclaimtemplates")
    await _created(running, *(_pod(n, templates={GPU: "two"}) for n in ("a", "b", "c")))
    first = running.session()
    assert len(first.bindings()) == 2  # two nodes of two GPUs
    running.sink.apply(first)
    # At once, before any write landed: both nodes' GPUs are taken in the cache's view.
    second = running.session()
    assert second.bindings() == {}
    why = second.pod_why[next(k for k in ("default/a", "default/b", "default/c")
                              if k not in first.bindings())]  # fmt: skip
    assert "too few free devices" in why.message
    await asyncio.wait_for(running.sink.drain(), 10)
    assert sorted(o.bound for o in running.outcomes) == [True, True]


async def test_a_claim_allocated_meanwhile_is_not_overwritten(cluster: Factory) -> None:
    running = await cluster()
    conftest.create(running.emulator, _claim("shared"), plural="resourceclaims")
    await _created(running, _pod("a", claims={GPU: "shared"}))
    result = running.session()
    assert "default/a" in result.bindings()
    # kube-scheduler (or another leader) allocates it first, to a device of its choice.
    theirs = dra.allocated((dra.GPU_DRIVER, "n-1", "gpu-1"), node="n-1")
    running.patch_claim_status("shared", theirs)
    running.sink.apply(result)
    await asyncio.wait_for(running.sink.drain(), 10)
    assert [(o.key, o.bound, o.failure) for o in running.outcomes] == [
        ("default/a", False, "resourceclaims")
    ]
    assert running.bindings("a") == 0
    claim = running.claim("shared")
    assert claim is not None
    assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-1"
    assert _consumers(claim) == []
    assert "default/a" in running.sink.holding(running.clock.now())
    failed = [e for e in running.events() if e[1] == "FailedScheduling" and e[0] == "a"]
    assert failed and "resourceclaim default/shared was allocated by someone else" in failed[0][2]


async def test_a_failed_binding_releases_what_was_written(cluster: Factory) -> None:
    running = await cluster()
    conftest.create(running.emulator, _claim("mine"), plural="resourceclaims")
    [pod] = await _created(running, _pod("a", claims={GPU: "mine"}))
    result = running.session()
    node = result.bindings()["default/a"]
    other = "n-1" if node == "n-0" else "n-0"
    # Somebody else binds the pod elsewhere before Berth's binding is posted.
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a"},
               "target": {"kind": "Node", "name": other}}  # fmt: skip
    running.emulator.call(running.emulator.api.bind, namespace="default", name="a", binding=binding)
    running.sink.apply(result)
    await asyncio.wait_for(running.sink.drain(), 10)
    assert [(o.key, o.bound) for o in running.outcomes] == [("default/a", False)]
    claim = running.claim("mine")
    assert claim is not None
    assert _consumers(claim) == []
    assert not (claim.get("status") or {}).get("allocation")  # deallocated: nobody holds it
    assert _uid(pod) not in _consumers(running.claim_at_bind.get("a"))
    assert running.sink.resource_claims.pending() == set()


async def test_pods_sharing_a_claim_are_reserved_after_its_allocation(cluster: Factory) -> None:
    running = await cluster()
    conftest.create(running.emulator, _claim("shared", count=2), plural="resourceclaims")
    made = await _created(running, *(_pod(n, claims={GPU: "shared"}) for n in ("a", "b")))
    result = running.session()
    assert len(set(result.bindings().values())) == 1  # the claim's devices are on one node
    writer, follower = result.of_kind(d.ReserveClaim)
    assert writer.allocation is not None and follower.after == writer.pod
    running.sink.apply(result)
    await asyncio.wait_for(running.sink.drain(), 10)
    assert sorted((o.key, o.bound) for o in running.outcomes) == [
        ("default/a", True),
        ("default/b", True),
    ]
    assert sorted(_consumers(running.claim("shared"))) == sorted(_uid(p) for p in made)


async def test_a_refused_allocation_binds_none_of_the_pods_sharing_it(cluster: Factory) -> None:
    running = await cluster()
    conftest.create(running.emulator, _claim("shared"), plural="resourceclaims")
    await _created(running, *(_pod(n, claims={GPU: "shared"}) for n in ("a", "b")))
    result = running.session()
    assert len(result.bindings()) == 2
    running.patch_claim_status("shared", dra.allocated((dra.GPU_DRIVER, "n-1", "gpu-0")))
    running.sink.apply(result)
    await asyncio.wait_for(running.sink.drain(), 10)
    assert sorted((o.key, o.bound) for o in running.outcomes) == [
        ("default/a", False),
        ("default/b", False),
    ]
    assert running.bindings("a") == running.bindings("b") == 0
    assert _consumers(running.claim("shared")) == []


async def test_a_claim_left_allocated_where_its_pod_cannot_go_is_freed(cluster: Factory) -> None:
    running = await cluster()
    conftest.create(running.emulator, _claim("stale"), plural="resourceclaims")
    # Allocated on n-1 and reserved by nobody (a scheduler that failed half way left it so).
    running.patch_claim_status("stale", dra.allocated((dra.GPU_DRIVER, "n-1", "gpu-0"), node="n-1"))
    pod = _pod("a", claims={GPU: "stale"})
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "n-0"}
    await _created(running, pod)
    await conftest.until(
        lambda: (
            (c := running.cache.resource_claim("default/stale")) is not None
            and c.allocation is not None
        )
    )
    first = running.session()
    assert first.bindings() == {}
    [freed] = first.of_kind(d.DeallocateClaim)
    assert (freed.key, freed.pod) == ("default/stale", "a")
    assert "resourceclaim default/stale is allocated where the pod cannot go" in (
        first.pod_why["default/a"].message
    )
    running.sink.apply(first)
    await asyncio.wait_for(running.sink.drain(), 10)
    assert not ((running.claim("stale") or {}).get("status") or {}).get("allocation")
    await conftest.until(
        lambda: (
            (c := running.cache.resource_claim("default/stale")) is not None
            and c.allocation is None
        )
    )
    second = running.session()
    assert second.bindings() == {"default/a": "n-0"}  # allocated again where it fits
    running.sink.apply(second)
    await asyncio.wait_for(running.sink.drain(), 10)
    results = (running.claim("stale") or {})["status"]["allocation"]["devices"]["results"]
    assert {r["pool"] for r in results} == {"n-0"}


async def test_a_claim_another_pod_reserves_is_never_freed(cluster: Factory) -> None:
    running = await cluster()
    conftest.create(running.emulator, _claim("theirs"), plural="resourceclaims")
    [holder] = await _created(running, _pod("holder", claims={GPU: "theirs"}))
    first = running.session()
    running.sink.apply(first)
    await asyncio.wait_for(running.sink.drain(), 10)
    node = first.bindings()["default/holder"]
    other = "n-1" if node == "n-0" else "n-0"
    pod = _pod("b", claims={GPU: "theirs"})
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": other}
    await _created(running, pod)
    await conftest.until(
        lambda: (
            (c := running.cache.resource_claim("default/theirs")) is not None
            and c.reserved_for_pod(_uid(holder))
        )
    )
    result = running.session()
    assert result.bindings() == {}
    assert result.of_kind(d.DeallocateClaim) == []
    why = result.pod_why["default/b"].message
    assert "didn't match the node selector of resourceclaim default/theirs's allocation" in why
    assert _consumers(running.claim("theirs")) == [_uid(holder)]
