"""Binding a pod: ``POST pods/{name}/binding``, what its answer means, and the backoff.

kube-scheduler's Bind, for the binder (:class:`~berth.kube.binder.decisions.ApiSink`), which
assumes the pod on its node in the cache first (the next cycle already counts it there) and
calls :meth:`Bindings.bind` with the pod's UID as precondition:

- On success the pod gets a ``Scheduled`` Event. A 409 saying the pod is already on *this* node
  is a success (an earlier attempt landed although its answer was lost).
- A 404, a UID mismatch or a pod being deleted means the pod is gone: forget it, no retry.
- A 409 naming another node means somebody else bound it: the cache holds the pod on *that*
  node (the truth the watch will bring), so that no cycle tries it again meanwhile — a 409 is
  never a retry loop — and that node's usage counts it.
- An answer that may have been lost (a 5xx, a timeout, a broken connection) is reconciled
  first: the pod is read and, if bound, the binding is settled from that (success, or bound
  elsewhere) with no second request. Otherwise a timeout is retried (keeping the assumption) a
  few times, then given up like any other failure: the cache forgets the pod and it sits out a
  backoff (1 s doubling to 10 s, as kube-scheduler) before the scheduler may try it again,
  possibly elsewhere (:meth:`Bindings.holding`); after :data:`FAILURES_BEFORE_REASON` failures
  in a row a ``FailedBinding`` Event says why.

The API server refuses a second binding of a bound pod, and a pod is only bound from a
``BindPod`` — so a pod is never bound twice.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import dataclasses
import logging
import re
import typing

import kubernetes_asyncio.client

from berth.kube.binder import failure_log
from berth.kube.transport import errors, events, pod_edits, rest
from berth.scheduler.framework import decisions
from berth.scheduler.snapshot import cache as cluster_cache
from berth.util import clocks, wakeups

__all__ = ["FAILURES_BEFORE_REASON", "BindOutcome", "BindingObserver", "Bindings"]

logger = logging.getLogger(__name__)


class BindingObserver(typing.Protocol):
    """Where binding latencies go (the operator's metrics)."""

    def observe_binding(self, seconds: float, *, failure: str | None = None) -> None: ...

    def observe_e2e(self, seconds: float) -> None: ...


FAILURES_BEFORE_REASON = 5
"""Consecutive failed bindings of one pod after which a ``FailedBinding`` Event says why (the
backoff keeps retrying, capped at its maximum)."""
_ASSIGNED = re.compile(r'already assigned to node "([^"]+)"')


class BindOutcome(typing.NamedTuple):
    """How one binding ended (for logs, tests and the bench)."""

    key: str
    node: str
    bound: bool
    failure: str | None  # conflict, not_found, gone, timeout, error, victims, claims,
    # resourceclaims, fenced


@dataclasses.dataclass
class _Backoff:
    attempts: int
    until: float


class Bindings:
    """Sends bindings and keeps the failed ones' backoffs; see the module docstring.

    ``gone`` says whether a pod was deleted since its binding was queued (then it is not sent).
    """

    def __init__(
        self,
        api: kubernetes_asyncio.client.ApiClient,
        *,
        cache: cluster_cache.ClusterCache,
        clock: clocks.Clock,
        gone: collections.abc.Callable[[str], bool],
        recorder: events.EventRecorder | None = None,
        observer: BindingObserver | None = None,
        bind_timeout: float = 10.0,
        retries_on_timeout: int = 2,
        backoff: tuple[float, float] = (1.0, 10.0),
    ) -> None:
        self._api = api
        self._cache = cache
        self._clock = clock
        self._gone = gone
        self._recorder = recorder
        self._observer = observer
        self._bind_timeout = bind_timeout
        self._retries = retries_on_timeout
        self._backoff = backoff
        self._backoffs: dict[str, _Backoff] = {}
        self._failures = failure_log.FailureLog(logger)
        self.bound = 0
        """Pods bound (the API server confirmed)."""
        self.failures = 0

    def holding(self, now: float) -> collections.abc.Set[str]:
        """Pods whose last binding failed and whose backoff has not ended at ``now``."""
        return {key for key, entry in self._backoffs.items() if entry.until > now}

    def forget(self, key: str) -> None:
        """The pod left the cluster: drop its backoff."""
        self._backoffs.pop(key, None)

    async def bind(
        self,
        decision: decisions.BindPod,
        *,
        created: float,
        ref: events.ObjectRef | None = None,
        annotations: collections.abc.Mapping[str, str] | None = None,
    ) -> BindOutcome:
        """Bind the pod assumed on ``decision.node``; how it ended."""
        key = decision.key
        loop = asyncio.get_running_loop()
        body = pod_edits.binding(key, uid=decision.uid, node=decision.node, annotations=annotations)
        path = pod_edits.path(key) + "/binding"
        for attempt in range(1 + self._retries):
            if self._gone(key):
                self._cache.forget_pod(key)
                return BindOutcome(key, decision.node, False, "gone")
            started = loop.time()
            try:
                await rest.request(
                    self._api, method="POST", path=path, body=body, timeout=self._bind_timeout
                )
            except errors.TransportError as exc:
                self._observe(loop.time() - started, failure="timeout")
                landed = await self._landed(decision, created=created, ref=ref)
                if landed is not None:
                    return landed
                if attempt < self._retries:
                    # It may have landed: ask again for the same node (a 409 naming this node
                    # then confirms it); the cache keeps the pod where it was assumed.
                    await wakeups.sleep_or_stop(self._backoff[0] / 4 * (attempt + 1))
                    continue
                return self.failed(decision, failure="timeout", detail=str(exc))
            except errors.APIError as exc:
                seconds = loop.time() - started
                if exc.status >= 500:
                    # The answer may be lost, not the binding: read the pod before deciding.
                    landed = await self._landed(decision, created=created, ref=ref)
                    if landed is not None:
                        self._observe(seconds, failure="error")
                        return landed
                return self._refused(decision, exc, seconds=seconds, created=created, ref=ref)
            except errors.NotLeader as exc:
                # Never sent: another replica may lead now. No retry, no backoff: whoever
                # leads places the pod from its own view.
                self._cache.forget_pod(key)
                self._failures.failed("bind-fenced", f"not binding pod {key}: {exc}")
                return BindOutcome(key, decision.node, False, "fenced")
            self._observe(loop.time() - started, failure=None)
            return self._succeeded(decision, created=created, ref=ref)
        raise AssertionError("unreachable: the last attempt returns")  # pragma: no cover

    def _refused(
        self,
        decision: decisions.BindPod,
        exc: errors.APIError,
        *,
        seconds: float,
        created: float,
        ref: events.ObjectRef | None,
    ) -> BindOutcome:
        key = decision.key
        message = str(exc.body.get("message") or exc)
        if isinstance(exc, errors.Conflict) and f'assigned to node "{decision.node}"' in message:
            self._observe(seconds, failure=None)
            return self._succeeded(decision, created=created, ref=ref)
        if isinstance(exc, errors.NotFound) or (
            isinstance(exc, errors.Conflict)
            and ("Precondition failed" in message or "being deleted" in message)
        ):
            self._observe(seconds, failure="not_found")
            self._cache.forget_pod(key)
            self._backoffs.pop(key, None)
            logger.info("pod %s is gone; not binding it", key)
            return BindOutcome(key, decision.node, False, "gone")
        if isinstance(exc, errors.Conflict) and "already assigned" in message:
            self._observe(seconds, failure="conflict")
            found = _ASSIGNED.search(message)
            return self._bound_elsewhere(decision, found.group(1) if found else None, message)
        failure = "conflict" if isinstance(exc, errors.Conflict) else "error"
        self._observe(seconds, failure=failure)
        return self.failed(decision, failure=failure, detail=str(exc))

    async def _landed(
        self, decision: decisions.BindPod, *, created: float, ref: events.ObjectRef | None
    ) -> BindOutcome | None:
        """After an answer that may have been lost: the outcome if the pod is bound already
        (here: success; elsewhere: conflict), None if it is not, or cannot be read."""
        try:
            pod = await rest.request(
                self._api, method="GET", path=pod_edits.path(decision.key), timeout=10.0
            )
        except errors.KubeError:
            return None
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if meta.get("uid") != decision.uid:
            return None
        node = spec.get("nodeName")
        if not node:
            return None
        if node == decision.node:
            logger.info("binding of pod %s landed although its answer was lost", decision.key)
            return self._succeeded(decision, created=created, ref=ref)
        return self._bound_elsewhere(decision, str(node), f"bound to {node}")

    def _bound_elsewhere(
        self, decision: decisions.BindPod, node: str | None, message: str
    ) -> BindOutcome:
        """The pod is bound, not where this binding wanted it: hold it where it is (the truth
        the watch will bring), so that no cycle tries it again meanwhile — a 409 is never a
        retry loop — and its node's usage counts it."""
        key = decision.key
        self._backoffs.pop(key, None)
        if node is None:
            self._cache.forget_pod(key)
        else:
            with contextlib.suppress(KeyError):  # gone meanwhile
                self._cache.assume_pod(key, node=node)
        logger.warning("pod %s was bound by somebody else: %s", key, message)
        return BindOutcome(key, decision.node, False, "conflict")

    def _succeeded(
        self, decision: decisions.BindPod, *, created: float, ref: events.ObjectRef | None = None
    ) -> BindOutcome:
        self.bound += 1
        self._backoffs.pop(decision.key, None)
        if self._observer is not None and created > 0:
            self._observer.observe_e2e(max(0.0, self._clock.now() - created))
        self._event(
            ref or events.ObjectRef("Pod", decision.name, decision.namespace, decision.uid),
            type=events.NORMAL,
            reason="Scheduled",
            message=f"Successfully assigned {decision.key} to {decision.node}",
        )
        return BindOutcome(decision.key, decision.node, True, None)

    def failed(self, decision: decisions.BindPod, *, failure: str, detail: str) -> BindOutcome:
        """Give the binding up: the cache forgets the pod, which sits out its backoff."""
        key = decision.key
        self.failures += 1
        self._cache.forget_pod(key)
        entry = self._backoffs.get(key)
        attempts = entry.attempts + 1 if entry is not None else 1
        delay = min(self._backoff[0] * 2 ** (attempts - 1), self._backoff[1])
        self._backoffs[key] = _Backoff(attempts, self._clock.now() + delay)
        self._failures.failed(
            f"bind-{failure}",
            f"binding pod {key} to {decision.node} failed ({detail}); retrying in {delay:g}s",
        )
        if attempts == FAILURES_BEFORE_REASON:
            self._event(
                events.ObjectRef("Pod", decision.name, decision.namespace, decision.uid),
                type=events.WARNING,
                reason="FailedBinding",
                message=(
                    f"binding failed {attempts} times in a row (last: {detail}); still retrying "
                    f"every {self._backoff[1]:g}s at most"
                ),
            )
        return BindOutcome(key, decision.node, False, failure)

    def _observe(self, seconds: float, *, failure: str | None) -> None:
        if self._observer is not None:
            self._observer.observe_binding(seconds, failure=failure)

    def _event(self, ref: events.ObjectRef, *, type: str, reason: str, message: str) -> None:
        if self._recorder is not None:
            self._recorder.record(ref, type=type, reason=reason, message=message)
