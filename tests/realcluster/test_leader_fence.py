"""The chart's leader fence on the real API server: only the pod holding the Lease writes.

No Berth process runs here: writes are sent with kubectl as each replica, which is Berth's
ServiceAccount from a stand-in pod of its own (a token bound to the pod, as the kubelet mounts
into a replica pod), while the administrator moves the Lease. We test these aspects:

- a write from the pod holding the Lease is accepted; once another pod holds it, the same
  write from the old holder is refused by the API server (403, naming the holder) and the new
  holder's is accepted — a paused leader's late write, without the SIGSTOP;
- a write of Berth's ServiceAccount from no pod (a token bound to nothing) is refused, while
  its reads pass;
- with the Lease released (no holder, as a leader stepping down leaves it) every write of
  Berth's ServiceAccount is refused;
- the administrator's writes are unaffected whoever holds the Lease.

The API server reads the Lease from its own informer: a change takes effect a moment later,
so each expectation is awaited within a bound; without the policy the refusals never come.
"""

from __future__ import annotations

import collections.abc
import pathlib
import time
import uuid

import pytest
import yaml

from berth.realcluster import install
from tests.realcluster import cluster

pytestmark = pytest.mark.realcluster

LEASE = "berth-scheduler"  # the chart's, which its fence's binding names
SETTLE = 30.0  # seconds the API server may take to see a Lease change


def _set_lease(real: cluster.RealCluster, holder: str | None) -> None:
    """The Lease held by ``holder`` ("" : released; None: deleted)."""
    real.kubectl("delete", "lease", LEASE, "-n", install.NAMESPACE, "--ignore-not-found")
    if holder is None:
        return
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE, "namespace": install.NAMESPACE},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }
    real.kubectl("create", "-f", "-", input=yaml.safe_dump(lease))


def _event(namespace: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"fence-{uuid.uuid4().hex[:8]}", "namespace": namespace},
            "involvedObject": {"kind": "Pod", "name": "somebody", "namespace": namespace},
            "reason": "Fenced",
            "message": "a write Berth's RBAC allows",
            "type": "Normal",
        }
    )


def _write(real: cluster.RealCluster, kubeconfig: pathlib.Path | None, namespace: str) -> str:
    """Create an Event as ``kubeconfig``'s user (None: the administrator): "" if accepted,
    else kubectl's error."""
    result = real.plane.kubectl(
        "create", "-f", "-", input=_event(namespace), kubeconfig=kubeconfig, check=False
    )
    return "" if result.returncode == 0 else result.stderr.strip()


def _until(what: str, check: collections.abc.Callable[[], bool]) -> None:
    deadline = time.monotonic() + SETTLE
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {SETTLE:g}s: {what}")
        time.sleep(0.2)


@pytest.fixture
def replicas(
    real: cluster.RealCluster,
) -> collections.abc.Iterator[dict[str, pathlib.Path]]:
    """Two replicas' identities; the Lease released afterwards (a later Berth takes it)."""
    names = [f"fence-{uuid.uuid4().hex[:6]}-{n}" for n in ("a", "b")]
    try:
        yield {name: real.installation.replica(name) for name in names}
    finally:
        _set_lease(real, "")
        for name in names:
            real.kubectl("delete", "pod", name, "-n", install.NAMESPACE, "--ignore-not-found")


def test_the_old_holder_is_refused_once_another_pod_holds_the_lease(
    real: cluster.RealCluster, replicas: dict[str, pathlib.Path]
) -> None:
    namespace = real.namespace()
    (a, a_config), (b, b_config) = replicas.items()
    _set_lease(real, a)
    _until(f"{a}, the holder, may write", lambda: _write(real, a_config, namespace) == "")

    _set_lease(real, b)  # b took over: a is a paused leader resuming
    _until(f"{b}, the new holder, may write", lambda: _write(real, b_config, namespace) == "")
    refusal = _write(real, a_config, namespace)
    assert "is forbidden" in refusal, refusal
    assert f"is held by {b}, this request came from pod {a}" in refusal, refusal
    assert _write(real, None, namespace) == ""  # the administrator is not fenced


def test_a_token_bound_to_no_pod_only_reads(real: cluster.RealCluster) -> None:
    namespace = real.namespace()
    unbound = real.installation.kubeconfig
    refusal = _write(real, unbound, namespace)
    assert "the token is not bound to a pod" in refusal, refusal
    listed = real.plane.kubectl("get", "pods", "-n", namespace, kubeconfig=unbound, check=False)
    assert listed.returncode == 0, listed.stderr


def test_a_released_lease_lets_no_replica_write(
    real: cluster.RealCluster, replicas: dict[str, pathlib.Path]
) -> None:
    namespace = real.namespace()
    (a, a_config), _ = replicas.items()
    _set_lease(real, a)
    _until(f"{a}, the holder, may write", lambda: _write(real, a_config, namespace) == "")
    _set_lease(real, "")  # released, as a leader stepping down leaves it
    _until(
        "the former holder's writes refused once the Lease is released",
        lambda: "is held by nobody" in _write(real, a_config, namespace),
    )
    assert _write(real, None, namespace) == ""
