"""Fixtures and builders for the ``berth.kube`` tests (emulator, real ``kubernetes_asyncio``).

- ``connection``: an async connection to the threaded ``emulator`` fixture;
- ``berth_crds``: the emulator with Berth's CRDs installed (Queues, PodGroups, Reservations);
- :func:`pod`, :func:`create`, :func:`until`: build a pod dict, create an object in process,
  wait (bounded) for a condition.
"""

from __future__ import annotations

import asyncio
import collections.abc
import typing

import pytest

from berth.api import crds
from berth.emulator import testing
from berth.kube.transport import clients

Object = dict[str, typing.Any]


@pytest.fixture
async def connection(
    emulator: testing.RunningEmulator,
) -> collections.abc.AsyncIterator[clients.AsyncConnection]:
    async with clients.connect_async(kubeconfig=str(emulator.kubeconfig)) as connected:
        yield connected


def install_crds(emulator: testing.RunningEmulator) -> None:
    """Register Berth's three CRDs in ``emulator``."""
    api = emulator.api
    definitions = emulator.call(
        api.resource, "apiextensions.k8s.io/v1", "customresourcedefinitions"
    )
    for crd in crds.render_all().values():
        emulator.call(api.create, definitions, crd)


@pytest.fixture
def berth_crds(emulator: testing.RunningEmulator) -> testing.RunningEmulator:
    install_crds(emulator)
    return emulator


def pod(
    name: str,
    *,
    scheduler: str = "berth-scheduler",
    node: str | None = None,
    cpu: str = "100m",
    labels: dict[str, str] | None = None,
    namespace: str = "default",
) -> Object:
    """A pod with one container requesting ``cpu``."""
    spec: Object = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def node(name: str, *, cpu: str = "8") -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}},
    }


def create(
    emulator: testing.RunningEmulator,
    body: Object,
    *,
    plural: str,
    namespace: str | None = "default",
) -> Object:
    """Create ``body`` in process; the stored object."""
    api = emulator.api
    resource = emulator.call(api.resource, str(body["apiVersion"]), plural)
    written = emulator.call(api.create, resource, body, namespace=namespace)
    return dict(written.object)


def set_phase(
    emulator: testing.RunningEmulator, name: str, phase: str, *, namespace: str = "default"
) -> None:
    """Write pod ``name``'s ``status.phase``, as its kubelet would."""
    pods = emulator.call(emulator.api.resource, "v1", "pods")
    emulator.call(
        emulator.api.patch,
        pods,
        {"status": {"phase": phase}},
        namespace=namespace,
        name=name,
        patch_type="application/merge-patch+json",
        subresource="status",
    )


async def until(
    predicate: collections.abc.Callable[[], bool], *, timeout: float = 10.0, step: float = 0.02
) -> None:
    """Wait until ``predicate()`` holds; ``TimeoutError`` after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(step)
