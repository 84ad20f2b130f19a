"""The embedded Kopf operator (``berth.operator.embedding.KopfComponent``) and its registry.

We test these aspects:

- Berth's registry is built explicitly (not Kopf's global default) with the login handler and
  a watching handler per kind; Kopf's settings: standalone, Berth's finalizer and annotation
  prefix, only warnings posted as Events;
- started as a component, Kopf runs on its own thread, logs in with the operator's
  credentials, and records the PodGroups, Queues and Reservations it sees (and forgets deleted
  ones) — putting no finalizer on them, so deleting one never waits for Berth;
- stopping it ends its thread; a Kopf that dies while starting makes ``start`` raise;
- the main thread's signal handlers are left alone;
- the plugins' controllers start with Kopf (its startup handler) on the operator's loop, not
  Kopf's, and stop with it (its cleanup handler).
"""

from __future__ import annotations

import asyncio
import collections.abc
import logging
import signal
import threading
import typing

import kopf
import pytest

from berth.controllers import observed, plugins
from berth.controllers import registry as kopf_registry
from berth.emulator import testing
from berth.kube import clients, credentials
from berth.operator import embedding
from berth.scheduler.framework import handles
from tests.kube import conftest
from tests.scheduler import builders as b


def test_registry_is_explicit_and_settings_fit_berth() -> None:
    objects = observed.ObservedObjects()

    async def login() -> credentials.Credentials:
        return credentials.Credentials(server="http://127.0.0.1:1")

    registry = kopf_registry.build(objects=objects, login=login)
    assert registry is not kopf_registry.build(objects=objects, login=login)
    watched = {h.id for h in registry._watching.get_all_handlers()}
    assert len(watched) == len(kopf_registry.CONTROLLERS)
    assert len(registry._activities.get_all_handlers()) == 1  # the login handler
    settings = kopf_registry.operator_settings()
    assert settings.peering.standalone
    assert settings.persistence.finalizer == "scheduling.berth.io/finalizer"
    assert settings.posting.level == logging.WARNING


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
async def kopf_running(
    berth_crds: testing.RunningEmulator, kube: clients.AsyncConnection
) -> collections.abc.AsyncIterator[tuple[embedding.KopfComponent, observed.ObservedObjects]]:
    objects = observed.ObservedObjects()

    async def login() -> credentials.Credentials:
        return await credentials.credentials_of(kube.api)

    component = embedding.KopfComponent(
        registry=lambda: kopf_registry.build(objects=objects, login=login),
        settings=kopf_registry.operator_settings,
        stop_timeout=10,
    )
    handler = signal.getsignal(signal.SIGTERM)
    await component.start()
    try:
        assert signal.getsignal(signal.SIGTERM) == handler
        yield component, objects
    finally:
        await component.stop()


async def test_kopf_observes_berths_objects_without_finalizers(
    berth_crds: testing.RunningEmulator,
    kopf_running: tuple[embedding.KopfComponent, observed.ObservedObjects],
) -> None:
    component, objects = kopf_running
    assert component.running
    assert any(t.name == "kopf" for t in threading.enumerate())
    conftest.create(berth_crds, b.queue("team"), plural="queues", namespace=None)
    conftest.create(berth_crds, b.pod_group("g", min_member=3), plural="podgroups")
    await conftest.until(
        lambda: (
            objects.get("Queue", "team") is not None
            and objects.get("PodGroup", "default/g") is not None
        ),
        timeout=60,
    )
    group = objects.get("PodGroup", "default/g")
    assert group is not None and group.spec["minMember"] == 3
    api = berth_crds.api
    resource = berth_crds.call(api.resource, "scheduling.berth.io/v1alpha1", "podgroups")
    stored = berth_crds.call(api.storage.get, resource.key, "default", "g")
    assert not (stored or {}).get("metadata", {}).get("finalizers")
    berth_crds.call(api.delete, resource, namespace="default", name="g")
    assert berth_crds.call(api.storage.get, resource.key, "default", "g") is None
    await conftest.until(lambda: objects.get("PodGroup", "default/g") is None, timeout=60)
    await component.stop()
    assert not component.running


async def test_kopf_dying_while_starting_makes_start_raise() -> None:
    def broken_settings() -> kopf.OperatorSettings:
        return typing.cast(kopf.OperatorSettings, object())  # Kopf fails on its first use

    exits: list[str] = []
    component = embedding.KopfComponent(
        registry=kopf.OperatorRegistry,
        settings=broken_settings,
        start_timeout=10,
        on_exit=lambda name, error: exits.append(name),
    )
    with pytest.raises(RuntimeError, match="Kopf ended while starting"):
        await component.start()
    await component.stop()
    await asyncio.sleep(0)
    assert exits == []  # a failed start is the supervisor's to handle, not a later exit
    assert not component.running


class LoopController:
    """A plugin controller recording which loop and thread it ran on, and that it stopped."""

    name = "expiry"

    def __init__(self) -> None:
        self.ran_on: asyncio.AbstractEventLoop | None = None
        self.stopped = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        self.ran_on = asyncio.get_running_loop()
        await stop.wait()
        self.stopped.set()


async def test_kopf_starts_and_stops_the_plugins_controllers_on_the_operators_loop(
    berth_crds: testing.RunningEmulator, kube: clients.AsyncConnection
) -> None:
    controller = LoopController()
    registered = handles.ControllerRegistry()
    registered.register("Reservation", controllers=[controller])
    runner = plugins.PluginControllers(registered, stop_timeout=5)
    runner.bind(asyncio.get_running_loop())

    async def login() -> credentials.Credentials:
        return await credentials.credentials_of(kube.api)

    objects = observed.ObservedObjects()
    component = embedding.KopfComponent(
        registry=lambda: kopf_registry.build(
            objects=objects, login=login, plugin_controllers=runner
        ),
        settings=kopf_registry.operator_settings,
        stop_timeout=10,
    )
    assert runner.running == []  # nothing runs before Kopf (this replica leading) starts
    await component.start()
    try:
        await conftest.until(lambda: runner.running == ["Reservation/expiry"], timeout=60)
        assert controller.ran_on is asyncio.get_running_loop()  # not Kopf's thread
        # Kopf's watches are up too (stopping Kopf before they are leaves its sessions open).
        conftest.create(berth_crds, b.queue("team"), plural="queues", namespace=None)
        await conftest.until(lambda: objects.get("Queue", "team") is not None, timeout=60)
    finally:
        await component.stop()
    assert controller.stopped.is_set()  # Kopf's cleanup stopped it before Kopf ended
    assert runner.running == []
