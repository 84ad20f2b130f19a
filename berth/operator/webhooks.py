"""The mutating admission webhook of admission mode: Berth's pods get the gate at creation.

The API server sends every pod creation the chart's MutatingWebhookConfiguration selects here as
an ``AdmissionReview`` (``admission.k8s.io/v1``); the answer allows it, with a JSON patch adding
the scheduling gate ``scheduling.berth.io/admission`` when the pod is Berth's. Berth then admits
it (:mod:`berth.kube.admission.admission`): pins it to the node it chose and removes the gate.

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
with a message saying so (:class:`~berth.kube.admission.queue_access.QueueAccessLookup`, which reads
the Namespace and the Queue, cached for seconds) — at creation, and on an update that changes its
queue label: a label added after creation must not reach a queue the pod could not have been
created in (the chart sends such updates, and only those, with a CEL ``matchCondition``; an
update is never gated). In scheduler mode the chart can register :data:`QUEUE_ACCESS_PATH`,
which only checks that.

Queues are validated here too (:data:`QUEUES_PATH`): a ``spec.parent`` that closes a cycle or a
guarantee the parent's limit cannot cover is refused, a missing parent is a warning
(:mod:`berth.scheduler.snapshot.queue_parents`; CEL sees one object and cannot check either).
A PodGroup naming a queue that does not exist is a warning (:data:`PODGROUPS_PATH`): the queue
may be created right after it, and the group waits, saying why, until then.

These are Kopf admission handlers (``kopf.on.mutate`` on pods, ``kopf.on.validate`` on Queues)
on Kopf's webhook server, in a Kopf operator of their own that holds no watching handler, so it
reconciles nothing, watches nothing and runs on every replica, not only the leader
(docs/architecture.md, "Admission: a second, always-on Kopf operator"), as tasks on the
operator's one event loop (:class:`~berth.operator.embedding.KopfOperator`): the handlers
read through the operator's API client directly. TLS comes from the certificate and key the
chart's Secret mounts (:class:`~berth.operator.settings.AdmissionSettings`). Apart from the
look-ups, handling is pure, with no state, so followers answer as well as the leader.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import logging
import socket
import typing

import kopf
import pydantic
import pydantic.alias_generators
from aiohttp import web

from berth.api import access_reviews, core, keys, manifests, objects, patches
from berth.controllers import registry as kopf_registry
from berth.kube.admission import queue_access
from berth.kube.transport import clients, credentials, discovery, errors, pod_edits, rest
from berth.operator import components, embedding, settings
from berth.scheduler.snapshot import queue_parents, queues
from berth.util import wakeups

__all__ = [
    "OPTED_IN_PATH",
    "PATH",
    "QUEUE_ACCESS_PATH",
    "PODGROUPS_PATH",
    "QUEUES_PATH",
    "AdmissionReview",
    "WebhookServer",
    "build_registry",
    "mutation",
    "queue_changed",
    "serving",
]

logger = logging.getLogger(__name__)

PATH = "/admission/pods"
"""Pods selected by their labels (a group or a queue)."""
OPTED_IN_PATH = "/admission/pods/opted-in"
"""Pods of namespaces labelled ``scheduling.berth.io/admission: enabled``."""
QUEUE_ACCESS_PATH = "/admission/pods/queue-access"
"""Scheduler mode: pods are only checked for queue access, never gated."""
QUEUES_PATH = "/validation/queues"
"""Queues: a parent that closes a cycle or cannot cover the guarantee is refused."""
PODGROUPS_PATH = "/validation/podgroups"
"""PodGroups: a queue that does not exist is a warning."""

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


class GroupVersionResource(_Strict):
    group: str = ""
    version: str = ""
    resource: str = ""


class AdmissionRequest(_Strict):
    """The part of ``AdmissionReview.request`` the webhook checks before Kopf reads it."""

    uid: str = pydantic.Field(min_length=1)
    kind: GroupVersionKind
    resource: GroupVersionResource
    namespace: str = ""
    operation: str
    # Untyped: any kind's object, which Kopf reads from the request as sent; only its presence
    # is checked here (objects.KubeObject's read-only keys are not pydantic's to validate).
    object: dict[str, typing.Any] | None = None
    old_object: dict[str, typing.Any] | None = None
    user_info: access_reviews.UserInfo | None = None  # Berth never reads it
    dry_run: bool = False


class AdmissionReview(_Strict):
    """An ``admission.k8s.io/v1`` AdmissionReview as the API server sends it."""

    api_version: typing.Literal["admission.k8s.io/v1"]
    kind: typing.Literal["AdmissionReview"]
    request: AdmissionRequest


def _escape(key: str) -> str:
    """A map key as a JSON-pointer segment (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def mutation(pod: core.Pod, /, *, opted_in: bool) -> list[patches.JsonPatchOperation]:
    """The JSON patch that makes ``pod`` wait for Berth's admission; empty to leave it alone.

    ``opted_in`` says the pod's namespace is labelled for admission (see the module docstring).
    """
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    assert isinstance(meta, dict) and isinstance(spec, dict)  # for mypy: narrowed above
    raw_labels = meta.get("labels")
    labels: dict[str, str] = raw_labels if isinstance(raw_labels, dict) else {}
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
    ops: list[patches.JsonPatchOperation] = []
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


def _apply(
    body: dict[str, typing.Any],  # Untyped: Kopf's patch, any JSON, walked by the ops' paths
    ops: collections.abc.Sequence[patches.JsonPatchOperation],
) -> None:
    """Apply :func:`mutation`'s ``add`` operations to ``body`` in place (Kopf diffs the result
    into the JSON patch it answers with)."""
    for op in ops:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        target: typing.Any = body
        for part in parents:
            target = target.setdefault(part, {})
        if last == "-":
            target.append(op["value"])
        else:
            target[last] = op["value"]


def _register_pods(
    registry: kopf.OperatorRegistry,
    *,
    path: str,
    opted_in: bool,
    gate: bool,
    lookup: queue_access.QueueAccessLookup | None,
) -> None:
    @kopf.on.mutate(
        "", "v1", "pods", id=path.lstrip("/"), operations=["CREATE", "UPDATE"], registry=registry
    )
    async def gate_pod(body: kopf.Body, patch: kopf.Patch, **kwargs: typing.Any) -> None:
        # ``operations`` only shapes a configuration Kopf would write; requests are not
        # filtered by it (the chart sends creates, and updates that change the queue label).
        operation = kwargs.get("operation")
        if operation not in ("CREATE", "UPDATE"):
            return
        pod = typing.cast(core.Pod, dict(body))  # the pods webhook's object is a pod
        meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
        assert isinstance(meta, dict)  # for mypy: narrowed above
        namespace = str(meta.get("namespace") or "default")
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        if operation == "UPDATE" and not queue_changed(kwargs.get("old"), labels or {}):
            return  # an update is only checked for the queue it names, and never gated
        if lookup is not None:
            refusal = await lookup.refusal(namespace=namespace, labels=labels or {})
            if refusal is not None:
                logger.info("refusing pod in %s: %s", namespace, refusal)
                raise kopf.AdmissionError(refusal, code=403)
        if not gate or operation != "CREATE":
            return
        ops = mutation(pod, opted_in=opted_in)
        if ops:
            logger.debug(
                "gating pod %s/%s", namespace, meta.get("name") or meta.get("generateName")
            )
            # Untyped: Kopf hands its patch over as any JSON (see _apply).
            patch.fns.append(lambda raw: _apply(typing.cast(dict[str, typing.Any], raw), ops))


def queue_changed(old: core.Pod | None, labels: collections.abc.Mapping[str, str]) -> bool:
    """Whether an update gives the pod (``old`` before it) another queue label: the label
    added after creation is checked as it would have been at creation."""
    meta = old.get("metadata") if old is not None else None
    before = meta.get("labels") if isinstance(meta, collections.abc.Mapping) else None
    was = before.get(keys.QUEUE_LABEL) if isinstance(before, collections.abc.Mapping) else None
    return labels.get(keys.QUEUE_LABEL) != was


async def _other_queues(
    api: clients.AsyncApiClient, name: str
) -> dict[str, queues.QueueInfo] | None:
    """Every Queue but ``name``, by name; ``None`` when they cannot be read."""
    try:
        listed = await rest.request(
            api, method="GET", path=f"/apis/{keys.API_VERSION}/queues", timeout=2.0
        )
    except errors.KubeError as exc:
        logger.warning("cannot read the queues to check queue %s: %s", name, exc)
        return None
    found = (queues.queue_info(item) for item in listed.get("items") or ())
    return {str(q.name): q for q in found if str(q.name) != name}


def _register_queues(registry: kopf.OperatorRegistry, *, api: clients.AsyncApiClient) -> None:
    @kopf.on.validate(
        keys.GROUP,
        "queues",
        id=QUEUES_PATH.lstrip("/"),
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )
    async def validate_queue(body: kopf.Body, warnings: list[str], **kwargs: typing.Any) -> None:
        if kwargs.get("operation") not in ("CREATE", "UPDATE"):
            return
        queue = queues.queue_info(dict(body))
        others = await _other_queues(api, str(queue.name))
        if others is None:
            # The scheduler keeps a bad tree out anyway; an unreadable API refuses nothing.
            warnings.append(f"the parent of queue {queue.name} could not be checked")
            return
        result = queue_parents.check(queue, others=others)
        warnings.extend(result.warnings)
        if result.refusal is not None:
            raise kopf.AdmissionError(result.refusal, code=422)


def missing_queue(queue: str) -> str:
    """The warning for a PodGroup naming a queue that does not exist."""
    return f"spec.queue: queue {queue} does not exist; the group waits until it is created"


async def _queue_exists(api: clients.AsyncApiClient, name: str) -> bool | None:
    """Whether Queue ``name`` exists; ``None`` when it cannot be read."""
    try:
        await rest.request(
            api, method="GET", path=f"/apis/{keys.API_VERSION}/queues/{name}", timeout=2.0
        )
    except errors.NotFound:
        return False
    except errors.KubeError as exc:
        logger.warning("cannot read queue %s to check a PodGroup: %s", name, exc)
        return None
    return True


def _register_podgroups(registry: kopf.OperatorRegistry, *, api: clients.AsyncApiClient) -> None:
    @kopf.on.validate(
        keys.GROUP,
        "podgroups",
        id=PODGROUPS_PATH.lstrip("/"),
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )
    async def validate_podgroup(spec: kopf.Spec, warnings: list[str], **kwargs: typing.Any) -> None:
        if kwargs.get("operation") not in ("CREATE", "UPDATE"):
            return
        queue = str(spec.get("queue") or keys.DEFAULT_QUEUE)
        # The default queue exists implicitly (the scheduler's), created or not.
        if queue != keys.DEFAULT_QUEUE and await _queue_exists(api, queue) is False:
            warnings.append(missing_queue(queue))


LoginFn = collections.abc.Callable[[], collections.abc.Awaitable[credentials.Credentials]]


def build_registry(
    *,
    login: LoginFn,
    api: clients.AsyncApiClient,
    lookup: queue_access.QueueAccessLookup | None,
) -> kopf.OperatorRegistry:
    """A registry of admission handlers only (and the login): no handler watches anything, so
    the Kopf operator running it serves webhooks and reconciles nothing."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(id="berth-admission-login", registry=registry)
    async def admission_login(**_: typing.Any) -> kopf.AiohttpSession:
        return kopf_registry.connection(await login())

    for path, opted_in, gate in (
        (PATH, False, True),
        (OPTED_IN_PATH, True, True),
        (QUEUE_ACCESS_PATH, False, False),
    ):
        _register_pods(registry, path=path, opted_in=opted_in, gate=gate, lookup=lookup)
    _register_queues(registry, api=api)
    _register_podgroups(registry, api=api)
    return registry


def _bad_request(message: str) -> web.Response:
    return web.Response(status=400, text=message + "\n", content_type="text/plain")


def _allowed(review: AdmissionReview) -> web.Response:
    response = {"uid": review.request.uid, "allowed": True}
    return web.json_response(
        {"apiVersion": _REVIEW_VERSION, "kind": "AdmissionReview", "response": response}
    )


class _KopfServer(kopf.WebhookServer):
    """Kopf's webhook server (TLS from the mounted files, re-read when they change), strict
    about what it reads and told when it listens.

    Before Kopf sees a request it is checked as :class:`AdmissionReview`: anything else is a 400
    saying what is wrong. A review of no object, or of a resource Berth has no handler for, is
    allowed untouched (there is nothing to gate). A refusal carries ``reason: Forbidden`` as
    Kubernetes' own denials do.
    """

    def __init__(self, *, listening: asyncio.Event, **options: typing.Any) -> None:
        super().__init__(**options)
        self._listening = listening

    async def __call__(
        self, fn: kopf.WebhookFn
    ) -> collections.abc.AsyncIterator[kopf.WebhookClientConfig]:
        async for config in super().__call__(fn):
            self._listening.set()
            yield config

    @staticmethod
    async def _serve(fn: kopf.WebhookFn, request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            return _bad_request(f"expected application/json, got {request.content_type!r}")
        raw = await request.read()
        try:
            review = AdmissionReview.model_validate_json(raw)
        except pydantic.ValidationError as exc:
            problems = manifests.describe(exc, whole="body")
            logger.warning("malformed AdmissionReview from %s: %s", request.remote, problems)
            return _bad_request(f"malformed AdmissionReview: {problems}")
        if review.request.object is None and review.request.old_object is None:
            return _allowed(review)

        async def berth_fn(
            request: typing.Any,
            *,
            webhook: str | None = None,
            headers: dict[str, str] | None = None,
            sslpeer: dict[str, typing.Any] | None = None,  # Untyped: Kopf's WebhookFn signature
        ) -> typing.Any:
            payload = request["request"]
            # An API server always says who asks; Kopf insists on it, Berth never reads it.
            payload.setdefault("userInfo", {})
            obj = payload.get("object")
            if isinstance(obj, dict) and review.request.namespace:
                meta = obj.setdefault("metadata", {})
                if isinstance(meta, dict):
                    meta.setdefault("namespace", review.request.namespace)
            answer = await fn(request, webhook=webhook, headers=headers, sslpeer=sslpeer)
            status = answer["response"].get("status")
            if status is not None and status.get("code") == 403:
                typing.cast(objects.Status, status)["reason"] = "Forbidden"
            return answer

        try:
            return await kopf.WebhookServer._serve(berth_fn, request)
        except web.HTTPNotFound:
            return _allowed(review)


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class WebhookServer:
    """Berth's admission handlers on Kopf's webhook server, in a Kopf operator of their own.

    That operator's registry holds admission handlers only (:func:`build_registry`): it watches
    no resource, so it runs on every replica beside the leader-only Kopf that reconciles.
    ``port`` is known once constructed (0 picks a free one); :meth:`start` returns once the
    server listens.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        cert_file: str,
        key_file: str,
        api: clients.AsyncApiClient,
        lookup: queue_access.QueueAccessLookup | None = None,
        on_exit: components.ExitCallback | None = None,
        start_timeout: float = 30.0,
    ) -> None:
        self.port = port or _free_port(host)
        self._start_timeout = start_timeout
        self._listening = asyncio.Event()
        self._server = _KopfServer(
            listening=self._listening,
            addr=host,
            port=self.port,
            host=host,
            certfile=cert_file,
            pkeyfile=key_file,
        )
        self._api = api
        self._lookup = lookup
        self._crds_served = False
        self._component = embedding.KopfOperator(
            name="admission webhooks",
            registry=self._registry,
            settings=self._settings,
            start_timeout=start_timeout,
            on_exit=on_exit,
        )

    def _registry(self) -> kopf.OperatorRegistry:
        async def login() -> credentials.Credentials:
            return await credentials.credentials_of(self._api)

        return build_registry(login=login, api=self._api, lookup=self._lookup)

    def _settings(self) -> kopf.OperatorSettings:
        options = kopf.OperatorSettings()
        options.peering.standalone = True
        # Kopf looks the resources up when it starts. With Berth's kinds served by then (the
        # chart installs the CRDs first), it watches nothing at all: each kind is watched once
        # per replica, and on the leader CRDs are watched by the leader's Kopf. Without them,
        # it watches CRDs (list/watch granted for the interop kinds already), so that Queues
        # and PodGroups are validated as soon as their CRDs are installed.
        options.scanning.disabled = self._crds_served
        options.posting.enabled = False
        options.admission.server = self._server
        options.admission.managed = None  # the chart owns the webhook configurations
        options.networking.request_timeout = 30
        return options

    async def start(self) -> None:
        """Start Kopf and wait until the server listens; raises when it does not in time."""
        found = await discovery.served(
            self._api, api_version=keys.API_VERSION, plurals=["queues", "podgroups"]
        )
        self._crds_served = found.all
        await self._component.start()
        if not await wakeups.first_set(self._listening, timeout=self._start_timeout):
            await self._component.stop()
            raise TimeoutError(
                f"the admission webhook did not listen on port {self.port} within "
                f"{self._start_timeout}s"
            )
        logger.info("admission webhook listening on %s (HTTPS, Kopf)", self.port)

    async def stop(self) -> None:
        await self._component.stop()


@contextlib.asynccontextmanager
async def serving(
    config: settings.Settings,
    *,
    api: clients.AsyncApiClient,
    on_exit: components.ExitCallback | None = None,
) -> collections.abc.AsyncIterator[WebhookServer | None]:
    """Serve the webhooks for the process's lifetime when admission mode (or, in scheduler
    mode, the queue-access check) asks for it.

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
        api=api,
        lookup=queue_access.QueueAccessLookup(api),
        on_exit=on_exit,
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
