"""A minimal kopf operator, embedded with ``kopf.operator(...)``, against the emulator.

We test these aspects (every handler must fire):
- an ``on.create`` handler runs and its result lands in the status subresource;
- a ``patch.status`` write from a handler is stored;
- an ``on.update`` handler runs when the spec changes (and not for status writes);
- a ``timer`` fires repeatedly;
- an ``on.delete`` handler runs through kopf's finalizer, after which the object is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import typing

import kopf
import pytest

from berth.emulator import patches, testing

TIMEOUT = 15.0


@pytest.fixture
def registry() -> kopf.OperatorRegistry:
    return kopf.OperatorRegistry()


async def _until(predicate: typing.Callable[[], bool], *, timeout: float = TIMEOUT) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_kopf_handlers_all_fire(
    emulator: testing.RunningEmulator,
    registry: kopf.OperatorRegistry,
    test_crd: dict[str, typing.Any],
) -> None:
    api = emulator.api
    # kopf keeps handler results in the status: let the schema keep them (as kopf's docs advise).
    status = test_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    status["x-kubernetes-preserve-unknown-fields"] = True
    crds = emulator.call(api.resource, "apiextensions.k8s.io/v1", "customresourcedefinitions")
    emulator.call(api.create, crds, test_crd)
    widgets = emulator.call(api.resource, "test.berth.io/v1", "widgets")
    fired: dict[str, list[typing.Any]] = {"create": [], "update": [], "delete": [], "timer": []}
    resource = ("test.berth.io", "v1", "widgets")

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: typing.Any) -> None:
        settings.peering.standalone = True
        settings.posting.level = logging.WARNING
        settings.watching.server_timeout = 10
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()

    @kopf.on.login(registry=registry)
    def login(**_: typing.Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=emulator.url, default_namespace="default")

    @kopf.on.create(*resource, id="created", registry=registry)
    def created(spec: kopf.Spec, patch: kopf.Patch, **_: typing.Any) -> dict[str, int]:
        fired["create"].append(spec["size"])
        patch.status["phase"] = "Ready"
        return {"seen": spec["size"]}

    @kopf.on.update(*resource, id="updated", field="spec", registry=registry)
    def updated(old: typing.Any, new: typing.Any, **_: typing.Any) -> None:
        fired["update"].append((old["size"], new["size"]))

    @kopf.on.delete(*resource, id="deleted", registry=registry)
    def deleted(name: str, **_: typing.Any) -> None:
        fired["delete"].append(name)

    @kopf.timer(*resource, id="ticked", interval=0.2, registry=registry)
    def ticked(name: str, **_: typing.Any) -> None:
        fired["timer"].append(name)

    stop, ready = asyncio.Event(), asyncio.Event()
    operator = asyncio.create_task(
        kopf.operator(registry=registry, namespaces=["default"], stop_flag=stop, ready_flag=ready)
    )
    try:
        await asyncio.wait_for(ready.wait(), TIMEOUT)
        body = {"metadata": {"name": "w"}, "spec": {"size": 3}}
        emulator.call(api.create, widgets, body, namespace="default")
        await _until(lambda: fired["create"] == [3])

        def stored() -> dict[str, typing.Any]:
            return emulator.call(api.get, widgets, namespace="default", name="w")

        await _until(lambda: stored().get("status", {}).get("created") == {"seen": 3})
        assert stored()["status"]["phase"] == "Ready"
        assert "kopf.zalando.org/KopfFinalizerMarker" in stored()["metadata"]["finalizers"]
        emulator.call(
            api.patch,
            widgets,
            {"spec": {"size": 4}},
            namespace="default",
            name="w",
            patch_type=patches.MERGE_PATCH,
        )
        await _until(lambda: fired["update"] == [(3, 4)])
        await _until(lambda: len(fired["timer"]) >= 2)
        emulator.call(api.delete, widgets, namespace="default", name="w")
        await _until(lambda: fired["delete"] == ["w"])
        await _until(lambda: emulator.call(api.storage.get, widgets.key, "default", "w") is None)
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(operator, TIMEOUT)
