"""The webhook refuses a pod naming a queue its namespace may not use, as kubectl shows it.

The emulator calls the registered MutatingWebhookConfiguration itself; the webhook reads the
Namespace and the Queue from the emulator with a real client. We test these aspects:

- in scheduler mode (the queue-access path, which never gates) and in admission mode (the
  gating path), ``kubectl apply`` of a pod naming a queue whose ``namespaceSelector`` does not
  admit the pod's namespace fails with the webhook's message; the same pod in an admitted
  namespace is created (and, in admission mode, gated);
- a pod naming no queue, in a namespace whose default queue does not admit it, is refused too;
- a queue that does not exist is not refused at admission (it may come after the pods);
- an update that gives a pod a queue label its namespace may not use is refused (on both
  paths), while updates that leave the label alone, or name an admitted queue, are allowed
  and never gated (the emulator calls no webhook on updates: the AdmissionReview is sent as
  kube-apiserver sends it).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import typing

import aiohttp
import kubernetes_asyncio.config
import pytest

from berth.api import keys
from berth.emulator import testing
from berth.kube.admission import queue_access
from berth.operator import webhooks
from tests.admission import conftest, stack

Obj = dict[str, typing.Any]


def _objects(*objects: Obj) -> str:
    return "\n---\n".join(json.dumps(o) for o in objects)


def _pod(name: str, labels: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


@pytest.mark.parametrize(
    "path", [webhooks.QUEUE_ACCESS_PATH, webhooks.PATH], ids=["scheduler", "admission"]
)
async def test_pod_naming_a_forbidden_queue_is_refused(
    emulator: testing.RunningEmulator, certs: conftest.Certs, path: str
) -> None:
    stack.install_crds(emulator)
    api = await kubernetes_asyncio.config.new_client_from_config(
        config_file=str(emulator.kubeconfig)
    )
    server = webhooks.WebhookServer(
        host="127.0.0.1",
        port=0,
        cert_file=str(certs.cert_file),
        key_file=str(certs.key_file),
        api=api,
        lookup=queue_access.QueueAccessLookup(api, ttl=0.0),
    )
    await server.start()
    try:
        body = conftest.configuration(
            url=f"https://127.0.0.1:{server.port}", ca_bundle=certs.ca_bundle
        )
        for hook in body["webhooks"]:
            hook["clientConfig"]["url"] = hook["clientConfig"]["url"].replace(
                webhooks.PATH, path, 1
            )
        conftest.register(emulator, body)

        def kubectl(*args: str, input: str | None = None) -> typing.Any:
            return asyncio.to_thread(emulator.kubectl, *args, input=input, check=False)

        setup = _objects(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "ml", "labels": {"team": "b"}},
            },
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "owners", "labels": {"team": "a"}},
            },
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": "sloppy",
                    "labels": {"team": "b", keys.NAMESPACE_QUEUE_LABEL: "team-a"},
                },
            },
            {
                "apiVersion": "scheduling.berth.io/v1alpha1",
                "kind": "Queue",
                "metadata": {"name": "team-a"},
                "spec": {"namespaceSelector": {"matchLabels": {"team": "a"}}},
            },
        )
        done = await kubectl("apply", "-f", "-", input=setup)
        assert done.returncode == 0, done.stderr

        refused = await kubectl(
            "apply",
            "-n",
            "ml",
            "-f",
            "-",
            input=json.dumps(_pod("p", {keys.QUEUE_LABEL: "team-a"})),
        )
        assert refused.returncode != 0
        assert "queue team-a does not admit pods of namespace ml" in refused.stderr
        assert "namespaceSelector (team=a)" in refused.stderr

        # No queue label, but the namespace's default queue does not admit it either.
        refused = await kubectl(
            "apply",
            "-n",
            "sloppy",
            "-f",
            "-",
            input=json.dumps(_pod("p", {keys.POD_GROUP_LABEL: "g"})),
        )
        assert refused.returncode != 0
        assert "queue team-a does not admit pods of namespace sloppy" in refused.stderr

        allowed = await kubectl(
            "apply",
            "-n",
            "owners",
            "-f",
            "-",
            input=json.dumps(_pod("p", {keys.QUEUE_LABEL: "team-a"})),
        )
        assert allowed.returncode == 0, allowed.stderr
        missing = await kubectl(
            "apply",
            "-n",
            "ml",
            "-f",
            "-",
            input=json.dumps(_pod("q", {keys.QUEUE_LABEL: "not-yet"})),
        )
        assert missing.returncode == 0, missing.stderr

        created = json.loads(
            (await kubectl("get", "pod", "p", "-n", "owners", "-o", "json")).stdout
        )
        gates = [g["name"] for g in created["spec"].get("schedulingGates") or []]
        assert gates == ([keys.ADMISSION_GATE] if path == webhooks.PATH else [])
    finally:
        await server.stop()
        await api.close()


def _update(namespace: str, *, old: dict[str, str], new: dict[str, str]) -> Obj:
    """An UPDATE AdmissionReview of pod ``p`` in ``namespace``, its labels ``old`` → ``new``."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7f0b2c1e-0000-4000-8000-000000000002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": "UPDATE",
            "object": {
                **_pod("p", new),
                "metadata": {"name": "p", "namespace": namespace, "labels": new},
            },
            "oldObject": {
                **_pod("p", old),
                "metadata": {"name": "p", "namespace": namespace, "labels": old},
            },
        },
    }


@pytest.mark.parametrize(
    "path", [webhooks.QUEUE_ACCESS_PATH, webhooks.PATH], ids=["scheduler", "admission"]
)
async def test_a_queue_label_added_after_creation_is_checked_as_at_creation(
    emulator: testing.RunningEmulator, certs: conftest.Certs, path: str
) -> None:
    stack.install_crds(emulator)
    setup = _objects(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "ml", "labels": {"team": "b"}},
        },
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "owners", "labels": {"team": "a"}},
        },
        {
            "apiVersion": "scheduling.berth.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "team-a"},
            "spec": {"namespaceSelector": {"matchLabels": {"team": "a"}}},
        },
    )
    done = await asyncio.to_thread(emulator.kubectl, "apply", "-f", "-", input=setup, check=False)
    assert done.returncode == 0, done.stderr
    api = await kubernetes_asyncio.config.new_client_from_config(
        config_file=str(emulator.kubeconfig)
    )
    server = webhooks.WebhookServer(
        host="127.0.0.1",
        port=0,
        cert_file=str(certs.cert_file),
        key_file=str(certs.key_file),
        api=api,
        lookup=queue_access.QueueAccessLookup(api, ttl=0.0),
    )
    await server.start()
    context = ssl.create_default_context(cadata=certs.ca_pem.decode())

    async def answer(review: Obj) -> Obj:
        url = f"https://127.0.0.1:{server.port}{path}"
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, json=review, ssl=context) as response,
        ):
            assert response.status == 200
            return typing.cast(Obj, (await response.json())["response"])

    try:
        squat = await answer(_update("ml", old={"app": "x"}, new={keys.QUEUE_LABEL: "team-a"}))
        assert squat["allowed"] is False
        assert "queue team-a does not admit pods of namespace ml" in squat["status"]["message"]
        moved = await answer(
            _update("ml", old={keys.QUEUE_LABEL: "other"}, new={keys.QUEUE_LABEL: "team-a"})
        )
        assert moved["allowed"] is False
        # The same label as before (another label changed), or an admitted namespace: allowed,
        # and an update is never gated.
        for review in (
            _update(
                "ml", old={keys.QUEUE_LABEL: "team-a"}, new={keys.QUEUE_LABEL: "team-a", "x": "1"}
            ),
            _update("owners", old={}, new={keys.QUEUE_LABEL: "team-a"}),
        ):
            allowed = await answer(review)
            assert allowed["allowed"] is True and "patch" not in allowed
    finally:
        await server.stop()
        await api.close()
