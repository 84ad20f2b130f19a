"""Lease calls and raw-JSON requests (``kube.transport.leases``, ``.rest``) on the emulator.

We test these aspects:

- a Lease round-trips: create, get (None while absent), replace; times travel as MicroTime;
- optimistic concurrency: creating an existing Lease and replacing a stale version are 409s;
- a replacement keeps what it does not manage (labels, spec fields such as ``strategy``);
- raw requests map answers to ``berth.kube.transport.errors`` by status, keep the Status message,
  and report an API server that does not answer as ``TransportError``;
- an async connection without any kubeconfig is a ``ConfigError``;
- malformed Lease fields read as absent rather than failing the election.
"""

from __future__ import annotations

import dataclasses
import pathlib

import pytest
import yaml

from berth.emulator import server
from berth.kube.transport import clients, errors, leases, rest

SPEC = leases.LeaseSpec(
    holder_identity="replica-a",
    lease_duration_seconds=15,
    acquire_time=1_767_225_600.25,
    renew_time=1_767_225_610.5,
    lease_transitions=2,
)


@pytest.fixture
def lease(connection: clients.AsyncConnection) -> leases.LeaseClient:
    return leases.LeaseClient(connection.api, namespace="default", name="berth-scheduler")


def test_micro_time_round_trips_to_the_microsecond() -> None:
    text = leases.format_micro_time(1_767_225_600.123456)
    assert text == "2026-01-01T00:00:00.123456Z"
    assert leases.parse_micro_time(text) == 1_767_225_600.123456
    assert leases.parse_micro_time("2026-01-01T00:00:00Z") == 1_767_225_600.0


async def test_lease_round_trips(lease: leases.LeaseClient) -> None:
    assert await lease.get() is None
    created = await lease.create(SPEC)
    assert created.spec == SPEC
    assert created.body["spec"]["renewTime"] == "2026-01-01T00:00:10.500000Z"
    read = await lease.get()
    assert read is not None and read.spec == SPEC
    assert read.resource_version == created.resource_version

    renewed = await lease.update(read, dataclasses.replace(SPEC, renew_time=1_767_225_612.0))
    assert renewed.spec.renew_time == 1_767_225_612.0
    assert renewed.resource_version != read.resource_version


async def test_creating_an_existing_lease_is_a_conflict(lease: leases.LeaseClient) -> None:
    await lease.create(SPEC)
    with pytest.raises(errors.Conflict, match="409"):
        await lease.create(SPEC)


async def test_replacing_a_stale_version_is_a_conflict(lease: leases.LeaseClient) -> None:
    first = await lease.create(SPEC)
    await lease.update(first, dataclasses.replace(SPEC, holder_identity="replica-b"))
    with pytest.raises(errors.Conflict):
        await lease.update(first, dataclasses.replace(SPEC, holder_identity="replica-c"))
    current = await lease.get()
    assert current is not None and current.spec.holder_identity == "replica-b"


async def test_replacement_keeps_labels_and_unmanaged_spec_fields(
    connection: clients.AsyncConnection, lease: leases.LeaseClient
) -> None:
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    await rest.request(
        connection.api,
        method="POST",
        path=path,
        body={
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "berth-scheduler", "labels": {"team": "batch"}},
            "spec": {"holderIdentity": "replica-a", "strategy": "OldestEmulationVersion"},
        },
    )
    current = await lease.get()
    assert current is not None
    released = dataclasses.replace(SPEC, holder_identity="", acquire_time=None, renew_time=None)
    updated = await lease.update(current, released)
    assert updated.body["metadata"]["labels"] == {"team": "batch"}
    assert updated.body["spec"]["strategy"] == "OldestEmulationVersion"
    assert "renewTime" not in updated.body["spec"]


@pytest.mark.parametrize(
    ("method", "path", "error"),
    [
        ("GET", "/api/v1/namespaces/default/pods/missing", errors.NotFound),
        ("GET", "/apis/nothing.example.com/v1/widgets", errors.NotFound),
        ("POST", "/api/v1/namespaces/default/pods", errors.APIError),
    ],
    ids=["missing-object", "unknown-resource", "invalid-body"],
)
async def test_answers_map_to_errors_by_status(
    connection: clients.AsyncConnection, method: str, path: str, error: type[errors.APIError]
) -> None:
    with pytest.raises(error) as caught:
        await rest.request(connection.api, method=method, path=path, body={"kind": "Pod"})
    assert caught.value.status >= 400
    assert str(caught.value).startswith(f"{method} {path}: {caught.value.status}")


async def test_an_api_server_that_does_not_answer_is_a_transport_error(
    tmp_path: pathlib.Path, unused_tcp_port: int
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(server.kubeconfig(f"http://127.0.0.1:{unused_tcp_port}")))
    async with clients.connect_async(kubeconfig=str(path)) as unreachable:
        with pytest.raises(errors.TransportError, match="GET /api/v1/namespaces"):
            await rest.request(unreachable.api, method="GET", path="/api/v1/namespaces")


async def test_no_kubeconfig_at_all_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(errors.ConfigError, match="no kubeconfig found"):
        async with clients.connect_async():
            pass


@pytest.mark.parametrize(
    "raw",
    [
        {"holderIdentity": 7, "leaseDurationSeconds": "15", "renewTime": "yesterday"},
        {"leaseDurationSeconds": True, "acquireTime": 12},
    ],
    ids=["wrong-types", "bool-and-number"],
)
def test_malformed_lease_fields_read_as_absent(raw: dict[str, object]) -> None:
    spec = leases.LeaseSpec.from_api(raw)
    assert spec == leases.LeaseSpec(holder_identity="", lease_duration_seconds=0)
