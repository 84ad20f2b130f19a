"""Berth's own kinds as the leader's Kopf hands them to the cache (``controllers.indexing``),
and when that wakes the scheduling loop.

We test these aspects:

- a new Queue, PodGroup or Reservation, and a change of its spec, wake the loop;
- the echo of a status Berth wrote on a Queue or a PodGroup (the object unchanged but for its
  status and resourceVersion) does not, unless the cache reads the fields it changed (a
  group's phase, a Reservation's status): no cycle could decide anything new from it. The
  status writers observe every change all the same.
"""

from __future__ import annotations

import asyncio
import copy
import typing

import pytest

from berth.controllers import indexing, observed
from berth.kube.informers import cache_sync
from berth.scheduler.snapshot import cache as cluster_cache
from tests.scheduler import builders as b

Obj = dict[str, typing.Any]
KINDS = {kind.kind: kind for kind in indexing.KINDS}


def feed() -> indexing.CacheFeed:
    return indexing.CacheFeed(
        typing.cast(typing.Any, None),  # the API is asked only before Kopf starts
        cache=cluster_cache.ClusterCache(),
        objects=observed.ObservedObjects(),
        trigger=asyncio.Event(),
        sync=cache_sync.CacheSync(),
    )


def woke(fed: indexing.CacheFeed, obj: Obj) -> bool:
    """Hand ``obj`` over as Kopf's indexing handler does; whether that woke the loop."""
    trigger = fed._trigger
    trigger.clear()
    fed.changed(KINDS[obj["kind"]], typing.cast(typing.Any, obj))
    return trigger.is_set()


def written(obj: Obj, status: Obj, *, version: str = "2") -> Obj:
    """``obj`` as the watch brings it back once Berth wrote ``status`` on it."""
    echoed = copy.deepcopy(obj)
    echoed["metadata"]["resourceVersion"] = version
    echoed["status"] = status
    return echoed


QUEUE, GROUP, RESERVATION = b.queue("team-a"), b.pod_group("job"), b.reservation("r")
WAITING: Obj = {"type": "Scheduled", "status": "False", "reason": "Unschedulable"}


@pytest.mark.parametrize(
    ("first", "then", "wakes"),
    [
        (QUEUE, written(QUEUE, {"allocated": {"cpu": "3"}, "pending": 2}), False),
        (QUEUE, b.queue("team-a", weight=2), True),
        (GROUP, written(GROUP, {"phase": "Pending", "conditions": [WAITING]}), False),
        (GROUP, written(GROUP, {"phase": "Running", "running": 2}), True),
        (GROUP, b.pod_group("job", min_member=2), True),
        (RESERVATION, written(RESERVATION, {"phase": "Available", "nodeName": "n1"}), True),
    ],
    ids=[
        "queue-status-echo",
        "queue-spec",
        "podgroup-conditions-echo",
        "podgroup-phase",  # a cycle reads a group's phase
        "podgroup-spec",
        "reservation-status",  # a cycle reads where a reservation holds its room
    ],
)
def test_a_change_wakes_a_cycle_only_if_the_cache_took_it(
    first: Obj, then: Obj, wakes: bool
) -> None:
    fed = feed()
    assert woke(fed, first)
    assert woke(fed, then) is wakes
    key = fed.objects.of_kind(first["kind"])[0].key
    seen = fed.objects.get(first["kind"], key)
    assert seen is not None and seen.status == then.get("status", {})
    # The same object again (a relist): only a Reservation wakes, the cache taking every
    # Reservation it is handed as a change.
    assert woke(fed, then) is (first is RESERVATION)
