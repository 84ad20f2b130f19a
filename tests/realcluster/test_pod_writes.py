"""The chart's narrowing of Berth's pod patches, on the real API server.

The ClusterRole grants Berth ``patch`` on every pod (RBAC cannot name fields); the chart's
``pod-writes`` ValidatingAdmissionPolicy narrows it to what Berth writes. No Berth process runs
here: the writes are sent with kubectl as a replica of Berth (its ServiceAccount, from a stand-in
pod holding the leader Lease, so the leader fence lets it write). We test these aspects:

- Berth's own writes pass: its annotations (and Cluster Autoscaler's that make a gang's pods
  consume its ProvisioningRequest), the gate removed;
- a label, an annotation that is not Berth's, or a toleration written by Berth's ServiceAccount
  is refused with the policy's message naming what it may not change;
- the administrator's writes are unaffected.
"""

from __future__ import annotations

import collections.abc
import json
import pathlib
import time
import uuid

import pytest
import yaml

from berth.api import autoscaling, keys
from berth.realcluster import install
from tests.realcluster import cluster, pods

pytestmark = pytest.mark.realcluster

LEASE = "berth-scheduler"
SETTLE = 30.0  # seconds the API server may take to see the Lease change (the leader fence)


def _set_lease(real: cluster.RealCluster, holder: str) -> None:
    real.kubectl("delete", "lease", LEASE, "-n", install.NAMESPACE, "--ignore-not-found")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE, "namespace": install.NAMESPACE},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }
    real.kubectl("create", "-f", "-", input=yaml.safe_dump(lease))


def _patch(
    real: cluster.RealCluster, kubeconfig: pathlib.Path | None, namespace: str, patch: object
) -> str:
    """JSON-patch pod ``p`` as ``kubeconfig``'s user (None: the administrator): "" if accepted,
    else kubectl's error."""
    result = real.plane.kubectl(
        "patch",
        "pod",
        "p",
        "-n",
        namespace,
        "--type=json",
        "-p",
        json.dumps(patch),
        kubeconfig=kubeconfig,
        check=False,
    )
    return "" if result.returncode == 0 else result.stderr.strip()


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


@pytest.fixture
def replica(real: cluster.RealCluster) -> collections.abc.Iterator[pathlib.Path]:
    """A replica's kubeconfig, its pod holding the Lease; the Lease released afterwards."""
    name = f"writes-{uuid.uuid4().hex[:6]}"
    try:
        config = real.installation.replica(name)
        _set_lease(real, name)
        yield config
    finally:
        _set_lease(real, "")
        real.kubectl("delete", "pod", name, "-n", install.NAMESPACE, "--ignore-not-found")


def test_berth_may_patch_only_what_it_writes(
    real: cluster.RealCluster, replica: pathlib.Path
) -> None:
    namespace = real.namespace()
    pod = pods.pod("p", labels={"app": "web"}, scheduler=None)
    pod["metadata"]["annotations"] = {"team": "a"}
    pod["spec"]["schedulingGates"] = [{"name": keys.ADMISSION_GATE}]
    real.create(pod, namespace=namespace)

    own = [
        {
            "op": "add",
            "path": f"/metadata/annotations/{_escape(keys.ADMITTED_AT_ANNOTATION)}",
            "value": "2026-01-01T00:00:00Z",
        },
        # A gang's pods consume its ProvisioningRequest (Cluster Autoscaler's annotations).
        {
            "op": "add",
            "path": f"/metadata/annotations/{_escape(autoscaling.CONSUME_ANNOTATION)}",
            "value": "berth-pg-train-1",
        },
        {
            "op": "add",
            "path": f"/metadata/annotations/{_escape(autoscaling.CLASS_ANNOTATION)}",
            "value": autoscaling.BEST_EFFORT_ATOMIC_SCALE_UP,
        },
    ]
    deadline = time.monotonic() + SETTLE  # until the fence sees the replica hold the Lease
    while (answer := _patch(real, replica, namespace, own)) and "not the leader" in answer:
        if time.monotonic() > deadline:
            pytest.fail(f"the replica never got to write: {answer}")
        time.sleep(0.2)
    assert answer == ""

    refused = {
        "Berth may change no pod label but its own": [
            {"op": "replace", "path": "/metadata/labels/app", "value": "hijacked"}
        ],
        "Berth may change no pod annotation but its own": [
            {"op": "remove", "path": "/metadata/annotations/team"}
        ],
        "Berth may change no container, toleration, node selector or deadline of a pod": [
            {
                "op": "add",
                "path": "/spec/tolerations",
                "value": [{"key": "dedicated", "operator": "Exists"}],
            }
        ],
    }
    for message, patch in refused.items():
        answer = _patch(real, replica, namespace, patch)
        assert message in answer, (patch, answer)
    assert _patch(real, None, namespace, refused[next(iter(refused))]) == ""  # the admin may

    ungate = [
        {
            "op": "add",
            "path": f"/metadata/annotations/{_escape(keys.ADMITTED_NODE_ANNOTATION)}",
            "value": "somewhere",
        },
        {"op": "remove", "path": "/spec/schedulingGates"},
    ]
    assert _patch(real, replica, namespace, ungate) == ""
    after = real.json("get", "pod", "p", "-n", namespace)
    assert not after["spec"].get("schedulingGates")
    assert after["metadata"]["labels"]["app"] == "hijacked"  # the administrator's
