"""Hostile objects get a 4xx from the emulator and never stop the simulated nodes (issue 20).

We test these aspects:
- a pod whose ``requests`` is a list, or holds a quantity that does not parse: 422 Invalid
  naming the field, as the API server's typed decoding refuses it;
- an integer past int64 (``minMember: 2**63``) in a custom resource: 422, not a 500.
"""

from __future__ import annotations

import typing

import pytest

from berth.emulator import errors, testing
from tests.kube import conftest as kube_conftest

Obj = dict[str, typing.Any]


def pod(name: str, requests: typing.Any, *, node: str | None = None) -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "i", "resources": {"requests": requests}}]}
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(
    ("requests", "field"),
    [
        (["cpu"], "spec.containers[0].resources.requests"),
        ({"cpu": "lots"}, "spec.containers[0].resources.requests[cpu]"),
    ],
)
def test_pods_with_unreadable_requests_are_invalid(
    emulator: testing.RunningEmulator, requests: typing.Any, field: str
) -> None:
    api = emulator.api
    pods = emulator.call(api.resource, "v1", "pods")
    with pytest.raises(errors.StatusError) as raised:
        emulator.call(api.create, pods, pod("bad", requests), namespace="default")
    assert raised.value.code == 422
    assert field in str(raised.value.status())


def test_an_integer_past_int64_in_a_custom_resource_is_422(
    emulator: testing.RunningEmulator, tmp_path: typing.Any
) -> None:
    kube_conftest.install_crds(emulator)
    manifest = tmp_path / "pg.json"
    manifest.write_text(
        '{"apiVersion": "scheduling.berth.io/v1alpha1", "kind": "PodGroup", '
        '"metadata": {"name": "g"}, "spec": {"minMember": 9223372036854775808}}'
    )
    out = emulator.kubectl("apply", "-f", str(manifest), check=False)
    assert out.returncode != 0
    assert "spec.minMember" in out.stderr and "must be of type integer" in out.stderr
    assert "InternalError" not in out.stderr
