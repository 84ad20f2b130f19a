"""The embedded Kopf operator (``berth.operator.embedding.KopfOperator``) and its registry.

We test these aspects:

- Berth's registry is built explicitly (not Kopf's global default) with the login handler and
  a watching handler per kind; Kopf's settings: standalone, Berth's finalizer and annotation
  prefix, only warnings posted as Events;
- started as a component, Kopf runs as tasks of the running loop (no thread of its own), logs
  in with the operator's credentials, and records the PodGroups and Queues it sees (forgetting
  deleted ones), putting no finalizer on them, so deleting one never waits for Berth;
- Kopf shares the loop safely: a task started after it survives its stop, none of Kopf's tasks
  does; SIGTERM still reaches the process's own handler, not Kopf's (and where the process
  installed none, Kopf's are not left behind);
- a Kopf that dies while starting makes ``start`` raise.
"""

from __future__ import annotations

import asyncio
import collections.abc
import logging
import os
import signal
import threading
import typing

import kopf
import pytest

from berth.controllers import observed
from berth.controllers import registry as kopf_registry
from berth.emulator import testing
from berth.kube import clients, credentials
from berth.operator import embedding
from berth.util import signals
from tests.kube import conftest
from tests.scheduler import builders as b


def kopf_of(
    api: clients.AsyncApiClient,
) -> tuple[embedding.KopfOperator, observed.ObservedObjects]:
    objects = observed.ObservedObjects()

    async def login() -> credentials.Credentials:
        return await credentials.credentials_of(api)

    operator = embedding.KopfOperator(
        registry=lambda: kopf_registry.build(objects=objects, login=login),
        settings=kopf_registry.operator_settings,
        stop_timeout=10,
    )
    return operator, objects


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
async def running(
    berth_crds: testing.RunningEmulator, kube: clients.AsyncConnection
) -> collections.abc.AsyncIterator[tuple[embedding.KopfOperator, observed.ObservedObjects]]:
    operator, objects = kopf_of(kube.api)
    await operator.start()
    try:
        yield operator, objects
    finally:
        await operator.stop()


async def test_kopf_runs_on_the_loop_and_observes_berths_objects_without_finalizers(
    berth_crds: testing.RunningEmulator, kube: clients.AsyncConnection
) -> None:
    threads = set(threading.enumerate())
    operator, objects = kopf_of(kube.api)
    await operator.start()
    try:
        assert operator.running
        # Kopf's tasks are this loop's; it started no thread.
        assert set(threading.enumerate()) <= threads
        names = {t.get_name() for t in operator.tasks}
        assert {"multidimensional multitasker", "kopf: kopf"} <= names
        assert all(t in asyncio.all_tasks() for t in operator.tasks)
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
    finally:
        await operator.stop()
    assert not operator.running
    assert operator.tasks == []


async def test_stopping_kopf_cancels_its_tasks_and_none_started_after_it(
    running: tuple[embedding.KopfOperator, observed.ObservedObjects],
) -> None:
    operator, _ = running
    later = asyncio.create_task(asyncio.sleep(3600), name="started after Kopf")
    try:
        await operator.stop()
        assert operator.tasks == []
        assert not later.done()  # Kopf ignores the loop's other tasks when it stops
    finally:
        later.cancel()


async def test_sigterm_reaches_the_process_not_kopf(
    berth_crds: testing.RunningEmulator, kube: clients.AsyncConnection
) -> None:
    stopping = asyncio.Event()
    signals.on_stop(stopping.set)  # as berth run does, before it leads
    operator, _ = kopf_of(kube.api)
    try:
        await operator.start()  # Kopf puts its own handlers on this (main) thread's loop
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stopping.wait(), 5)
        await asyncio.sleep(0.5)
        assert operator.running  # Kopf did not take the signal: the process stops it
    finally:
        await operator.stop()
        signals.remove()


async def test_without_handlers_of_the_process_kopfs_are_not_left_behind(
    running: tuple[embedding.KopfOperator, observed.ObservedObjects],
) -> None:
    assert threading.current_thread() is threading.main_thread()  # where Kopf installs them
    assert running[0].running
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
