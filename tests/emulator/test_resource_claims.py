"""``resource.k8s.io/v1`` in the emulator: the DRA kinds, and the resourceclaim controller.

We test these aspects, through the ``kubernetes`` client and kubectl:

- DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates are served: create,
  get, list, replace, delete, and a watch from a list's resourceVersion sees the later events;
- a claim's status is a subresource: the main resource leaves it, ``/status`` writes only it;
- the API server's checks: selectors that do not compile, requests without a class or with
  both ``exactly`` and ``firstAvailable``, a claim's spec changed, an allocation changed, a
  consumer without an allocation, a slice naming no place or a device twice — each refused
  with the field named;
- a pod naming a template gets its claim made (controlled by the pod) and
  ``status.resourceClaimStatuses`` naming it, also when the template comes after the pod;
- a finished pod leaves its claims: a shared one is deallocated once nobody reserves it, the
  one made for it is deleted; deleting a pod deletes the claim made for it.
"""

from __future__ import annotations

import json
import time
import typing
import urllib.error
import urllib.request

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from berth.api import claims as claim_objects
from berth.emulator import testing

Obj = dict[str, typing.Any]

NS = "default"
SELECTOR = {"cel": {"expression": 'device.driver == "gpu.example.com"'}}
SPEC = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}


def _resource(client: kubernetes.client.ApiClient) -> kubernetes.client.ResourceV1Api:
    return kubernetes.client.ResourceV1Api(client)


def _claim(name: str, spec: Obj | None = None) -> Obj:
    return {"metadata": {"name": name}, "spec": spec or SPEC}


def _pod(name: str, **spec: typing.Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }


def _get_claim(api: kubernetes.client.ResourceV1Api, name: str) -> Obj:
    return typing.cast(
        Obj, api.api_client.sanitize_for_serialization(api.read_namespaced_resource_claim(name, NS))
    )


def _eventually(check: typing.Callable[[], typing.Any], *, what: str) -> typing.Any:
    """Wait for the emulator's controller (another loop's work): polled, bounded."""
    deadline = time.monotonic() + 20
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not within 20 s"
        time.sleep(0.02)


def test_the_dra_kinds_are_served_with_crud_and_watch(
    client: kubernetes.client.ApiClient,
) -> None:
    api = _resource(client)
    api.create_device_class({"metadata": {"name": "gpu"}, "spec": {"selectors": [SELECTOR]}})
    api.create_resource_slice(
        {
            "metadata": {"name": "n1-gpus"},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}}}],
            },
        }
    )
    api.create_namespaced_resource_claim_template(
        NS, {"metadata": {"name": "one"}, "spec": {"spec": SPEC}}
    )
    listed = api.list_namespaced_resource_claim(NS)
    # The client's Watch helper names a model this client version lacks: the raw stream.
    response = api.list_namespaced_resource_claim(
        NS,
        watch=True,
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
        _preload_content=False,
    )
    api.create_namespaced_resource_claim(NS, _claim("c"))
    api.delete_namespaced_resource_claim("c", NS)
    seen: list[tuple[str, str]] = []
    buffer = b""
    for chunk in response.stream(1024):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in filter(None, lines):
            event = json.loads(line)
            seen.append((event["type"], event["object"]["metadata"]["name"]))
        if len(seen) >= 2:
            break
    response.release_conn()
    assert seen == [("ADDED", "c"), ("DELETED", "c")]
    assert (
        api.read_device_class("gpu").spec.selectors[0].cel.expression
        == SELECTOR["cel"]["expression"]
    )
    assert [s.metadata.name for s in api.list_resource_slice().items] == ["n1-gpus"]
    assert (
        api.read_namespaced_resource_claim_template("one", NS).spec.spec.devices.requests[0].name
        == "gpu"
    )


def test_a_claims_status_is_a_subresource(client: kubernetes.client.ApiClient) -> None:
    api = _resource(client)
    api.create_namespaced_resource_claim(NS, _claim("c"))
    allocation = {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}
            ]
        }
    }
    ignored = {**_get_claim(api, "c"), "status": {"allocation": allocation}}
    api.replace_namespaced_resource_claim("c", NS, ignored)
    assert "allocation" not in (_get_claim(api, "c").get("status") or {})
    reserved = {
        "allocation": allocation,
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}],
    }
    api.patch_namespaced_resource_claim_status("c", NS, {"status": reserved})
    status = _get_claim(api, "c")["status"]
    assert status["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert status["reservedFor"][0]["uid"] == "u1"


_CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"
_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
_SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def _post(emulator: testing.RunningEmulator, path: str, body: Obj) -> tuple[int, Obj]:
    """POST ``body`` as JSON over HTTP (the typed clients refuse some bad input themselves)."""
    request = urllib.request.Request(
        emulator.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _slice(**spec: typing.Any) -> Obj:
    pool = {"name": "p", "generation": 1, "resourceSliceCount": 1}
    return {
        "metadata": {"name": "bad"},
        "spec": {"driver": "gpu.example.com", "pool": pool, **spec},
    }


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (
            _CLASSES,
            {
                "metadata": {"name": "bad"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]},
            },
            "spec.selectors[0].cel.expression",
        ),
        (
            _CLAIMS,
            _claim("bad", {"devices": {"requests": [{"name": "gpu", "exactly": {}}]}}),
            "spec.devices.requests[0].exactly.deviceClassName",
        ),
        (
            _CLAIMS,
            _claim(
                "bad",
                {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {"deviceClassName": "gpu"},
                                "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}],
                            }
                        ]
                    }
                },
            ),
            "spec.devices.requests[0]",
        ),
        (
            _CLAIMS,
            _claim(
                "bad",
                {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 0}}
                        ]
                    }
                },
            ),
            "spec.devices.requests[0].exactly.count",
        ),
        (_SLICES, _slice(devices=[{"name": "gpu-0"}]), "spec"),
        (
            _SLICES,
            _slice(allNodes=True, devices=[{"name": "gpu-0"}, {"name": "gpu-0"}]),
            "spec.devices[1].name",
        ),
    ],
    ids=["selector", "no-class", "both-kinds", "count-zero", "slice-nowhere", "device-twice"],
)
def test_bad_objects_are_refused_naming_the_field(
    emulator: testing.RunningEmulator, path: str, body: Obj, field: str
) -> None:
    status, answer = _post(emulator, path, body)
    assert status == 422, answer
    assert field in [c["field"] for c in answer["details"]["causes"]], answer


def test_a_claims_spec_and_allocation_do_not_change(client: kubernetes.client.ApiClient) -> None:
    api = _resource(client)
    api.create_namespaced_resource_claim(NS, _claim("c"))
    with pytest.raises(ApiException) as caught:
        api.patch_namespaced_resource_claim(
            "c",
            NS,
            {
                "spec": {
                    "devices": {
                        "requests": [{"name": "other", "exactly": {"deviceClassName": "gpu"}}]
                    }
                }
            },
        )
    assert caught.value.status == 422
    with pytest.raises(ApiException) as caught:
        api.patch_namespaced_resource_claim_status(
            "c", NS, {"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}
        )
    assert "status.reservedFor" in caught.value.body
    first = {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}
            ]
        }
    }
    api.patch_namespaced_resource_claim_status("c", NS, {"status": {"allocation": first}})
    second = {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-1"}
            ]
        }
    }
    with pytest.raises(ApiException) as caught:
        api.patch_namespaced_resource_claim_status("c", NS, {"status": {"allocation": second}})
    assert "status.allocation" in caught.value.body


def test_a_pods_claims_are_made_from_templates_even_when_the_template_comes_later(
    client: kubernetes.client.ApiClient,
) -> None:
    api, core = _resource(client), kubernetes.client.CoreV1Api(client)
    api.create_namespaced_resource_claim_template(
        NS, {"metadata": {"name": "one"}, "spec": {"spec": SPEC}}
    )
    core.create_namespaced_pod(
        NS, _pod("early", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one"}])
    )
    core.create_namespaced_pod(
        NS, _pod("late", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "later"}])
    )

    def statuses(name: str) -> list[typing.Any]:
        return core.read_namespaced_pod(name, NS).status.resource_claim_statuses or []

    made = _eventually(lambda: statuses("early"), what="the claim of pod early")
    uid = core.read_namespaced_pod("early", NS).metadata.uid
    assert made[0].name == "gpu"
    assert made[0].resource_claim_name == claim_objects.generated_name("early", "gpu", pod_uid=uid)
    claim = _get_claim(api, made[0].resource_claim_name)
    owner = claim["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Pod",
        "early",
        uid,
        True,
    )
    assert claim["spec"] == SPEC
    assert statuses("late") == []
    api.create_namespaced_resource_claim_template(
        NS, {"metadata": {"name": "later"}, "spec": {"spec": SPEC}}
    )
    _eventually(lambda: statuses("late"), what="the claim of pod late, once its template came")


def test_finished_and_deleted_pods_leave_their_claims(
    client: kubernetes.client.ApiClient, emulator: testing.RunningEmulator
) -> None:
    api, core = _resource(client), kubernetes.client.CoreV1Api(client)
    api.create_namespaced_resource_claim(NS, _claim("shared"))
    api.create_namespaced_resource_claim_template(
        NS, {"metadata": {"name": "one"}, "spec": {"spec": SPEC}}
    )
    pod = core.create_namespaced_pod(
        NS,
        _pod(
            "p",
            resourceClaims=[
                {"name": "shared", "resourceClaimName": "shared"},
                {"name": "gpu", "resourceClaimTemplateName": "one"},
            ],
        ),
    )
    made = _eventually(
        lambda: core.read_namespaced_pod("p", NS).status.resource_claim_statuses, what="claims"
    )[0].resource_claim_name
    allocation = {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}
            ]
        }
    }
    for name in ("shared", made):
        api.patch_namespaced_resource_claim_status(
            name,
            NS,
            {
                "status": {
                    "allocation": allocation,
                    "reservedFor": [{"resource": "pods", "name": "p", "uid": pod.metadata.uid}],
                }
            },
        )
        api.patch_namespaced_resource_claim(
            name, NS, {"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}}
        )
    core.patch_namespaced_pod_status("p", NS, {"status": {"phase": "Succeeded"}})

    def released() -> bool:
        status = _get_claim(api, "shared").get("status") or {}
        return "allocation" not in status and not status.get("reservedFor")

    _eventually(released, what="the shared claim deallocated")
    assert _get_claim(api, "shared")["metadata"].get("finalizers") is None

    def gone() -> bool:
        try:
            api.read_namespaced_resource_claim(made, NS)
        except ApiException as exc:
            return exc.status == 404
        return False

    _eventually(gone, what="the claim made for the finished pod deleted")
