"""The ``kubernetes_asyncio`` client against the emulator.

We test these aspects:
- pod CRUD with 201 on create and 404 after delete;
- a stale merge patch (resourceVersion in the patch) is 409;
- list + watch from a resourceVersion (``watch=True`` as this client sends it) sees exactly the
  later events, and a label selector filters them;
- a watch from a compacted resourceVersion ends with an ERROR event carrying 410 Expired;
- custom objects CRUD after posting a CRD.
"""

from __future__ import annotations

import typing

import kubernetes_asyncio
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from berth.emulator import testing


def _pod(name: str, labels: dict[str, str] | None = None) -> dict[str, typing.Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


async def test_pod_crud(aclient: kubernetes_asyncio.client.ApiClient) -> None:
    core = kubernetes_asyncio.client.CoreV1Api(aclient)
    _, status, _ = await core.create_namespaced_pod_with_http_info("default", _pod("p"))
    assert status == 201
    pod = await core.read_namespaced_pod("p", "default")
    assert pod.metadata.uid
    await core.delete_namespaced_pod("p", "default")
    with pytest.raises(ApiException) as caught:
        await core.read_namespaced_pod("p", "default")
    assert caught.value.status == 404


async def test_stale_merge_patch_is_a_conflict(
    aclient: kubernetes_asyncio.client.ApiClient,
) -> None:
    core = kubernetes_asyncio.client.CoreV1Api(aclient)
    made = await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    await core.patch_namespaced_config_map("c", "default", {"data": {"a": "1"}})
    stale = {"metadata": {"resourceVersion": made.metadata.resource_version}, "data": {"a": "2"}}
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_config_map("c", "default", stale)
    assert caught.value.status == 409


async def test_watch_from_resource_version_with_selector(
    aclient: kubernetes_asyncio.client.ApiClient,
) -> None:
    core = kubernetes_asyncio.client.CoreV1Api(aclient)
    await core.create_namespaced_pod("default", _pod("old", {"app": "a"}))
    listed = await core.list_namespaced_pod("default", label_selector="app=a")
    await core.create_namespaced_pod("default", _pod("new", {"app": "a"}))
    await core.create_namespaced_pod("default", _pod("other", {"app": "b"}))
    await core.delete_namespaced_pod("old", "default")
    seen = []
    async with kubernetes_asyncio.watch.Watch() as watch:
        async for event in watch.stream(
            core.list_namespaced_pod,
            "default",
            label_selector="app=a",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=1,
        ):
            seen.append((event["type"], event["object"].metadata.name))
    assert seen == [("ADDED", "new"), ("DELETED", "old")]


async def test_watch_from_a_compacted_version_is_expired(tmp_path: typing.Any) -> None:
    running = testing.start_emulator(tmp_path, history=3)
    try:
        client = await kubernetes_asyncio.config.new_client_from_config(
            config_file=str(running.kubeconfig)
        )
        async with client:
            core = kubernetes_asyncio.client.CoreV1Api(client)
            first = await core.create_namespaced_config_map("default", {"metadata": {"name": "c0"}})
            for i in range(1, 6):
                await core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
            response = await core.list_namespaced_config_map(
                "default",
                watch=True,
                resource_version=first.metadata.resource_version,
                _preload_content=False,
            )
            lines = (await response.read()).decode().splitlines()
        assert len(lines) == 1 and '"type":"ERROR"' in lines[0] and '"code":410' in lines[0]
    finally:
        running.threaded.stop()


async def test_custom_objects_crud(
    aclient: kubernetes_asyncio.client.ApiClient, test_crd: dict[str, typing.Any]
) -> None:
    await kubernetes_asyncio.client.ApiextensionsV1Api(aclient).create_custom_resource_definition(
        test_crd
    )
    custom = kubernetes_asyncio.client.CustomObjectsApi(aclient)
    args = ("test.berth.io", "v1", "default", "widgets")
    body = {
        "apiVersion": "test.berth.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 2},
    }
    made = await custom.create_namespaced_custom_object(*args, body)
    assert made["metadata"]["name"] == "w"
    made["spec"]["size"] = 5
    replaced = await custom.replace_namespaced_custom_object(*args, "w", made)
    assert replaced["spec"]["size"] == 5
    with pytest.raises(ApiException) as caught:
        await custom.replace_namespaced_custom_object(*args, "w", made)  # stale now
    assert caught.value.status == 409
    await custom.delete_namespaced_custom_object(*args, "w")
    listed = await custom.list_namespaced_custom_object(*args)
    assert listed["items"] == []
