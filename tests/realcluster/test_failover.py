"""Leader failover on the real control plane, counted by the API server's audit log.

We test these aspects:
- two Berth replicas, the leader SIGKILLed during a burst of 2 000 pods in gangs of four: the
  other replica takes over and binds the rest; every pod is bound, the audit log shows at
  most one successful binding per pod (none only where the API server stored a binding but
  answered it with a 5xx), and every gang is bound whole. A replica that exits because its
  renewals missed the deadline (a loaded machine) is restarted, as its Deployment would.
"""

from __future__ import annotations

import signal
import threading

import pytest

from berth.emulator import kubelets
from berth.realcluster import audit, nodes, processes
from tests.realcluster import cluster, pods

pytestmark = pytest.mark.realcluster

PODS = 2000
GANG = 4
BURST_NODES = "20x cpu=64,memory=256Gi,pods=110 label=pool=burst name=burst"
SHORT_LEASE = {
    "BERTH_LEADER_ELECTION__LEASE_DURATION": "4",
    "BERTH_LEADER_ELECTION__RENEW_DEADLINE": "3",
    "BERTH_LEADER_ELECTION__RETRY_PERIOD": "0.5",
}


@pytest.fixture
def burst_nodes(real: cluster.RealCluster) -> object:
    manifests = nodes.node_manifests([kubelets.parse_pool(BURST_NODES)])
    real.create(*manifests)
    real.kubectl("wait", "--for=condition=Ready", "nodes", "-l", "sim.berth.io/pool=burst",
                 f"--timeout={cluster.WAIT}")  # fmt: skip
    yield manifests
    real.kubectl("delete", "nodes", "-l", "sim.berth.io/pool=burst", "--wait=false")


@pytest.mark.timeout(600)
def test_leader_killed_mid_burst_every_pod_bound_once(
    real: cluster.RealCluster, burst_nodes: object
) -> None:
    first = real.berth(identity="replica-a", settings=SHORT_LEASE)
    processes.wait_until("replica-a leading", lambda: real.leader() == "replica-a", timeout=60)
    second = real.berth(identity="replica-b", settings=SHORT_LEASE)
    namespace = real.namespace()
    queue = f"q-{namespace}"
    real.create(pods.queue(queue))
    documents = []
    for g in range(PODS // GANG):
        documents += pods.gang(f"g{g}", GANG, queue=queue, cpu="10m", memory="16Mi")
    creating = threading.Thread(target=real.create, args=documents, kwargs={"namespace": namespace})
    creating.start()
    try:

        def some_bound() -> bool:
            first.keep_running()
            second.keep_running()
            return sum(audit.bindings(real.audited()).values()) >= PODS // 5

        processes.wait_until("a fifth of the pods bound", some_bound, timeout=300, interval=0.5)
        first.process.signal(signal.SIGKILL)
    finally:
        creating.join()

    # Bound is what the API server stored (the pod's nodeName), not what it answered: on a
    # loaded machine it may store a binding and still answer 504 (its request timed out), and
    # the leader that sent it then sees the pod bound by its watch.
    # A leader that misses its renew deadline on a loaded machine exits to restart as a
    # follower; the test restarts it as its Deployment would (replica-a stays killed).
    def all_bound() -> bool:
        second.keep_running()
        listed = real.pods(namespace)
        return len(listed) == PODS and all(p["spec"].get("nodeName") for p in listed)

    processes.wait_until("every pod bound", all_bound, timeout=300, interval=2.0)
    assert real.leader() == "replica-b"
    requests = [
        r for r in real.audited() if r.namespace == namespace and r.resource == "pods/binding"
    ]
    counted = {name: n for (_, name), n in audit.bindings(requests).items()}
    assert set(counted.values()) == {1}, {k: v for k, v in counted.items() if v != 1}
    # A pod with no successful binding was bound by one whose answer was lost (a 5xx).
    unanswered = {r.name for r in requests if r.verb == "create" and r.code >= 500}
    names = {p["metadata"]["name"] for p in real.pods(namespace)}
    assert names - set(counted) <= unanswered, sorted(names - set(counted) - unanswered)
