"""The leader's Kopf operator: its registry and settings, built explicitly.

:func:`build` returns a fresh ``kopf.OperatorRegistry`` (never Kopf's process-global default
registry) holding Berth's handlers: the login handler (Kopf uses the operator's own
credentials, from the operator's API client on the same loop), the indexing and watching
handlers that are the one watch of Queues, PodGroups and Reservations and feed the scheduler's
cache (:mod:`berth.controllers.indexing`), and the handlers owning the statuses
(:mod:`berth.controllers.statuses`, :mod:`berth.controllers.reservation_statuses`). Kopf's
decorators are used only inside those modules' ``register`` functions, so importing a module
registers nothing.

:func:`operator_settings` fixes how Kopf behaves inside ``berth run``: no peering (Berth's
Lease already makes this replica the only one running Kopf); no scanning (Kopf looks its
resources up once when it starts, after the leader made sure Berth's CRDs are served, and
watches no CRDs of its own: the CRD handler of :mod:`berth.controllers.indexing` is the
process's one watch of them); Events posted by Kopf only for warnings and errors (Berth posts
its own, rate-limited; a failing handler is an Event), handler progress and diff-bases kept in
annotations under Berth's prefix — ``kopf.scheduling.berth.io/<handler>`` while a handler is
being retried, ``kopf.scheduling.berth.io/last-handled-configuration`` once an object was
handled: the marks ``kubectl get -o yaml`` shows (the CRDs' status schemas are structural and
would prune Kopf's ``status.kopf``) — and Berth's own finalizer name for whichever handlers need
one. Kopf writes these marks through its own session, not Berth's fenced client:
docs/architecture.md, "Status owners", says why that is safe.
:mod:`berth.operator.embedding` runs Kopf with them on the operator's loop.
"""

from __future__ import annotations

import collections.abc
import logging
import typing

import aiohttp
import kopf

from berth.api import keys
from berth.controllers import indexing, reservation_statuses, reservations, statuses
from berth.kube.transport import credentials

__all__ = ["CONNECTIONS", "FINALIZER", "build", "connection", "operator_settings"]

FINALIZER = f"{keys.GROUP}/finalizer"
"""The finalizer Kopf puts on objects whose handlers must run before they go."""
_ANNOTATIONS_PREFIX = f"kopf.{keys.GROUP}"


LoginFn = collections.abc.Callable[[], collections.abc.Awaitable[credentials.Credentials]]
"""Returns the credentials Kopf should use now (refreshed when Kopf asks again after a 401)."""

CONNECTIONS = 32
"""Connections Kopf's session opens to the API server at most: its few watches, and the
handlers' requests. Kopf's own session has no limit, so a new leader's Kopf, resuming every
object at once, would open (and, over TLS, handshake) a connection per object on the loop the
Lease renewals share; bounded, the requests queue for a connection instead."""


def connection(found: credentials.Credentials, *, limit: int = CONNECTIONS) -> kopf.AiohttpSession:
    """Kopf's API session for ``found``: what Kopf would build itself (TLS, client certificate,
    bearer token: ``kopf.ConnectionInfo``), with at most ``limit`` connections. Kopf closes it
    when it is done with these credentials."""
    info = kopf.ConnectionInfo(
        server=found.server,
        token=found.token,
        ca_path=found.ca_path,
        certificate_path=found.certificate_path,
        private_key_path=found.private_key_path,
        insecure=found.insecure,
        default_namespace=None,
    )
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, ssl=info.as_ssl_context()),
        headers=info.as_http_headers(),
    )
    return kopf.AiohttpSession(server=info.server, aiohttp_session=session)


def build(
    *,
    feed: indexing.CacheFeed,
    login: LoginFn,
    writer: statuses.StatusWriter | None = None,
    reservation_writer: reservation_statuses.ReservationStatusWriter | None = None,
    reservation_controller: reservations.ReservationController | None = None,
) -> kopf.OperatorRegistry:
    """A new registry with the login handler and the handlers feeding ``feed``; with a
    ``writer`` (a ``reservation_writer``, and its ``reservation_controller``), the handlers
    owning PodGroups' and Queues' (Reservations') statuses too."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(id="berth-login", registry=registry)
    async def berth_login(**_: typing.Any) -> kopf.AiohttpSession:
        return connection(await login())

    indexing.register(registry, feed=feed)
    if writer is not None:
        statuses.register(registry, writer=writer)
    if reservation_writer is not None:
        reservation_statuses.register(
            registry, writer=reservation_writer, controller=reservation_controller
        )
    return registry


def operator_settings(*, watch_timeout: int = 300) -> kopf.OperatorSettings:
    """Kopf's settings inside ``berth run`` (see the module docstring)."""
    settings = kopf.OperatorSettings()
    settings.peering.standalone = True
    # Resources are looked up once, at start: the leader waits for Berth's CRDs before starting
    # Kopf, and the one watch of CRDs is a handler's (berth.controllers.indexing), not Kopf's.
    settings.scanning.disabled = True
    settings.posting.enabled = True
    settings.posting.level = logging.WARNING
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=_ANNOTATIONS_PREFIX
    )
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=_ANNOTATIONS_PREFIX, key="last-handled-configuration"
    )
    settings.watching.server_timeout = watch_timeout
    settings.watching.client_timeout = watch_timeout + 30
    # A dead API server is reported through Berth's readiness; Kopf need not retry quickly.
    settings.networking.request_timeout = 30
    return settings
