"""The Berth PodGroups mirroring other schedulers' gangs, kept in step at the cost of a change.

:class:`~berth.kube.grouping.interop_groups.InteropGroups` on the emulator, with Kubernetes
1.36's own PodGroups served (a minimal CRD, as in ``test_interop_discovery``), counting the
requests it sends about Berth PodGroups. We test these aspects:

- an original's status changing (its owner writes it: kube-scheduler for its own gangs,
  Berth's write-back for the flavours whose status it writes) sends nothing about its mirror;
  a change of its spec updates the mirror (a create refused, a read, a patch);
- a mirror deleted by hand, once a cycle's snapshot held it, is made again after the next
  cycle's snapshot shows it gone.
"""

from __future__ import annotations

import asyncio
import collections.abc
import json
import typing

import pytest

from berth.api import keys
from berth.emulator import testing
from berth.kube.grouping import interop_groups
from berth.kube.transport import clients, rest
from berth.workloads import interop
from tests.admission import stack
from tests.scheduler import builders
from tests.workloads.test_interop_discovery import PODGROUPS_CRD

pytestmark = pytest.mark.timeout(60)

Obj = dict[str, typing.Any]
MIRRORS = f"/apis/{keys.API_VERSION}/namespaces/default/podgroups"


def original(*, min_count: int, status: Obj | None = None) -> Obj:
    body: Obj = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }
    if status is not None:
        body["status"] = status
    return body


async def _until(
    emulator: testing.RunningEmulator, holds: collections.abc.Callable[[Obj | None], bool]
) -> Obj | None:
    """The Berth PodGroup ``default/train`` once ``holds`` says so (bounded)."""
    for _ in range(400):
        found = emulator.call(
            emulator.api.storage.get, (keys.GROUP, "podgroups"), "default", "train"
        )
        if holds(found):
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"the mirror never reached the state looked for: {found}")


async def test_status_changes_leave_the_mirror_alone_and_a_deleted_one_comes_back(
    emulator: testing.RunningEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.install_crds(emulator)
    emulator.kubectl("apply", "-f", "-", input=json.dumps(PODGROUPS_CRD))
    emulator.kubectl("apply", "-f", "-", input=json.dumps(original(min_count=3)))
    sent: list[tuple[str, str]] = []
    real = rest.request

    async def spy(api: typing.Any, *, method: str, path: str, **kw: typing.Any) -> typing.Any:
        if path.startswith(MIRRORS):
            sent.append((method, path))
        return await real(api, method=method, path=path, **kw)

    monkeypatch.setattr(rest, "request", spy)
    stop = asyncio.Event()
    async with clients.connect_async(kubeconfig=str(emulator.kubeconfig)) as connection:
        groups = interop_groups.InteropGroups(connection.api, flavors=[interop.KUBERNETES])
        task = asyncio.create_task(groups.run(stop))
        try:
            await _until(emulator, lambda m: m is not None and m["spec"]["minMember"] == 3)
            assert sent == [("POST", MIRRORS)]
            sent.clear()
            for running in (1, 2, 3):  # its owner writes its status
                status = {"phase": "Running", "running": running}
                body = original(min_count=3, status=status)
                emulator.kubectl("apply", "-f", "-", input=json.dumps(body))
            emulator.kubectl("apply", "-f", "-", input=json.dumps(original(min_count=4)))
            # Changes arrive in order: the spec's is handled after the three statuses'.
            await _until(emulator, lambda m: m is not None and m["spec"]["minMember"] == 4)
            train = f"{MIRRORS}/train"
            assert sent == [("POST", MIRRORS), ("GET", train), ("PATCH", train)]

            held = builders.cache_of(builders.pod_group("train", min_member=4))
            groups.offer(held.snapshot(builders.EPOCH), reasons={})
            emulator.kubectl("delete", "podgroups.scheduling.berth.io", "train")
            await _until(emulator, lambda m: m is None)
            groups.offer(builders.cache_of().snapshot(builders.EPOCH), reasons={})
            again = await _until(emulator, lambda m: m is not None)
            assert again is not None and again["spec"]["minMember"] == 4
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
