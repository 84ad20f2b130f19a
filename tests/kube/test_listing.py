"""``berth.kube.transport.listing``: what ``kubectl berth`` reads of a cluster for its dry runs.

We test these aspects:
- where the API server serves ``resource.k8s.io/v1``, the DRA objects are read with the rest and
  the dry run's cache schedules devices: a pod claiming more GPUs than any node has is explained
  by its claim, not refused as a field Berth does not implement;
- a pod the informers would not take (another scheduler's, unbound) is left out, as there.
"""

from __future__ import annotations

from berth.emulator import testing
from berth.kube.transport import clients, listing
from berth.scheduler import loop
from berth.scheduler.plugins import registry
from berth.scheduler.snapshot import cache as cluster_cache
from berth.util import clocks
from tests.kube import conftest
from tests.scheduler import dra_builders as dra


async def test_dry_runs_see_devices_where_dra_is_served(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    emulator = berth_crds
    emulator.start_kubelets(["1x cpu=4,memory=8Gi name=n"], speedup=20)
    conftest.create(emulator, dra.device_class("gpu"), plural="deviceclasses", namespace=None)
    conftest.create(emulator, dra.node_slice("n-0"), plural="resourceslices", namespace=None)
    conftest.create(
        emulator,
        dra.template("four", dra.request(cls="gpu", count=4)),
        plural="resourceclaimtemplates",
    )
    greedy = dra.pod_with_claims("greedy", templates={"gpu": "four"})
    for field in ("uid", "resourceVersion"):
        greedy["metadata"].pop(field, None)
    greedy.pop("status")
    conftest.create(emulator, greedy, plural="pods")
    other = conftest.pod("other", scheduler="default-scheduler")
    conftest.create(emulator, other, plural="pods")
    await conftest.until(
        lambda: bool(
            emulator.call(emulator.api.storage.list, ("resource.k8s.io", "resourceclaims"), None)
        )
    )
    objects = await listing.read_cluster(connection.api)
    assert objects.dynamic_resources
    assert [s["metadata"]["name"] for s in objects.resource_slices] == ["n-0-gpu.example.com"]
    assert len(objects.resource_claims) == 1 and len(objects.claim_templates) == 1
    cache = cluster_cache.ClusterCache()
    assert listing.fill_cache(cache, objects, scheduler_names={"berth-scheduler"}) == []
    clock = clocks.SystemClock()
    snapshot = cache.snapshot(clock.now())
    assert "default/other" not in snapshot.pods
    scheduler = loop.Scheduler(
        registry.default_profile(), registry=registry.in_tree_registry(), clock=clock
    )
    why = scheduler.run_session(snapshot).pod_why["default/greedy"]
    assert "had no devices matching resourceclaim default/greedy-gpu-" in why.message, why
