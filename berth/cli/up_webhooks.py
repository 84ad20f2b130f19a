"""Admission mode on ``berth up``'s embedded cluster: the chart's webhooks, pointed at this process.

On a real cluster the chart registers Berth's admission webhooks
(``helm/berth/templates/admission-webhook.yaml``); ``berth up --real`` installs the chart and
points them at the local operator. The embedded cluster has no Helm, so ``berth up --mode
admission`` registers the same configurations, written here as the chart renders them in
admission mode with its default values, or with ``admission.namespaces=all`` (``berth up
--admission-namespaces all``; ``tests/cli/test_up_webhooks.py`` renders the chart both ways and
compares), each webhook's ``clientConfig`` a URL on 127.0.0.1 with the CA of a certificate made
for this run (:func:`serving_certificate`).

The emulator calls them as kube-apiserver does (:mod:`berth.emulator.webhooks`), except that it
does not evaluate ``matchConditions``: the webhook for pods naming a gang by an annotation or
``spec.schedulingGroup`` is called for every other pod too, and Berth's webhook answers those
unchanged, as it answers any pod that is not Berth's. Nor does it call webhooks on updates (the
check of a queue label changed after creation is the real API server's).
"""

from __future__ import annotations

import base64
import dataclasses
import pathlib

import typing_extensions

from berth.api import admissionregistration, objects
from berth.cli import up_steps
from berth.operator import webhooks
from berth.realcluster import pki

__all__ = ["NAME", "NAMESPACES", "ServingCertificate", "configurations", "serving_certificate"]

NAME = "berth-admission"
"""The configurations' name (the chart's for the release ``berth``)."""
_EXCLUDED_NAMESPACES = ["kube-system", "berth-system"]  # the chart's: kube-system, its own
_ADMISSION = "scheduling.berth.io/admission"
_FAILURE_POLICY = "Fail"
_TIMEOUT_SECONDS = 5
# (webhook name prefix, the pod label it selects; "" for opted-in namespaces), as the chart
# lists them with interop.schedulerPlugins enabled (its default).
_POD_WEBHOOKS = (
    ("group", "scheduling.berth.io/pod-group"),
    ("queue", "scheduling.berth.io/queue"),
    ("scheduler-plugins-group", "scheduling.x-k8s.io/pod-group"),
    ("namespace", ""),
)
# interop.volcano and interop.workloadAPI enabled (the defaults): the keys no selector sees.
_INTEROP_KEYS = (
    "(has(object.metadata.annotations) && "
    "'scheduling.k8s.io/group-name' in object.metadata.annotations)",
    "has(object.spec.schedulingGroup)",
    "has(object.spec.workloadRef)",
)

_QUEUE = "scheduling.berth.io/queue"

NAMESPACES = up_steps.ADMISSION_NAMESPACES
"""The chart's ``admission.namespaces`` values (:data:`berth.cli.up_steps.ADMISSION_NAMESPACES`)."""


def _queue_of(obj: str) -> str:
    return (
        f"(has({obj}.metadata.labels) && '{_QUEUE}' in {obj}.metadata.labels ? "
        f"{obj}.metadata.labels['{_QUEUE}'] : '')"
    )


QUEUE_CHANGED = f"{_queue_of('object')} != {_queue_of('oldObject')}"
"""CEL: an update changes the pod's queue label (the chart's matchCondition)."""


@dataclasses.dataclass(frozen=True)
class ServingCertificate:
    """The webhook server's certificate and key files, and the CA (PEM) that signed them."""

    cert: pathlib.Path
    key: pathlib.Path
    ca_pem: bytes


def serving_certificate(directory: pathlib.Path) -> ServingCertificate:
    """A fresh CA in ``directory`` and a serving certificate for 127.0.0.1 signed by it."""
    authority = pki.Authority(directory, name="berth-up-admission-ca")
    pair = authority.serving("berth-webhook", hosts=["127.0.0.1"])
    return ServingCertificate(pair.cert, pair.key, authority.pem)


def _pods_rule(operation: str = "CREATE") -> admissionregistration.RuleWithOperations:
    return {
        "operations": [operation],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["pods"],
        "scope": "Namespaced",
    }


def _webhook(
    name: str,
    url: str,
    bundle: str,
    /,
    **rest: typing_extensions.Unpack[admissionregistration.Webhook],
) -> admissionregistration.Webhook:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": _FAILURE_POLICY,
        "timeoutSeconds": _TIMEOUT_SECONDS,
        "clientConfig": {"url": url, "caBundle": bundle},
        **rest,
    }


def _not_excluded(*more: objects.LabelSelectorRequirement) -> objects.LabelSelector:
    return {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": list(_EXCLUDED_NAMESPACES),
            },
            *more,
        ]
    }


def configurations(
    base_url: str, ca_pem: bytes, *, namespaces: str = "optIn"
) -> list[admissionregistration.WebhookConfiguration]:
    """The chart's Mutating- and ValidatingWebhookConfiguration (admission mode, default
    values but ``admission.namespaces``), sent to ``base_url`` (``https://127.0.0.1:PORT``)
    and trusting ``ca_pem``."""
    if namespaces not in NAMESPACES:
        raise ValueError(f"admission.namespaces must be one of {NAMESPACES}, not {namespaces!r}")
    bundle = base64.b64encode(ca_pem).decode()
    # Namespaces gated whole go to the namespace webhook, the others to the label webhooks:
    # each pod is sent to one of them, never two (as the chart splits them).
    whole, rest = ("In", "NotIn") if namespaces == "optIn" else ("NotIn", "In")
    value = "enabled" if namespaces == "optIn" else "disabled"
    opted_in: objects.LabelSelectorRequirement = {
        "key": _ADMISSION,
        "operator": whole,
        "values": [value],
    }
    optional: objects.LabelSelectorRequirement = {
        "key": _ADMISSION,
        "operator": rest,
        "values": [value],
    }
    mutating: list[admissionregistration.Webhook] = []
    for prefix, label in _POD_WEBHOOKS:
        if label:
            mutating.append(
                _webhook(
                    f"{prefix}.pods.admission.scheduling.berth.io",
                    base_url + webhooks.PATH,
                    bundle,
                    reinvocationPolicy="Never",
                    rules=[_pods_rule()],
                    namespaceSelector=_not_excluded(optional),
                    objectSelector={
                        "matchExpressions": [
                            {"key": label, "operator": "Exists"},
                            {"key": _ADMISSION, "operator": "NotIn", "values": ["disabled"]},
                        ]
                    },
                )
            )
        else:
            mutating.append(
                _webhook(
                    f"{prefix}.pods.admission.scheduling.berth.io",
                    base_url + webhooks.OPTED_IN_PATH,
                    bundle,
                    reinvocationPolicy="Never",
                    rules=[_pods_rule()],
                    namespaceSelector=_not_excluded(opted_in),
                )
            )
    mutating.append(
        _webhook(
            "queue-label.pods.admission.scheduling.berth.io",
            base_url + webhooks.QUEUE_ACCESS_PATH,
            bundle,
            reinvocationPolicy="Never",
            rules=[_pods_rule("UPDATE")],
            namespaceSelector=_not_excluded(),
            objectSelector={"matchExpressions": [{"key": _QUEUE, "operator": "Exists"}]},
            matchConditions=[{"name": "changes-the-queue", "expression": QUEUE_CHANGED}],
        )
    )
    mutating.append(
        _webhook(
            "interop-keys.pods.admission.scheduling.berth.io",
            base_url + webhooks.PATH,
            bundle,
            reinvocationPolicy="Never",
            rules=[_pods_rule()],
            namespaceSelector=_not_excluded(optional),
            objectSelector={
                "matchExpressions": [
                    {"key": _ADMISSION, "operator": "NotIn", "values": ["disabled"]}
                ]
            },
            matchConditions=[{"name": "names-a-gang", "expression": " || ".join(_INTEROP_KEYS)}],
        )
    )
    validating = [
        _webhook(
            f"{name}.validation.scheduling.berth.io",
            base_url + path,
            bundle,
            failurePolicy="Ignore",
            rules=[
                {
                    "operations": ["CREATE", "UPDATE"],
                    "apiGroups": ["scheduling.berth.io"],
                    "apiVersions": ["*"],
                    "resources": [plural],
                    "scope": scope,
                }
            ],
        )
        for name, path, plural, scope in (
            ("parent.queues", webhooks.QUEUES_PATH, "queues", "Cluster"),
            ("queue.podgroups", webhooks.PODGROUPS_PATH, "podgroups", "Namespaced"),
        )
    ]
    return [
        {
            "apiVersion": admissionregistration.API_VERSION,
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": NAME},
            "webhooks": mutating,
        },
        {
            "apiVersion": admissionregistration.API_VERSION,
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": NAME},
            "webhooks": validating,
        },
    ]
