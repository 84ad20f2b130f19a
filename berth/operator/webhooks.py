"""The mutating admission webhook of admission mode: Berth's pods get the gate at creation.

The API server sends every pod creation the chart's MutatingWebhookConfiguration selects here as
an ``AdmissionReview`` (``admission.k8s.io/v1``); the answer allows it, with a JSON patch adding
the scheduling gate ``scheduling.berth.io/admission`` when the pod is Berth's. Berth then admits
it (:mod:`berth.kube.admission`): pins it to the node it chose and removes the gate.

A pod is Berth's when it names a group (``scheduling.berth.io/pod-group``, or the interop keys
Berth reads) or a queue (``scheduling.berth.io/queue``), or when it is created in a namespace
labelled ``scheduling.berth.io/admission: enabled`` — the configuration's namespaceSelector
sends those to :data:`OPTED_IN_PATH`, and a pod there without group or queue is given the queue
``default``. Never gated: pods with neither group nor queue elsewhere (kube-scheduler places them
as usual), pods labelled ``scheduling.berth.io/admission: disabled`` outside opted-in
namespaces (in one, admission is required and the label is ignored), pods already bound
(``spec.nodeName``), pods that name a scheduler other than the default one (Berth's own binds
them directly; another scheduler's are not Berth's to hold), and pods that already carry the
gate (written in the template: the patch would duplicate it). The webhook refuses a pod only
for its queue (below): a request it cannot read is a 400 (the API server then applies the
configuration's ``failurePolicy``), anything else is allowed.

A pod naming a queue its namespace may not use (the Queue's ``namespaceSelector``) is refused
with a message saying so (:class:`~berth.kube.queue_access.QueueAccessLookup`, which reads the
Namespace and the Queue, cached for seconds); in scheduler mode the chart can register
:data:`QUEUE_ACCESS_PATH`, which only checks that.

Every replica serves it (the Service targets them all), over TLS from the certificate and key
the chart's Secret mounts (:class:`~berth.operator.settings.AdmissionSettings`). Apart from that
look-up it is pure request handling, with no state, so followers answer as well as the
leader.
"""

from __future__ import annotations

import base64
import collections.abc
import contextlib
import json
import logging
import ssl
import typing

import pydantic
import pydantic.alias_generators
from aiohttp import web

from berth.api import keys
from berth.kube import clients, pod_edits, queue_access
from berth.operator import settings

__all__ = [
    "OPTED_IN_PATH",
    "PATH",
    "QUEUE_ACCESS_PATH",
    "AdmissionReview",
    "WebhookServer",
    "build_app",
    "mutation",
    "respond",
    "serving",
]

logger = logging.getLogger(__name__)

PATH = "/admission/pods"
"""Pods selected by their labels (a group or a queue)."""
OPTED_IN_PATH = "/admission/pods/opted-in"
"""Pods of namespaces labelled ``scheduling.berth.io/admission: enabled``."""
QUEUE_ACCESS_PATH = "/admission/pods/queue-access"
"""Scheduler mode: pods are only checked for queue access, never gated."""

_REVIEW_VERSION = "admission.k8s.io/v1"
_DEFAULT_SCHEDULERS = frozenset({"", "default-scheduler"})
_MAX_BODY = 3 * 1024 * 1024  # the API server's own request limit


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(
        alias_generator=pydantic.alias_generators.to_camel, populate_by_name=True, extra="ignore"
    )


class GroupVersionKind(_Strict):
    group: str = ""
    version: str = ""
    kind: str = ""


class AdmissionRequest(_Strict):
    """The part of ``AdmissionReview.request`` the webhook reads."""

    uid: str = pydantic.Field(min_length=1)
    kind: GroupVersionKind
    namespace: str = ""
    operation: str
    object: dict[str, typing.Any] | None = None
    dry_run: bool = False


class AdmissionReview(_Strict):
    """An ``admission.k8s.io/v1`` AdmissionReview as the API server sends it."""

    api_version: typing.Literal["admission.k8s.io/v1"]
    kind: typing.Literal["AdmissionReview"]
    request: AdmissionRequest


def _escape(key: str) -> str:
    """A map key as a JSON-pointer segment (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def mutation(
    pod: collections.abc.Mapping[str, typing.Any], /, *, opted_in: bool
) -> list[dict[str, typing.Any]]:
    """The JSON patch that makes ``pod`` wait for Berth's admission; empty to leave it alone.

    ``opted_in`` says the pod's namespace is labelled for admission (see the module docstring).
    """
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    assert isinstance(meta, dict) and isinstance(spec, dict)  # for mypy: narrowed above
    raw_labels = meta.get("labels")
    labels: dict[str, typing.Any] = raw_labels if isinstance(raw_labels, dict) else {}
    if labels.get(keys.ADMISSION_LABEL) == "disabled" and not opted_in:
        # The label opts a pod out only where admission is optional: a namespace labelled
        # for admission requires it, and its tenants cannot write their way around that.
        return []
    if spec.get("nodeName"):
        return []
    if str(spec.get("schedulerName") or "") not in _DEFAULT_SCHEDULERS:
        return []
    belongs = pod_edits.belongs(pod)
    if not belongs and not opted_in:
        return []
    gates = spec.get("schedulingGates")
    gate_list = gates if isinstance(gates, list) else []
    if any(isinstance(g, dict) and g.get("name") == keys.ADMISSION_GATE for g in gate_list):
        return []
    ops: list[dict[str, typing.Any]] = []
    if not belongs:
        # An opted-in namespace's plain pod joins the default queue (a group of one there),
        # as Kueue defaults a managed namespace's pods to its default LocalQueue.
        if isinstance(raw_labels, dict):
            path = f"/metadata/labels/{_escape(keys.QUEUE_LABEL)}"
            ops.append({"op": "add", "path": path, "value": keys.DEFAULT_QUEUE})
        else:
            value = {keys.QUEUE_LABEL: keys.DEFAULT_QUEUE}
            ops.append({"op": "add", "path": "/metadata/labels", "value": value})
    gate = {"name": keys.ADMISSION_GATE}
    if isinstance(gates, list):
        ops.append({"op": "add", "path": "/spec/schedulingGates/-", "value": gate})
    else:
        ops.append({"op": "add", "path": "/spec/schedulingGates", "value": [gate]})
    return ops


def respond(
    review: AdmissionReview, /, *, opted_in: bool, refusal: str | None = None, gate: bool = True
) -> dict[str, typing.Any]:
    """The AdmissionReview answering ``review``: refused (403) with ``refusal`` when given,
    else allowed, with the gating patch unless ``gate`` is off (the queue-access check of
    scheduler mode)."""
    request = review.request
    if refusal is not None:
        status = {"code": 403, "reason": "Forbidden", "message": refusal}
        response = {"uid": request.uid, "allowed": False, "status": status}
        return {"apiVersion": _REVIEW_VERSION, "kind": "AdmissionReview", "response": response}
    response = {"uid": request.uid, "allowed": True}
    is_pod = request.kind.group == "" and request.kind.kind == "Pod"
    if gate and is_pod and request.operation == "CREATE" and request.object is not None:
        ops = mutation(request.object, opted_in=opted_in)
        if ops:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
    return {"apiVersion": _REVIEW_VERSION, "kind": "AdmissionReview", "response": response}


def _bad_request(message: str) -> web.Response:
    return web.Response(status=400, text=message + "\n", content_type="text/plain")


async def _refusal(
    review: AdmissionReview, lookup: queue_access.QueueAccessLookup | None
) -> str | None:
    request = review.request
    pod = request.object
    is_pod = request.kind.group == "" and request.kind.kind == "Pod"
    if lookup is None or not is_pod or request.operation != "CREATE" or pod is None:
        return None
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    namespace = request.namespace or str(meta.get("namespace") or "default")
    return await lookup.refusal(namespace=namespace, labels=labels or {})


def _handler(
    *, opted_in: bool, lookup: queue_access.QueueAccessLookup | None = None, gate: bool = True
) -> collections.abc.Callable[[web.Request], collections.abc.Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            return _bad_request(f"expected application/json, got {request.content_type!r}")
        raw = await request.read()
        try:
            review = AdmissionReview.model_validate_json(raw)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            logger.warning("malformed AdmissionReview from %s: %s", request.remote, problems)
            return _bad_request(f"malformed AdmissionReview: {problems}")
        refusal = await _refusal(review, lookup)
        if refusal is not None:
            logger.info("refusing pod in %s: %s", review.request.namespace, refusal)
        answer = respond(review, opted_in=opted_in, refusal=refusal, gate=gate)
        if "patch" in answer["response"]:
            logger.debug(
                "gating pod %s/%s",
                review.request.namespace,
                (review.request.object or {}).get("metadata", {}).get("name")
                or (review.request.object or {}).get("metadata", {}).get("generateName"),
            )
        return web.json_response(answer)

    return handle


def build_app(lookup: queue_access.QueueAccessLookup | None = None) -> web.Application:
    """The webhook's aiohttp application (the three paths, plus ``/healthz``); with
    ``lookup``, pods naming a queue their namespace may not use are refused."""
    app = web.Application(client_max_size=_MAX_BODY)
    app.router.add_post(PATH, _handler(opted_in=False, lookup=lookup))
    app.router.add_post(OPTED_IN_PATH, _handler(opted_in=True, lookup=lookup))
    app.router.add_post(QUEUE_ACCESS_PATH, _handler(opted_in=False, lookup=lookup, gate=False))

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/healthz", healthz)
    return app


class WebhookServer:
    """Serves :func:`build_app` over HTTPS; ``port`` is known once started."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        cert_file: str,
        key_file: str,
        lookup: queue_access.QueueAccessLookup | None = None,
    ) -> None:
        self._lookup = lookup
        self._host = host
        self._requested_port = port
        self._cert_file = cert_file
        self._key_file = key_file
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    async def start(self) -> None:
        """Listen; raises ``OSError``/``ssl.SSLError`` when the certificate cannot be loaded."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self._cert_file, self._key_file)
        runner = web.AppRunner(build_app(self._lookup), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._requested_port, ssl_context=context)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or ()
        self.port = int(sockets[0].getsockname()[1]) if sockets else self._requested_port
        logger.info("admission webhook listening on %s:%s (HTTPS)", self._host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@contextlib.asynccontextmanager
async def serving(
    config: settings.Settings, *, api: clients.AsyncApiClient | None = None
) -> collections.abc.AsyncIterator[WebhookServer | None]:
    """Serve the webhook for the process's lifetime when admission mode (or, in scheduler mode,
    the queue-access check) asks for it; with ``api``, queue access is checked.

    Yields the server, or ``None`` when neither asks or the webhook is turned off.
    """
    options = config.admission
    wanted = config.mode == settings.Mode.ADMISSION or options.queue_access
    if not wanted or not options.webhook:
        yield None
        return
    server = WebhookServer(
        host=options.webhook_host,
        port=options.webhook_port,
        cert_file=str(options.cert_file),
        key_file=str(options.key_file),
        lookup=queue_access.QueueAccessLookup(api) if api is not None else None,
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
