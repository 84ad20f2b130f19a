"""Every replica answers the admission webhook, not only the leader.

We test this aspect: a ``berth run`` replica (in the test's loop) in admission mode whose Lease
is held by another replica stays a follower (no leader-only component runs, the Lease keeps its
holder) and still answers an ``AdmissionReview`` on its webhook port with the gate patch.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import socket
import ssl
import typing

import aiohttp

from berth.api import keys
from berth.emulator import testing
from berth.operator import main, scheduling, settings, webhooks
from tests.admission import conftest
from tests.kube.conftest import until

LEASE = "berth-scheduler"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def hold_lease(emulator: testing.RunningEmulator, holder: str) -> None:
    """Another replica holds the Lease, renewed just now, for an hour."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    api = emulator.api
    resource = emulator.call(api.resource, "coordination.k8s.io/v1", "leases")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE, "namespace": "default"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 3600,
            "acquireTime": now,
            "renewTime": now,
        },
    }
    emulator.call(api.create, resource, lease, namespace="default")


def holder(emulator: testing.RunningEmulator) -> str:
    api = emulator.api
    resource = emulator.call(api.resource, "coordination.k8s.io/v1", "leases")
    return str(
        emulator.call(api.get, resource, namespace="default", name=LEASE)["spec"]["holderIdentity"]
    )


async def test_a_follower_answers_the_webhook(
    emulator: testing.RunningEmulator, certs: conftest.Certs
) -> None:
    hold_lease(emulator, "the-leader")
    port = free_port()
    config = settings.Settings(
        kubeconfig=emulator.kubeconfig,
        namespace="default",
        http_host="127.0.0.1",
        http_port=0,
        mode="admission",
        leader_election={"identity": "follower", "lease_name": LEASE},
        admission={
            "webhook_host": "127.0.0.1",
            "webhook_port": port,
            "cert_file": certs.cert_file,
            "key_file": certs.key_file,
        },
    )
    started: list[str] = []

    def leader_components(context: main.Context) -> typing.Any:
        started.append("leading")  # never, while the other replica holds the Lease
        return scheduling.leader_components(context)

    stop = asyncio.Event()
    served: list[int] = []
    operator = asyncio.create_task(
        main.run(config, stop=stop, leader_components=leader_components, on_serving=served.append)
    )
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7f0b2c1e-0000-4000-8000-000000000002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "labels": {keys.POD_GROUP_LABEL: "train"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    trust = ssl.create_default_context(cadata=certs.ca_pem.decode())
    try:
        answer: dict[str, typing.Any] | None = None
        async with aiohttp.ClientSession() as session:
            async with asyncio.timeout(30):
                while answer is None:  # until its webhook server listens (bounded)
                    assert not operator.done(), "the replica stopped"
                    try:
                        async with session.post(
                            f"https://127.0.0.1:{port}{webhooks.PATH}",
                            json=review,
                            ssl=trust,
                        ) as response:
                            assert response.status == 200
                            answer = await response.json()
                    except aiohttp.ClientConnectorError:
                        await asyncio.sleep(0.05)
        response_body = answer["response"]
        assert response_body["allowed"] is True
        assert json.loads(base64.b64decode(response_body["patch"])) == [
            {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": keys.ADMISSION_GATE}]}
        ]
        await until(lambda: bool(served))
        assert started == []
        assert holder(emulator) == "the-leader"
    finally:
        stop.set()
        assert await asyncio.wait_for(operator, 30) == main.ExitCode.OK
