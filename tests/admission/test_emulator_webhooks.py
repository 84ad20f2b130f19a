"""Pods created through the emulator pass Berth's webhook, as they would in a cluster.

The emulator calls registered MutatingWebhookConfigurations itself
(:mod:`berth.emulator.webhooks`); nothing here posts AdmissionReviews by hand. We test these
aspects:
- a real ``kubernetes`` client creating a group's pod gets the gate added (by URL, and by a
  Service the test maps to the webhook's address); a plain pod is created untouched;
- a namespace labelled ``scheduling.berth.io/admission: enabled`` has its plain pods gated
  and put in the ``default`` queue; other namespaces do not;
- a webhook outage: with ``failurePolicy: Ignore`` every pod is still created (ungated), with
  ``Fail`` a selected pod is refused with the API server's message and a plain pod is not;
  a webhook slower than ``timeoutSeconds`` counts as an outage;
- the emulator enforces that scheduling gates can only be removed, never added.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import typing

import kubernetes
import pytest
from aiohttp import web
from kubernetes.client.rest import ApiException

from berth.api import keys
from berth.emulator import testing
from berth.operator import webhooks
from tests.admission import conftest


def _core(emulator: testing.RunningEmulator) -> kubernetes.client.CoreV1Api:
    configuration = kubernetes.client.Configuration()
    configuration.host = emulator.url
    configuration.api_key = {"authorization": "Bearer berth-emulator"}
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))


def _pod(name: str, labels: dict[str, str] | None = None) -> dict[str, typing.Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


async def _create(
    core: kubernetes.client.CoreV1Api, pod: dict[str, typing.Any], namespace: str = "default"
) -> dict[str, typing.Any]:
    """Create through the blocking client in a thread: the webhook answers on this loop."""

    def create() -> dict[str, typing.Any]:
        response = core.create_namespaced_pod(namespace, pod, _preload_content=False)
        return typing.cast(dict[str, typing.Any], json.loads(response.data))

    return await asyncio.to_thread(create)


def _gates(pod: dict[str, typing.Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or ()]


async def test_client_created_group_pod_gets_the_gate(
    emulator: testing.RunningEmulator,
    webhook: webhooks.WebhookServer,
    certs: conftest.Certs,
) -> None:
    url = f"https://127.0.0.1:{webhook.port}"
    conftest.register(emulator, conftest.configuration(url=url, ca_bundle=certs.ca_bundle))
    core = _core(emulator)
    gang = await _create(core, _pod("train-0", {keys.POD_GROUP_LABEL: "train"}))
    queued = await _create(core, _pod("one", {keys.QUEUE_LABEL: "research"}))
    plain = await _create(core, _pod("web", {"app": "web"}))
    assert _gates(gang) == [keys.ADMISSION_GATE]
    assert _gates(queued) == [keys.ADMISSION_GATE]
    assert _gates(plain) == []
    stored = emulator.call(
        emulator.api.get, emulator.api.resource("v1", "pods"), namespace="default", name="train-0"
    )
    assert _gates(stored) == [keys.ADMISSION_GATE]
    assert emulator.server.handlers.webhooks.calls == 2  # the plain pod matched no selector


async def test_service_reference_reaches_the_webhook(
    emulator: testing.RunningEmulator,
    webhook: webhooks.WebhookServer,
    certs: conftest.Certs,
) -> None:
    port = webhook.port
    emulator.server.handlers.webhooks.resolve_service = lambda namespace, name, _port: (
        f"https://127.0.0.1:{port}"
        if (namespace, name) == ("berth-system", "berth-admission")
        else None
    )
    conftest.register(emulator, conftest.configuration(service_port=443, ca_bundle=certs.ca_bundle))
    made = await _create(_core(emulator), _pod("train-0", {keys.POD_GROUP_LABEL: "train"}))
    assert _gates(made) == [keys.ADMISSION_GATE]


async def test_opted_in_namespace_gates_plain_pods(
    emulator: testing.RunningEmulator,
    webhook: webhooks.WebhookServer,
    certs: conftest.Certs,
) -> None:
    url = f"https://127.0.0.1:{webhook.port}"
    conftest.register(emulator, conftest.configuration(url=url, ca_bundle=certs.ca_bundle))
    namespaces = emulator.api.resource("v1", "namespaces")
    emulator.call(
        emulator.api.create,
        namespaces,
        {"metadata": {"name": "batch", "labels": {keys.ADMISSION_LABEL: "enabled"}}},
    )
    core = _core(emulator)
    inside = await _create(core, _pod("web", {"app": "web"}), namespace="batch")
    outside = await _create(core, _pod("web", {"app": "web"}), namespace="default")
    grouped = await _create(core, _pod("g-0", {keys.POD_GROUP_LABEL: "g"}), namespace="batch")
    assert _gates(inside) == [keys.ADMISSION_GATE]
    assert inside["metadata"]["labels"][keys.QUEUE_LABEL] == "default"
    assert _gates(outside) == []
    assert _gates(grouped) == [keys.ADMISSION_GATE]  # asked once, through the namespace webhook


@pytest.mark.parametrize(
    ("policy", "plain_created", "group_refused"),
    [("Ignore", True, False), ("Fail", True, True)],
    ids=["ignore", "fail"],
)
async def test_webhook_outage_follows_the_failure_policy(
    emulator: testing.RunningEmulator,
    certs: conftest.Certs,
    policy: str,
    plain_created: bool,
    group_refused: bool,
) -> None:
    # Nothing listens there: the webhook is down.
    conftest.register(
        emulator,
        conftest.configuration(
            url="https://127.0.0.1:9", ca_bundle=certs.ca_bundle, failure_policy=policy
        ),
    )
    core = _core(emulator)
    plain = await _create(core, _pod("web", {"app": "web"}))
    assert (_gates(plain) == []) is plain_created
    if group_refused:
        with pytest.raises(ApiException) as caught:
            await _create(core, _pod("train-0", {keys.POD_GROUP_LABEL: "train"}))
        message = json.loads(caught.value.body)["message"]
        assert caught.value.status == 500
        assert message.startswith(
            'Internal error occurred: failed calling webhook "group.pods.admission.scheduling'
        )
        assert "connect: connection refused" in message
    else:
        made = await _create(core, _pod("train-0", {keys.POD_GROUP_LABEL: "train"}))
        assert _gates(made) == []  # created, ungated: Berth's bad-input path never sees it


async def test_webhook_slower_than_its_timeout_is_an_outage(
    emulator: testing.RunningEmulator, certs: conftest.Certs
) -> None:
    release = asyncio.Event()

    async def stuck(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({})

    app = web.Application()
    app.router.add_post(webhooks.PATH, stuck)
    runner = web.AppRunner(app)
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(certs.cert_file), str(certs.key_file))
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        conftest.register(
            emulator,
            conftest.configuration(
                url=f"https://127.0.0.1:{port}", ca_bundle=certs.ca_bundle, timeout_seconds=1
            ),
        )
        with pytest.raises(ApiException) as caught:
            await _create(_core(emulator), _pod("train-0", {keys.POD_GROUP_LABEL: "train"}))
        assert caught.value.status == 500
        assert "context deadline exceeded" in caught.value.body
    finally:
        release.set()
        await runner.cleanup()


def test_gates_can_only_be_removed(emulator: testing.RunningEmulator) -> None:
    pods = emulator.api.resource("v1", "pods")
    body = _pod("p")
    body["spec"]["schedulingGates"] = [{"name": keys.ADMISSION_GATE}]
    emulator.call(emulator.api.create, pods, body, namespace="default")
    core = _core(emulator)
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod(
            "p",
            "default",
            [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "more"}}],
        )
    assert caught.value.status == 422
    assert "only deletion is allowed" in caught.value.body
    core.patch_namespaced_pod("p", "default", [{"op": "remove", "path": "/spec/schedulingGates"}])
    with pytest.raises(ApiException) as again:
        core.patch_namespaced_pod(
            "p", "default", {"spec": {"schedulingGates": [{"name": keys.ADMISSION_GATE}]}}
        )
    assert again.value.status == 422


ZONE = {"key": "zone", "operator": "In", "values": ["a"]}
PIN = {"key": "metadata.name", "operator": "In", "values": ["n1"]}


def _terms(*terms: dict[str, typing.Any]) -> dict[str, typing.Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


@pytest.mark.parametrize(
    ("before", "after", "allowed"),
    [
        ({}, {"affinity": _terms({"matchFields": [PIN]})}, True),
        (
            {"affinity": _terms({"matchExpressions": [ZONE]})},
            {"affinity": _terms({"matchExpressions": [ZONE], "matchFields": [PIN]})},
            True,
        ),
        ({"affinity": _terms({"matchFields": [PIN]})}, {"affinity": None}, False),
        (
            {"affinity": _terms({"matchExpressions": [ZONE]})},
            {"affinity": _terms({"matchExpressions": [ZONE]}, {"matchFields": [PIN]})},
            False,
        ),
        ({"nodeSelector": {"a": "1"}}, {"nodeSelector": {"a": "1", "b": "2"}}, True),
        ({"nodeSelector": {"a": "1"}}, {"nodeSelector": {"a": "2"}}, False),
        ({}, {"affinity": {"podAffinity": {"x": 1}}}, False),
    ],
    ids=[
        "pin-where-none",
        "pin-anded-into-a-term",
        "pin-removed",
        "term-added",
        "selector-added",
        "selector-changed",
        "pod-affinity",
    ],
)
def test_gated_pod_directives_may_only_narrow(
    emulator: testing.RunningEmulator,
    before: dict[str, typing.Any],
    after: dict[str, typing.Any],
    allowed: bool,
) -> None:
    pods = emulator.api.resource("v1", "pods")
    body = _pod("p")
    body["spec"].update(before, schedulingGates=[{"name": keys.ADMISSION_GATE}])
    emulator.call(emulator.api.create, pods, body, namespace="default")
    core = _core(emulator)
    if allowed:
        core.patch_namespaced_pod("p", "default", {"spec": after})
        return
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod("p", "default", {"spec": after})
    assert caught.value.status == 422
