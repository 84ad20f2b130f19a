"""Fixtures of the admission-mode tests.

- ``certs``: a throw-away CA (``trustme``) and a serving certificate for 127.0.0.1, localhost and
  the chart's Service name, written as PEM files; ``certs.ca_bundle`` is the base64 caBundle;
- ``webhook``: Berth's admission webhook server (:mod:`berth.operator.webhooks`: Kopf's server
  in a Kopf operator of its own, logged in to the test's emulator) on a free port of 127.0.0.1,
  over TLS with ``certs``;
- ``register_webhook(emulator, ...)``: a MutatingWebhookConfiguration as the chart writes it.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import pathlib
import typing
from collections.abc import AsyncIterator

import pytest
import trustme

from berth.emulator import testing
from berth.kube.transport import clients
from berth.operator import webhooks

SERVICE_HOST = "berth-admission.berth-system.svc"


@dataclasses.dataclass(frozen=True)
class Certs:
    cert_file: pathlib.Path
    key_file: pathlib.Path
    ca_pem: bytes

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca_pem).decode()


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    directory = tmp_path_factory.mktemp("webhook-certs")
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "localhost", SERVICE_HOST)
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    issued.cert_chain_pems[0].write_to_path(str(cert_file))
    for extra in issued.cert_chain_pems[1:]:
        extra.write_to_path(str(cert_file), append=True)
    issued.private_key_pem.write_to_path(str(key_file))
    return Certs(cert_file, key_file, ca.cert_pem.bytes())


@contextlib.asynccontextmanager
async def serving_webhook(
    emulator: testing.RunningEmulator, certs: Certs
) -> AsyncIterator[webhooks.WebhookServer]:
    """The webhook server on a free port of 127.0.0.1, logged in to ``emulator``."""
    async with clients.connect_async(kubeconfig=str(emulator.kubeconfig)) as connection:
        server = webhooks.WebhookServer(
            host="127.0.0.1",
            port=0,
            cert_file=str(certs.cert_file),
            key_file=str(certs.key_file),
            api=connection.api,
        )
        await server.start()
        try:
            yield server
        finally:
            await server.stop()


@pytest.fixture
async def webhook(
    certs: Certs, emulator: testing.RunningEmulator
) -> AsyncIterator[webhooks.WebhookServer]:
    async with serving_webhook(emulator, certs) as server:
        yield server


def configuration(
    *,
    url: str | None = None,
    service_port: int | None = None,
    ca_bundle: str,
    failure_policy: str = "Fail",
    timeout_seconds: int = 5,
    name: str = "berth-admission",
) -> dict[str, typing.Any]:
    """A MutatingWebhookConfiguration shaped like the chart's: pods with a group label, with a
    queue label, and every pod of an opted-in namespace."""

    def client(path: str) -> dict[str, typing.Any]:
        if url is not None:
            return {"url": url.rstrip("/") + path, "caBundle": ca_bundle}
        return {
            "service": {
                "namespace": "berth-system",
                "name": "berth-admission",
                "path": path,
                "port": service_port or 443,
            },
            "caBundle": ca_bundle,
        }

    rules = [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    opted_out = {"key": "scheduling.berth.io/admission", "operator": "NotIn", "values": ["enabled"]}
    common = {
        "rules": rules,
        "failurePolicy": failure_policy,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": timeout_seconds,
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "group.pods.admission.scheduling.berth.io",
                "clientConfig": client(webhooks.PATH),
                "namespaceSelector": {"matchExpressions": [opted_out]},
                "objectSelector": {
                    "matchExpressions": [
                        {"key": "scheduling.berth.io/pod-group", "operator": "Exists"}
                    ]
                },
                **common,
            },
            {
                "name": "queue.pods.admission.scheduling.berth.io",
                "clientConfig": client(webhooks.PATH),
                "namespaceSelector": {"matchExpressions": [opted_out]},
                "objectSelector": {
                    "matchExpressions": [{"key": "scheduling.berth.io/queue", "operator": "Exists"}]
                },
                **common,
            },
            {
                "name": "namespace.pods.admission.scheduling.berth.io",
                "clientConfig": client(webhooks.OPTED_IN_PATH),
                "namespaceSelector": {"matchLabels": {"scheduling.berth.io/admission": "enabled"}},
                **common,
            },
        ],
    }


def register(emulator: testing.RunningEmulator, body: dict[str, typing.Any]) -> None:
    """Create the Mutating- or ValidatingWebhookConfiguration ``body`` in ``emulator``."""
    plural = str(body.get("kind", "MutatingWebhookConfiguration")).lower() + "s"
    resource = emulator.call(emulator.api.resource, "admissionregistration.k8s.io/v1", plural)
    emulator.call(emulator.api.create, resource, body)
