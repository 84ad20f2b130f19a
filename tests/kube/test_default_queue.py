"""The leader creates the Queue ``default`` (``kube.grouping.default_queue``), on the emulator.

We test these aspects:

- missing, it is created with the implicit queue's values (an empty spec: the CRD's defaults,
  no guarantee, no limit, weight 1, open), labelled as Berth's,
  and the component then waits until asked to stop;
- present (a user's, with a limit), it is left exactly as it is: nothing is written;
- a failure (no CRD served yet) is tried again, after a doubling wait, until it works.
"""

from __future__ import annotations

import asyncio
import typing

from berth.api import keys
from berth.emulator import testing
from berth.kube.grouping import default_queue
from berth.kube.transport import clients, writes
from tests.kube.conftest import create, install_crds, until

Object = dict[str, typing.Any]


def stored(emulator: testing.RunningEmulator) -> Object | None:
    """The Queue ``default`` as stored (None: there is none)."""
    api = emulator.api

    def read() -> Object | None:
        resource = api.resource(keys.API_VERSION, "queues")
        found = [q for q in api.storage.list(resource.key) if q["metadata"]["name"] == "default"]
        return dict(found[0]) if found else None

    return emulator.call(read)


async def test_a_missing_default_queue_is_created_and_then_kept_until_stop(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    writer = writes.Writer(connection.api)
    stop = asyncio.Event()
    task = asyncio.create_task(default_queue.keep(writer, stop))
    await until(lambda: stored(berth_crds) is not None)
    queue = stored(berth_crds)
    assert queue is not None
    # The implicit queue's values: the CRD's defaults of an empty spec, no guarantee or limit.
    spec = queue["spec"]
    assert (spec["weight"], spec["state"], spec["priority"]) == (1, "Open", 0)
    assert not {"guaranteed", "limit", "parent", "namespaceSelector"} & set(spec)
    assert queue["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "berth"}
    await asyncio.sleep(0)
    assert not task.done()  # a leader component ends only when asked
    stop.set()
    await asyncio.wait_for(task, timeout=5)
    assert writer.sent == 1


async def test_a_users_default_queue_is_left_as_it_is(
    berth_crds: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    mine = {
        "apiVersion": keys.API_VERSION,
        "kind": "Queue",
        "metadata": {"name": "default"},
        "spec": {"limit": {"cpu": "4"}, "weight": 3},
    }
    before = create(berth_crds, mine, plural="queues", namespace=None)
    writer = writes.Writer(connection.api)
    stop = asyncio.Event()
    stop_soon = asyncio.get_running_loop().call_later(0.5, stop.set)
    await asyncio.wait_for(default_queue.keep(writer, stop), timeout=5)
    stop_soon.cancel()
    after = stored(berth_crds)
    assert after is not None
    assert after["spec"]["limit"] == {"cpu": "4"} and after["spec"]["weight"] == 3
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert writer.sent == 0


async def test_a_failure_is_tried_again_until_it_works(
    emulator: testing.RunningEmulator, connection: clients.AsyncConnection
) -> None:
    writer = writes.Writer(connection.api)
    stop = asyncio.Event()
    task = asyncio.create_task(default_queue.keep(writer, stop, first=0.05, cap=0.2))
    await asyncio.sleep(0.3)  # Queues are not served yet: every attempt fails
    assert stored_or_none(emulator) is None
    install_crds(emulator)
    await until(lambda: stored_or_none(emulator) is not None, timeout=10)
    stop.set()
    await asyncio.wait_for(task, timeout=5)


def stored_or_none(emulator: testing.RunningEmulator) -> Object | None:
    try:
        return stored(emulator)
    except Exception:  # the kind is not registered before its CRD is
        return None
