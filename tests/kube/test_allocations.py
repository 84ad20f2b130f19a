"""Admission's pending allocations (``kube.admission.allocations``) and their mirror in the cache.

We test these aspects:
- starting an allocation assumes the pod on its node in the cache; a pod the cache lost is
  not allocated;
- dropping one makes the cache forget the assumption; a pod bound where it was put ends its
  allocation and stays placed;
- an adopted allocation is assumed once the cache has its pod, not before;
- ``overdue`` lists ungated allocations past the timeout, not those still being pinned.
"""

from __future__ import annotations

from berth.kube.admission import allocations
from berth.scheduler.snapshot import cache as cluster_cache
from tests.kube import conftest

KEY = "default/p"


def cache_with(*names: str) -> cluster_cache.ClusterCache:
    cache = cluster_cache.ClusterCache()
    cache.add_node(conftest.node("n1"))
    for name in names:
        cache.add_pod(conftest.pod(name))
    return cache


def placed_on(cache: cluster_cache.ClusterCache, key: str) -> str | None:
    return cache.snapshot(0.0).pods[key].node_name


def test_starting_assumes_the_pod_and_dropping_forgets_it() -> None:
    cache = cache_with("p")
    ledger = allocations.Allocations(cache)
    assert ledger.start(KEY, uid="u", node="n1", group=None, now=5.0)
    assert placed_on(cache, KEY) == "n1"
    assert ledger[KEY].state is allocations.AllocationState.PINNING
    ledger.drop(ledger[KEY])
    assert KEY not in ledger
    assert placed_on(cache, KEY) is None


def test_a_pod_the_cache_lost_is_not_allocated() -> None:
    ledger = allocations.Allocations(cache_with())
    assert not ledger.start(KEY, uid="u", node="n1", group=None, now=5.0)
    assert len(ledger) == 0


def test_bound_ends_the_allocation_and_keeps_the_pod_placed() -> None:
    cache = cache_with("p")
    ledger = allocations.Allocations(cache)
    ledger.start(KEY, uid="u", node="n1", group=None, now=5.0)
    ledger.bound(KEY)
    assert KEY not in ledger
    assert placed_on(cache, KEY) == "n1"


def test_an_adopted_allocation_is_assumed_once_its_pod_is_cached() -> None:
    cache = cache_with()
    ledger = allocations.Allocations(cache)
    ledger.adopt(KEY, uid="u", node="n1", since=1.0)
    ledger.assume_adopted()  # the pod is not cached yet: nothing to assume, kept for later
    cache.add_pod(conftest.pod("p"))
    assert placed_on(cache, KEY) is None
    ledger.assume_adopted()
    assert placed_on(cache, KEY) == "n1"
    assert ledger[KEY].state is allocations.AllocationState.UNGATED


def test_overdue_lists_only_ungated_allocations_past_the_timeout() -> None:
    ledger = allocations.Allocations(cache_with("p", "q", "r"))
    ledger.adopt("default/p", uid="", node="n1", since=0.0)
    ledger.adopt("default/q", uid="", node="n1", since=50.0)
    ledger.start("default/r", uid="", node="n1", group=None, now=0.0)
    assert [a.key for a in ledger.overdue(60.0, timeout=60.0)] == ["default/p"]
