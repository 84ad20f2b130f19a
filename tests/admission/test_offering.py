"""What admission offers a cycle (``through_gate.offering``), for the readers around the cycle.

We test these aspects:
- the pods awaiting a group from their owners that the offered snapshot names include the gated
  pods admission holds or admits (kube-scheduler's, which the cache does not keep apart), so the
  owner grouper derives their group as it does for Berth's own.
"""

from __future__ import annotations

from berth.api import keys
from berth.kube.admission import through_gate
from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import pods
from tests.scheduler import builders as b


def test_the_gated_pods_admission_holds_await_their_group_from_their_owners() -> None:
    live = cluster_cache.ClusterCache(group_by_owner=True)
    job = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j1", "controller": True}
    for name in ("j-0", "j-1"):
        obj = b.pod(name, scheduler="default-scheduler", gates=[keys.ADMISSION_GATE])
        obj["metadata"]["ownerReferences"] = [job]
        live.update_pod(obj)
    base = live.snapshot(b.EPOCH)
    assert base.awaiting_owner_group() == ()  # not Berth's scheduler's: the cache keeps none
    held, admitted = base.pods["default/j-0"], base.pods["default/j-1"]
    lifted = pods.replace(admitted, scheduling_gates=())
    offered = through_gate.offering(base, admitted=[lifted], still_gated=[held])
    assert offered.awaiting_owner_group() == (held, lifted)
