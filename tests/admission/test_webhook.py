"""The admission webhook (:mod:`berth.operator.webhooks`), asked directly.

We test these aspects:
- which pods get the gate (a group or queue label, an interop group key, an opted-in namespace)
  and which never do (plain pods, bound pods, other schedulers, opted out, already gated);
- the JSON patch: the gate appended to existing gates, or the list created; an opted-in plain
  pod also gets the ``default`` queue;
- the served webhook over TLS answers an AdmissionReview with the same uid and a base64 patch;
- non-pod and non-create requests are allowed untouched;
- a malformed AdmissionReview (not JSON, wrong kind or version, no uid, wrong content type)
  gets a 400;
- ``serving`` starts nothing in scheduler mode or with the webhook off;
- the server is Kopf's: the answers come from ``kopf.on.mutate`` handlers.
"""

from __future__ import annotations

import base64
import json
import ssl
import typing

import aiohttp
import pytest

from berth.api import keys
from berth.emulator import testing
from berth.kube.transport import clients
from berth.operator import settings, webhooks
from tests.admission import conftest

GATE = {"name": keys.ADMISSION_GATE}


def _pod(
    labels: dict[str, str] | None = None,
    *,
    annotations: dict[str, str] | None = None,
    **spec: typing.Any,
) -> dict[str, typing.Any]:
    meta: dict[str, typing.Any] = {"name": "p"}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


@pytest.mark.parametrize(
    ("pod", "opted_in", "expected"),
    [
        (
            _pod({keys.POD_GROUP_LABEL: "g"}),
            False,
            [{"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}],
        ),
        (
            _pod({keys.QUEUE_LABEL: "q"}, schedulingGates=[{"name": "other"}]),
            False,
            [{"op": "add", "path": "/spec/schedulingGates/-", "value": GATE}],
        ),
        (
            _pod({keys.INTEROP_POD_GROUP_LABEL: "g"}, schedulerName="default-scheduler"),
            False,
            [{"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}],
        ),
        (
            _pod(annotations={keys.INTEROP_POD_GROUP_ANNOTATION: "g"}),
            False,
            [{"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}],
        ),
        (
            _pod(schedulingGroup={"podGroupName": "g"}),
            False,
            [{"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}],
        ),
        (
            _pod(workloadRef={"name": "w", "podGroup": "g"}),
            False,
            [{"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}],
        ),
        (_pod({"app": "web"}), False, []),
        (_pod(), False, []),
        (
            _pod({"app": "web"}),
            True,
            [
                {
                    "op": "add",
                    "path": "/metadata/labels/scheduling.berth.io~1queue",
                    "value": "default",
                },
                {"op": "add", "path": "/spec/schedulingGates", "value": [GATE]},
            ],
        ),
        (
            _pod(),
            True,
            [
                {"op": "add", "path": "/metadata/labels", "value": {keys.QUEUE_LABEL: "default"}},
                {"op": "add", "path": "/spec/schedulingGates", "value": [GATE]},
            ],
        ),
        (_pod({keys.POD_GROUP_LABEL: "g"}, nodeName="n1"), False, []),
        (_pod({keys.POD_GROUP_LABEL: "g"}, schedulerName="berth-scheduler"), True, []),
        (_pod({keys.POD_GROUP_LABEL: "g", keys.ADMISSION_LABEL: "disabled"}), False, []),
        (
            _pod({keys.POD_GROUP_LABEL: "g", keys.ADMISSION_LABEL: "disabled"}),
            True,
            [{"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}],
        ),
        (_pod({keys.POD_GROUP_LABEL: "g"}, schedulingGates=[GATE]), False, []),
    ],
    ids=[
        "group-label",
        "queue-label-appends-to-gates",
        "interop-group-label",
        "volcano-group-annotation",
        "kubernetes-scheduling-group",
        "kubernetes-workload-ref",
        "plain-pod-never",
        "no-labels-never",
        "opted-in-plain-pod-joins-default-queue",
        "opted-in-without-labels",
        "already-bound",
        "another-scheduler",
        "opted-out",
        "opt-out-ignored-where-admission-is-required",
        "gate-already-in-template",
    ],
)
def test_mutation_gates_berths_pods_only(
    pod: dict[str, typing.Any], opted_in: bool, expected: list[dict[str, typing.Any]]
) -> None:
    assert webhooks.mutation(pod, opted_in=opted_in) == expected


def _review(
    obj: typing.Any, *, operation: str = "CREATE", kind: str = "Pod"
) -> dict[str, typing.Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7f0b2c1e-0000-4000-8000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": operation,
            "object": obj,
        },
    }


def _client_context(certs: conftest.Certs) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=certs.ca_pem.decode())


async def _post(
    server: webhooks.WebhookServer,
    certs: conftest.Certs,
    body: bytes,
    *,
    path: str = webhooks.PATH,
    content_type: str = "application/json",
) -> tuple[int, bytes]:
    url = f"https://127.0.0.1:{server.port}{path}"
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url, data=body, headers={"Content-Type": content_type}, ssl=_client_context(certs)
        ) as response,
    ):
        return response.status, await response.read()


async def test_served_review_answers_with_the_gate_patch(
    webhook: webhooks.WebhookServer, certs: conftest.Certs
) -> None:
    review = _review(_pod({keys.POD_GROUP_LABEL: "train"}))
    status, raw = await _post(webhook, certs, json.dumps(review).encode())
    answer = json.loads(raw)
    assert status == 200
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == review["request"]["uid"] and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}
    ]


async def test_opted_in_path_gates_plain_pods(
    webhook: webhooks.WebhookServer, certs: conftest.Certs
) -> None:
    review = _review(_pod({"app": "web"}))
    status, raw = await _post(
        webhook, certs, json.dumps(review).encode(), path=webhooks.OPTED_IN_PATH
    )
    ops = json.loads(base64.b64decode(json.loads(raw)["response"]["patch"]))
    assert status == 200
    assert {"op": "add", "path": "/spec/schedulingGates", "value": [GATE]} in ops


@pytest.mark.parametrize(
    "review",
    [
        _review(_pod({keys.POD_GROUP_LABEL: "g"}), operation="UPDATE"),
        _review({"metadata": {"name": "cm"}}, kind="ConfigMap"),
        _review(None),
    ],
    ids=["update", "not-a-pod", "no-object"],
)
async def test_other_requests_are_allowed_untouched(
    webhook: webhooks.WebhookServer, certs: conftest.Certs, review: dict[str, typing.Any]
) -> None:
    status, raw = await _post(webhook, certs, json.dumps(review).encode())
    response = json.loads(raw)["response"]
    assert status == 200 and response["allowed"] is True and "patch" not in response


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{not json", "application/json"),
        (json.dumps({**_review(_pod()), "kind": "Pod"}).encode(), "application/json"),
        (
            json.dumps({**_review(_pod()), "apiVersion": "admission.k8s.io/v1beta1"}).encode(),
            "application/json",
        ),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            "application/json",
        ),
        (
            json.dumps(
                {**_review(_pod()), "request": {**_review(_pod())["request"], "uid": ""}}
            ).encode(),
            "application/json",
        ),
        (json.dumps(_review(_pod())).encode(), "text/plain"),
        (b"[]", "application/json"),
    ],
    ids=[
        "not-json",
        "wrong-kind",
        "old-version",
        "no-request",
        "empty-uid",
        "wrong-type",
        "a-list",
    ],
)
async def test_malformed_review_is_a_400(
    webhook: webhooks.WebhookServer, certs: conftest.Certs, body: bytes, content_type: str
) -> None:
    status, raw = await _post(webhook, certs, body, content_type=content_type)
    assert status == 400
    assert raw.strip()


@pytest.mark.parametrize(
    "options",
    [{"mode": "scheduler"}, {"mode": "admission", "admission": {"webhook": False}}],
    ids=["scheduler-mode", "webhook-off"],
)
async def test_serving_starts_nothing_unless_asked(
    options: dict[str, typing.Any], emulator: testing.RunningEmulator
) -> None:
    config = settings.Settings(**options)
    async with (
        clients.connect_async(kubeconfig=str(emulator.kubeconfig)) as connection,
        webhooks.serving(config, api=connection.api) as server,
    ):
        assert server is None


async def test_serving_in_admission_mode_listens_with_the_mounted_certificate(
    certs: conftest.Certs, emulator: testing.RunningEmulator
) -> None:
    config = settings.Settings(
        mode="admission",
        admission={
            "webhook_host": "127.0.0.1",
            "webhook_port": 0,
            "cert_file": certs.cert_file,
            "key_file": certs.key_file,
        },
    )
    async with (
        clients.connect_async(kubeconfig=str(emulator.kubeconfig)) as connection,
        webhooks.serving(config, api=connection.api) as server,
    ):
        assert server is not None and server.port
        status, _ = await _post(server, certs, json.dumps(_review(_pod())).encode())
    assert status == 200
