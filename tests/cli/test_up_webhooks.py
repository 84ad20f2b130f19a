"""``berth up --mode admission`` registers the chart's webhooks: the same configurations.

We test this aspect: the Mutating- and ValidatingWebhookConfiguration that
:mod:`berth.cli.up_webhooks` writes for the embedded cluster are those the chart installs in
admission mode (``helm install`` into an emulator), with its default values and with
``admission.namespaces=all`` (``berth up --admission-namespaces all``), webhook by webhook —
rules, selectors, match conditions, policies and paths — but for where they are sent (a URL on
127.0.0.1 with this run's CA, instead of the chart's Service and Secret).
"""

from __future__ import annotations

import asyncio
import typing

import pytest

from berth.cli import up_webhooks
from berth.emulator import testing
from tests.packaging import charts

Object = dict[str, typing.Any]


def _comparable(config: Object, *, base: str = "") -> list[Object]:
    """The webhooks without where they are sent (a Service or a URL under ``base``), each
    path kept; the API server's default ``matchPolicy`` filled in."""
    out = []
    for webhook in config["webhooks"]:
        webhook = dict(webhook)
        client = webhook.pop("clientConfig")
        webhook["path"] = (
            client["service"]["path"] if "service" in client else client["url"].removeprefix(base)
        )
        webhook.setdefault("matchPolicy", "Equivalent")
        out.append(webhook)
    return out


@pytest.mark.parametrize("namespaces", up_webhooks.NAMESPACES)
def test_the_embedded_clusters_webhooks_are_the_charts(
    emulator: testing.RunningEmulator, namespaces: str
) -> None:
    asyncio.run(
        charts.install(
            emulator.kubeconfig,
            release="berth",
            namespace="berth-system",
            values={"mode": "admission", "admission": {"namespaces": namespaces}},
        )
    )
    ours = up_webhooks.configurations("https://127.0.0.1:8443", b"CA", namespaces=namespaces)
    for mine in ours:
        plural = str(mine["kind"]).lower() + "s"
        resource = emulator.call(emulator.api.resource, "admissionregistration.k8s.io/v1", plural)
        charts_config = emulator.call(
            emulator.api.get, resource, namespace=None, name=up_webhooks.NAME
        )
        for webhook in mine["webhooks"]:
            assert webhook["clientConfig"]["url"].startswith("https://127.0.0.1:8443/")
            assert webhook["clientConfig"]["caBundle"] == "Q0E="
        theirs = _comparable(charts_config)
        assert _comparable(mine, base="https://127.0.0.1:8443") == theirs, mine["kind"]
