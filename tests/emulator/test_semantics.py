"""The API's semantics, through the in-process :class:`berth.emulator.rest.Api` (no HTTP).

We test these aspects:
- metadata: uid, creationTimestamp, generation (spec changes only), generateName, no-op writes
  keep the resourceVersion; the namespace must exist;
- status subresources: the main resource ignores status; ``status`` changes only status;
- finalizers: delete marks deletionTimestamp, removing the last finalizer deletes; no new
  finalizers on an object being deleted; delete preconditions;
- owner references: background deletion cascades, orphan keeps dependents;
- namespaces: deleting one deletes its contents and then itself;
- pods: priority from PriorityClasses (unknown class is 403), immutable spec, scheduling gates;
- eviction honours PodDisruptionBudgets (429);
- lists page with limit/continue; dry-run stores nothing; deleting a CRD removes its objects.
"""

from __future__ import annotations

import typing

import pytest

from berth.emulator import errors, patches, resources, rest, storage, strategies
from berth.util import clocks

Object = dict[str, typing.Any]


@pytest.fixture
def api() -> rest.Api:
    return rest.Api(
        registry=resources.Registry(),
        store=storage.Storage(),
        clock=clocks.VirtualClock(1_767_225_600.0),
        seed=1,
    )


def _pod(name: str, **spec: typing.Any) -> Object:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "i"}], **spec},
    }


def test_metadata_on_create_and_generation(api: rest.Api) -> None:
    cms = api.resource("v1", "configmaps")
    made = api.create(
        cms, {"metadata": {"generateName": "c-"}, "data": {"a": "1"}}, namespace="default"
    )
    meta = made.object["metadata"]
    assert made.created and meta["name"].startswith("c-") and meta["uid"]
    assert meta["creationTimestamp"] == "2026-01-01T00:00:00Z" and meta["generation"] == 1
    same = api.patch(
        cms,
        {"data": {"a": "1"}},
        namespace="default",
        name=meta["name"],
        patch_type=patches.MERGE_PATCH,
    )
    assert same.object["metadata"]["resourceVersion"] == meta["resourceVersion"]
    labelled = api.patch(
        cms,
        {"metadata": {"labels": {"x": "y"}}},
        namespace="default",
        name=meta["name"],
        patch_type=patches.MERGE_PATCH,
    )
    assert labelled.object["metadata"]["generation"] == 1
    changed = api.patch(
        cms,
        {"data": {"a": "2"}},
        namespace="default",
        name=meta["name"],
        patch_type=patches.MERGE_PATCH,
    )
    assert changed.object["metadata"]["generation"] == 2
    with pytest.raises(errors.StatusError) as caught:
        api.create(cms, {"metadata": {"name": "x"}}, namespace="nowhere")
    assert (caught.value.code, caught.value.message) == (404, 'namespaces "nowhere" not found')


def test_status_subresource(api: rest.Api) -> None:
    deployments = api.resource("apps/v1", "deployments")
    api.create(
        deployments,
        {"metadata": {"name": "d"}, "spec": {"replicas": 1}, "status": {"replicas": 9}},
        namespace="default",
    )
    assert "status" not in api.get(deployments, namespace="default", name="d")
    api.patch(
        deployments,
        {"spec": {"replicas": 2}, "status": {"replicas": 5}},
        namespace="default",
        name="d",
        patch_type=patches.MERGE_PATCH,
    )
    api.patch(
        deployments,
        {"spec": {"replicas": 7}, "status": {"replicas": 2}, "metadata": {"labels": {"no": "pe"}}},
        namespace="default",
        name="d",
        patch_type=patches.MERGE_PATCH,
        subresource="status",
    )
    stored = api.get(deployments, namespace="default", name="d")
    assert stored["spec"] == {"replicas": 2} and stored["status"] == {"replicas": 2}
    assert "labels" not in stored["metadata"] and stored["metadata"]["generation"] == 2


def test_finalizers_hold_deletion(api: rest.Api) -> None:
    cms = api.resource("v1", "configmaps")
    api.create(cms, {"metadata": {"name": "c", "finalizers": ["x/y"]}}, namespace="default")
    pending = api.delete(cms, namespace="default", name="c")
    assert pending.pending and pending.object["metadata"]["deletionTimestamp"]
    with pytest.raises(errors.StatusError) as caught:
        api.patch(
            cms,
            {"metadata": {"finalizers": ["x/y", "new/one"]}},
            namespace="default",
            name="c",
            patch_type=patches.MERGE_PATCH,
        )
    assert caught.value.code == 422
    gone = api.patch(
        cms,
        [{"op": "remove", "path": "/metadata/finalizers"}],
        namespace="default",
        name="c",
        patch_type=patches.JSON_PATCH,
    )
    assert gone.object["metadata"]["name"] == "c"
    assert api.storage.get(cms.key, "default", "c") is None


def test_delete_preconditions(api: rest.Api) -> None:
    cms = api.resource("v1", "configmaps")
    api.create(cms, {"metadata": {"name": "c"}}, namespace="default")
    with pytest.raises(errors.StatusError) as caught:
        api.delete(cms, namespace="default", name="c", options={"preconditions": {"uid": "other"}})
    assert caught.value.code == 409


def _owned(api: rest.Api, owner: Object, name: str) -> None:
    ref = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    body = _pod(name)
    body["metadata"]["ownerReferences"] = [ref]
    api.create(api.resource("v1", "pods"), body, namespace="default")


@pytest.mark.parametrize(
    ("policy", "left"),
    [("Background", []), ("Orphan", ["p1", "p2"]), ("Foreground", [])],
    ids=["background", "orphan", "foreground"],
)
def test_owner_references_cascade(api: rest.Api, policy: str, left: list[str]) -> None:
    replicasets = api.resource("apps/v1", "replicasets")
    owner = api.create(replicasets, {"metadata": {"name": "rs"}}, namespace="default").object
    _owned(api, owner, "p1")
    _owned(api, owner, "p2")
    api.delete(replicasets, namespace="default", name="rs", options={"propagationPolicy": policy})
    pods = api.list(api.resource("v1", "pods"), namespace="default").items
    assert [p["metadata"]["name"] for p in pods] == left
    assert api.storage.get(replicasets.key, "default", "rs") is None
    assert all(not p["metadata"].get("ownerReferences") for p in pods)


def test_namespace_deletion_removes_its_contents(api: rest.Api) -> None:
    namespaces, cms = api.resource("v1", "namespaces"), api.resource("v1", "configmaps")
    made = api.create(namespaces, {"metadata": {"name": "team"}}).object
    assert made["status"] == {"phase": "Active"}
    api.create(cms, {"metadata": {"name": "held", "finalizers": ["x/y"]}}, namespace="team")
    api.create(cms, {"metadata": {"name": "free"}}, namespace="team")
    pending = api.delete(namespaces, namespace=None, name="team")
    assert pending.pending and pending.object["status"] == {"phase": "Terminating"}
    with pytest.raises(errors.StatusError) as caught:
        api.create(cms, {"metadata": {"name": "late"}}, namespace="team")
    assert caught.value.code == 403
    api.patch(
        cms,
        {"metadata": {"finalizers": None}},
        namespace="team",
        name="held",
        patch_type=patches.MERGE_PATCH,
    )
    assert api.storage.get(namespaces.key, "", "team") is None


def test_pod_priority_and_immutability(api: rest.Api) -> None:
    pods, classes = (
        api.resource("v1", "pods"),
        api.resource("scheduling.k8s.io/v1", "priorityclasses"),
    )
    api.create(classes, {"metadata": {"name": "high"}, "value": 1000})
    made = api.create(pods, _pod("p", priorityClassName="high"), namespace="default").object
    assert made["spec"]["priority"] == 1000 and made["status"]["phase"] == "Pending"
    with pytest.raises(errors.StatusError) as caught:
        api.create(pods, _pod("q", priorityClassName="missing"), namespace="default")
    assert caught.value.code == 403
    with pytest.raises(errors.StatusError) as caught:
        api.patch(
            pods,
            {"spec": {"nodeName": "n1"}},
            namespace="default",
            name="p",
            patch_type=patches.STRATEGIC_MERGE_PATCH,
        )
    assert caught.value.code == 422
    api.patch(
        pods,
        {"spec": {"containers": [{"name": "c", "image": "j"}]}},
        namespace="default",
        name="p",
        patch_type=patches.STRATEGIC_MERGE_PATCH,
    )


def test_scheduling_gates_may_only_be_removed_and_block_binding(api: rest.Api) -> None:
    pods = api.resource("v1", "pods")
    api.create(pods, _pod("g", schedulingGates=[{"name": "a"}]), namespace="default")
    with pytest.raises(errors.StatusError) as caught:
        api.bind(namespace="default", name="g", binding={"target": {"name": "n1"}})
    assert caught.value.code == 409
    api.patch(
        pods,
        {"spec": {"nodeSelector": {"pool": "x"}}},
        namespace="default",
        name="g",
        patch_type=patches.MERGE_PATCH,
    )
    with pytest.raises(errors.StatusError):
        api.patch(
            pods,
            {"spec": {"schedulingGates": [{"name": "a"}, {"name": "b"}]}},
            namespace="default",
            name="g",
            patch_type=patches.MERGE_PATCH,
        )
    api.patch(
        pods,
        {"spec": {"schedulingGates": None}},
        namespace="default",
        name="g",
        patch_type=patches.MERGE_PATCH,
    )
    api.bind(namespace="default", name="g", binding={"target": {"name": "n1"}})


def test_eviction_honours_disruption_budgets(api: rest.Api) -> None:
    pods = api.resource("v1", "pods")
    budgets = api.resource("policy/v1", "poddisruptionbudgets")
    api.create(
        budgets,
        {
            "metadata": {"name": "b"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}},
        },
        namespace="default",
    )
    for name in ("p1", "p2"):
        body = _pod(name)
        body["metadata"]["labels"] = {"app": "a"}
        api.create(pods, body, namespace="default")
        api.patch(
            pods,
            {"status": {"phase": "Running"}},
            namespace="default",
            name=name,
            patch_type=patches.MERGE_PATCH,
            subresource="status",
        )
    assert api.evict(namespace="default", name="p1", eviction={})["code"] == 201
    with pytest.raises(errors.StatusError) as caught:
        api.evict(namespace="default", name="p2", eviction={})
    assert (caught.value.code, caught.value.reason) == (429, "TooManyRequests")
    assert api.storage.get(pods.key, "default", "p2") is not None


def test_pages_dry_runs_and_crd_removal(api: rest.Api, test_crd: Object) -> None:
    cms = api.resource("v1", "configmaps")
    for i in range(5):
        api.create(cms, {"metadata": {"name": f"c{i}"}}, namespace="default")
    first = api.list(cms, namespace="default", limit=2)
    assert [o["metadata"]["name"] for o in first.items] == ["c0", "c1"] and first.remaining == 3
    rest_ = api.list(cms, namespace="default", limit=10, continue_token=first.continue_token)
    assert [o["metadata"]["name"] for o in rest_.items] == ["c2", "c3", "c4"]
    api.create(
        cms,
        {"metadata": {"name": "dry"}},
        namespace="default",
        context=strategies.WriteContext(dry_run=True),
    )
    assert api.storage.get(cms.key, "default", "dry") is None
    crds = api.resource("apiextensions.k8s.io/v1", "customresourcedefinitions")
    crd = api.create(crds, test_crd).object
    assert {c["type"] for c in crd["status"]["conditions"]} == {"NamesAccepted", "Established"}
    widgets = api.resource("test.berth.io/v1", "widgets")
    api.create(widgets, {"metadata": {"name": "w"}, "spec": {"size": 1}}, namespace="default")
    api.delete(crds, namespace=None, name="widgets.test.berth.io")
    assert api.registry.get("test.berth.io", "v1", "widgets") is None
    assert api.storage.list(widgets.key) == []
