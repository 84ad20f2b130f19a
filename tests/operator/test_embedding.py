"""The leader's embedded Kopf operator (``berth.operator.embedding.KopfOperator``) and its registry.

We test these aspects:

- Berth's registry is built explicitly (not Kopf's global default) with the login handler, an
  indexing and a watching handler per kind of Berth's and the CRD handler, and no status
  handler on resume for PodGroups and Queues; Kopf's settings: standalone, no scanning of its
  own, Berth's finalizer and annotation prefix, only warnings posted as Events; Kopf's session
  (built at login) opens a bounded number of connections, with the operator's credentials;
- started as a component, Kopf runs as tasks of the running loop (no thread of its own), logs
  in with the operator's credentials, and feeds every PodGroup and Queue into the scheduler's
  cache and the observed objects (forgetting deleted ones), putting no finalizer on them;
- the cache's sync waits for Kopf's first lists, and Kopf waits for Berth's CRDs: without them
  ``caches-synced`` says so, and once they are installed Kopf starts and the cache syncs;
- Kopf shares the loop safely: a task started after it survives its stop, none of Kopf's tasks
  does; SIGTERM still reaches the process's own handler, not Kopf's (and where the process
  installed none, Kopf's are not left behind);
- a Kopf that dies while starting makes ``start`` raise.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import logging
import os
import signal
import threading
import typing

import kopf
import pytest

from berth.controllers import indexing, observed, statuses
from berth.controllers import registry as kopf_registry
from berth.emulator import testing
from berth.kube.informers import cache_sync
from berth.kube.transport import clients, credentials
from berth.operator import embedding, probing
from berth.scheduler.snapshot import cache as cluster_cache
from berth.util import signals
from tests.kube import conftest
from tests.scheduler import builders as b

NOW = 1_767_225_600.0


@dataclasses.dataclass
class Fed:
    """A leader's Kopf and what its handlers feed."""

    operator: embedding.KopfOperator
    feed: indexing.CacheFeed
    cache: cluster_cache.ClusterCache
    objects: observed.ObservedObjects
    readiness: probing.Readiness
    sync: cache_sync.CacheSync

    def condition(self) -> probing.Condition:
        (found,) = [c for c in self.readiness.report() if c.name == "caches-synced"]
        return found


def fed(api: clients.AsyncApiClient) -> Fed:
    cache = cluster_cache.ClusterCache()
    objects = observed.ObservedObjects()
    readiness = probing.Readiness()
    sync = cache_sync.CacheSync(readiness)
    feed = indexing.CacheFeed(
        api,
        cache=cache,
        objects=objects,
        trigger=asyncio.Event(),
        sync=sync,
        backoff=(0.05, 0.2),
    )

    async def login() -> credentials.Credentials:
        return await credentials.credentials_of(api)

    operator = embedding.KopfOperator(
        registry=lambda: kopf_registry.build(feed=feed, login=login),
        settings=kopf_registry.operator_settings,
        prerequisite=feed.served,
        stop_timeout=10,
    )
    return Fed(operator, feed, cache, objects, readiness, sync)


def test_registry_is_explicit_and_settings_fit_berth() -> None:
    async def login() -> credentials.Credentials:
        return credentials.Credentials(server="http://127.0.0.1:1")

    feed = fed(typing.cast(clients.AsyncApiClient, None)).feed
    registry = kopf_registry.build(feed=feed, login=login)
    assert registry is not kopf_registry.build(feed=feed, login=login)
    indexed = {h.id for h in registry._indexing.get_all_handlers()}
    assert indexed == {"queue-cache", "podgroup-cache", "reservation-cache"}
    watched = {h.id for h in registry._watching.get_all_handlers()}
    assert watched == {"queue-gone", "podgroup-gone", "reservation-gone", "crds"}
    assert len(registry._activities.get_all_handlers()) == 1  # the login handler
    settings = kopf_registry.operator_settings()
    assert settings.peering.standalone
    assert settings.scanning.disabled  # the CRD handler is the one watch of CRDs
    assert settings.persistence.finalizer == "scheduling.berth.io/finalizer"
    assert settings.posting.level == logging.WARNING


def test_podgroup_and_queue_statuses_have_no_resume_handler() -> None:
    async def login() -> credentials.Credentials:
        return credentials.Credentials(server="http://127.0.0.1:1")

    feed = fed(typing.cast(clients.AsyncApiClient, None)).feed
    writer = typing.cast(statuses.StatusWriter, object())
    registry = kopf_registry.build(feed=feed, login=login, writer=writer)
    reasons = {
        (h.selector.any_name if h.selector else "", h.reason)
        for h in registry._changing.get_all_handlers()
    }
    for plural in ("podgroups", "queues"):
        assert (plural, kopf.Reason.CREATE) in reasons and (plural, kopf.Reason.UPDATE) in reasons
        assert (plural, kopf.Reason.RESUME) not in reasons


async def test_kopfs_session_is_bounded_and_carries_the_operators_credentials() -> None:
    found = kopf_registry.connection(
        credentials.Credentials(server="https://127.0.0.1:1", token="secret", insecure=True)
    )
    try:
        assert found.server == "https://127.0.0.1:1"
        connector = found.aiohttp_session.connector
        assert connector is not None and connector.limit == kopf_registry.CONNECTIONS
        assert found.aiohttp_session.headers["Authorization"] == "Bearer secret"
    finally:
        await found.aiohttp_session.close()


@pytest.fixture
def berth_crds(emulator: testing.RunningEmulator) -> testing.RunningEmulator:
    conftest.install_crds(emulator)
    return emulator


@pytest.fixture
async def kube(
    emulator: testing.RunningEmulator,
) -> collections.abc.AsyncIterator[clients.AsyncConnection]:
    async with clients.connect_async(kubeconfig=str(emulator.kubeconfig)) as connected:
        yield connected


@pytest.fixture
async def running(
    berth_crds: testing.RunningEmulator, kube: clients.AsyncConnection
) -> collections.abc.AsyncIterator[Fed]:
    found = fed(kube.api)
    await found.operator.start()
    try:
        yield found
    finally:
        await found.operator.stop()


async def test_kopf_runs_on_the_loop_and_feeds_the_cache_without_finalizers(
    berth_crds: testing.RunningEmulator, kube: clients.AsyncConnection
) -> None:
    conftest.create(berth_crds, b.pod_group("early", min_member=2), plural="podgroups")
    threads = set(threading.enumerate())
    found = fed(kube.api)
    await found.operator.start()
    try:
        assert found.operator.running
        # Kopf's tasks are this loop's; it started no thread.
        assert set(threading.enumerate()) <= threads
        names = {t.get_name() for t in found.operator.tasks}
        assert {"multidimensional multitasker", "kopf: kopf"} <= names
        assert all(t in asyncio.all_tasks() for t in found.operator.tasks)
        # The first list is in the cache before the sync says so.
        await asyncio.wait_for(found.sync.synced.wait(), 60)
        assert "default/early" in found.cache.snapshot(NOW).pod_groups
        assert found.condition().ready
        conftest.create(berth_crds, b.queue("team"), plural="queues", namespace=None)
        conftest.create(berth_crds, b.pod_group("g", min_member=3), plural="podgroups")
        await conftest.until(
            lambda: (
                "team" in found.cache.snapshot(NOW).queues
                and found.objects.get("PodGroup", "default/g") is not None
            ),
            timeout=60,
        )
        group = found.objects.get("PodGroup", "default/g")
        assert group is not None and group.spec["minMember"] == 3
        assert found.cache.snapshot(NOW).pod_groups["default/g"].min_member == 3
        api = berth_crds.api
        resource = berth_crds.call(api.resource, "scheduling.berth.io/v1alpha1", "podgroups")
        stored = berth_crds.call(api.storage.get, resource.key, "default", "g")
        assert not (stored or {}).get("metadata", {}).get("finalizers")
        berth_crds.call(api.delete, resource, namespace="default", name="g")
        assert berth_crds.call(api.storage.get, resource.key, "default", "g") is None
        await conftest.until(
            lambda: (
                found.objects.get("PodGroup", "default/g") is None
                and "default/g" not in found.cache.snapshot(NOW).pod_groups
            ),
            timeout=60,
        )
    finally:
        await found.operator.stop()
    assert not found.operator.running
    assert found.operator.tasks == []


async def test_without_berths_crds_kopf_waits_and_says_so_then_syncs(
    emulator: testing.RunningEmulator, kube: clients.AsyncConnection
) -> None:
    found = fed(kube.api)
    await found.operator.start()  # returns: Kopf waits for the CRDs, the process need not
    try:
        await conftest.until(lambda: "CRDs" in found.condition().reason, timeout=60)
        assert not found.condition().ready and not found.sync.synced.is_set()
        conftest.install_crds(emulator)
        conftest.create(emulator, b.queue("team"), plural="queues", namespace=None)
        await asyncio.wait_for(found.sync.synced.wait(), 60)
        assert "team" in found.cache.snapshot(NOW).queues
        assert found.condition().ready
    finally:
        await found.operator.stop()
    assert found.operator.tasks == []


async def test_stopping_kopf_cancels_its_tasks_and_none_started_after_it(
    running: Fed,
) -> None:
    await asyncio.wait_for(running.sync.synced.wait(), 60)
    later = asyncio.create_task(asyncio.sleep(3600), name="started after Kopf")
    try:
        await running.operator.stop()
        assert running.operator.tasks == []
        assert not later.done()  # Kopf ignores the loop's other tasks when it stops
    finally:
        later.cancel()


async def test_sigterm_reaches_the_process_not_kopf(
    berth_crds: testing.RunningEmulator, kube: clients.AsyncConnection
) -> None:
    stopping = asyncio.Event()
    signals.on_stop(stopping.set)  # as berth run does, before it leads
    found = fed(kube.api)
    try:
        await found.operator.start()  # Kopf puts its own handlers on this (main) thread's loop
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stopping.wait(), 5)
        await asyncio.sleep(0.5)
        assert found.operator.running  # Kopf did not take the signal: the process stops it
    finally:
        await found.operator.stop()
        signals.remove()


async def test_without_handlers_of_the_process_kopfs_are_not_left_behind(running: Fed) -> None:
    assert threading.current_thread() is threading.main_thread()  # where Kopf installs them
    assert running.operator.running
    # Kopf's would have made it asyncio's (the loop's handler); SIGTERM kills as it did before.
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


async def test_kopf_dying_while_starting_makes_start_raise() -> None:
    def broken_settings() -> kopf.OperatorSettings:
        settings = kopf.OperatorSettings()
        settings.peering = typing.cast(typing.Any, object())  # Kopf fails on its first use
        return settings

    exits: list[str] = []
    component = embedding.KopfOperator(
        registry=kopf.OperatorRegistry,
        settings=broken_settings,
        start_timeout=10,
        on_exit=lambda name, error: exits.append(name),
    )
    with pytest.raises(RuntimeError, match="ended while starting"):
        await component.start()
    await component.stop()
    await asyncio.sleep(0)
    assert exits == []  # a failed start is the supervisor's to handle, not a later exit
    assert not component.running
