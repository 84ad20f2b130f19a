"""Admission webhooks: the API server's call-out on create, as a real one makes it.

Before an object created over HTTP is stored (:meth:`Handlers._post
<berth.emulator.handlers.Handlers>` calls :meth:`MutatingWebhooks.mutate`), every webhook of
every registered ``admissionregistration.k8s.io/v1`` MutatingWebhookConfiguration is asked in
order (configurations by name, webhooks in listed order), each seeing the object as the previous
ones left it:

- a webhook applies when one of its ``rules`` names the operation (``CREATE`` or ``*``), the
  group, version and resource (or ``*``), its ``namespaceSelector`` matches the labels of the
  object's namespace and its ``objectSelector`` the object's labels (absent or empty selectors
  match everything);
- the call is an HTTPS ``POST`` of an ``AdmissionReview`` to ``clientConfig.url``, or to
  ``clientConfig.service`` through :attr:`MutatingWebhooks.resolve_service` (the emulator has no
  cluster network: a test maps a Service to the address it listens on; unmapped Services have
  no endpoints), trusting ``clientConfig.caBundle``, with ``?timeout=Ns`` appended and cut off
  after ``timeoutSeconds`` (default 10);
- an answer with ``allowed: false`` refuses the create with the webhook's status (403 by
  default); an allowed answer's ``JSONPatch`` is applied;
- a failed call (refused, timed out, not 200, not an AdmissionReview for this request, a patch
  that does not apply) refuses the create with a 500 ``InternalError`` when ``failurePolicy`` is
  ``Fail`` (the default), and is skipped when it is ``Ignore`` — messages as kube-apiserver's.

Validating webhooks (``ValidatingWebhookConfiguration``, :class:`ValidatingWebhooks`) are asked
the same way after the mutating ones, with the object as they left it; only their refusals
count (a validating webhook's patch is not applied).

Not modelled: ``matchConditions``, ``reinvocationPolicy``, ``matchPolicy: Equivalent``, update,
delete and connect operations, warnings of allowed answers, and the in-process API
(``Api.create`` called directly is a privileged path that no webhook sees).
"""

from __future__ import annotations

import base64
import binascii
import collections.abc
import json
import os
import ssl
import typing
import uuid

import aiohttp

from berth.api import admission, admissionregistration, objects
from berth.emulator import errors, patches, resources, rest, selectors

__all__ = [
    "CONFIGURATIONS",
    "VALIDATING_CONFIGURATIONS",
    "MutatingWebhooks",
    "ServiceResolver",
    "ValidatingWebhooks",
]

CONFIGURATIONS: resources.StorageKey = (
    "admissionregistration.k8s.io",
    "mutatingwebhookconfigurations",
)
VALIDATING_CONFIGURATIONS: resources.StorageKey = (
    "admissionregistration.k8s.io",
    "validatingwebhookconfigurations",
)
_NAMESPACES: resources.StorageKey = ("", "namespaces")
_DEFAULT_TIMEOUT = 10

ServiceResolver = collections.abc.Callable[[str, str, int], str | None]
"""``(namespace, name, port) -> "https://host:port"`` for a webhook Service, or None."""


class _CallFailed(Exception):
    """The webhook could not be asked, or its answer cannot be used."""


def _selects(
    selector: objects.LabelSelector | None, labels: typing.Mapping[str, str] | None
) -> bool:
    if not isinstance(selector, dict) or not selector:
        return True
    return selectors.matches_label_selector_object(selector, labels)


def _applies(
    webhook: admissionregistration.Webhook, *, resource: resources.Resource, operation: str
) -> bool:
    for rule in webhook.get("rules") or ():
        if not isinstance(rule, dict):
            continue
        operations = rule.get("operations") or ()
        groups = rule.get("apiGroups") or ()
        versions = rule.get("apiVersions") or ()
        plurals = rule.get("resources") or ()
        scope = rule.get("scope") or "*"
        if (
            (operation in operations or "*" in operations)
            and (resource.group in groups or "*" in groups)
            and (resource.version in versions or "*" in versions)
            and (resource.plural in plurals or "*" in plurals or "*/*" in plurals)
            and (scope == "*" or (scope == "Namespaced") == resource.namespaced)
        ):
            return True
    return False


class MutatingWebhooks:
    """Calls the registered mutating webhooks for creates; see the module docstring."""

    configurations: resources.StorageKey = CONFIGURATIONS
    """Where the configurations this kind of webhook reads are stored."""
    mutating = True
    """Whether an allowed answer's patch is applied."""

    def __init__(self, api: rest.Api) -> None:
        self.api = api
        self.resolve_service: ServiceResolver = lambda namespace, name, port: None
        """Where a ``clientConfig.service`` listens (the emulator has no cluster network)."""
        self.calls = 0
        """Webhook calls made (answered or not)."""

    async def mutate(
        self,
        resource: resources.Resource,
        body: typing.Any,
        *,
        namespace: str | None,
        operation: str = "CREATE",
        dry_run: bool = False,
    ) -> typing.Any:
        """``body`` after every applicable webhook; raises ``StatusError`` when refused."""
        configurations = typing.cast(
            list[admissionregistration.WebhookConfiguration],
            self.api.storage.list(self.configurations),
        )
        if not configurations or not isinstance(body, dict):
            return body
        # A body not yet validated: only a map is known, so its metadata is checked as read.
        obj = typing.cast(objects.KubeObject, body)
        for configuration in sorted(configurations, key=lambda c: c["metadata"]["name"]):
            for webhook in configuration.get("webhooks") or ():
                if isinstance(webhook, dict) and self._selected(
                    webhook, resource=resource, obj=obj, namespace=namespace, operation=operation
                ):
                    obj = await self._call(
                        webhook,
                        resource=resource,
                        obj=obj,
                        namespace=namespace,
                        operation=operation,
                        dry_run=dry_run,
                    )
        return obj

    def _selected(
        self,
        webhook: admissionregistration.Webhook,
        *,
        resource: resources.Resource,
        obj: objects.KubeObject,
        namespace: str | None,
        operation: str,
    ) -> bool:
        if not _applies(webhook, resource=resource, operation=operation):
            return False
        meta = obj.get("metadata")
        labels = meta.get("labels") if isinstance(meta, dict) else None
        if not _selects(webhook.get("objectSelector"), labels if isinstance(labels, dict) else {}):
            return False
        if resource.namespaced and namespace:
            found = self.api.storage.get(_NAMESPACES, "", namespace)
            ns_labels = (found or {}).get("metadata", {}).get("labels") or {}
            return _selects(webhook.get("namespaceSelector"), ns_labels)
        return True

    async def _call(
        self,
        webhook: admissionregistration.Webhook,
        *,
        resource: resources.Resource,
        obj: objects.KubeObject,
        namespace: str | None,
        operation: str,
        dry_run: bool,
    ) -> objects.KubeObject:
        name = str(webhook.get("name") or "")
        policy = str(webhook.get("failurePolicy") or "Fail")
        request_uid = str(uuid.uuid4())
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        # The request names what was asked for and what is served: the same here.
        kind = admission.GroupVersionKind(
            group=resource.group, version=resource.version, kind=resource.kind
        )
        gvr = admission.GroupVersionResource(
            group=resource.group, version=resource.version, resource=resource.plural
        )
        review: admission.AdmissionReview = {
            "apiVersion": admission.API_VERSION,
            "kind": "AdmissionReview",
            "request": {
                "uid": request_uid,
                "kind": kind,
                "resource": gvr,
                "requestKind": kind,
                "requestResource": gvr,
                "name": str((meta or {}).get("name") or ""),
                "namespace": namespace or "",
                "operation": operation,
                "userInfo": {"username": "berth-emulator", "groups": ["system:authenticated"]},
                "object": obj,
                "oldObject": None,
                "dryRun": dry_run,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
            },
        }
        self.calls += 1
        try:
            url, hostname, context = self._endpoint(webhook)
            timeout = int(webhook.get("timeoutSeconds") or _DEFAULT_TIMEOUT)
            target = f"{url}{'&' if '?' in url else '?'}timeout={timeout}s"
            answer = await self._post(
                target, review, hostname=hostname, context=context, timeout=timeout
            )
            return self._apply(answer, obj=obj, name=name, request_uid=request_uid)
        except _CallFailed as exc:
            if policy == "Ignore":
                return obj
            raise errors.internal(f'failed calling webhook "{name}": {exc}') from None

    def _endpoint(
        self, webhook: admissionregistration.Webhook
    ) -> tuple[str, str | None, ssl.SSLContext]:
        config = webhook.get("clientConfig") or {}
        if not isinstance(config, dict):
            raise _CallFailed("clientConfig is not an object")
        context = ssl.create_default_context()
        bundle = config.get("caBundle")
        if bundle:
            try:
                context.load_verify_locations(cadata=base64.b64decode(bundle).decode())
            except (binascii.Error, ValueError, ssl.SSLError) as exc:
                raise _CallFailed(f"invalid caBundle: {exc}") from None
        if config.get("url"):
            return str(config["url"]), None, context
        service = config.get("service")
        if not isinstance(service, dict) or not service.get("name"):
            raise _CallFailed("clientConfig has neither url nor service")
        ns, svc = str(service.get("namespace") or "default"), str(service["name"])
        port = int(service.get("port") or 443)
        path = str(service.get("path") or "/")
        shown = f"https://{svc}.{ns}.svc:{port}{path}"
        base = self.resolve_service(ns, svc, port)
        if base is None:
            raise _CallFailed(
                f'failed to call webhook: Post "{shown}": '
                f'no endpoints available for service "{svc}"'
            )
        # The certificate names the Service's DNS name, whatever address it is reached at.
        return base.rstrip("/") + path, f"{svc}.{ns}.svc", context

    async def _post(
        self,
        url: str,
        review: admission.AdmissionReview,
        *,
        hostname: str | None,
        context: ssl.SSLContext,
        timeout: int,
    ) -> typing.Any:
        shown = url.split("?", 1)[0]
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
                session.post(
                    url,
                    data=json.dumps(review).encode(),
                    headers={"Content-Type": "application/json", "Accept": "application/json"},
                    ssl=context,
                    server_hostname=hostname,
                ) as response,
            ):
                raw = await response.read()
                status = response.status
        except TimeoutError:
            raise _CallFailed(
                f'failed to call webhook: Post "{shown}": context deadline exceeded'
            ) from None
        except aiohttp.ClientConnectorError as exc:
            code = exc.os_error.errno if exc.os_error is not None else None
            why = os.strerror(code) if code else str(exc)
            raise _CallFailed(
                f'failed to call webhook: Post "{shown}": dial tcp {exc.host}:{exc.port}: '
                f"connect: {str(why).lower()}"
            ) from None
        except (aiohttp.ClientError, OSError, ssl.SSLError) as exc:
            raise _CallFailed(f'failed to call webhook: Post "{shown}": {exc}') from None
        if status != 200:
            text = raw.decode("utf-8", "replace").strip()[:200]
            raise _CallFailed(
                f"failed to call webhook: the server responded with the status code {status} "
                f"but did not return a valid AdmissionReview: {text}"
            )
        try:
            return json.loads(raw)
        except ValueError:
            raise _CallFailed("received invalid webhook response: not JSON") from None

    def _apply(
        self, answer: typing.Any, *, obj: objects.KubeObject, name: str, request_uid: str
    ) -> objects.KubeObject:
        # ``answer`` is JSON from the webhook's server: every field is checked where it is read.
        response = answer.get("response") if isinstance(answer, dict) else None
        if not isinstance(response, dict):
            raise _CallFailed("received invalid webhook response: no response field")
        if response.get("uid") != request_uid:
            raise _CallFailed(f"expected response.uid={request_uid!r}, got {response.get('uid')!r}")
        if not response.get("allowed"):
            found = response.get("status")
            result: objects.JSONObject = found if isinstance(found, dict) else {}
            found_code = result.get("code")
            code = found_code if type(found_code) is int and found_code else 403
            message = str(result.get("message") or "")
            raise errors.StatusError(
                f'admission webhook "{name}" denied the request'
                + (f": {message}" if message else " without explanation"),
                code=code,
                reason=str(result.get("reason") or "Forbidden"),
            )
        patch = response.get("patch")
        if not patch or not self.mutating:
            return obj
        if response.get("patchType") != "JSONPatch":
            raise _CallFailed(f"unsupported patchType {response.get('patchType')!r}")
        try:
            operations = json.loads(base64.b64decode(patch))
            patched = patches.apply_json_patch(obj, operations)
        except (binascii.Error, ValueError) as exc:
            raise _CallFailed(f"the patch does not apply: {exc}") from None
        if not isinstance(patched, dict):
            raise _CallFailed("the patch did not produce an object")
        return typing.cast(objects.KubeObject, patched)


class ValidatingWebhooks(MutatingWebhooks):
    """Calls the registered validating webhooks for creates: refusals only, no patches."""

    configurations = VALIDATING_CONFIGURATIONS
    mutating = False

    async def validate(
        self,
        resource: resources.Resource,
        body: typing.Any,
        *,
        namespace: str | None,
        dry_run: bool = False,
    ) -> None:
        """Raise ``StatusError`` when a validating webhook refuses ``body``."""
        await self.mutate(resource, body, namespace=namespace, dry_run=dry_run)
