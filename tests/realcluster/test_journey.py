"""A user's journey on a real control plane, with the real kubectl, Berth under the chart's RBAC.

We test these aspects:
- the chart's CRDs are established and served, with their short names and category;
- the real API server refuses every invalid object Berth's own rule tests refuse, at the same
  field with the same message, and accepts the valid ones (server-side dry run);
- a gang that fits runs, all of it; a gang that cannot fit binds nothing and says why in
  ``kubectl get bpg`` and ``kubectl berth why``;
- ``kubectl create reservation`` holds room on a node that its owner then gets;
- Berth's requests are all allowed by the chart's RBAC (the ``real`` fixture fails a test
  whose run made the API server refuse any of them).
"""

from __future__ import annotations

import collections.abc
import json

import pytest

from berth.api import keys
from berth.realcluster import processes
from tests.api import conftest as api_examples
from tests.api import test_cel_rules
from tests.realcluster import cluster, pods

pytestmark = pytest.mark.realcluster


def test_the_crds_are_established_and_served(real: cluster.RealCluster) -> None:
    for plural in ("queues", "podgroups", "reservations"):
        real.kubectl(
            "wait", f"crd/{plural}.{keys.GROUP}", "--for=condition=Established", "--timeout=60s"
        )
    resources = real.kubectl("api-resources", f"--api-group={keys.GROUP}", "-o", "wide").stdout
    for short in ("bq", "bpg", "resv"):
        assert f" {short} " in resources
    assert "berth" in resources  # the category: `kubectl get berth`


def _document(kind: str, patch: dict[str, object], namespace: str) -> dict[str, object]:
    """The example with ``patch`` merged in (server-side dry runs store nothing: no renaming)."""
    document = api_examples.merged(api_examples.BASES[kind], patch)
    if kind != "Queue":
        document["metadata"] = {**document["metadata"], "namespace": namespace}
    return document


@pytest.fixture(scope="module")
def dry_run_namespace(real_cluster: cluster.RealCluster) -> collections.abc.Iterator[str]:
    name = real_cluster.namespace(per_test=False)
    yield name
    real_cluster.kubectl("delete", "namespace", name, "--wait=false")


@pytest.mark.parametrize(
    ("kind", "patch", "path", "fragment"),
    [case[1:] for case in test_cel_rules.REJECTED],
    ids=[case[0] for case in test_cel_rules.REJECTED],
)
def test_the_real_api_server_refuses_what_berth_refuses(
    real: cluster.RealCluster,
    dry_run_namespace: str,
    kind: str,
    patch: dict[str, object],
    path: str,
    fragment: str,
) -> None:
    document = _document(kind, patch, dry_run_namespace)
    # JSON, not YAML: kubectl reads YAML 1.2-style, where an unquoted 1e30 (PyYAML leaves it
    # unquoted) is a number, and the case would test the type check instead of the range.
    result = real.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(document), check=False
    )
    assert result.returncode != 0, f"accepted: {document}"
    assert f"{path}:" in result.stderr
    assert fragment in result.stderr


@pytest.mark.parametrize("kind", sorted(api_examples.BASES))
def test_the_real_api_server_accepts_the_valid_examples(
    real: cluster.RealCluster, dry_run_namespace: str, kind: str
) -> None:
    document = _document(kind, {}, dry_run_namespace)
    real.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(document))


def test_a_gang_that_fits_runs_and_one_that_cannot_says_why(real: cluster.RealCluster) -> None:
    real.berth()
    namespace = real.namespace()
    queue = f"q-{namespace}"
    real.create(pods.queue(queue))
    real.create(*pods.gang("fits", 3, queue=queue, cpu="1"), namespace=namespace)
    # Six nodes have 8 cpu: eight members of 7 cpu can never all fit at once.
    real.create(*pods.gang("huge", 8, queue=queue, cpu="7"), namespace=namespace)
    for i in range(3):
        real.wait(f"pod/fits-{i}", jsonpath="{.status.phase}", value="Running", namespace=namespace)

    def scheduled() -> dict[str, str]:
        group = real.json("get", "podgroup", "huge", "-n", namespace)
        conditions = (group.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Scheduled"), {})

    # First it waits for its pods to be seen, then for room that never comes.
    processes.wait_until(
        "huge's reason", lambda: "Insufficient cpu" in scheduled().get("message", ""), timeout=60
    )
    assert scheduled()["status"] == "False"
    # The REASON printer column shows the condition's reason (NotEnoughResources).
    table = real.kubectl("get", "bpg", "huge", "-n", namespace, "--no-headers").stdout
    assert scheduled()["reason"] in table.split()
    assert not [p for p in real.pods(namespace) if p["metadata"]["name"].startswith("huge-")
                and p["spec"].get("nodeName")]  # fmt: skip
    why = real.kubectl("berth", "why", "podgroup/huge", "-n", namespace)
    assert "Insufficient cpu" in why.stdout


def test_a_reservation_holds_room_its_owner_gets(real: cluster.RealCluster) -> None:
    real.berth()
    namespace = real.namespace()
    real.kubectl(
        "create", "reservation", "hold", "-n", namespace, "--cpu", "3", "--memory", "1Gi",
        "--owner-selector", "app=trainer", "--ttl", "1h",
    )  # fmt: skip
    real.wait(
        "reservation/hold", jsonpath="{.status.phase}", value="Available", namespace=namespace
    )
    node = real.json("get", "reservation", "hold", "-n", namespace)["status"]["nodeName"]
    real.create(pods.pod("owner", cpu="3", labels={"app": "trainer"}), namespace=namespace)
    real.wait("pod/owner", jsonpath="{.status.phase}", value="Running", namespace=namespace)
    owner = real.json("get", "pod", "owner", "-n", namespace)
    assert owner["spec"]["nodeName"] == node
    assert owner["metadata"]["annotations"][keys.RESERVATION_ALLOCATED_ANNOTATION]
    real.wait(
        "reservation/hold", jsonpath="{.status.phase}", value="Succeeded", namespace=namespace
    )
