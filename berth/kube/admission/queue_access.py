"""Whether a new pod may use the queue it names: the admission webhook's look-up.

:meth:`QueueAccessLookup.refusal` reads the pod's Namespace (its labels, and the default queue
its label ``scheduling.berth.io/default-queue`` names) and the Queue the pod ends up in — its
queue label, where ``default`` (or no label) means the namespace's default queue — and says why
the pod must be refused when that queue's ``namespaceSelector`` does not admit the namespace.
Objects read are kept ``ttl`` seconds, so a burst of a Job's pods costs two reads. A queue that
does not exist is not refused here (it may be created right after the pods; the pods wait,
saying so); neither is anything when the API cannot be read — the scheduler keeps the rule for
pods that got in (:mod:`berth.scheduler.plugins.queue_access`).
"""

from __future__ import annotations

import collections.abc
import logging
import typing

import kubernetes_asyncio.client

from berth.api import core, custom_objects, keys, objects
from berth.kube.transport import errors, rest
from berth.scheduler.snapshot import queues
from berth.util import clocks

__all__ = ["QueueAccessLookup"]

logger = logging.getLogger(__name__)

_MISSING: objects.KubeObject = {}


class QueueAccessLookup:
    """Cached reads of Namespaces and Queues for the webhook (module docstring)."""

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        clock: clocks.Clock | None = None,
        ttl: float = 5.0,
    ) -> None:
        self._api = api
        self._clock = clock if clock is not None else clocks.SystemClock()
        self._ttl = ttl
        self._cache: dict[str, tuple[float, objects.KubeObject]] = {}

    async def _get(self, path: str) -> objects.KubeObject:
        now = self._clock.now()
        found = self._cache.get(path)
        if found is not None and now - found[0] < self._ttl:
            return found[1]
        try:
            read = await rest.request(self._api, method="GET", path=path, timeout=2.0)
            obj = typing.cast(objects.KubeObject, read)  # a Namespace or a Queue
        except errors.NotFound:
            obj = _MISSING
        self._cache[path] = (now, obj)
        return obj

    async def refusal(
        self, *, namespace: str, labels: collections.abc.Mapping[str, str]
    ) -> str | None:
        """Why a pod of ``namespace`` with ``labels`` may not be created, or ``None``."""
        try:
            ns = typing.cast(core.Namespace, await self._get(f"/api/v1/namespaces/{namespace}"))
            ns_labels = (ns.get("metadata") or {}).get("labels") or {}
            named = str(labels.get(keys.QUEUE_LABEL) or "")
            own = str(ns_labels.get(keys.NAMESPACE_QUEUE_LABEL) or "")
            queue = own if own and named in ("", keys.DEFAULT_QUEUE) else named
            if not queue:
                return None
            obj = typing.cast(
                custom_objects.Queue, await self._get(f"/apis/{keys.API_VERSION}/queues/{queue}")
            )
        except errors.KubeError as exc:
            logger.warning("cannot check queue access for a pod of %s: %s", namespace, exc)
            return None
        selector = queues.namespace_selector((obj.get("spec") or {}).get("namespaceSelector"))
        if selector is None or selector.admits({str(k): str(v) for k, v in ns_labels.items()}):
            return None
        return (
            f"queue {queue} does not admit pods of namespace {namespace}: its namespaceSelector "
            f"({selector}) does not match the namespace's labels; use a queue that admits it "
            f"or ask its owner to"
        )
