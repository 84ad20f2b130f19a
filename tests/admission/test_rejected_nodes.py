"""Admission mode remembers the node kube-scheduler rejected a pinned pod on.

On the emulator with simulated nodes, Berth's admission stack and the stand-in kube-scheduler
(``tests/admission/stack.py``), which here refuses one node Berth cannot see is bad (as a taint
only kube-scheduler honours). We test these aspects:

- a gang member reported Unschedulable on its pinned node releases the gang's other pending
  allocation with it (both recreated gated), and the gang is admitted again whole, no member
  pinned to the rejected node, each bound where it was pinned;
- a lone pod rejected on its node is pinned elsewhere the next time, although that node is the
  one Berth's scoring prefers, and only after its backoff: never in the 5 seconds after the
  refusal.
"""

from __future__ import annotations

import time
import typing

import pytest

from berth.api import keys
from berth.emulator import testing
from berth.scheduler.snapshot import wire
from tests.admission import stack

pytestmark = pytest.mark.timeout(60)

Object = dict[str, typing.Any]


@pytest.fixture
def cluster(emulator: testing.RunningEmulator) -> testing.RunningEmulator:
    stack.install_crds(emulator)
    emulator.start_kubelets(["3x cpu=4,memory=16Gi"], speedup=100, start_delay=0)
    return emulator


def _pinned(obj: Object | None) -> str | None:
    if obj is None:
        return None
    return (obj["metadata"].get("annotations") or {}).get(keys.ADMITTED_NODE_ANNOTATION)


def _node(cluster: testing.RunningEmulator, name: str) -> str | None:
    """The node the pod is bound to (None: unbound, or gone while it is recreated)."""
    found = stack.get_pod(cluster, name)
    return None if found is None else found["spec"].get("nodeName")


def _uid(cluster: testing.RunningEmulator, name: str) -> str:
    found = stack.get_pod(cluster, name)
    assert found is not None
    return str(found["metadata"]["uid"])


async def test_a_rejected_gang_member_releases_the_gang_which_avoids_that_node(
    cluster: testing.RunningEmulator,
) -> None:
    group = {
        "apiVersion": keys.API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": "duo"},
        "spec": {"minMember": 2, "queue": "default"},
    }
    stack.create(cluster, keys.API_VERSION, "podgroups", group)
    for i in range(2):
        labels = {keys.POD_GROUP_LABEL: "duo"}
        stack.create(cluster, "v1", "pods", stack.pod(f"duo-{i}", cpu="3", labels=labels))
    first = {name: _uid(cluster, name) for name in ("duo-0", "duo-1")}
    async with (
        stack.stand_in(cluster) as kube_scheduler,
        stack.BerthStack(cluster, bind_timeout=30) as berth,
    ):
        kube_scheduler.paused = True
        await stack.eventually(lambda: len(berth.admission.allocations) == 2, what="admission")
        refused = berth.admission.allocations["default/duo-0"].node
        kube_scheduler.refuses = {refused}
        kube_scheduler.holding = {"duo-1"}
        kube_scheduler.resume()
        await stack.eventually(lambda: berth.admission.rejected == 2, timeout=10, what="rejection")
        kube_scheduler.holding = set()
        await stack.eventually(
            lambda: all(_node(cluster, n) for n in ("duo-0", "duo-1")),
            timeout=60,  # after the gang's backoff (5 s after a first refusal)
            what="the gang admitted again and bound",
        )
    for name in ("duo-0", "duo-1"):
        again = stack.get_pod(cluster, name)
        assert again is not None
        assert again["metadata"]["uid"] != first[name]  # both were sent back, together
        assert again["spec"]["nodeName"] == _pinned(again) != refused
    assert berth.admission.rejections.nodes_of("default/duo-0", group="default/duo") == {refused}


async def test_a_rejected_pod_is_pinned_elsewhere_next_time(
    cluster: testing.RunningEmulator,
) -> None:
    stack.create(
        cluster, "v1", "pods", stack.pod("solo", cpu="1", labels={keys.QUEUE_LABEL: "default"})
    )
    async with (
        stack.stand_in(cluster) as kube_scheduler,
        stack.BerthStack(cluster, bind_timeout=30) as berth,
    ):
        kube_scheduler.paused = True
        await stack.eventually(lambda: bool(berth.admission.allocations), what="an admission")
        refused = berth.admission.allocations["default/solo"].node
        kube_scheduler.refuses = {refused}
        kube_scheduler.resume()
        await stack.eventually(lambda: berth.admission.rejected == 1, timeout=10, what="rejection")
        refused_at = time.time()
        await stack.eventually(
            lambda: bool(_node(cluster, "solo")),
            timeout=60,  # after its backoff (5 s after a first refusal)
            what="placed again",
        )
    solo = stack.get_pod(cluster, "solo")
    assert solo is not None
    assert solo["spec"]["nodeName"] == _pinned(solo) != refused
    pinned_again = wire.parse_time(solo["metadata"]["annotations"][keys.ADMITTED_AT_ANNOTATION])
    # (admitted-at has whole seconds; the refusal was seen a little before refused_at)
    assert pinned_again is not None and pinned_again >= refused_at + 3
    assert berth.admission.rejected == 1  # not pinned to the refused node a second time
