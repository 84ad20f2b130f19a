"""Fencing: no write acts for a leader whose Lease may already belong to another replica.

Leader election (:mod:`berth.operator.leadership`) guarantees that the leader *notices* a lost
Lease within the renew deadline — but only while its event loop runs. A paused process (SIGSTOP,
a stalled VM, a long GC or swap) resumes with binder workers, status writers and the scheduling
loop all ready to send what they prepared before the pause; whichever task runs first wins, and
the elector is not necessarily first. A follower that took over meanwhile has filled the nodes,
so every such write is a second scheduler acting on stale data (pods bound onto full nodes end
``Failed: OutOfcpu``).

A :class:`Fence` closes that gap at the last possible moment: every mutating request on a fenced
API client is checked **when it is about to be written to the socket** — after it has waited for
a pooled connection, not when it was queued — and refused with
:class:`~berth.kube.transport.errors.NotLeader` unless the last successful Lease renewal, measured
on the monotonic clock from when that renewal was *sent*, is younger than the renew deadline. The
monotonic clock keeps running while the process is stopped, so the first thing a resumed leader
can do is find out that it is stale. Followers take over only ``leaseDurationSeconds`` after the
last change *they* saw, later than the renewal was sent, and ``renew_deadline < lease_duration``
leaves the gap for a checked request to reach the API server.

:func:`install` hooks the check into the client's aiohttp session: at request start, when
the connection is acquired (reused or created), and when the body task is about to write
headers and body (aiohttp writes them from a task of its own, a loop iteration later on
Python 3.11: a pause can land in between). Reads (GET, HEAD, OPTIONS; watches) are never
fenced. The Lease calls themselves run inside :func:`unfenced`: a candidate must write the
Lease to become leader. Requests that were
already written before a pause reached the server before the follower could take over.

What no check in this process can close — a pause landing between the last check and the
bytes reaching the socket — the API server closes: the chart's leader fence refuses writes of
Berth's ServiceAccount from any pod but the Lease holder (``helm/berth/templates/
leader-fence.yaml``, docs/chaos.md).
"""

from __future__ import annotations

import collections.abc
import contextlib
import contextvars
import logging
import time
import types
import typing

import aiohttp
import aiohttp.helpers

from berth.kube.transport import errors

__all__ = ["Fence", "install", "unfenced"]

logger = logging.getLogger(__name__)

_READS = frozenset({"GET", "HEAD", "OPTIONS"})
_UNFENCED: contextvars.ContextVar[bool] = contextvars.ContextVar("berth_unfenced", default=False)


class Fence:
    """Whether this replica may still write for the leader; see the module docstring.

    ``now`` is the monotonic clock renewals are measured on (the event loop's ``time`` in the
    operator, so that tests run it in virtual time).
    """

    def __init__(
        self,
        *,
        renew_deadline: float,
        now: collections.abc.Callable[[], float] = time.monotonic,
    ) -> None:
        self._renew_deadline = renew_deadline
        self._now = now
        self._renewed: float | None = None  # when the last successful renewal was sent
        self._refusing: str | None = None  # why writes are refused, logged once per episode
        self.refused = 0
        """Writes refused so far (tests, metrics)."""

    @property
    def held(self) -> bool:
        """True while writes acting for the leader may be sent."""
        return self._why_not() is None

    def renewed(self, sent_at: float) -> None:
        """A Lease write sent at ``sent_at`` (on ``now``'s clock) succeeded."""
        if self._renewed is None or sent_at > self._renewed:
            self._renewed = sent_at
        self._refusing = None

    def revoke(self) -> None:
        """Leadership ended (stepping down, released or lost): refuse every write from now on."""
        self._renewed = None

    def check(self, what: str) -> None:
        """Raise :class:`~berth.kube.transport.errors.NotLeader` unless ``what`` may be sent now."""
        why = self._why_not()
        if why is None:
            return
        self.refused += 1
        if why != self._refusing:
            self._refusing = why
            logger.warning("refusing writes for the leader: %s", why)
        raise errors.NotLeader(f"{what}: not sent: {why}")

    def _why_not(self) -> str | None:
        if self._renewed is None:
            return "this replica does not hold the Lease"
        age = self._now() - self._renewed
        if age >= self._renew_deadline:
            return (
                f"the last Lease renewal was sent {age:.3f}s ago, "
                f"past the renew deadline ({self._renew_deadline:g}s)"
            )
        return None


@contextlib.contextmanager
def unfenced() -> collections.abc.Iterator[None]:
    """Requests sent inside this block (from this task) skip the fence: the Lease calls."""
    token = _UNFENCED.set(True)
    try:
        yield
    finally:
        _UNFENCED.reset(token)


class _Hooks:
    """The aiohttp trace callbacks of one fenced session."""

    def __init__(self, fence: Fence) -> None:
        self._fence = fence

    async def request_start(
        self,
        session: aiohttp.ClientSession,
        context: types.SimpleNamespace,
        params: aiohttp.TraceRequestStartParams,
    ) -> None:
        method = params.method.upper()
        fenced = method not in _READS and not _UNFENCED.get()
        context.berth_fenced = fenced
        context.berth_what = f"{method} {params.url.path}"
        if fenced:
            self._fence.check(context.berth_what)  # fail early: no connection taken

    async def connected(
        self, session: aiohttp.ClientSession, context: types.SimpleNamespace, params: object
    ) -> None:
        # The connection is ours and the request is written next, without another await:
        # the last moment a pause can have made this replica stale.
        if getattr(context, "berth_fenced", False):
            self._fence.check(context.berth_what)


def _fenced_request_class(
    base: type[aiohttp.ClientRequest], fence: Fence
) -> type[aiohttp.ClientRequest]:
    """``base`` checking the fence once more when its body is about to be written.

    aiohttp buffers a request's headers and writes them with the body from a task of its own
    (on Python < 3.12 that task runs one loop iteration after the connection was taken): a
    pause landing in between would send a request checked before the pause. Checked here, a
    refused request writes nothing; its connection is closed and the caller sees
    :class:`~berth.kube.transport.errors.NotLeader` (:func:`berth.kube.transport.rest.request`
    unwraps it).
    """

    class FencedRequest(base):  # type: ignore[valid-type,misc]
        async def write_bytes(
            self,
            writer: typing.Any,
            conn: typing.Any,
            content_length: int | None = None,
        ) -> None:
            if self.method.upper() not in _READS and not _UNFENCED.get():
                try:
                    fence.check(f"{self.method} {self.url.path}")
                except errors.NotLeader as exc:
                    refused = aiohttp.ClientConnectionError(str(exc))
                    aiohttp.helpers.set_exception(conn.protocol, refused, exc)
                    conn.close()
                    return
            await super().write_bytes(writer, conn, content_length)

    return FencedRequest


def install(api: typing.Any, fence: Fence) -> None:
    """Fence every mutating request ``api`` (a ``kubernetes_asyncio`` ApiClient) sends."""
    hooks = _Hooks(fence)
    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(hooks.request_start)
    trace.on_connection_reuseconn.append(hooks.connected)
    trace.on_connection_create_end.append(hooks.connected)
    trace.freeze()
    session: aiohttp.ClientSession = api.rest_client.pool_manager
    session.trace_configs.append(trace)
    # The session is built by the client library; its request class is the one seam left
    # between "connection taken" and "bytes written".
    session._request_class = _fenced_request_class(session._request_class, fence)
