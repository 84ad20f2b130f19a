"""Constraints Berth's scheduler mode does not implement, in both modes (DRA claims).

We test these aspects:
- a pod with a DRA resource claim naming Berth's scheduler waits, its reason naming the field
  and pointing to admission mode, and is never bound;
- the same pod in admission mode (default scheduler, a queue label) is admitted: pinned,
  ungated, and bound by kube-scheduler (the tests' stand-in), which checks such fields itself.
"""

from __future__ import annotations

import typing

import pytest

from berth.api import keys
from berth.emulator import testing
from tests.admission import stack

pytestmark = pytest.mark.timeout(60)

CLAIMS = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]


@pytest.fixture
def cluster(emulator: testing.RunningEmulator) -> testing.RunningEmulator:
    stack.install_crds(emulator)
    emulator.start_kubelets(["2x cpu=4,memory=16Gi"], speedup=100, start_delay=0)
    return emulator


def _with_claims(obj: dict[str, typing.Any]) -> dict[str, typing.Any]:
    obj["spec"]["resourceClaims"] = CLAIMS
    return obj


async def test_dra_claim_waits_in_scheduler_mode_and_runs_in_admission_mode(
    cluster: testing.RunningEmulator,
) -> None:
    queued = {keys.QUEUE_LABEL: keys.DEFAULT_QUEUE}
    ours = stack.pod("ours", labels=queued, gated=False, scheduler=keys.DEFAULT_SCHEDULER_NAME)
    admitted = stack.pod("admitted", labels=queued)
    stack.create(cluster, "v1", "pods", _with_claims(ours))
    stack.create(cluster, "v1", "pods", _with_claims(admitted))
    async with stack.stand_in(cluster), stack.BerthStack(cluster):
        await stack.eventually(
            lambda: bool(
                (stack.get_pod(cluster, "admitted") or {}).get("spec", {}).get("nodeName")
            ),
            what="the admitted pod bound",
        )
        await stack.eventually(lambda: _unschedulable(cluster, "ours") is not None, what="why")
    message = _unschedulable(cluster, "ours")
    assert message is not None
    assert "spec.resourceClaims" in message and "admission mode" in message
    obj = stack.get_pod(cluster, "ours")
    assert obj is not None and not obj["spec"].get("nodeName")


def _unschedulable(emulator: testing.RunningEmulator, name: str) -> str | None:
    obj = stack.get_pod(emulator, name)
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or "")
    return None
