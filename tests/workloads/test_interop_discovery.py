"""Which of the other schedulers' gang APIs Berth finds served, by discovery, on the emulator.

Kubernetes' Workload API is built into the API server (1.35's ``scheduling.k8s.io/v1alpha1``
Workloads, 1.36's ``v1alpha2`` PodGroups): there is no CRD to watch, so
:class:`~berth.kube.grouping.interop_groups.InteropGroups` asks discovery. The emulator serves the
APIs through minimal CRDs, which discovery lists as the API server lists its own. We test these
aspects:

- a table of what is served (nothing, a Workload CRD, one whose v1alpha1 is not served, the 1.36
  PodGroups) against each flavour: served exactly where discovery lists its resource in its
  group and version;
- with the Workload API served when Berth starts, a Workload's pod group gets its Berth
  PodGroup, owned by the Workload.
"""

from __future__ import annotations

import asyncio
import json
import typing

import pytest

from berth.api import keys
from berth.emulator import testing
from berth.kube.grouping import interop_groups
from berth.kube.transport import clients
from berth.workloads import interop
from tests.admission import stack

pytestmark = pytest.mark.timeout(60)

Obj = dict[str, typing.Any]


def crd(plural: str, kind: str, *versions: tuple[str, bool]) -> Obj:
    """A minimal CRD of ``scheduling.k8s.io`` with ``(version, served)`` versions (the first
    is stored)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.scheduling.k8s.io",
            "annotations": {
                "api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/4671"
            },
        },
        "spec": {
            "group": "scheduling.k8s.io",
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "plural": plural,
                "singular": kind.lower(),
                "listKind": f"{kind}List",
            },
            "versions": [
                {
                    "name": name,
                    "served": served,
                    "storage": i == 0,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
                for i, (name, served) in enumerate(versions)
            ],
        },
    }


WORKLOADS_CRD = crd("workloads", "Workload", ("v1alpha1", True))
UNSERVED_CRD = crd("workloads", "Workload", ("v1alpha2", True), ("v1alpha1", False))
PODGROUPS_CRD = crd("podgroups", "PodGroup", ("v1alpha2", True))


@pytest.mark.parametrize(
    ("crds", "served"),
    [
        ([], set()),
        ([WORKLOADS_CRD], {interop.WORKLOADS.name}),
        ([UNSERVED_CRD], set()),
        ([PODGROUPS_CRD], {interop.KUBERNETES.name}),
        ([WORKLOADS_CRD, PODGROUPS_CRD], {interop.WORKLOADS.name, interop.KUBERNETES.name}),
    ],
    ids=["nothing", "workloads", "workloads-not-served", "podgroups-1.36", "both"],
)
async def test_discovery_says_what_is_served(
    emulator: testing.RunningEmulator, crds: list[Obj], served: set[str]
) -> None:
    for body in crds:
        emulator.kubectl("apply", "-f", "-", input=json.dumps(body))
    async with clients.connect_async(kubeconfig=str(emulator.kubeconfig)) as connection:
        groups = interop_groups.InteropGroups(connection.api)
        found = {f.name for f in interop.FLAVORS if await groups.served_by(f)}
    assert found & {interop.WORKLOADS.name, interop.KUBERNETES.name} == served


async def test_workload_found_by_discovery_gets_its_podgroups(
    emulator: testing.RunningEmulator,
) -> None:
    stack.install_crds(emulator)
    emulator.kubectl("apply", "-f", "-", input=json.dumps(WORKLOADS_CRD))
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 3}}}]},
    }
    emulator.kubectl("apply", "-f", "-", input=json.dumps(workload))
    stop = asyncio.Event()
    async with clients.connect_async(kubeconfig=str(emulator.kubeconfig)) as connection:
        groups = interop_groups.InteropGroups(connection.api, flavors=[interop.WORKLOADS])
        task = asyncio.create_task(groups.run(stop))
        try:
            for _ in range(200):
                found = emulator.call(
                    emulator.api.storage.get, (keys.GROUP, "podgroups"), "default", "train-workers"
                )
                if found is not None:
                    break
                await asyncio.sleep(0.05)
            assert found is not None, "no Berth PodGroup for the Workload's pod group"
            assert found["spec"]["minMember"] == 3
            assert found["metadata"]["ownerReferences"][0]["kind"] == "Workload"
            assert groups.served == {interop.WORKLOADS.name}
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
