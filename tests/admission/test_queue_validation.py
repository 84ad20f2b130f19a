"""Queues are validated by Kopf's validating handler on the webhook server (issue 18).

We test these aspects:
- :func:`~berth.scheduler.snapshot.queue_parents.check`: a queue that is its own parent or
  closes a cycle, and a guarantee above the parent's limit, are refused with a message naming
  the field; a missing parent is a warning; a fitting parent passes;
- through the emulator (a ValidatingWebhookConfiguration shaped like the chart's pointing at
  the served webhook), ``kubectl apply`` of a Queue closing a cycle is refused with that
  message, and a Queue naming a parent that does not exist yet is created;
- a PodGroup naming a queue that does not exist is allowed with a warning, one naming an
  existing queue (or the implicit default) without — also when the CRDs were installed after
  the webhook server started (Kopf's CRD watch brings the new kinds in).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import typing

import aiohttp
import pytest

from berth.emulator import testing
from berth.operator import webhooks
from berth.scheduler.snapshot import queue_parents, queues
from tests.admission import conftest, stack


def _queue(
    name: str,
    parent: str | None = None,
    *,
    guaranteed: dict[str, str] | None = None,
    limit: dict[str, str] | None = None,
) -> dict[str, typing.Any]:
    spec: dict[str, typing.Any] = {}
    if parent is not None:
        spec["parent"] = parent
    if guaranteed is not None:
        spec["guaranteed"] = guaranteed
    if limit is not None:
        spec["limit"] = limit
    return {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def _others(*raw: dict[str, typing.Any]) -> dict[str, queues.QueueInfo]:
    return {str(q.name): q for q in (queues.queue_info(r) for r in raw)}


@pytest.mark.parametrize(
    ("queue", "others", "refusal", "warned"),
    [
        (_queue("a", "a"), (), "spec.parent: queue a cannot be its own parent", False),
        (
            _queue("a", "b"),
            (_queue("b", "c"), _queue("c", "a")),
            "spec.parent: b would make a cycle of queues (a -> b -> c -> a)",
            False,
        ),
        (_queue("a", "missing"), (_queue("b"),), None, True),
        (
            _queue("a", "b", guaranteed={"cpu": "8", "memory": "1Gi"}),
            (_queue("b", limit={"cpu": "4"}),),
            "spec.guaranteed: cpu above the limit of parent queue b; "
            "the parent can never give that much",
            False,
        ),
        (
            _queue("a", "b", guaranteed={"cpu": "2"}),
            (_queue("b", limit={"cpu": "4"}),),
            None,
            False,
        ),
        (_queue("a"), (_queue("b", "a"),), None, False),
    ],
    ids=["own-parent", "cycle", "missing-parent", "above-parent-limit", "fits", "no-parent"],
)
def test_parent_check(
    queue: dict[str, typing.Any],
    others: tuple[dict[str, typing.Any], ...],
    refusal: str | None,
    warned: bool,
) -> None:
    result = queue_parents.check(queues.queue_info(queue), others=_others(*others))
    assert result.refusal == refusal
    assert bool(result.warnings) == warned
    if warned:
        assert result.warnings[0].startswith("spec.parent: queue missing does not exist")


def _validating(url: str, ca_bundle: str) -> dict[str, typing.Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "berth-admission"},
        "webhooks": [
            {
                "name": "parent.queues.validation.scheduling.berth.io",
                "clientConfig": {"url": url + webhooks.QUEUES_PATH, "caBundle": ca_bundle},
                "rules": [
                    {
                        "operations": ["CREATE", "UPDATE"],
                        "apiGroups": ["scheduling.berth.io"],
                        "apiVersions": ["*"],
                        "resources": ["queues"],
                        "scope": "Cluster",
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }


async def test_a_queue_closing_a_cycle_is_refused_at_admission(
    emulator: testing.RunningEmulator, certs: conftest.Certs
) -> None:
    stack.install_crds(emulator)
    # The server starts after the CRDs exist here; Kopf's CRD watch covers the other order.
    async with conftest.serving_webhook(emulator, certs) as server:
        conftest.register(
            emulator, _validating(f"https://127.0.0.1:{server.port}", certs.ca_bundle)
        )

        def kubectl(*args: str, input: str | None = None) -> typing.Any:
            return asyncio.to_thread(emulator.kubectl, *args, input=input, check=False)

        made = await kubectl("create", "-f", "-", input=json.dumps(_queue("a", "b")))
        assert made.returncode == 0, made.stderr  # b does not exist yet: a warning only
        made = await kubectl("create", "-f", "-", input=json.dumps(_queue("b", "c")))
        assert made.returncode == 0, made.stderr
        refused = await kubectl("create", "-f", "-", input=json.dumps(_queue("c", "a")))
        assert refused.returncode != 0
        assert "spec.parent: a would make a cycle of queues (c -> a -> b -> c)" in refused.stderr
        fine = await kubectl("create", "-f", "-", input=json.dumps(_queue("c")))
        assert fine.returncode == 0, fine.stderr


def _podgroup_review(queue: str | None) -> dict[str, typing.Any]:
    spec: dict[str, typing.Any] = {"minMember": 1}
    if queue is not None:
        spec["queue"] = queue
    group = {
        "apiVersion": "scheduling.berth.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": spec,
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7f0b2c1e-0000-4000-8000-000000000003",
            "kind": {"group": "scheduling.berth.io", "version": "v1alpha1", "kind": "PodGroup"},
            "resource": {
                "group": "scheduling.berth.io",
                "version": "v1alpha1",
                "resource": "podgroups",
            },
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": group,
        },
    }


async def test_a_podgroup_naming_a_missing_queue_gets_a_warning(
    emulator: testing.RunningEmulator,
    webhook: webhooks.WebhookServer,
    certs: conftest.Certs,
) -> None:
    # The CRDs arrive after the server started, as on a fresh install racing the chart's CRDs.
    stack.install_crds(emulator)
    emulator.kubectl("create", "-f", "-", input=json.dumps(_queue("research")))
    trust = ssl.create_default_context(cadata=certs.ca_pem.decode())
    url = f"https://127.0.0.1:{webhook.port}{webhooks.PODGROUPS_PATH}"

    async def answer(queue: str | None) -> dict[str, typing.Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, json=_podgroup_review(queue), ssl=trust) as response,
        ):
            assert response.status == 200
            body: dict[str, typing.Any] = (await response.json())["response"]
            return body

    async with asyncio.timeout(30):
        while "warnings" not in (found := await answer("missing")):
            await asyncio.sleep(0.1)  # until Kopf has seen the new CRD (bounded above)
    assert found["allowed"] is True
    assert found["warnings"] == [webhooks.missing_queue("missing")]
    assert found["warnings"][0].startswith("spec.queue: queue missing does not exist")
    for queue in ("research", "default", None):
        known = await answer(queue)
        assert known["allowed"] is True and "warnings" not in known
