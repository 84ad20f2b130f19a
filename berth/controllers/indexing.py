"""Berth's own kinds as the leader's Kopf sees them: the one watch of Queues, PodGroups and
Reservations, feeding the scheduler's cache.

Each kind is watched once per replica (docs/architecture.md, "Where Kopf is used"): the
informers (:mod:`berth.kube.informers.cluster_informers`) watch every other kind, and the leader's
Kopf watches Berth's CRDs. :func:`register` adds to the leader's Kopf registry, per kind:

- an **indexing handler** (``kopf.index``) that hands every listed, added or changed object to
  the :class:`~berth.scheduler.snapshot.cache.ClusterCache` (``add_queue`` and the like), records
  it as the status writers observe it (:class:`~berth.controllers.observed.ObservedObjects`) and
  wakes the scheduling loop if the cache changed (not for the echo of a status Berth wrote); it
  stores nothing in Kopf's index (it answers ``None``): it is an indexing handler for Kopf's
  promise that no other handler runs before every indexed kind's first list went through its
  indexing handlers;
- a **watching handler** (``kopf.on.event``) that removes a deleted object from both (Kopf
  calls no indexing handler for a deletion).

Neither needs a finalizer, writes anything, or leaves a mark on the object.

**When the cache holds them all.** Kopf has no "listed" callback; its promise above gives one:
a watching handler on CustomResourceDefinitions runs for Berth's own CRDs (which exist, since
Kopf watches their kinds) only after every Queue, PodGroup and Reservation listed at start went
through the indexing handlers. The first time it runs, the three kinds are listed in the
cache's :class:`~berth.kube.informers.cache_sync.CacheSync` (the ``caches-synced`` readiness and the
scheduling loop's first cycle wait for them as for the informers). That handler is also the
process's one watch of CRDs: it passes every CRD on (``on_crd``: the interop mirrors learn that
another scheduler's PodGroup API appeared), and Kopf's own scanner watches none
(``settings.scanning.disabled``; :func:`berth.controllers.registry.operator_settings`).

**Before Kopf starts**, :meth:`CacheFeed.served` waits until the API server serves Berth's three
kinds (Kopf resolves its resources once, when it starts): while it does not, ``caches-synced``
says that Berth's CRDs are not installed, and discovery is asked again with capped backoff.

Everything here runs on the operator's loop, as Kopf does.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import logging
import random
import typing

import kopf

from berth.api import keys
from berth.api import objects as api_objects
from berth.api import podgroups as podgroup_api
from berth.api import queues as queue_api
from berth.api import reservations as reservation_api
from berth.controllers import observed
from berth.kube.informers import cache_sync, list_watch
from berth.kube.transport import clients, discovery
from berth.scheduler.snapshot import cache as cluster_cache
from berth.scheduler.snapshot import wire
from berth.status import observations
from berth.util import wakeups

__all__ = ["CRDS", "CacheFeed", "Kind", "KINDS", "register"]

logger = logging.getLogger(__name__)

CRDS = ("apiextensions.k8s.io", "v1", "customresourcedefinitions")
"""Where Kopf watches CustomResourceDefinitions (group, version, plural)."""

CrdCallback = collections.abc.Callable[[str, api_objects.KubeObject], None]
"""Told ``(event type, CRD)`` for every CRD Kopf sees (``"ADDED"`` for a listed one too)."""


@dataclasses.dataclass(frozen=True)
class Kind:
    """One of Berth's kinds: its names and how the cache takes it."""

    kind: str  # "Queue"
    plural: str  # "queues"
    namespaced: bool
    add: collections.abc.Callable[[cluster_cache.ClusterCache, typing.Any], None]
    remove: collections.abc.Callable[[cluster_cache.ClusterCache, str], None]

    @property
    def crd(self) -> str:
        """The name of its CustomResourceDefinition."""
        return f"{self.plural}.{keys.GROUP}"


KINDS: tuple[Kind, ...] = (
    Kind(
        queue_api.KIND,
        queue_api.PLURAL,
        False,
        cluster_cache.ClusterCache.add_queue,
        cluster_cache.ClusterCache.remove_queue,
    ),
    Kind(
        podgroup_api.KIND,
        podgroup_api.PLURAL,
        True,
        cluster_cache.ClusterCache.add_pod_group,
        cluster_cache.ClusterCache.remove_pod_group,
    ),
    Kind(
        reservation_api.KIND,
        reservation_api.PLURAL,
        True,
        cluster_cache.ClusterCache.add_reservation,
        cluster_cache.ClusterCache.remove_reservation,
    ),
)
"""Berth's kinds the leader's Kopf watches, in the order they are listed for readiness."""


class CacheFeed:
    """What the handlers of :func:`register` feed, and whether Kopf has listed Berth's kinds.

    Built by the composition root with the cache, the observed objects, the loop's trigger and
    the cache's :class:`~berth.kube.informers.cache_sync.CacheSync` (each kind is expected there at
    once).
    """

    def __init__(
        self,
        api: clients.AsyncApiClient,
        *,
        cache: cluster_cache.ClusterCache,
        objects: observed.ObservedObjects,
        trigger: asyncio.Event,
        sync: cache_sync.CacheSync,
        on_crd: collections.abc.Sequence[CrdCallback] = (),
        backoff: tuple[float, float] = (0.5, 30.0),
        rng: random.Random | None = None,
    ) -> None:
        self._api = api
        self.cache = cache
        self.objects = objects
        self._trigger = trigger
        self._sync = sync
        self._on_crd = tuple(on_crd)
        self._backoff = backoff
        self._rng = rng if rng is not None else random.Random()
        self._malformed: set[str] = set()
        self.listed = asyncio.Event()
        """Set once Kopf's first lists of Berth's kinds are all in the cache."""
        for kind in KINDS:
            sync.expect(kind.plural)

    # Before Kopf starts -------------------------------------------------------------------
    async def served(
        self, stop: asyncio.Event, waiting: collections.abc.Callable[[], None]
    ) -> bool:
        """Return once the API server serves Berth's kinds (True), or ``stop`` is set (False).

        The leader's Kopf waits for it (:class:`berth.operator.embedding.KopfOperator`'s
        prerequisite): Kopf looks its resources up once, when it starts."""
        delay = self._backoff[0]
        while not stop.is_set():
            found = await discovery.served(
                self._api, api_version=keys.API_VERSION, plurals=[k.plural for k in KINDS]
            )
            if found.all:
                for kind in KINDS:
                    self._sync.following(kind.plural)
                return True
            waiting()
            problem = found.problem or (
                f"the API server does not serve {', '.join(found.missing)} of "
                f"{keys.API_VERSION}; {cache_sync.CRD_HINT}"
            )
            for kind in KINDS:
                self._sync.following(kind.plural, problem)
            pause = delay * (1 + self._rng.random() / 2)
            delay = min(delay * 2, self._backoff[1])
            if await wakeups.sleep_or_stop(pause, stop=stop):
                break
        return False

    # Kopf's handlers ----------------------------------------------------------------------
    def changed(self, kind: Kind, body: kopf.Body) -> None:
        """``body`` was listed, added or changed."""
        raw = typing.cast(api_objects.KubeObject, dict(body))  # an object of ``kind``
        found = observations.observe(kind.kind, body=raw, parse_time=wire.parse_time)
        if found is None:
            self._skip(f"{kind.plural}: an object without a name: {str(raw)[:120]}")
            return
        before = self.cache.seq
        try:
            kind.add(self.cache, raw)
        except Exception as exc:
            self._skip(f"{kind.plural} {found.key}: cannot be read ({exc!r}); ignored")
            return
        self.objects.put(found)
        # A change the cache ignored (most often the echo of a status Berth wrote) can decide
        # nothing new in a cycle: like the echo of Berth's own binding, it wakes none. In a
        # stream of pods the Queue's status echoes ran about one cycle in six.
        if self.cache.seq != before:
            self._trigger.set()

    def deleted(self, kind: Kind, body: kopf.Body) -> None:
        """``body`` is gone."""
        raw = typing.cast(api_objects.KubeObject, dict(body))  # an object of ``kind``
        key = list_watch.object_key(raw, namespaced=kind.namespaced)
        if key is None:
            return
        self.objects.remove(kind.kind, key)
        try:
            kind.remove(self.cache, key)
        except Exception:
            logger.exception("%s %s: removing it from the cache failed", kind.plural, key)
        self._trigger.set()

    def crd(self, event_type: str, body: kopf.Body) -> None:
        """A CRD seen by Kopf: Berth's own mark the kinds listed; every one is passed on."""
        raw = typing.cast(api_objects.KubeObject, dict(body))  # a CustomResourceDefinition
        name = str((raw.get("metadata") or {}).get("name") or "")
        if not self.listed.is_set() and name in {kind.crd for kind in KINDS}:
            # Kopf calls no watching handler before every indexed kind's first list is indexed.
            self.listed.set()
            for kind in KINDS:
                self._sync.listed(kind.plural)
            self._trigger.set()
        for callback in self._on_crd:
            try:
                callback(event_type, raw)
            except Exception:
                logger.exception("a listener of CustomResourceDefinition %s failed", name)

    def _skip(self, message: str) -> None:
        # Once per message: a broken object is handed over again on every relist.
        if message not in self._malformed:
            self._malformed.add(message)
            logger.warning("malformed object from the API server: %s", message)


def register(registry: kopf.OperatorRegistry, *, feed: CacheFeed) -> None:
    """Add the indexing and watching handlers of Berth's kinds, and the CRD handler, to
    ``registry`` (see the module docstring)."""
    for kind in KINDS:
        _register_kind(registry, feed=feed, kind=kind)

    @kopf.on.event(*CRDS, id="crds", registry=registry)
    async def crd_seen(event: kopf.RawEvent, body: kopf.Body, **_: typing.Any) -> None:
        feed.crd(str(event.get("type") or "ADDED"), body)


def _register_kind(registry: kopf.OperatorRegistry, *, feed: CacheFeed, kind: Kind) -> None:
    where = (keys.GROUP, keys.VERSION, kind.plural)
    name = kind.kind.lower()

    @kopf.index(*where, id=f"{name}-cache", registry=registry)
    async def index(body: kopf.Body, **_: typing.Any) -> None:
        feed.changed(kind, body)

    @kopf.on.event(*where, id=f"{name}-gone", registry=registry)
    async def gone(event: kopf.RawEvent, body: kopf.Body, **_: typing.Any) -> None:
        if event.get("type") == "DELETED":
            feed.deleted(kind, body)
