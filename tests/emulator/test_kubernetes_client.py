"""The synchronous ``kubernetes`` client against the emulator.

We test these aspects:
- creating a pod answers 201 with full metadata (uid, resourceVersion, creationTimestamp, ...);
- ``generateName`` names objects; a duplicate name is 409 AlreadyExists;
- a replace with a stale resourceVersion is 409 Conflict;
- ``pods/binding`` sets ``spec.nodeName`` and PodScheduled; a second binding is 409;
- list + watch from the list's resourceVersion sees exactly the later events;
- a Lease is created and renewed with optimistic concurrency (the loser gets 409);
- custom objects: CRUD through CustomObjectsApi once the CRD is posted, status subresource.
"""

from __future__ import annotations

import json
import typing

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from berth.emulator import testing


def _pod(name: str, **meta: typing.Any) -> dict[str, typing.Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **meta},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def test_pod_create_answers_201_with_full_metadata(client: kubernetes.client.ApiClient) -> None:
    core = kubernetes.client.CoreV1Api(client)
    _, status, _ = core.create_namespaced_pod_with_http_info("default", _pod("p1"))
    pod = core.read_namespaced_pod("p1", "default")
    assert status == 201
    assert pod.metadata.uid and pod.metadata.resource_version
    assert pod.metadata.creation_timestamp is not None
    assert pod.metadata.namespace == "default"
    assert pod.status.phase == "Pending"
    assert pod.spec.scheduler_name == "default-scheduler"


def test_generate_name_and_duplicates(client: kubernetes.client.ApiClient) -> None:
    core = kubernetes.client.CoreV1Api(client)
    made = core.create_namespaced_config_map("default", {"metadata": {"generateName": "cm-"}})
    assert made.metadata.name.startswith("cm-") and len(made.metadata.name) == 8
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("default", {"metadata": {"name": made.metadata.name}})
    assert caught.value.status == 409
    assert "already exists" in caught.value.body


def test_stale_replace_is_a_conflict(client: kubernetes.client.ApiClient) -> None:
    core = kubernetes.client.CoreV1Api(client)
    first = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c"}, "data": {"a": "1"}}
    )
    first.data = {"a": "2"}
    core.replace_namespaced_config_map("c", "default", first)
    first.data = {"a": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_config_map("c", "default", first)
    assert caught.value.status == 409
    assert "the object has been modified" in caught.value.body
    assert core.read_namespaced_config_map("c", "default").data == {"a": "2"}


def test_binding_sets_node_name_once(
    client: kubernetes.client.ApiClient, emulator: testing.RunningEmulator
) -> None:
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_pod("default", _pod("p"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False)
    pod = core.read_namespaced_pod("p", "default")
    assert pod.spec.node_name == "node-1"
    assert [(c.type, c.status) for c in pod.status.conditions] == [("PodScheduled", "True")]
    binding["target"]["name"] = "node-2"
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False)
    assert caught.value.status == 409
    assert 'already assigned to node "node-1"' in json.loads(caught.value.body)["message"]
    assert emulator.count("POST", "/api/v1/namespaces/{namespace}/pods/{name}/binding") == 2


def test_list_then_watch_sees_exactly_later_events(client: kubernetes.client.ApiClient) -> None:
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_config_map("default", {"metadata": {"name": "before"}})
    listed = core.list_namespaced_config_map("default")
    assert [c.metadata.name for c in listed.items] == ["before"]
    core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
    core.patch_namespaced_config_map("before", "default", {"data": {"x": "y"}})
    core.delete_namespaced_config_map("after", "default")
    watch = kubernetes.watch.Watch()
    seen = [
        (event["type"], event["object"].metadata.name)
        for event in watch.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=1,
        )
    ]
    assert seen == [("ADDED", "after"), ("MODIFIED", "before"), ("DELETED", "after")]


def test_lease_renewal_with_optimistic_concurrency(client: kubernetes.client.ApiClient) -> None:
    leases = kubernetes.client.CoordinationV1Api(client)
    body = {
        "metadata": {"name": "berth"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    created = leases.create_namespaced_lease("kube-system", body)
    mine = leases.read_namespaced_lease("berth", "kube-system")
    theirs = leases.read_namespaced_lease("berth", "kube-system")
    mine.spec.renew_time = "2026-01-01T00:00:10.000000Z"
    renewed = leases.replace_namespaced_lease("berth", "kube-system", mine)
    assert int(renewed.metadata.resource_version) > int(created.metadata.resource_version)
    theirs.spec.holder_identity = "b"
    with pytest.raises(ApiException) as caught:
        leases.replace_namespaced_lease("berth", "kube-system", theirs)
    assert caught.value.status == 409
    assert leases.read_namespaced_lease("berth", "kube-system").spec.holder_identity == "a"


def test_custom_objects_crud_and_status(
    client: kubernetes.client.ApiClient, test_crd: dict[str, typing.Any]
) -> None:
    kubernetes.client.ApiextensionsV1Api(client).create_custom_resource_definition(test_crd)
    custom = kubernetes.client.CustomObjectsApi(client)
    args = ("test.berth.io", "v1", "default", "widgets")
    made = custom.create_namespaced_custom_object(
        *args,
        {
            "apiVersion": "test.berth.io/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 3},
            "status": {"phase": "ignored"},
        },
    )
    assert made["metadata"]["uid"] and made["metadata"]["generation"] == 1
    assert made["spec"] == {"size": 3, "color": "red"}  # defaulted
    assert "status" not in made  # the main resource ignores status
    patched = custom.patch_namespaced_custom_object_status(
        *args, "w", {"status": {"phase": "Ready"}}
    )
    assert patched["status"] == {"phase": "Ready"} and patched["metadata"]["generation"] == 1
    bigger = custom.patch_namespaced_custom_object(*args, "w", {"spec": {"size": 4}})
    assert bigger["metadata"]["generation"] == 2 and bigger["status"] == {"phase": "Ready"}
    listed = custom.list_namespaced_custom_object(*args)
    assert listed["kind"] == "WidgetList" and [i["metadata"]["name"] for i in listed["items"]] == [
        "w"
    ]
    custom.delete_namespaced_custom_object(*args, "w")
    with pytest.raises(ApiException) as caught:
        custom.get_namespaced_custom_object(*args, "w")
    assert caught.value.status == 404
